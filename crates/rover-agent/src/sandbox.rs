//! The per-thread sandbox behind the file tools (`ls`, `read_file`, `write_file`, `edit_file`,
//! `save_artifact`): one directory per thread, kept on disk between turns, bounded in total size.
//!
//! The model names files by absolute *virtual* paths (`/notes/plan.md`, `/` being the thread's
//! directory). *Architecture Invariant*: no virtual path reaches outside `<base>/<thread id>/` — paths
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

use rover_contracts::ids::ThreadId;
use rover_contracts::tools::{FileEntry, FileWritten};

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
    /// Nothing exists at this virtual path.
    #[error("There is no file or directory at {0}.")]
    NotFound(String),
    /// The request cannot be honoured as asked; the message says why and what to do instead.
    #[error("{0}")]
    Invalid(String),
    /// The write would push the thread's files over their size limit; nothing was written.
    #[error(
        "Writing {path} would bring this chat's files to {would_use} bytes, over their limit of \
         {limit} bytes. Nothing was written."
    )]
    TooLarge {
        /// The file that was being written.
        path: String,
        /// The total the thread's files would have reached.
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

/// One thread's files. Cheap to clone; every call goes to the disk, so nothing is cached between
/// turns or between clones.
///
/// The size limit is checked before each write against what is on disk; two writes racing on the
/// same thread could together overshoot it by one file, which the one-turn-per-thread rule of the
/// worker prevents.
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// Whose files these are (for spans).
    thread: ThreadId,
    /// The directory every sandbox lives under: host paths under it are refused by name.
    base: PathBuf,
    /// `<base>/<thread id>`: the virtual root `/`.
    dir: PathBuf,
    /// The most bytes the thread's files may hold together.
    limit_bytes: u64,
}

impl Sandbox {
    /// Opens (creating it if needed) the sandbox of `thread` under `base`, holding at most
    /// `limit_bytes` bytes of files.
    #[tracing::instrument(level = "debug", skip_all, fields(thread = %thread))]
    pub fn open(base: &Path, thread: ThreadId, limit_bytes: u64) -> Result<Sandbox, SandboxError> {
        let dir = base.join(thread.to_string());
        fs::create_dir_all(&dir).map_err(|e| io_error("/", "create", e))?;
        let meta = fs::symlink_metadata(&dir).map_err(|e| io_error("/", "open", e))?;
        if !meta.is_dir() {
            return Err(SandboxError::Invalid(
                "This chat's file area is not a directory.".to_owned(),
            ));
        }
        Ok(Sandbox {
            thread,
            base: base.to_owned(),
            dir,
            limit_bytes,
        })
    }

    /// The thread these files belong to.
    pub fn thread(&self) -> ThreadId {
        self.thread
    }

    /// The most bytes the thread's files may hold together.
    pub fn limit_bytes(&self) -> u64 {
        self.limit_bytes
    }

