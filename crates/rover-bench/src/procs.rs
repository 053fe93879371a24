//! The release binaries as child processes: started with a clean `ROVER_` environment plus the
//! bench's own, ready when they log their ready line, killed when dropped; and their peak resident
//! memory (`VmHWM` in `/proc/<pid>/status`).

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde_json::Value;

/// A service binary built next to `rover-bench` (`target/release/`).
pub(crate) fn binary(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("Failed to find the rover-bench executable")?;
    let path = exe
        .parent()
        .context("Unexpected rover-bench location")?
        .join(name);
    if !path.is_file() {
        bail!(
            "{} is not built: run `cargo build --release --bins` (make bench does) first",
            path.display()
        );
    }
    Ok(path)
}

/// A running child process, killed when dropped.
#[derive(Debug)]
pub(crate) struct Service {
    pub(crate) name: &'static str,
    child: Child,
    /// Runs under callgrind: stop it gently, so the profile is written.
    profiled: bool,
}

impl Service {
    /// Starts `name` with `args` and `env` (JSON logs), and waits until it logs a line containing
    /// `ready`; returns it with that line, parsed.
    pub(crate) fn start(
        name: &'static str,
        args: &[&str],
        env: &HashMap<String, String>,
        ready: &str,
    ) -> anyhow::Result<(Service, Value)> {
        // `ROVER_BENCH_PROFILE=<name>` runs that service under callgrind (output in
        // target/bench/callgrind.<name>.<pid>), for finding where its time goes.
        let profiled = std::env::var("ROVER_BENCH_PROFILE").is_ok_and(|p| p == name);
        let mut command = if profiled {
            let mut command = Command::new("valgrind");
            command.args([
                "--tool=callgrind",
                &format!("--callgrind-out-file=target/bench/callgrind.{name}.%p"),
            ]);
            command.arg(binary(name)?);
            command
        } else {
            Command::new(binary(name)?)
        };
        for (key, _) in std::env::vars() {
            if key.starts_with("ROVER_") || key == "RUST_LOG" {
                command.env_remove(key);
            }
        }
        let mut child = command
            .args(args)
            .envs(env)
            .env("ROVER_TELEMETRY__FORMAT", "json")
            .env("RUST_BACKTRACE", "0")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("Failed to start {name}"))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let service = Service {
            name,
            child,
            profiled,
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // Keep draining after the ready line, so the child never blocks on a full pipe.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(120))
                .with_context(|| format!("{name} did not become ready"))?;
            if line.contains(ready) {
                std::thread::spawn(move || for _ in rx {});
                return Ok((service, serde_json::from_str(&line).unwrap_or(Value::Null)));
            }
        }
    }

    /// Peak resident set size so far, in MB (10^6 bytes).
    pub(crate) fn peak_rss_mb(&self) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let kib: f64 = status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        Some(kib * 1024.0 / 1e6)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if self.profiled {
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
            let _ = self.child.wait();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
