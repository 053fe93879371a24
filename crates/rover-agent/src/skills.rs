//! The skill library: every `SKILL.md` under the deployment's `skills/` folder, loaded once at worker
//! start-up, and the per-turn choice of which skills an agent sees.
//!
//! Layout: `skills/general/` (everyone), `skills/rover/` (Rover only), and one folder per role subagent
//! named by [`Subagent::name`]. Each skill is a folder holding a `SKILL.md` whose YAML front matter
//! carries `name` (kebab-case, equal to the folder's name) and `description` (one sentence), followed
//! by a Markdown body. The model sees each skill at a virtual path such as
//! `/skills/rover/create-department/SKILL.md`.
//!
//! *Architecture Invariant*: a subagent's skills are `general/` plus its own folder, never Rover's;
//! a bad skill stops the worker at start-up with an error naming the file, instead of silently
//! missing from every prompt.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use rover_contracts::context::Subagent;
use serde::Deserialize;

/// The folder every agent reads first.
pub const GENERAL: &str = "general";
/// Rover's own folder, read after [`GENERAL`].
pub const ROVER: &str = "rover";
/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// Where skills appear in the model's file tools.
pub const VIRTUAL_ROOT: &str = "/skills";

/// The longest skill name accepted (the Agent Skills convention).
const MAX_NAME_LEN: usize = 64;
/// The longest description accepted; the prompt lists every description on every turn.
const MAX_DESCRIPTION_LEN: usize = 500;

/// The folders an agent's skills come from, in precedence order (a later folder wins a name).
///
/// `None` is Rover: `general` then `rover`. A subagent gets `general` then its own folder.
pub fn folders_for(subagent: Option<Subagent>) -> [&'static str; 2] {
    [GENERAL, subagent.map_or(ROVER, Subagent::name)]
}

/// Every folder the library reads, in load order.
fn all_folders() -> impl Iterator<Item = &'static str> {
    [GENERAL, ROVER]
        .into_iter()
        .chain(Subagent::ALL.into_iter().map(Subagent::name))
}

/// One skill: what the prompt lists (name, description, path) and what `read_file` returns (body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Kebab-case name, equal to its folder's name (`create-department`).
    pub name: String,
    /// One sentence saying when to read it.
    pub description: String,
    /// The virtual path the model reads it at: `/skills/rover/create-department/SKILL.md`.
    pub path: String,
    /// The Markdown after the front matter.
    pub body: String,
}

/// The skills of one top-level folder (`general`, `rover`, a subagent's).
#[derive(Debug, Clone, Default)]
struct Folder {
    /// Skills by name; a `BTreeMap` so listings come out sorted.
    skills: BTreeMap<String, Skill>,
}

/// All skills of the deployment, by folder. Load once with [`SkillLibrary::load`]; select per turn
/// with [`SkillLibrary::for_agent`].
#[derive(Debug, Clone, Default)]
pub struct SkillLibrary {
    /// Folder name → its skills; only folders that exist on disk.
    folders: BTreeMap<&'static str, Folder>,
}

/// Why the skill library could not be loaded. Every variant names the file or folder at fault.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    /// The skills root itself is missing, not a directory, or unreadable.
    #[error("Failed to read the skills folder {}", path.display())]
    Root {
        /// The root that was given.
        path: PathBuf,
        /// What the file system said.
        #[source]
        source: io::Error,
    },
    /// A folder or `SKILL.md` below the root could not be read.
    #[error("Failed to read {}", path.display())]
    Read {
        /// The folder or file.
        path: PathBuf,
        /// What the file system said.
        #[source]
        source: io::Error,
    },
    /// A skill folder has no `SKILL.md`.
    #[error("{}: the skill folder has no {SKILL_FILE}", path.display())]
    MissingSkillFile {
        /// The skill folder.
        path: PathBuf,
    },
    /// The file does not open with a YAML front matter block, or the block is not valid YAML.
    #[error("{}: bad front matter: {problem}", path.display())]
    FrontMatter {
        /// The `SKILL.md`.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// The front matter lacks a required field, or has it empty.
    #[error("{}: the front matter has no `{field}`", path.display())]
    MissingField {
        /// The `SKILL.md`.
        path: PathBuf,
        /// `name` or `description`.
        field: &'static str,
    },
    /// A field is present but unusable (a name that is not kebab-case, a multi-line description…).
    #[error("{}: bad `{field}`: {problem}", path.display())]
    BadField {
        /// The `SKILL.md`.
        path: PathBuf,
        /// The field at fault.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// The front matter's `name` differs from the skill's folder name.
    #[error(
        "{}: the skill is named `{name}` but its folder is `{folder}`; they must match",
        path.display()
    )]
    NameMismatch {
        /// The `SKILL.md`.
        path: PathBuf,
        /// The name in the front matter.
        name: String,
        /// The folder's name.
        folder: String,
    },
    /// Nothing follows the front matter.
    #[error("{}: the skill has no body after its front matter", path.display())]
    EmptyBody {
        /// The `SKILL.md`.
        path: PathBuf,
    },
}

