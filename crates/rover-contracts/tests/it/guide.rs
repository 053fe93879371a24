//! `docs/adding-a-tool.md` stays true: every source file that names a tool is named by the guide
//! (so wiring a tool into a new place without updating the guide fails), and every path the guide
//! names exists (so moving a file without updating the guide fails).
//!
//! "Names a tool" is keyed on the registry: a file names a tool when it holds the tool's name as a
//! whole identifier (`create_department`; a one-word name only quoted, `"task"`), its event quoted
//! (`"create.department"`), or its contract type (`CreateDepartment`, `CreateDepartmentArgs`; a
//! one-word tool only as `tools::Task` or `Task::CONTRACT`). Scanned: every file of the repository
//! except `target/`, `node_modules/`, build output (`dist/`), hidden folders, any `tests/` folder, and Markdown outside
//! `skills/`; in Rust files, `//` comment lines and everything from the first `#[cfg(test)]` on are
//! left out. A file is covered when the guide names it, its folder, or — for a skill's `SKILL.md` —
//! the folder of its skill set (`skills/rover/`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rover_contracts::tools::REGISTRY;

const GUIDE: &str = "docs/adding-a-tool.md";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every scanned file under `dir`, as a `/`-separated path relative to the repository root.
fn scanned_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if path.is_dir() {
            if !(name.starts_with('.')
                || ["target", "node_modules", "tests", "dist"].contains(&&*name))
            {
                scanned_files(root, &path, out);
            }
            continue;
        }
        let relative = path
            .strip_prefix(root)
            .expect("under the root")
            .to_string_lossy()
            .replace('\\', "/");
        if relative.ends_with(".md") && !relative.starts_with("skills/") {
            continue;
        }
        out.push(relative);
    }
}

/// The text a file contributes: Rust files without comment lines and without their test module.
fn scanned_text(path: &str, text: String) -> String {
    if !path.ends_with(".rs") {
        return text;
    }
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    code.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `needle` occurs in `text` with no identifier character before it and, after it, no
/// character for which `stops` is true.
fn occurs(text: &str, needle: &str, stops: impl Fn(char) -> bool) -> bool {
    text.match_indices(needle).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + needle.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(&stops)
    })
}

/// `create_department` → `CreateDepartment`.
fn camel(name: &str) -> String {
    name.split('_')
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// Whether `text` names the tool `name` (with RPC routing key `event`).
fn names_tool(text: &str, name: &str, event: Option<&str>) -> bool {
    let type_name = camel(name);
    let by_name = if name.contains('_') {
        occurs(text, name, is_ident)
            || occurs(text, &type_name, |c: char| {
                c.is_ascii_lowercase() || c.is_ascii_digit()
            })
    } else {
        text.contains(&format!("\"{name}\""))
            || occurs(text, &format!("tools::{type_name}"), is_ident)
            || text.contains(&format!("{type_name}::CONTRACT"))
    };
    by_name || event.is_some_and(|event| text.contains(&format!("\"{event}\"")))
}

/// Every scanned file that names a tool, with the tools it names.
fn files_naming_tools(root: &Path) -> BTreeMap<String, BTreeSet<&'static str>> {
    let mut files = Vec::new();
    scanned_files(root, root, &mut files);
    let mut found: BTreeMap<String, BTreeSet<&'static str>> = BTreeMap::new();
    for file in files {
        // Binary files (images, keys) are not source.
        let Ok(text) = std::fs::read_to_string(root.join(&file)) else {
            continue;
        };
        let text = scanned_text(&file, text);
        for contract in REGISTRY {
            if names_tool(&text, contract.name, contract.event()) {
                found.entry(file.clone()).or_default().insert(contract.name);
            }
        }
    }
    found
}

