//! The per-thread sandbox behind the file tools (`ls`, `read_file`, `write_file`, `edit_file`,
//! `save_artifact`): one directory per thread, `<base>/<school id>/<user id>/<thread id>/`, kept on
//! disk between turns, bounded per thread, per user and per school (bytes of files, and entries —
//! files and directories alike), and removed by [`sweep`] once nobody has opened it for a while.
//!
//! The model names files by absolute *virtual* paths (`/notes/plan.md`, `/` being the thread's
//! directory). *Architecture Invariant*: no virtual path reaches outside the thread's directory
//! (the school, user and thread segments are UUIDs, never model input) — paths
//! are normalised lexically (a `..` above the root is refused, never clamped), host paths,
//! backslashes and NUL bytes are refused, and symbolic links are never followed: every component
//! is examined with `symlink_metadata`, and a link is an error. Errors are sentences a model can
//! read; they name the virtual path, never the host one.
//!
//! `/skills/` belongs to the skill library, not to the sandbox: the caller routes reads there, and
//! `write`/`edit` refuse it here as well.

use std::fmt;
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use rover_contracts::ids::{SchoolId, ThreadId, UserId};
use rover_contracts::tools::{FileEntry, FileWritten};

mod quota;
mod sweep;
mod vpath;

pub use quota::{Quota, QuotaScope, QuotaUnit, SandboxLimits, SandboxUsage};
pub use sweep::{Swept, sweep};
use vpath::VirtualPath;

/// The first segment reserved for the skill library.
const SKILLS: &str = "skills";
/// Prefix of the temporary files an atomic write renames into place; hidden from `ls`.
const TEMP_PREFIX: &str = ".rover-tmp-";
/// The longest virtual path accepted, in bytes (tool arguments allow 500 characters).
const MAX_PATH_LEN: usize = 1024;
/// The longest file or directory name accepted, in bytes (what common file systems allow).
const MAX_NAME_LEN: usize = 255;

/// Why a file operation failed. The messages are plain sentences for the model, naming virtual
/// paths only.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The chat has no file area (the worker mounts none).
    #[error("This chat has no files.")]
    Unmounted,
    /// Nothing exists at this virtual path.
    #[error("There is no file or directory at {0}.")]
    NotFound(String),
    /// The request cannot be honoured as asked; the message says why and what to do instead.
    #[error("{0}")]
    Invalid(String),
    /// The write would push the thread's, the user's or the school's files over a quota; nothing
    /// was written.
    #[error(
        "Writing {path} would bring {scope} to {would_use} {unit}, over their limit of {limit} \
         {unit}. Nothing was written."
    )]
    TooLarge {
        /// The file that was being written.
        path: String,
        /// Whose quota it would break.
        scope: QuotaScope,
        /// What the quota counts.
        unit: QuotaUnit,
        /// The total the files would have reached.
        would_use: u64,
        /// The limit.
        limit: u64,
    },
    /// The file system failed; `source` carries the cause for the logs.
    #[error("Could not {action} {path}: {}.", source.kind())]
    Io {
        /// The virtual path involved.
        path: String,
        /// What was being done ("read", "write", "list").
        action: &'static str,
        /// The underlying error (its text never includes the host path).
        #[source]
        source: io::Error,
    },
}

/// Whose sandbox: it lives at `<base>/<school>/<user>/<thread>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxOwner {
    /// The school (from the runtime context).
    pub school: SchoolId,
    /// The staff member whose thread it is.
    pub user: UserId,
    /// The thread.
    pub thread: ThreadId,
}

/// One thread's files. Cheap to clone; every call goes to the disk, so nothing is cached between
/// turns or between clones.
///
/// The quotas are checked before each write against what is on disk (one walk of the school's
/// directory, bounded by the school's entry quota); writes racing in different threads of one user
/// or school could together overshoot a quota by one file each.
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// Whose files these are (for spans, and the quotas' levels).
    owner: SandboxOwner,
    /// The directory every sandbox lives under: host paths under it are refused by name.
    base: PathBuf,
    /// `<base>/<school id>`: everything the school's quota counts.
    school_dir: PathBuf,
    /// `<base>/<school id>/<user id>/<thread id>`: the virtual root `/`.
    dir: PathBuf,
    /// The quotas.
    limits: SandboxLimits,
}

