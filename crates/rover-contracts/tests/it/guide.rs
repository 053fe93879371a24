//! `docs/adding-a-tool.md` stays true: every source file that names a tool is named by the guide
//! (so wiring a tool into a new place without updating the guide fails), and every path the guide
//! names exists (so moving a file without updating the guide fails). The other documents too —
//! `README.md`, `ARCHITECTURE.md` and every page under `docs/` (designs, decisions): each
//! repository path they name in backticks exists, each relative link reaches a file of the
//! repository (and its `#anchor` a heading there), and none cites a path outside the repository.
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

/// The documents the doc checks read: `README.md`, `ARCHITECTURE.md` and every `.md` under
/// `docs/`, as paths relative to the repository root.
fn documents(root: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
            .map(|entry| entry.expect("a directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                let relative = path.strip_prefix(root).expect("under the root");
                out.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let mut docs = vec!["README.md".to_owned(), "ARCHITECTURE.md".to_owned()];
    walk(root, &root.join("docs"), &mut docs);
    docs
}

/// A document's prose: its lines outside fenced code blocks (examples, not references).
fn prose(text: &str) -> String {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            let fence = line.trim_start().starts_with("```");
            fenced ^= fence;
            !fence && !fenced
        })
        .map(|line| format!("{line}\n"))
        .collect()
}

/// The repository paths a document names: backticked spans of its prose whose first segment is
/// a top-level entry of the repository (`crates/…`, `docs/…`, `Makefile`), without patterns
/// (`<…>`, `*`, `{…}`, spaces, `…`) and without build output (`target/`, `dist/`,
/// `node_modules/`), which a fresh clone does not have. A span of a path inside a crate
/// (`turns/stream.rs`) or of anything else with a slash (`text/event-stream`) is not one.
fn doc_paths(root: &Path, text: &str) -> BTreeSet<String> {
    let top_level: BTreeSet<String> = std::fs::read_dir(root)
        .expect("read the repository root")
        .map(|entry| {
            entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| !name.starts_with('.'))
        .collect();
    prose(text)
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| !span.contains(['<', '>', '*', '{', '}', ' ', '…']) && !span.contains("://"))
        .map(|span| span.trim_end_matches('/'))
        .filter(|span| {
            let first = span.split('/').next().unwrap_or_default();
            top_level.contains(first)
                && !span
                    .split('/')
                    .any(|segment| ["target", "dist", "node_modules"].contains(&segment))
        })
        .map(str::to_owned)
        .collect()
}

/// The targets of a document's Markdown links (`[text](target)`) in its prose, but for web
/// addresses and `mailto:`.
fn doc_links(text: &str) -> Vec<String> {
    let prose = prose(text);
    prose
        .match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &prose[at + 2..];
            let target = &rest[..rest.find(')')?];
            let external = target.contains("://") || target.starts_with("mailto:");
            (!external && !target.is_empty()).then(|| target.to_owned())
        })
        .collect()
}

/// GitHub's anchor for a heading: lower case, spaces to hyphens, punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings.
fn anchors(text: &str) -> BTreeSet<String> {
    prose(text)
        .lines()
        .filter_map(|line| {
            line.trim_start_matches('#')
                .strip_prefix(' ')
                .filter(|_| line.starts_with('#'))
        })
        .map(slug)
        .collect()
}

/// A path made of `base`'s folder and a relative `target`, with `.` and `..` folded; `None` when
/// it climbs out of the repository.
fn resolve(base: &str, target: &str) -> Option<String> {
    let mut parts: Vec<&str> = base.split('/').collect();
    parts.pop();
    for segment in target.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            segment => parts.push(segment),
        }
    }
    Some(parts.join("/"))
}

#[test]
fn every_path_the_docs_name_exists() {
    let root = repo_root();
    let mut missing = Vec::new();
    for doc in documents(&root) {
        let text = std::fs::read_to_string(root.join(&doc)).expect("a document reads");
        for path in doc_paths(&root, &text) {
            if !root.join(&path).exists() {
                missing.push(format!("{doc}: `{path}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "these documents name paths that do not exist (moved or renamed? say where it went):\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn every_link_in_the_docs_reaches_a_file_and_heading_of_the_repository() {
    let root = repo_root();
    let mut broken = Vec::new();
    for doc in documents(&root) {
        let text = std::fs::read_to_string(root.join(&doc)).expect("a document reads");
        for link in doc_links(&text) {
            let (path, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let Some(file) = (if path.is_empty() {
                Some(doc.clone())
            } else {
                resolve(&doc, path)
            }) else {
                broken.push(format!("{doc}: ({link}) leaves the repository"));
                continue;
            };
            let target = root.join(&file);
            if !target.exists() {
                broken.push(format!("{doc}: ({link}) — no {file}"));
            } else if !anchor.is_empty() {
                let text = std::fs::read_to_string(&target).unwrap_or_default();
                if !anchors(&text).contains(anchor) {
                    broken.push(format!("{doc}: ({link}) — no heading #{anchor} in {file}"));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "broken links in the documents:\n  {}",
        broken.join("\n  ")
    );
}

#[test]
fn no_doc_cites_a_path_outside_the_repository() {
    let root = repo_root();
    let mut outside = Vec::new();
    for doc in documents(&root) {
        let text = std::fs::read_to_string(root.join(&doc)).expect("a document reads");
        for (n, line) in text.lines().enumerate() {
            let cited = ["../shared", "/work/", "/root/", "/home/"]
                .iter()
                .any(|p| line.contains(p));
            if cited {
                outside.push(format!("{doc}:{}: {line}", n + 1));
            }
        }
    }
    assert!(
        outside.is_empty(),
        "documents cite paths outside the repository (a reader of a clone has only the \
         repository; move what they need into it):\n  {}",
        outside.join("\n  ")
    );
}

/// The doc checks themselves: which spans are repository paths, which links are checked, and
/// how anchors and relative paths resolve.
#[test]
fn the_doc_checks_read_paths_links_and_anchors_as_meant() {
    let root = repo_root();
    let paths = doc_paths(
        &root,
        "`crates/rover-agent/src/` `Makefile` `turns/stream.rs` `text/event-stream` \
         `target/eval/latest.json` `console/dist` `skills/<owner>/x` `/api/chat` `crates/x y`\n\
         ```sh\n`docs/nowhere.md`\n```\n",
    );
    assert_eq!(
        paths,
        ["Makefile", "crates/rover-agent/src"]
            .map(String::from)
            .into()
    );
    assert_eq!(
        doc_links("[a](hub.md#stop) [b](https://x.org/a) [c](../ARCHITECTURE.md) [d](#here)"),
        ["hub.md#stop", "../ARCHITECTURE.md", "#here"]
    );
    assert_eq!(
        slug("The model: retries, fallbacks, warm-up, calls written as text"),
        "the-model-retries-fallbacks-warm-up-calls-written-as-text"
    );
    assert_eq!(
        slug("On a real model: `make run MODEL=local`"),
        "on-a-real-model-make-run-modellocal"
    );
    assert!(anchors("# Title\n## Stop\n```\n# not a heading\n```\n").contains("stop"));
    assert!(!anchors("```\n# not a heading\n```\n").contains("not-a-heading"));
    assert_eq!(
        resolve("docs/design/x.md", "../hub.md").as_deref(),
        Some("docs/hub.md")
    );
    assert_eq!(
        resolve("docs/x.md", "../ARCHITECTURE.md").as_deref(),
        Some("ARCHITECTURE.md")
    );
    assert_eq!(resolve("docs/x.md", "../../../shared/a.md"), None);
}
