//! What the bench adds to `rover_stack`'s launcher: the release binaries under `callgrind` when
//! `ROVER_BENCH_PROFILE` names one, and their resident memory (`VmRSS`, and the peak `VmHWM`, in
//! `/proc/<pid>/status`).

use std::time::Duration;

use rover_stack::{Launcher, Process};

/// The bench's launcher: the services' standard error shown with the bench's, 120 s to become
/// ready (a service under callgrind is slow to start), and `ROVER_BENCH_PROFILE=<name>` running
/// that service under callgrind (output in `target/bench/callgrind.<name>.<pid>`, written when it
/// is stopped), for finding where its time goes. Collection starts off and is switched on for each
/// measured load phase it serves (`cpu::Meter`), so the profile and the instructions per
/// operation hold the calls' work, not start-up or warm-up.
pub(crate) fn launcher() -> Launcher {
    let launcher = Launcher::new().ready_timeout(Duration::from_secs(120));
    match profiled() {
        Some(name) => {
            // callgrind cannot create the folder itself (`--out` may name another one).
            if let Err(error) = std::fs::create_dir_all("target/bench") {
                eprintln!("rover-bench: cannot create target/bench for callgrind: {error}");
            }
            let out = format!("--callgrind-out-file=target/bench/callgrind.{name}.%p");
            launcher.wrap(
                &name,
                "valgrind",
                ["--tool=callgrind", "--instr-atstart=no", out.as_str()],
            )
        }
        None => launcher,
    }
}

/// The service `ROVER_BENCH_PROFILE` names, to run under callgrind.
pub(crate) fn profiled() -> Option<String> {
    std::env::var("ROVER_BENCH_PROFILE")
        .ok()
        .filter(|name| !name.is_empty())
}

/// Peak resident set size of `process` so far, in MB (10^6 bytes).
pub(crate) fn peak_rss_mb(process: &Process) -> Option<f64> {
    status_mb(process, "VmHWM:")
}

/// Resident set size of `process` now, in MB (10^6 bytes).
pub(crate) fn rss_mb(process: &Process) -> Option<f64> {
    status_mb(process, "VmRSS:")
}

/// A `… kB` line of `/proc/<pid>/status`, in MB.
fn status_mb(process: &Process, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", process.id())).ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix(field))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024.0 / 1e6)
}
