//! CPU per unit of work: each service process's own user + system CPU time, read from
//! `/proc/<pid>/stat` (fields `utime` and `stime`: every thread of the process, the ones that
//! have exited included) before and after a measured load phase, divided by the operations the
//! phase completed. Not the broker's or Postgres's CPU, nor the bench's own: what each Rover
//! process burns for the work it is given.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Linux reports `utime`/`stime` in clock ticks of `USER_HZ`, which is 100 on every architecture
/// Linux runs Rover on (it is part of the kernel's ABI, whatever the kernel's own `HZ`).
const TICKS_PER_SECOND: f64 = 100.0;

/// The processes a load phase is metered on: (name, pid).
#[derive(Debug, Clone, Default)]
pub(crate) struct Meter(Vec<(String, u32)>);

impl Meter {
    /// Meters nothing (the in-process and broker-only cases).
    pub(crate) fn none() -> Meter {
        Meter(Vec::new())
    }

    /// Meters these processes.
    pub(crate) fn of<'a>(processes: impl IntoIterator<Item = &'a rover_stack::Process>) -> Meter {
        Meter(
            processes
                .into_iter()
                .map(|p| (p.name().to_owned(), p.id()))
                .collect(),
        )
    }

    /// Starts counting instructions in the profiled process, if one is metered.
    pub(crate) fn start_counting(&self) {
        if let Some((_, pid)) = self.profiled() {
            callgrind_control(pid, &["--zero"]);
            callgrind_control(pid, &["--instr=on"]);
        }
    }

    /// Stops counting; the instructions the profiled process ran since [`Meter::start_counting`].
    pub(crate) fn instructions(&self) -> Option<(String, u64)> {
        let (name, pid) = self.profiled()?;
        callgrind_control(pid, &["--instr=off"]);
        let before = dumps(name, pid);
        callgrind_control(pid, &["--dump=rover-bench phase"]);
        let dump = dumps(name, pid).into_iter().find(|d| !before.contains(d))?;
        let text = std::fs::read_to_string(dump).ok()?;
        // `totals:` (the last line) holds the dump's count; the header's `summary:` may be 0.
        let total = text
            .lines()
            .find_map(|l| l.strip_prefix("totals:"))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        Some((name.clone(), total))
    }

    /// The metered process `ROVER_BENCH_PROFILE` runs under callgrind.
    fn profiled(&self) -> Option<(&String, u32)> {
        let profiled = crate::procs::profiled()?;
        self.0
            .iter()
            .find(|(name, _)| *name == profiled)
            .map(|(name, pid)| (name, *pid))
    }

    /// Each process's CPU time so far (a process whose `stat` cannot be read is left out).
    pub(crate) fn sample(&self) -> Sample {
        Sample(
            self.0
                .iter()
                .filter_map(|(name, pid)| Some((name.clone(), cpu_time(*pid)?)))
                .collect(),
        )
    }
}

/// CPU time per process at one moment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sample(Vec<(String, Duration)>);

impl Sample {
    /// The CPU each process used between `self` (earlier) and `later`.
    pub(crate) fn until(&self, later: &Sample) -> Vec<(String, Duration)> {
        self.0
            .iter()
            .filter_map(|(name, before)| {
                let (_, after) = later.0.iter().find(|(n, _)| n == name)?;
                Some((name.clone(), after.saturating_sub(*before)))
            })
            .collect()
    }
}

/// `callgrind_control <args> <pid>`; a failure is reported, not fatal (the figures go missing).
fn callgrind_control(pid: u32, args: &[&str]) {
    let ran = std::process::Command::new("callgrind_control")
        .args(args)
        .arg(pid.to_string())
        .stdout(std::process::Stdio::null())
        .status();
    if !matches!(ran, Ok(status) if status.success()) {
        eprintln!("rover-bench: callgrind_control {args:?} {pid} failed: {ran:?}");
    }
}

/// The callgrind dumps of `name`'s process `pid` so far (`procs::launcher` names them).
fn dumps(name: &str, pid: u32) -> Vec<std::path::PathBuf> {
    let prefix = format!("callgrind.{name}.{pid}.");
    std::fs::read_dir("target/bench")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix))
        })
        .collect()
}

/// One process's CPU over a row: in all, and per operation of the row.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ProcessCpu {
    /// The binary's name (`rover-toolserver`, …).
    pub(crate) process: String,
    /// User + system CPU over the measured phase, in ms.
    pub(crate) cpu_ms: f64,
    /// That divided by the operations completed (calls, turns), in µs.
    pub(crate) per_op_us: f64,
    /// Under callgrind (`ROVER_BENCH_PROFILE`): instructions per operation over the same phase
    /// (its CPU time is then valgrind's, not comparable with a plain run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) instructions_per_op: Option<f64>,
}

/// Per-process CPU of a phase, per each of its `ops` operations, with the profiled process's
/// instructions when it was counted.
pub(crate) fn per_op(
    used: &[(String, Duration)],
    instructions: Option<&(String, u64)>,
    ops: usize,
) -> Vec<ProcessCpu> {
    let ops = ops.max(1) as f64;
    used.iter()
        .map(|(process, cpu)| ProcessCpu {
            process: process.clone(),
            cpu_ms: cpu.as_secs_f64() * 1e3,
            per_op_us: cpu.as_secs_f64() * 1e6 / ops,
            instructions_per_op: instructions
                .filter(|(name, _)| name == process)
                .map(|(_, total)| *total as f64 / ops),
        })
        .collect()
}

/// The CPU time `pid` and all its threads have used, user + system.
fn cpu_time(pid: u32) -> Option<Duration> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// `utime + stime` from a `/proc/<pid>/stat` line. The command name (field 2) is in parentheses
/// and may hold spaces or parentheses itself, so fields are counted after its last `)`.
fn parse_stat(stat: &str) -> Option<Duration> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // After the name: state is field 3; utime and stime are fields 14 and 15.
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_secs_f64(
        (utime + stime) as f64 / TICKS_PER_SECOND,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utime_and_stime_are_read_after_the_command_name() {
        let stat = "4242 (rover (tool) srv) S 1 4242 4242 0 -1 4194560 1234 0 0 0 \
                    250 75 3 4 20 0 9 0 123456 1000000 2000 18446744073709551615";
        assert_eq!(parse_stat(stat), Some(Duration::from_millis(3250)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_has_used_some_cpu_and_the_meter_sees_it() {
        let own = cpu_time(std::process::id()).expect("our own /proc/<pid>/stat");
        let mut spin = 0u64;
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_millis(60) {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
        let later = cpu_time(std::process::id()).expect("our own /proc/<pid>/stat");
        assert!(later > own, "{own:?} then {later:?}");
    }

    #[test]
    fn per_op_divides_by_the_operations() {
        let used = [("rover-toolserver".into(), Duration::from_millis(500))];
        let cpu = per_op(&used, Some(&("rover-toolserver".into(), 40_000_000)), 1000);
        assert_eq!(cpu[0].cpu_ms, 500.0);
        assert_eq!(cpu[0].per_op_us, 500.0);
        assert_eq!(cpu[0].instructions_per_op, Some(40_000.0));
        assert_eq!(per_op(&used, None, 1000)[0].instructions_per_op, None);
    }
}
