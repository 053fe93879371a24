//! Crash points for the fault suites: `ROVER_FAULT_CRASH_AT=<point>` makes the process abort (no
//! unwinding, no clean-up — as abrupt as `kill -9`) when it reaches that point. Unset, a point is
//! one relaxed load of a value read once.
//!
//! Points: `toolserver.before-commit`, `toolserver.after-commit` (committed, no reply sent),
//! `toolserver.after-reply` (replied; the request was acked before it ran), `worker.turn` (a turn was received, nothing run),
//! `worker.finish-recorded` (a turn's last events recorded, not yet published).

use std::sync::OnceLock;

static CRASH_AT: OnceLock<Option<String>> = OnceLock::new();

fn crash_at() -> Option<&'static str> {
    CRASH_AT
        .get_or_init(|| {
            let point = std::env::var("ROVER_FAULT_CRASH_AT")
                .ok()
                .filter(|p| !p.is_empty());
            if let Some(point) = &point {
                tracing::warn!(
                    point,
                    "fault injection is on: this process will abort there"
                );
            }
            point
        })
        .as_deref()
}

/// Aborts the process if `ROVER_FAULT_CRASH_AT` names this point.
pub fn point(name: &str) {
    if crash_at() == Some(name) {
        tracing::error!(point = name, "fault injection: aborting");
        std::process::abort();
    }
}

/// Reads the setting now, so the warning is logged at start-up rather than at the first point.
pub fn init() {
    let _ = crash_at();
}
