//! Smoke test of the `rover-bench` binary: it starts and describes itself. (The benchmarks
//! themselves run with `make bench`, never in `make test`.)

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story: its setup, the act and every assertion in one place"
)]

use std::process::Command;

#[test]
fn help_names_every_section() {
    let output = Command::new(env!("CARGO_BIN_EXE_rover-bench"))
        .arg("--help")
        .output()
        .expect("rover-bench runs");
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for section in ["floor", "tool-hop", "agent-build", "turns", "streams"] {
        assert!(
            help.contains(section),
            "--help does not name {section}:\n{help}"
        );
    }
}
