//! ARCHITECTURE.md's codemap stays true: every source file of every crate and service is named in
//! the section of the codemap that heads its crate (by its path under `src/`, e.g.
//! `turns/stream.rs`), and every crate has such a section. A new file without its line fails here.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the repository")
        .to_path_buf()
}

/// The codemap's sections: the crate folders each heads (the backticked paths of its `###`
/// heading), and its text.
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
            (folders, body.to_owned())
        })
        .collect()
}

/// Every `.rs` file under `dir`, as its path relative to `dir`.
fn sources(dir: &Path, under: &Path, found: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, under, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path.strip_prefix(under).expect("under its root");
            found.push(relative.to_string_lossy().replace('\\', "/"));
        }
    }
}

#[test]
fn every_source_file_is_in_the_codemap_under_its_crate() {
    let root = repo();
    let architecture =
        std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md exists");
    let sections = sections(&architecture);
    let mut missing = Vec::new();
    for group in ["crates", "services"] {
        let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join(group))
            .expect("the folder exists")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("Cargo.toml").is_file())
            .collect();
        crates.sort();
        for dir in crates {
            let name = format!("{group}/{}", dir.file_name().unwrap().to_string_lossy());
            let Some((_, text)) = sections.iter().find(|(folders, _)| folders.contains(&name))
            else {
                missing.push(format!("{name}: no codemap section"));
                continue;
            };
            let mut files = Vec::new();
            sources(&dir.join("src"), &dir.join("src"), &mut files);
            files.sort();
            for file in files {
                let named = text.contains(&format!("`{file}`"))
                    || text.contains(&format!("{file}`"))
                    || text.contains(&format!("`{file}"));
                if !named {
                    missing.push(format!("{name}: src/{file}"));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's codemap does not name these (name each file, by its path under src/, \
         in its crate's section):\n{}",
        missing.join("\n")
    );
}