impl SkillLibrary {
    /// Reads every skill folder that exists under `root` (`general`, `rover`, one per subagent).
    ///
    /// A missing folder is skipped; a missing or unreadable `root` is an error, and so is any skill
    /// whose `SKILL.md` is missing or malformed — the error names the file and the problem.
    #[tracing::instrument(skip_all, fields(root = %root.display()), err)]
    pub fn load(root: &Path) -> Result<SkillLibrary, SkillError> {
        let root_is_dir = fs::metadata(root)
            .map_err(|source| SkillError::Root {
                path: root.to_owned(),
                source,
            })?
            .is_dir();
        if !root_is_dir {
            return Err(SkillError::Root {
                path: root.to_owned(),
                source: io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
            });
        }

        let mut folders = BTreeMap::new();
        for folder in all_folders() {
            let dir = root.join(folder);
            if dir.is_dir() {
                folders.insert(folder, load_folder(&dir, folder)?);
            }
        }
        let library = SkillLibrary { folders };
        tracing::info!(
            folders = library.folders.len(),
            skills = library
                .folders
                .values()
                .map(|f| f.skills.len())
                .sum::<usize>(),
            "loaded the skill library"
        );
        Ok(library)
    }

    /// The skills an agent sees, sorted by name: `general` then `rover` for Rover (`None`), or
    /// `general` then the subagent's own folder. A later folder's skill replaces an earlier one of
    /// the same name.
    pub fn for_agent(&self, subagent: Option<Subagent>) -> Vec<&Skill> {
        let mut chosen: BTreeMap<&str, &Skill> = BTreeMap::new();
        for folder in folders_for(subagent) {
            if let Some(folder) = self.folders.get(folder) {
                chosen.extend(folder.skills.iter().map(|(name, s)| (name.as_str(), s)));
            }
        }
        chosen.into_values().collect()
    }

    /// The skill at a virtual path (`/skills/rover/create-department/SKILL.md`), whoever may see it.
    ///
    /// Duplicate and trailing slashes are tolerated; anything else must match exactly. To answer a
    /// particular agent, use [`SkillLibrary::read_as`].
    pub fn read(&self, virtual_path: &str) -> Option<&Skill> {
        let [folder, skill, file] = segments(virtual_path)?[..] else {
            return None;
        };
        if file != SKILL_FILE {
            return None;
        }
        self.folders.get(folder)?.skills.get(skill)
    }

    /// Like [`SkillLibrary::read`], but only a skill this agent sees: never another agent's folder,
    /// nor a `general` skill its own folder replaces.
    pub fn read_as(&self, subagent: Option<Subagent>, virtual_path: &str) -> Option<&Skill> {
        let skill = self.read(virtual_path)?;
        self.for_agent(subagent)
            .into_iter()
            .find(|visible| visible.path == skill.path)
    }

