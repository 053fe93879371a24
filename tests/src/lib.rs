//! Helpers for Rover's cross-service tests: finding the built service binaries and running them as
//! child processes that are always killed, even when a test fails.

use std::path::PathBuf;
use std::process::{Child, Command};

use anyhow::{Context as _, bail};

/// The three service binaries.
pub const SERVICES: [&str; 3] = ["rover-gateway", "rover-worker", "rover-toolserver"];

/// The path of a workspace binary, built next to the test executable (`target/<profile>/`).
///
/// `make test` builds every binary before running the tests; a missing one is a clear error.
pub fn binary(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("Failed to find the test executable")?;
    // target/<profile>/deps/it-<hash> → target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .context("Unexpected test executable location")?;
    let path = dir.join(name);
    if !path.is_file() {
        bail!(
            "{} is not built: run `cargo build --workspace --bins` (make test does) first",
            path.display()
        );
    }
    Ok(path)
}

/// A command for a service binary with a clean `ROVER_`/`OTEL_` environment, so the developer's
/// own settings cannot leak into a test.
pub fn service_command(name: &str) -> anyhow::Result<Command> {
    let mut command = Command::new(binary(name)?);
    for (key, _) in std::env::vars() {
        if key.starts_with("ROVER_") || key.starts_with("OTEL_") || key == "RUST_LOG" {
            command.env_remove(key);
        }
    }
    command.env("RUST_BACKTRACE", "0");
    Ok(command)
}

/// A child process killed when dropped.
#[derive(Debug)]
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