    /// The entries of a directory, sorted by path: sub-directories and regular files only (links
    /// and half-written temporary files are left out).
    #[tracing::instrument(level = "debug", skip_all, fields(thread = %self.thread, path))]
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
    #[tracing::instrument(level = "debug", skip_all, fields(thread = %self.thread, path))]
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
    #[tracing::instrument(level = "debug", skip_all, fields(thread = %self.thread, path, bytes = content.len()))]
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
    #[tracing::instrument(level = "debug", skip_all, fields(thread = %self.thread, path, replace_all))]
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
        let edited = match text.matches(old).count() {
            0 => {
                return Err(SandboxError::Invalid(format!(
                    "The text to replace was not found in {vpath}; read the file and copy the text exactly."
                )));
            }
            1 => text.replacen(old, new, 1),
            n if replace_all => {
                tracing::debug!(occurrences = n, "replacing every occurrence");
                text.replace(old, new)
            }
            n => {
                return Err(SandboxError::Invalid(format!(
                    "The text to replace occurs {n} times in {vpath}; include more of the \
                     surrounding text so it occurs once, or set replaceAll to change every one."
                )));
            }
        };
        self.put(&vpath, text.len() as u64, edited.as_bytes())
    }

    /// A file's raw bytes (for `save_artifact`).
    #[tracing::instrument(level = "debug", skip_all, fields(thread = %self.thread, path))]
    pub fn read_bytes(&self, path: &str) -> Result<Vec<u8>, SandboxError> {
        let vpath = self.parse(path)?;
        tracing::Span::current().record("path", tracing::field::display(&vpath));
        self.expect_file(&vpath)?;
        fs::read(self.host(&vpath)).map_err(|e| io_error(&vpath, "read", e))
    }

    /// The bytes the thread's regular files hold together (links are not counted, nor followed).
    #[tracing::instrument(level = "debug", skip_all, fields(thread = %self.thread))]
    pub fn used_bytes(&self) -> Result<u64, SandboxError> {
        let mut total = 0;
        let mut pending = vec![self.dir.clone()];
        while let Some(dir) = pending.pop() {
            let measure_error = |e| io_error("/", "measure", e);
            for entry in fs::read_dir(&dir).map_err(measure_error)? {
                let entry = entry.map_err(measure_error)?;
                let meta = fs::symlink_metadata(entry.path()).map_err(measure_error)?;
                if meta.is_dir() {
                    pending.push(entry.path());
                } else if meta.is_file() {
                    total += meta.len();
                }
            }
        }
        Ok(total)
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

    /// Writes `content` to `vpath` (currently `old_size` bytes, 0 if absent): checks the limit,
    /// creates missing directories, then writes a temporary file and renames it into place.
    fn put(
        &self,
        vpath: &VirtualPath,
        old_size: u64,
        content: &[u8],
    ) -> Result<FileWritten, SandboxError> {
        let new_size = content.len() as u64;
        let would_use = self.used_bytes()?.saturating_sub(old_size) + new_size;
        if would_use > self.limit_bytes {
            return Err(SandboxError::TooLarge {
                path: vpath.to_string(),
                would_use,
                limit: self.limit_bytes,
            });
        }

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

/// What a virtual path names on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    Missing,
    Dir,
    /// A regular file of this many bytes.
    File(u64),
}

/// A lexically normalised virtual path: plain names only, no `.`, `..` or empty segments.
#[derive(Debug, Clone, PartialEq, Eq)]
struct VirtualPath {
    segments: Vec<String>,
}

impl VirtualPath {
    /// Parses an absolute virtual path, resolving `.` and `..` lexically and refusing anything that
    /// could name a place outside the sandbox.
    fn parse(input: &str) -> Result<VirtualPath, SandboxError> {
        let shown = || quoted(input);
        let invalid = |why: String| Err(SandboxError::Invalid(why));
        if input.is_empty() {
            return invalid(
                "The path is empty; give an absolute path such as /notes.md.".to_owned(),
            );
        }
        if input.len() > MAX_PATH_LEN {
            return invalid(format!("The path is longer than {MAX_PATH_LEN} bytes."));
        }
        if input.contains('\0') {
            return invalid(format!("The path {} contains a NUL byte.", shown()));
        }
        if input.chars().any(char::is_control) {
            return invalid(format!("The path {} contains control characters.", shown()));
        }
        if input.contains('\\') {
            return invalid(format!(
                "The path {} contains a backslash; use forward slashes, as in /notes/plan.md.",
                shown()
            ));
        }
        if !input.starts_with('/') {
            return invalid(format!(
                "The path {} is not absolute; paths start with /, as in /notes/plan.md.",
                shown()
            ));
        }
        let mut segments: Vec<String> = Vec::new();
        for segment in input.split('/') {
            match segment {
                "" | "." => {}
                ".." => {
                    if segments.pop().is_none() {
                        return invalid(format!(
                            "The path {} leads outside this chat's files.",
                            shown()
                        ));
                    }
                }
                name if name.len() > MAX_NAME_LEN => {
                    return invalid(format!(
                        "A name in the path {} is longer than {MAX_NAME_LEN} bytes.",
                        shown()
                    ));
                }
                name if name.starts_with(TEMP_PREFIX) => {
                    return invalid(format!(
                        "Names starting with {TEMP_PREFIX} are reserved; choose another name."
                    ));
                }
                name => segments.push(name.to_owned()),
            }
        }
        Ok(VirtualPath { segments })
    }

    /// The path of the first `depth` segments.
    fn prefix(&self, depth: usize) -> VirtualPath {
        VirtualPath {
            segments: self.segments[..depth].to_vec(),
        }
    }

    /// The path of a child named `name`.
    fn child(&self, name: &str) -> VirtualPath {
        let mut segments = self.segments.clone();
        segments.push(name.to_owned());
        VirtualPath { segments }
    }
}

impl fmt::Display for VirtualPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.segments.is_empty() {
            return f.write_str("/");
        }
        for segment in &self.segments {
            write!(f, "/{segment}")?;
        }
        Ok(())
    }
}

/// The model's input, quoted and escaped for an error message, cut to a readable length.
fn quoted(input: &str) -> String {
    const SHOWN: usize = 120;
    let escaped: String = input
        .chars()
        .take(SHOWN)
        .flat_map(char::escape_debug)
        .collect();
    let more = if input.chars().count() > SHOWN {
        "…"
    } else {
        ""
    };
    format!("\"{escaped}{more}\"")
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