    /// The child names of a virtual directory, sorted, for `ls /skills/…`: folder names under
    /// `/skills`, skill names under `/skills/<folder>`, and `SKILL.md` under a skill. Everything but
    /// `SKILL.md` is a directory. Unknown directories have no children.
    pub fn list_dir(&self, virtual_dir: &str) -> Vec<String> {
        let Some(segments) = segments(virtual_dir) else {
            return Vec::new();
        };
        match segments[..] {
            [] => self.folders.keys().map(|f| (*f).to_owned()).collect(),
            [folder] => self
                .folders
                .get(folder)
                .map(|f| f.skills.keys().cloned().collect())
                .unwrap_or_default(),
            [folder, skill] => self
                .folders
                .get(folder)
                .filter(|f| f.skills.contains_key(skill))
                .map(|_| vec![SKILL_FILE.to_owned()])
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// Like [`SkillLibrary::list_dir`], but only what this agent sees: its two folders at the top
    /// (in precedence order, `general` first), and in each folder only the skills
    /// [`SkillLibrary::for_agent`] returns, sorted.
    pub fn list_dir_as(&self, subagent: Option<Subagent>, virtual_dir: &str) -> Vec<String> {
        let Some(segments) = segments(virtual_dir) else {
            return Vec::new();
        };
        let visible = self.for_agent(subagent);
        let in_folder = |folder: &str| {
            let prefix = format!("{VIRTUAL_ROOT}/{folder}/");
            visible
                .iter()
                .filter(move |s| s.path.starts_with(&prefix))
                .map(|s| s.name.clone())
                .collect::<Vec<_>>()
        };
        match segments[..] {
            [] => folders_for(subagent)
                .into_iter()
                .filter(|f| self.folders.contains_key(f))
                .map(str::to_owned)
                .collect(),
            [folder] => in_folder(folder),
            [folder, skill] if in_folder(folder).iter().any(|s| s == skill) => {
                vec![SKILL_FILE.to_owned()]
            }
            _ => Vec::new(),
        }
    }
}

/// The segments of a virtual path below `/skills`, or `None` if it is not under `/skills`.
fn segments(virtual_path: &str) -> Option<Vec<&str>> {
    let mut parts = virtual_path.split('/').filter(|s| !s.is_empty());
    (virtual_path.starts_with('/') && parts.next() == Some(&VIRTUAL_ROOT[1..]))
        .then(|| parts.collect())
}

/// Loads the skills of one top-level folder: every non-hidden sub-folder must be a valid skill.
fn load_folder(dir: &Path, folder: &'static str) -> Result<Folder, SkillError> {
    let read_err = |source| SkillError::Read {
        path: dir.to_owned(),
        source,
    };
    let mut skills = BTreeMap::new();
    for entry in fs::read_dir(dir).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        let skill_dir = entry.path();
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        if hidden || !skill_dir.is_dir() {
            continue;
        }
        let skill = load_skill(&skill_dir, folder)?;
        skills.insert(skill.name.clone(), skill);
    }
    Ok(Folder { skills })
}

/// The front matter fields a skill must have; other keys (`license`, `metadata`…) are allowed.
#[derive(Debug, Deserialize)]
struct FrontMatter {
    name: Option<String>,
    description: Option<String>,
}

/// Loads and checks one skill folder's `SKILL.md`.
fn load_skill(skill_dir: &Path, folder: &str) -> Result<Skill, SkillError> {
    let path = skill_dir.join(SKILL_FILE);
    if !path.is_file() {
        return Err(SkillError::MissingSkillFile {
            path: skill_dir.to_owned(),
        });
    }
    let text = fs::read_to_string(&path).map_err(|source| SkillError::Read {
        path: path.clone(),
        source,
    })?;
    let folder_name = skill_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    parse_skill(&text, folder, &folder_name).map_err(|problem| problem.at(path))
}

/// A problem with a `SKILL.md`, before the file's path is attached.
enum Problem {
    FrontMatter(String),
    MissingField(&'static str),
    BadField(&'static str, String),
    NameMismatch { name: String, folder: String },
    EmptyBody,
}

impl Problem {
    fn at(self, path: PathBuf) -> SkillError {
        match self {
            Problem::FrontMatter(problem) => SkillError::FrontMatter { path, problem },
            Problem::MissingField(field) => SkillError::MissingField { path, field },
            Problem::BadField(field, problem) => SkillError::BadField {
                path,
                field,
                problem,
            },
            Problem::NameMismatch { name, folder } => {
                SkillError::NameMismatch { path, name, folder }
            }
            Problem::EmptyBody => SkillError::EmptyBody { path },
        }
    }
}

/// Parses a `SKILL.md`'s text; `folder` is the top-level folder, `skill_folder` the skill's own.
fn parse_skill(text: &str, folder: &str, skill_folder: &str) -> Result<Skill, Problem> {
    let (yaml, body) = split_front_matter(text)?;
    let front: FrontMatter = match serde_yaml_ng::from_str(yaml) {
        Ok(front) => front,
        Err(error) => {
            return Err(Problem::FrontMatter(format!(
                "the YAML does not parse ({error})"
            )));
        }
    };

    let name = required(front.name, "name")?;
    check_name(&name)?;
    if name != skill_folder {
        return Err(Problem::NameMismatch {
            name,
            folder: skill_folder.to_owned(),
        });
    }

    let description = required(front.description, "description")?;
    if description.contains('\n') {
        return Err(Problem::BadField(
            "description",
            "it must be one sentence on one line".to_owned(),
        ));
    }
    if description.chars().count() > MAX_DESCRIPTION_LEN {
        return Err(Problem::BadField(
            "description",
            format!("it is longer than {MAX_DESCRIPTION_LEN} characters"),
        ));
    }

    let body = body.trim();
    if body.is_empty() {
        return Err(Problem::EmptyBody);
    }
    Ok(Skill {
        path: format!("{VIRTUAL_ROOT}/{folder}/{name}/{SKILL_FILE}"),
        name,
        description,
        body: format!("{body}\n"),
    })
}

/// Splits `---\n<yaml>\n---\n<body>` into the YAML and the body.
fn split_front_matter(text: &str) -> Result<(&str, &str), Problem> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some("---") {
        return Err(Problem::FrontMatter(
            "the file must start with a `---` line".to_owned(),
        ));
    }
    let yaml_start = text.find('\n').map_or(text.len(), |i| i + 1);
    let mut offset = yaml_start;
    for line in lines {
        if line.trim_end() == "---" {
            return Ok((&text[yaml_start..offset], &text[offset + line.len()..]));
        }
        offset += line.len();
    }
    Err(Problem::FrontMatter(
        "no closing `---` line after the front matter".to_owned(),
    ))
}

/// A required, non-blank string field, trimmed.
fn required(value: Option<String>, field: &'static str) -> Result<String, Problem> {
    value
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .ok_or(Problem::MissingField(field))
}

/// Skill names are kebab-case: lowercase letters and digits in words joined by single hyphens.
fn check_name(name: &str) -> Result<(), Problem> {
    let kebab = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.split('-').all(|word| {
            !word.is_empty()
                && word
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        });
    if kebab {
        Ok(())
    } else {
        Err(Problem::BadField(
            "name",
            format!(
                "`{name}` is not kebab-case (lowercase letters and digits joined by single hyphens, at most {MAX_NAME_LEN} characters)"
            ),
        ))
    }
}