/// The repository paths the guide names: backticked spans outside fenced code blocks that contain
/// a `/` (and are not a
/// pattern with `<…>`, `*` or `{…}`, a URL, or an absolute path), or that are a top-level entry of
/// the repository (`tool-contracts.json`). Folders are returned without their trailing `/`.
fn guide_paths(root: &Path, guide: &str) -> BTreeSet<String> {
    let top_level: BTreeSet<String> = std::fs::read_dir(root)
        .expect("read the repository root")
        .map(|entry| {
            entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    // Fenced code blocks are examples, not references: their lines are left out.
    let mut fenced = false;
    let prose: String = guide
        .lines()
        .filter(|line| {
            let fence = line.trim_start().starts_with("```");
            fenced ^= fence;
            !fence && !fenced
        })
        .map(|line| format!("{line}\n"))
        .collect();
    prose
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| {
            let pattern = span.contains(['<', '>', '*', '{', '}', ' ', '…']);
            let path_like = span.contains('/') && !span.starts_with('/') && !span.contains("://");
            !pattern && (path_like || top_level.contains(*span))
        })
        .map(|span| span.trim_end_matches('/').to_owned())
        .collect()
}

/// Whether the guide's paths `named` cover `file`.
fn covered(file: &str, named: &BTreeSet<String>) -> bool {
    let path = Path::new(file);
    let folder = path.parent().map(|p| p.to_string_lossy().into_owned());
    let skill_set = (path.file_name().is_some_and(|n| n == "SKILL.md"))
        .then(|| path.parent().and_then(Path::parent))
        .flatten()
        .map(|p| p.to_string_lossy().into_owned());
    named.contains(file)
        || folder.is_some_and(|f| named.contains(&f))
        || skill_set.is_some_and(|s| named.contains(&s))
}

fn read_guide(root: &Path) -> String {
    std::fs::read_to_string(root.join(GUIDE)).unwrap_or_else(|e| panic!("read {GUIDE}: {e}"))
}

#[test]
fn every_file_that_names_a_tool_is_named_by_the_guide() {
    let root = repo_root();
    let named = guide_paths(&root, &read_guide(&root));
    let found = files_naming_tools(&root);
    let missing: Vec<String> = found
        .iter()
        .filter(|(file, _)| !covered(file, &named))
        .map(|(file, tools)| format!("{file} (names {tools:?})"))
        .collect();
    assert!(
        missing.is_empty(),
        "these files name a tool but {GUIDE} names neither them nor their folder; say in the guide \
         what a new tool needs there (or that it needs nothing):\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn every_path_the_guide_names_exists() {
    let root = repo_root();
    let missing: Vec<String> = guide_paths(&root, &read_guide(&root))
        .into_iter()
        .filter(|path| !root.join(path).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "{GUIDE} names paths that do not exist: {missing:?}"
    );
}

/// The scan is not vacuous: it finds the places every kind of tool is known to be wired through,
/// and ignores what it should.
#[test]
fn the_scan_finds_the_known_wiring_of_an_rpc_and_a_local_tool() {
    let found = files_naming_tools(&repo_root());
    let names = |file: &str, tool: &str| found.get(file).is_some_and(|t| t.contains(tool));
    for (file, tool) in [
        (
            "crates/rover-contracts/src/tools/mod.rs",
            "create_department",
        ),
        (
            "crates/rover-contracts/src/tools/rover.rs",
            "create_department",
        ),
        (
            "crates/rover-domain/src/departments.rs",
            "create_department",
        ),
        ("crates/rover-domain/src/lib.rs", "create_department"),
        (
            "services/rover-toolserver/src/dispatch.rs",
            "create_department",
        ),
        (
            "services/rover-gateway/src/rest/mod.rs",
            "create_department",
        ),
        (
            "services/rover-gateway/src/rest/openapi.rs",
            "create_department",
        ),
        (
            "crates/rover-scripted-model/rules.toml",
            "create_department",
        ),
        (
            "skills/rover/create-department/SKILL.md",
            "create_department",
        ),
        ("tool-contracts.json", "create_department"),
        (
            "crates/rover-contracts/src/tools/local.rs",
            "get_current_date",
        ),
        ("crates/rover-agent/src/local.rs", "get_current_date"),
        ("crates/rover-agent/src/build.rs", "get_current_date"),
    ] {
        assert!(names(file, tool), "the scan missed {tool} in {file}");
    }
    assert!(
        !found
            .keys()
            .any(|f| f.contains("/tests/") || f.starts_with("tests/")),
        "test files are not scanned"
    );
    assert!(
        !found.contains_key("README.md") && !found.contains_key("ARCHITECTURE.md"),
        "Markdown outside skills/ is not scanned"
    );

    // The matcher itself: whole identifiers, quoted one-word names, events, contract types.
    assert!(names_tool(
        "d::create_department(tx)",
        "create_department",
        None
    ));
    assert!(!names_tool(
        "recreate_departments",
        "create_department",
        None
    ));
    assert!(names_tool(
        "CreateDepartmentArgs {",
        "create_department",
        None
    ));
    assert!(!names_tool("CreateDepartmental", "create_department", None));
    assert!(names_tool(
        "\"create.department\"",
        "x_y",
        Some("create.department")
    ));
    assert!(names_tool("\"task\" =>", "task", None));
    assert!(!names_tool("a background task", "task", None));
    assert!(names_tool("tools::Task::CONTRACT", "task", None));
}

/// The coverage rule: the file, its folder, or a skill's skill set — nothing further up.
#[test]
fn a_file_is_covered_by_itself_its_folder_or_its_skill_set_only() {
    let named: BTreeSet<String> = [
        "crates/rover-agent/src",
        "skills/rover",
        "tool-contracts.json",
    ]
    .map(String::from)
    .into();
    assert!(covered("crates/rover-agent/src/local.rs", &named));
    assert!(covered("tool-contracts.json", &named));
    assert!(covered("skills/rover/create-department/SKILL.md", &named));
    assert!(!covered("crates/rover-agent/src/deep/x.rs", &named));
    assert!(!covered("skills/general/terms-and-dates/SKILL.md", &named));
    assert!(!covered("crates/rover-domain/src/lib.rs", &named));

    let root = repo_root();
    let paths = guide_paths(
        &root,
        "see `crates/rover-agent/src/` and `tool-contracts.json`, not `skills/<owner>/x/SKILL.md`, \
         `/skills/rover`, `rover_domain::x`, `https://a/b` or `README`\n\
         ```rust\n// `crates/new/file.rs`\n```\nand `skills/rover/`",
    );
    assert_eq!(
        paths,
        [
            "crates/rover-agent/src",
            "skills/rover",
            "tool-contracts.json"
        ]
        .map(String::from)
        .into()
    );
}