impl Sandbox {
    /// Opens (creating it if needed) the sandbox of `owner` under `base`, bounded by `limits`, and
    /// marks it used now (so [`sweep`] keeps it).
    #[tracing::instrument(level = "debug", skip_all, fields(thread = %owner.thread))]
    pub fn open(
        base: &Path,
        owner: SandboxOwner,
        limits: SandboxLimits,
    ) -> Result<Sandbox, SandboxError> {
        let school_dir = base.join(owner.school.to_string());
        let dir = school_dir
            .join(owner.user.to_string())
            .join(owner.thread.to_string());
        // A concurrent sweep may remove an empty parent between two of `create_dir_all`'s steps.
        let mut created = fs::create_dir_all(&dir);
        for _ in 0..2 {
            if created.is_ok() {
                break;
            }
            created = fs::create_dir_all(&dir);
        }
        created.map_err(|e| io_error("/", "create", e))?;
        let meta = fs::symlink_metadata(&dir).map_err(|e| io_error("/", "open", e))?;
        if !meta.is_dir() {
            return Err(SandboxError::Invalid(
                "This chat's file area is not a directory.".to_owned(),
            ));
        }
        touch(&dir).map_err(|e| io_error("/", "open", e))?;
        Ok(Sandbox {
            owner,
            base: base.to_owned(),
            school_dir,
            dir,
            limits,
        })
    }

    /// The thread these files belong to.
    pub fn thread(&self) -> ThreadId {
        self.owner.thread
    }

    /// The quotas writes are checked against.
    pub fn limits(&self) -> SandboxLimits {
        self.limits
    }

    /// The entries of a directory, sorted by path: sub-directories and regular files only (links
    /// and half-written temporary files are left out).
    #[tracing::instrument(level = "debug", skip_all, fields(thread = %self.owner.thread, path))]
    pub fn ls(&self, path: &str) -> Result<Vec<FileEntry>, SandboxError> {
        let vpath = self.parse(path)?;
        tracing::Span::current().record("path", tracing::field::display(&vpath));
        match self.inspect(&vpath)? {
            Node::Dir => {}
            Node::File(_) => {
                return Err(SandboxError::Invalid(format!(
                    "{vpath} is a file, not a directory; use read_file to read it."
                )));
            }
            Node::Missing => return Err(SandboxError::NotFound(vpath.to_string())),
        }
        let host = self.host(&vpath);
        let list_error = |e| io_error(&vpath, "list", e);
        let mut entries = Vec::new();
        for entry in fs::read_dir(&host).map_err(list_error)? {
            let entry = entry.map_err(list_error)?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if name.starts_with(TEMP_PREFIX) {
                continue;
            }
            let meta = fs::symlink_metadata(entry.path()).map_err(list_error)?;
            let child = vpath.child(&name).to_string();
            if meta.is_dir() {
                entries.push(FileEntry {
                    path: child,
                    is_dir: true,
                    size: None,
                });
            } else if meta.is_file() {
                entries.push(FileEntry {
                    path: child,
                    is_dir: false,
                    size: Some(meta.len()),
                });
            }
        }
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(entries)
    }

    /// A text file's lines: from line `offset` (0-based; default 0), at most `limit` lines
    /// (default all), with their line endings as stored.
    #[tracing::instrument(level = "debug", skip_all, fields(thread = %self.owner.thread, path))]
    pub fn read(
        &self,
        path: &str,
        offset: Option<u32>,
        limit: Option<u32>,
    ) -> Result<String, SandboxError> {
        let vpath = self.parse(path)?;
        tracing::Span::current().record("path", tracing::field::display(&vpath));
        let text = self.read_text(&vpath)?;
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let offset = offset.unwrap_or(0) as usize;
        if offset > 0 && offset >= lines.len() {
            return Err(SandboxError::Invalid(format!(
                "{vpath} has {} lines; offset {offset} is past the end (offsets start at 0).",
                lines.len()
            )));
        }
        let limit = limit.map_or(usize::MAX, |l| l as usize);
        Ok(lines.into_iter().skip(offset).take(limit).collect())
    }

