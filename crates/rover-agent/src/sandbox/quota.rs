//! Sandbox quotas: bytes and entries, per thread, per user and per school, and what is stored.

use std::fmt;

/// Whose quota a refused write would break.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaScope {
    /// This thread's files.
    Thread,
    /// All the files of the thread's user, across their threads.
    User,
    /// All the files of the school, across its users.
    School,
}

impl fmt::Display for QuotaScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuotaScope::Thread => "this chat's files",
            QuotaScope::User => "your files across all your chats",
            QuotaScope::School => "your school's files across all its chats",
        })
    }
}

/// What a quota counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaUnit {
    /// Bytes of regular files.
    Bytes,
    /// Entries: files and directories.
    Entries,
}

impl fmt::Display for QuotaUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuotaUnit::Bytes => "bytes",
            QuotaUnit::Entries => "files and folders",
        })
    }
}

/// How much may be stored, or is stored: bytes of regular files, and entries (files and
/// directories; a directory costs an entry however empty it is).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quota {
    /// Bytes of regular files.
    pub bytes: u64,
    /// Files and directories.
    pub entries: u64,
}

/// The quotas a sandbox's writes are checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxLimits {
    /// One thread's files.
    pub thread: Quota,
    /// One user's files, across their threads.
    pub user: Quota,
    /// One school's files, across its users.
    pub school: Quota,
}

impl SandboxLimits {
    /// The same quota at every level (tests that care about one level only).
    pub fn uniform(quota: Quota) -> Self {
        Self {
            thread: quota,
            user: quota,
            school: quota,
        }
    }
}

/// What is stored, as one walk of the school's directory measured it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SandboxUsage {
    /// This thread's files.
    pub thread: Quota,
    /// The user's files, across their threads.
    pub user: Quota,
    /// The school's files.
    pub school: Quota,
}
