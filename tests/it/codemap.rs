//! ARCHITECTURE.md's codemap stays true: every crate and service of the workspace (every Cargo
//! package its `members` name) and `console/`, `skills/` and `deploy/` have their paragraph — a
//! `###` heading naming the folder in backticks, then one paragraph saying what it owns and what
//! it must not know — and no heading names a folder that is gone. A file a paragraph names by its
//! path inside its crate (`store.rs`, `turns/`) must exist there, so a rename cannot leave the
//! paragraph behind. The files themselves are described by their own `//!` headers, not here.

use std::path::{Path, PathBuf};

/// The folders that are not Cargo packages but have a paragraph of their own.
const OTHER_FOLDERS: [&str; 3] = ["console", "skills", "deploy"];

/// Fewer words than this is a heading, not a paragraph.
const MIN_WORDS: usize = 30;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the repository")
        .to_path_buf()
}

/// The codemap's sections: the folders each heads (the backticked paths of its `###` heading),
/// and its text.
fn sections(architecture: &str) -> Vec<(Vec<String>, String)> {
    let codemap = architecture
        .split("\n## Codemap")
        .nth(1)
        .expect("ARCHITECTURE.md has a Codemap")
        .split("\n## ")
        .next()
        .unwrap_or_default();
    codemap
        .split("\n### ")
        .skip(1)
        .map(|section| {
            let (heading, body) = section.split_once('\n').unwrap_or((section, ""));
            let folders = heading
                .split('`')
                .skip(1)
                .step_by(2)
                .map(|f| f.trim_end_matches('/').to_owned())
                .collect();
            // A `**Room: …**` line closes the paragraph before it.
            let body = body
                .lines()
                .take_while(|line| !line.starts_with("**Room"))
                .collect::<Vec<_>>()
                .join("\n");
            (folders, body.trim().to_owned())
        })
        .collect()
}

/// The workspace's packages, as folders relative to the repository: `members` of the root
/// `Cargo.toml`, a trailing `/*` expanded to each folder with a `Cargo.toml`.
fn packages(root: &Path) -> Vec<String> {
    let manifest: toml::Table = std::fs::read_to_string(root.join("Cargo.toml"))
        .expect("the root Cargo.toml reads")
        .parse()
        .expect("the root Cargo.toml parses");
    let members = manifest["workspace"]["members"]
        .as_array()
        .expect("workspace.members is a list");
    let mut folders = Vec::new();
    for member in members {
        let member = member.as_str().expect("a member is a path");
        if let Some(parent) = member.strip_suffix("/*") {
            let mut found: Vec<String> = std::fs::read_dir(root.join(parent))
                .expect("the members' folder exists")
                .flatten()
                .filter(|e| e.path().join("Cargo.toml").is_file())
                .map(|e| format!("{parent}/{}", e.file_name().to_string_lossy()))
                .collect();
            found.sort();
            folders.extend(found);
        } else {
            folders.push(member.to_owned());
        }
    }
    folders
}

/// The paths a paragraph names inside its own folder: backticked `….rs` files and `…/` folders
/// that are not repository paths (those are checked by the contracts crate's `guide.rs`).
fn local_paths(body: &str, top_level: &[String]) -> Vec<String> {
    body.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| !span.contains([' ', ':', '<', '*', '{']))
        .filter(|span| span.ends_with(".rs") || span.ends_with('/'))
        .filter(|span| {
            let first = span.split('/').next().unwrap_or_default();
            !top_level.iter().any(|t| t == first)
        })
        .map(|span| span.trim_end_matches('/').to_owned())
        .collect()
}

#[test]
fn every_crate_and_service_has_its_paragraph_in_the_codemap() {
    let root = repo();
    let architecture =
        std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md exists");
    let sections = sections(&architecture);
    let top_level: Vec<String> = std::fs::read_dir(&root)
        .expect("the repository reads")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let mut wanted = packages(&root);
    assert!(
        wanted.iter().any(|p| p == "services/rover-gateway") && wanted.iter().any(|p| p == "tests"),
        "the workspace's members are read: {wanted:?}"
    );
    wanted.extend(OTHER_FOLDERS.map(String::from));

    let mut problems = Vec::new();
    for folder in &wanted {
        let heading = sections
            .iter()
            .filter(|(folders, _)| folders.contains(folder))
            .count();
        match heading {
            0 => problems.push(format!("{folder}: no `### `{folder}`` paragraph")),
            1 => {}
            n => problems.push(format!("{folder}: {n} paragraphs, one wanted")),
        }
    }
    for (folders, body) in &sections {
        let name = folders.join(", ");
        for folder in folders {
            if !root.join(folder).is_dir() {
                problems.push(format!("{name}: the folder {folder} does not exist"));
            }
        }
        if body.contains("\n\n") {
            problems.push(format!("{name}: more than one paragraph"));
        }
        let words = body.split_whitespace().count();
        if words < MIN_WORDS {
            problems.push(format!(
                "{name}: {words} words — say what it owns and what it must not know"
            ));
        }
        for path in local_paths(body, &top_level) {
            let named = folders.iter().any(|folder| {
                root.join(folder).join("src").join(&path).exists()
                    || root.join(folder).join(&path).exists()
            });
            if !named {
                problems.push(format!("{name}: `{path}` is not in it"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md's codemap (one paragraph per crate, service, console/, skills/ and \
         deploy/, under a `###` heading naming its folder):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_codemap_reader_finds_headings_paragraphs_and_local_paths() {
    let text = "# A\n## Codemap\nintro\n**Room: x.**\n\n### `crates/a`, `crates/b/`\nOne \
                paragraph naming `store.rs`, `turns/`, `crates/a/src/x.rs`, `rover_a::b` and \
                `a b.rs`.\n\n**Room: y.**\n\n### `console/`\nFirst.\n\nSecond.\n## After\n### `x`\n";
    let sections = sections(text);
    assert_eq!(sections.len(), 2, "{sections:?}");
    assert_eq!(sections[0].0, ["crates/a", "crates/b"]);
    assert!(!sections[0].1.contains("Room"), "{:?}", sections[0].1);
    assert_eq!(sections[1].0, ["console"]);
    assert!(sections[1].1.contains("\n\n"));
    assert_eq!(
        local_paths(&sections[0].1, &["crates".to_owned()]),
        ["store.rs", "turns"]
    );
}