    /// Creates or replaces a file with `content`, creating missing directories. The replacement is
    /// atomic; if it would take the thread over its limit, nothing changes.
    #[tracing::instrument(level = "debug", skip_all, fields(thread = %self.owner.thread, path, bytes = content.len()))]
    pub fn write(&self, path: &str, content: &str) -> Result<FileWritten, SandboxError> {
        let vpath = self.parse_writable(path)?;
        tracing::Span::current().record("path", tracing::field::display(&vpath));
        let old_size = match self.inspect(&vpath)? {
            Node::File(size) => size,
            Node::Missing => 0,
            Node::Dir => {
                return Err(SandboxError::Invalid(format!(
                    "{vpath} is a directory; choose a file name inside it, such as {}.",
                    vpath.child("notes.md")
                )));
            }
        };
        self.put(&vpath, old_size, content.as_bytes())
    }

    /// Replaces `old` with `new` in a text file: exactly one occurrence unless `replace_all`.
    /// Fails, changing nothing, if `old` is empty or absent, or occurs more than once without
    /// `replace_all`.
    #[tracing::instrument(level = "debug", skip_all, fields(thread = %self.owner.thread, path, replace_all))]
    pub fn edit(
        &self,
        path: &str,
        old: &str,
        new: &str,
        replace_all: bool,
    ) -> Result<FileWritten, SandboxError> {
        let vpath = self.parse_writable(path)?;
        tracing::Span::current().record("path", tracing::field::display(&vpath));
        if old.is_empty() {
            return Err(SandboxError::Invalid(
                "The text to replace is empty; give the exact text to find.".to_owned(),
            ));
        }
        let text = self.read_text(&vpath)?;
        let occurrences = match text.matches(old).count() {
            0 => {
                return Err(SandboxError::Invalid(format!(
                    "The text to replace was not found in {vpath}; read the file and copy the text exactly."
                )));
            }
            n if n > 1 && !replace_all => {
                return Err(SandboxError::Invalid(format!(
                    "The text to replace occurs {n} times in {vpath}; include more of the \
                     surrounding text so it occurs once, or set replaceAll to change every one."
                )));
            }
            n => n,
        };
        tracing::debug!(occurrences, "replacing");
        // The edited size is known before the edited text is built: refuse first, allocate after.
        let old_size = text.len() as u64;
        let edited_size = edited_len(text.len(), occurrences, old.len(), new.len());
        self.check_room(&vpath, old_size, edited_size)?;
        let edited = if occurrences == 1 {
            text.replacen(old, new, 1)
        } else {
            text.replace(old, new)
        };
        self.write_atomic(&vpath, edited.as_bytes())
    }

    /// A file's raw bytes (for `save_artifact`).
    #[tracing::instrument(level = "debug", skip_all, fields(thread = %self.owner.thread, path))]
    pub fn read_bytes(&self, path: &str) -> Result<Vec<u8>, SandboxError> {
        let vpath = self.parse(path)?;
        tracing::Span::current().record("path", tracing::field::display(&vpath));
        self.expect_file(&vpath)?;
        fs::read(self.host(&vpath)).map_err(|e| io_error(&vpath, "read", e))
    }

    /// The bytes the thread's regular files hold together (links are not counted, nor followed).
    pub fn used_bytes(&self) -> Result<u64, SandboxError> {
        Ok(self.usage()?.thread.bytes)
    }

    /// What the thread, its user and its school store, in one walk of the school's directory.
    /// Entries are the files and directories inside threads' directories (not the user and
    /// thread directories themselves); links count as entries but are never followed.
    #[tracing::instrument(level = "debug", skip_all, fields(thread = %self.owner.thread))]
    pub fn usage(&self) -> Result<SandboxUsage, SandboxError> {
        let measure_error = |e| io_error("/", "measure", e);
        let (user, thread) = (self.owner.user.to_string(), self.owner.thread.to_string());
        let mut usage = SandboxUsage::default();
        // (directory, depth below the school's, is the user's, is the thread's)
        let mut pending = vec![(self.school_dir.clone(), 0_usize, false, false)];
        while let Some((dir, depth, in_user, in_thread)) = pending.pop() {
            let entries = match fs::read_dir(&dir) {
                Ok(entries) => entries,
                // Removed meanwhile (a sweep of another user's old thread): nothing to count.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(measure_error(e)),
            };
            for entry in entries {
                let entry = entry.map_err(measure_error)?;
                let meta = match fs::symlink_metadata(entry.path()) {
                    Ok(meta) => meta,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(measure_error(e)),
                };
                let name = entry.file_name();
                let (in_user, in_thread) = match depth {
                    0 => (name.to_str() == Some(user.as_str()), false),
                    1 => (in_user, in_user && name.to_str() == Some(thread.as_str())),
                    _ => (in_user, in_thread),
                };
                if depth >= 2 {
                    let bytes = if meta.is_file() { meta.len() } else { 0 };
                    for (counted, quota) in [
                        (true, &mut usage.school),
                        (in_user, &mut usage.user),
                        (in_thread, &mut usage.thread),
                    ] {
                        if counted {
                            quota.bytes += bytes;
                            quota.entries += 1;
                        }
                    }
                }
                if meta.is_dir() {
                    pending.push((entry.path(), depth + 1, in_user, in_thread));
                }
            }
        }
        Ok(usage)
    }

