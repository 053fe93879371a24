//! The sweep: removes the sandboxes of threads nobody has opened for a while.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// What a [`sweep`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Thread sandboxes removed.
    pub threads: u64,
}

/// Removes every thread sandbox under `base` that nobody has opened for longer than `max_age`
/// (by its directory's modification time, which [`Sandbox::open`] sets), then the user and school
/// directories left empty. Links are removed, never followed; what cannot be removed is logged
/// and left for the next sweep.
#[tracing::instrument(level = "debug", skip_all, fields(max_age_secs = max_age.as_secs()))]
pub fn sweep(base: &Path, max_age: Duration) -> io::Result<Swept> {
    let now = SystemTime::now();
    let mut swept = Swept::default();
    let stale = |meta: &fs::Metadata| {
        meta.modified()
            .ok()
            .and_then(|modified| now.duration_since(modified).ok())
            .is_some_and(|age| age > max_age)
    };
    for school in real_dirs(base)? {
        for user in real_dirs(&school)? {
            for entry in fs::read_dir(&user)? {
                let path = entry?.path();
                let Ok(meta) = fs::symlink_metadata(&path) else {
                    continue;
                };
                if !stale(&meta) {
                    continue;
                }
                let removed = if meta.is_dir() {
                    fs::remove_dir_all(&path)
                } else {
                    fs::remove_file(&path)
                };
                match removed {
                    Ok(()) => swept.threads += 1,
                    Err(error) => tracing::warn!(%error, "could not remove an old sandbox"),
                }
            }
            // Fails, harmlessly, while the user has threads (or one was just opened).
            let _ = fs::remove_dir(&user);
        }
        let _ = fs::remove_dir(&school);
    }
    if swept.threads > 0 {
        tracing::info!(
            threads = swept.threads,
            "removed sandboxes unused for too long"
        );
    }
    Ok(swept)
}

/// The real (not linked) sub-directories of `dir`; none if it does not exist.
pub(super) fn real_dirs(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            dirs.push(entry.path());
        }
    }
    Ok(dirs)
}