    /// Parses a virtual path, refusing host paths under the sandboxes' base directory by name.
    fn parse(&self, input: &str) -> Result<VirtualPath, SandboxError> {
        if input.starts_with('/')
            && self.base.is_absolute()
            && Path::new(input).starts_with(&self.base)
        {
            return Err(SandboxError::Invalid(
                "That is a path on the server, not in this chat's files; use paths such as /notes.md."
                    .to_owned(),
            ));
        }
        VirtualPath::parse(input)
    }

    /// Parses a path that may be written: not the root, not under `/skills/`.
    fn parse_writable(&self, input: &str) -> Result<VirtualPath, SandboxError> {
        let vpath = self.parse(input)?;
        match vpath.segments.first().map(String::as_str) {
            None => Err(SandboxError::Invalid(
                "/ is a directory; give a file path such as /notes.md.".to_owned(),
            )),
            Some(SKILLS) => Err(SandboxError::Invalid(format!(
                "{vpath} is under /skills/, where skills live; they are read-only. Write your own \
                 files elsewhere, such as /notes.md."
            ))),
            Some(_) => Ok(vpath),
        }
    }

    /// The host path of a parsed virtual path (always under `dir`: segments are plain names).
    fn host(&self, vpath: &VirtualPath) -> PathBuf {
        let mut host = self.dir.clone();
        host.extend(&vpath.segments);
        host
    }

    /// What is at a virtual path, walking it one component at a time without following links.
    fn inspect(&self, vpath: &VirtualPath) -> Result<Node, SandboxError> {
        let mut host = self.dir.clone();
        let last = vpath.segments.len();
        for (depth, segment) in vpath.segments.iter().enumerate() {
            host.push(segment);
            let here = || vpath.prefix(depth + 1);
            let meta = match fs::symlink_metadata(&host) {
                Ok(meta) => meta,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Node::Missing),
                Err(e) => return Err(io_error(here(), "open", e)),
            };
            let file_type = meta.file_type();
            if file_type.is_symlink() {
                return Err(SandboxError::Invalid(format!(
                    "{} is a link, and links are not followed in this chat's files.",
                    here()
                )));
            }
            if file_type.is_file() && depth + 1 == last {
                return Ok(Node::File(meta.len()));
            }
            if file_type.is_file() {
                return Err(SandboxError::Invalid(format!(
                    "{} is a file, not a directory, so {vpath} cannot exist.",
                    here()
                )));
            }
            if !file_type.is_dir() {
                return Err(SandboxError::Invalid(format!(
                    "{} is not a regular file or directory.",
                    here()
                )));
            }
        }
        Ok(Node::Dir)
    }

    /// Succeeds only if a regular file is at `vpath`.
    fn expect_file(&self, vpath: &VirtualPath) -> Result<(), SandboxError> {
        match self.inspect(vpath)? {
            Node::File(_) => Ok(()),
            Node::Missing => Err(SandboxError::NotFound(vpath.to_string())),
            Node::Dir => Err(SandboxError::Invalid(format!(
                "{vpath} is a directory; use ls to see what is in it."
            ))),
        }
    }

    /// A regular file's content as UTF-8 text.
    fn read_text(&self, vpath: &VirtualPath) -> Result<String, SandboxError> {
        self.expect_file(vpath)?;
        let bytes = fs::read(self.host(vpath)).map_err(|e| io_error(vpath, "read", e))?;
        String::from_utf8(bytes).map_err(|_| {
            SandboxError::Invalid(format!(
                "{vpath} is not a text file (it is not UTF-8), so it cannot be read or edited as text."
            ))
        })
    }

    /// Writes `content` to `vpath` (currently `old_size` bytes, 0 if absent): checks the quotas,
    /// then writes.
    fn put(
        &self,
        vpath: &VirtualPath,
        old_size: u64,
        content: &[u8],
    ) -> Result<FileWritten, SandboxError> {
        self.check_room(vpath, old_size, content.len() as u64)?;
        self.write_atomic(vpath, content)
    }

    /// Refuses a write that would make `vpath` (now `old_size` bytes, 0 if absent) `new_size`
    /// bytes if that, with the directories and file it creates, breaks any quota.
    fn check_room(
        &self,
        vpath: &VirtualPath,
        old_size: u64,
        new_size: u64,
    ) -> Result<(), SandboxError> {
        let new_entries = self.missing_entries(vpath)?;
        let usage = self.usage()?;
        let levels = [
            (QuotaScope::Thread, usage.thread, self.limits.thread),
            (QuotaScope::User, usage.user, self.limits.user),
            (QuotaScope::School, usage.school, self.limits.school),
        ];
        for (scope, used, limit) in levels {
            let bytes = used.bytes.saturating_sub(old_size).saturating_add(new_size);
            let entries = used.entries.saturating_add(new_entries);
            for (unit, would_use, limit) in [
                (QuotaUnit::Bytes, bytes, limit.bytes),
                (QuotaUnit::Entries, entries, limit.entries),
            ] {
                if would_use > limit {
                    return Err(SandboxError::TooLarge {
                        path: vpath.to_string(),
                        scope,
                        unit,
                        would_use,
                        limit,
                    });
                }
            }
        }
        Ok(())
    }

    /// How many entries writing `vpath` creates: its missing directories and the file itself.
    fn missing_entries(&self, vpath: &VirtualPath) -> Result<u64, SandboxError> {
        let mut host = self.dir.clone();
        for (depth, segment) in vpath.segments.iter().enumerate() {
            host.push(segment);
            match fs::symlink_metadata(&host) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Ok((vpath.segments.len() - depth) as u64);
                }
                Err(e) => return Err(io_error(vpath.prefix(depth + 1), "open", e)),
            }
        }
        Ok(0)
    }

    /// Creates missing directories, then writes a temporary file and renames it into place.
    fn write_atomic(
        &self,
        vpath: &VirtualPath,
        content: &[u8],
    ) -> Result<FileWritten, SandboxError> {
        let new_size = content.len() as u64;
        let target = self.host(vpath);
        let parent = target.parent().unwrap_or(&self.dir);
        let write_error = |e| io_error(vpath, "write", e);
        fs::create_dir_all(parent).map_err(write_error)?;
        let temp = parent.join(format!("{TEMP_PREFIX}{}", uuid::Uuid::new_v4()));
        let written = fs::File::create_new(&temp)
            .and_then(|mut file| {
                file.write_all(content)?;
                file.sync_all()
            })
            .and_then(|()| fs::rename(&temp, &target));
        if let Err(e) = written {
            let _ = fs::remove_file(&temp);
            return Err(write_error(e));
        }
        Ok(FileWritten {
            path: vpath.to_string(),
            bytes: new_size,
        })
    }
}

/// The length of a text of `len` bytes after `occurrences` (non-overlapping, all present) of a
/// `old`-byte text are replaced by a `new`-byte one; saturates rather than overflows.
fn edited_len(len: usize, occurrences: usize, old: usize, new: usize) -> u64 {
    let (len, n, old, new) = (len as u128, occurrences as u128, old as u128, new as u128);
    u64::try_from(len - n * old + n * new).unwrap_or(u64::MAX)
}

/// Marks a directory as used now (its modification time), for [`sweep`].
fn touch(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.set_modified(SystemTime::now())
}

/// What a virtual path names on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    Missing,
    Dir,
    /// A regular file of this many bytes.
    File(u64),
}

/// Wraps a file-system failure with the virtual path, and logs it (the model only sees the kind).
fn io_error(path: impl fmt::Display, action: &'static str, source: io::Error) -> SandboxError {
    let path = path.to_string();
    tracing::warn!(%path, action, error = %source, "sandbox file operation failed");
    SandboxError::Io {
        path,
        action,
        source,
    }
}
