//! The per-thread sandbox: the file tools' round trip, paths that must not escape, links that are
//! not followed, the quotas (per thread, user and school; bytes and entries; an edit refused before
//! it is built), persistence across turns, the sweep of old sandboxes, and the read-only
//! `/skills/`.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story: its setup, the act and every assertion in one place"
)]

use std::fs;
use std::path::{Path, PathBuf};

use rover_agent::sandbox::{
    Quota, QuotaScope, QuotaUnit, Sandbox, SandboxError, SandboxLimits, SandboxOwner,
};
use rover_contracts::ids::{SchoolId, ThreadId, UserId};
use rover_contracts::tools::FileEntry;

const LIMIT: u64 = 1024 * 1024;

/// Generous quotas, except `bytes` for the thread.
fn limits(bytes: u64) -> SandboxLimits {
    let roomy = Quota {
        bytes: 1 << 40,
        entries: 1 << 20,
    };
    SandboxLimits {
        thread: Quota {
            bytes,
            entries: roomy.entries,
        },
        user: roomy,
        school: roomy,
    }
}

/// A new thread of a new user of a new school.
fn owner() -> SandboxOwner {
    SandboxOwner {
        school: SchoolId::new(),
        user: UserId::new(),
        thread: ThreadId::new(),
    }
}

/// Another thread of the same user.
fn sibling_of(owner: SandboxOwner) -> SandboxOwner {
    SandboxOwner {
        thread: ThreadId::new(),
        ..owner
    }
}

/// A fresh base directory and one thread's sandbox in it, the thread holding at most `limit`
/// bytes.
fn sandbox(limit: u64) -> (tempfile::TempDir, SandboxOwner, Sandbox) {
    let base = tempfile::tempdir().unwrap();
    let owner = owner();
    let sandbox = Sandbox::open(base.path(), owner, limits(limit)).unwrap();
    (base, owner, sandbox)
}

/// Where a thread's files live on the host (only tests reach behind the sandbox like this).
fn host_dir(base: &Path, owner: SandboxOwner) -> PathBuf {
    base.join(owner.school.to_string())
        .join(owner.user.to_string())
        .join(owner.thread.to_string())
}

fn file(path: &str, size: u64) -> FileEntry {
    FileEntry {
        path: path.to_owned(),
        is_dir: false,
        size: Some(size),
    }
}

fn dir(path: &str) -> FileEntry {
    FileEntry {
        path: path.to_owned(),
        is_dir: true,
        size: None,
    }
}

fn assert_invalid(result: Result<impl std::fmt::Debug, SandboxError>, mentions: &str) {
    match result {
        Err(SandboxError::Invalid(message)) => {
            assert!(
                message.contains(mentions),
                "{message:?} should mention {mentions:?}"
            );
        }
        other => panic!("expected Invalid mentioning {mentions:?}, got {other:?}"),
    }
}

#[test]
fn write_read_ls_and_edit_round_trip() {
    let (base, thread, sandbox) = sandbox(LIMIT);

    let written = sandbox
        .write("/notes/plan.md", "# Plan\nline one\nline two\n")
        .unwrap();
    assert_eq!(written.path, "/notes/plan.md");
    assert_eq!(written.bytes, 25);
    sandbox.write("/readme.txt", "hello").unwrap();

    assert_eq!(
        sandbox.read("/notes/plan.md", None, None).unwrap(),
        "# Plan\nline one\nline two\n"
    );
    assert_eq!(
        sandbox.read("/notes/plan.md", Some(1), Some(1)).unwrap(),
        "line one\n"
    );
    assert_eq!(
        sandbox.read("/notes/plan.md", Some(2), None).unwrap(),
        "line two\n"
    );
    assert_invalid(
        sandbox.read("/notes/plan.md", Some(3), None),
        "past the end",
    );

    assert_eq!(
        sandbox.ls("/").unwrap(),
        [dir("/notes"), file("/readme.txt", 5)]
    );
    assert_eq!(sandbox.ls("/notes/").unwrap(), [file("/notes/plan.md", 25)]);
    assert_eq!(
        sandbox.ls("/notes/./../notes").unwrap(),
        sandbox.ls("/notes").unwrap()
    );

    let edited = sandbox
        .edit("/notes/plan.md", "line one", "first line", false)
        .unwrap();
    assert_eq!(edited.path, "/notes/plan.md");
    assert_eq!(edited.bytes, 27);
    assert_eq!(
        sandbox.read("/notes/plan.md", None, None).unwrap(),
        "# Plan\nfirst line\nline two\n"
    );
    assert_eq!(sandbox.read_bytes("/readme.txt").unwrap(), b"hello");
    assert_eq!(sandbox.used_bytes().unwrap(), 27 + 5);

    // The bytes really are in the thread's directory, and nothing else is left behind.
    let host = host_dir(base.path(), thread);
    assert_eq!(
        fs::read_to_string(host.join("readme.txt")).unwrap(),
        "hello"
    );
    assert_eq!(
        fs::read_dir(host.join("notes")).unwrap().count(),
        1,
        "no temporary files remain"
    );
}

#[test]
fn missing_files_and_wrong_kinds_are_clear_errors() {
    let (_base, _thread, sandbox) = sandbox(LIMIT);
    sandbox.write("/notes/plan.md", "x").unwrap();

    let missing = sandbox.read("/nope.md", None, None).unwrap_err();
    assert!(
        matches!(&missing, SandboxError::NotFound(p) if p == "/nope.md"),
        "{missing:?}"
    );
    assert_eq!(
        missing.to_string(),
        "There is no file or directory at /nope.md."
    );
    assert!(matches!(
        sandbox.ls("/nowhere"),
        Err(SandboxError::NotFound(_))
    ));
    assert!(matches!(
        sandbox.read_bytes("/nope.bin"),
        Err(SandboxError::NotFound(_))
    ));
    assert!(matches!(
        sandbox.edit("/nope.md", "a", "b", false),
        Err(SandboxError::NotFound(_))
    ));

    assert_invalid(sandbox.ls("/notes/plan.md"), "is a file");
    assert_invalid(sandbox.read("/notes", None, None), "is a directory");
    assert_invalid(sandbox.write("/notes", "x"), "is a directory");
    assert_invalid(sandbox.write("/", "x"), "is a directory");
    assert_invalid(sandbox.write("/notes/plan.md/inner.md", "x"), "is a file");
}

#[test]
fn paths_that_escape_the_thread_are_refused() {
    let (base, thread, sandbox) = sandbox(LIMIT);
    let outside = base.path().join("outside.txt");
    fs::write(&outside, "secret").unwrap();
    let sibling = host_dir(base.path(), sibling_of(thread));
    fs::create_dir_all(&sibling).unwrap();
    fs::write(sibling.join("theirs.md"), "another thread's").unwrap();

    for escape in [
        "/../outside.txt",
        "/notes/../../outside.txt",
        "/./../outside.txt",
        &format!(
            "/../{}/theirs.md",
            sibling.file_name().unwrap().to_str().unwrap()
        ),
    ] {
        assert_invalid(sandbox.read(escape, None, None), "outside");
        assert_invalid(sandbox.write(escape, "overwritten"), "outside");
        assert_invalid(sandbox.ls(escape), "outside");
        assert_invalid(sandbox.read_bytes(escape), "outside");
    }
    assert_invalid(sandbox.read("notes.md", None, None), "not absolute");
    assert_invalid(sandbox.read("~/notes.md", None, None), "not absolute");
    assert_invalid(sandbox.read("C:\\notes.md", None, None), "backslash");
    assert_invalid(sandbox.write("/notes\\..\\..\\x", "x"), "backslash");
    assert_invalid(sandbox.write("/a\0b", "x"), "NUL");
    assert_invalid(sandbox.read("", None, None), "empty");

    // A host path is refused by name rather than quietly nested inside the sandbox.
    let host_path = outside.display().to_string();
    assert_invalid(sandbox.read(&host_path, None, None), "server");
    assert_invalid(sandbox.write(&host_path, "x"), "server");

    // `..` that stays inside is fine, and error messages never show the host path.
    sandbox.write("/a/../b.md", "inside").unwrap();
    assert_eq!(sandbox.read("/b.md", None, None).unwrap(), "inside");
    let message = sandbox
        .read("/../outside.txt", None, None)
        .unwrap_err()
        .to_string();
    assert!(
        !message.contains(&base.path().display().to_string()),
        "{message}"
    );

    assert_eq!(fs::read_to_string(&outside).unwrap(), "secret");
    assert_eq!(
        fs::read_to_string(sibling.join("theirs.md")).unwrap(),
        "another thread's"
    );
    assert!(!host_dir(base.path(), thread).join("outside.txt").exists());
}

#[cfg(unix)]
#[test]
fn links_to_outside_are_not_followed() {
    use std::os::unix::fs::symlink;

    let (base, thread, sandbox) = sandbox(LIMIT);
    let outside_dir = tempfile::tempdir().unwrap();
    let secret = outside_dir.path().join("secret.txt");
    fs::write(&secret, "secret").unwrap();
    let host = host_dir(base.path(), thread);
    symlink(outside_dir.path(), host.join("elsewhere")).unwrap();
    symlink(&secret, host.join("secret.txt")).unwrap();
    sandbox.write("/real.md", "mine").unwrap();

    assert_invalid(
        sandbox.read("/secret.txt", None, None),
        "links are not followed",
    );
    assert_invalid(sandbox.read_bytes("/secret.txt"), "links are not followed");
    assert_invalid(
        sandbox.read("/elsewhere/secret.txt", None, None),
        "links are not followed",
    );
    assert_invalid(sandbox.ls("/elsewhere"), "links are not followed");
    assert_invalid(
        sandbox.write("/elsewhere/new.txt", "x"),
        "links are not followed",
    );
    assert_invalid(
        sandbox.write("/secret.txt", "overwritten"),
        "links are not followed",
    );
    assert_invalid(
        sandbox.edit("/secret.txt", "secret", "gone", false),
        "links are not followed",
    );

    assert_eq!(
        sandbox.ls("/").unwrap(),
        [file("/real.md", 4)],
        "links are not listed"
    );
    assert_eq!(sandbox.used_bytes().unwrap(), 4, "links are not counted");
    assert_eq!(fs::read_to_string(&secret).unwrap(), "secret");
    assert!(!outside_dir.path().join("new.txt").exists());
}

#[test]
fn a_write_over_the_limit_is_refused_and_keeps_the_old_content() {
    let (_base, _thread, sandbox) = sandbox(100);
    sandbox.write("/a.txt", &"a".repeat(60)).unwrap();
    sandbox.write("/b.txt", &"b".repeat(30)).unwrap();

    let refused = sandbox.write("/b.txt", &"B".repeat(41)).unwrap_err();
    match &refused {
        SandboxError::TooLarge {
            path,
            scope,
            unit,
            would_use,
            limit,
        } => {
            assert_eq!(path, "/b.txt");
            assert_eq!(*scope, QuotaScope::Thread);
            assert_eq!(*unit, QuotaUnit::Bytes);
            assert_eq!(*would_use, 101);
            assert_eq!(*limit, 100);
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(
        refused.to_string().contains("Nothing was written"),
        "{refused}"
    );
    assert_eq!(sandbox.read("/b.txt", None, None).unwrap(), "b".repeat(30));
    assert!(matches!(
        sandbox.write("/new/c.txt", &"c".repeat(11)),
        Err(SandboxError::TooLarge { .. })
    ));
    assert!(
        matches!(sandbox.ls("/new"), Err(SandboxError::NotFound(_))),
        "no directory was made"
    );
    assert!(matches!(
        sandbox.edit("/a.txt", &"a".repeat(60), &"x".repeat(71), false),
        Err(SandboxError::TooLarge { .. })
    ));
    assert_eq!(sandbox.read("/a.txt", None, None).unwrap(), "a".repeat(60));
    assert_eq!(sandbox.used_bytes().unwrap(), 90);

    // Replacing a file counts its new size, not old + new: exactly the limit is fine.
    sandbox.write("/b.txt", &"B".repeat(40)).unwrap();
    assert_eq!(sandbox.used_bytes().unwrap(), 100);
}

#[test]
fn files_persist_when_the_thread_is_opened_again() {
    let (base, thread, sandbox) = sandbox(LIMIT);
    sandbox
        .write("/notes/plan.md", "kept between turns")
        .unwrap();
    drop(sandbox);

    let next_turn = Sandbox::open(base.path(), thread, limits(LIMIT)).unwrap();
    assert_eq!(
        next_turn.read("/notes/plan.md", None, None).unwrap(),
        "kept between turns"
    );

    let other_thread = Sandbox::open(base.path(), sibling_of(thread), limits(LIMIT)).unwrap();
    assert!(
        other_thread.ls("/").unwrap().is_empty(),
        "threads do not share files"
    );
}

#[test]
fn writes_under_skills_are_refused() {
    let (_base, _thread, sandbox) = sandbox(LIMIT);

    for path in [
        "/skills/rover/create-department/SKILL.md",
        "/skills",
        "/notes/../skills/x.md",
    ] {
        assert_invalid(sandbox.write(path, "overwritten"), "/skills/");
        assert_invalid(sandbox.edit(path, "a", "b", false), "/skills/");
    }
    assert!(sandbox.ls("/").unwrap().is_empty());
}

#[test]
fn edit_refuses_ambiguous_or_absent_text_unless_replacing_all() {
    let (_base, _thread, sandbox) = sandbox(LIMIT);
    sandbox
        .write("/list.md", "- todo\n- todo\n- done\n")
        .unwrap();

    assert_invalid(
        sandbox.edit("/list.md", "- todo", "- done", false),
        "occurs 2 times",
    );
    assert_invalid(
        sandbox.edit("/list.md", "- later", "- done", false),
        "not found",
    );
    assert_invalid(sandbox.edit("/list.md", "", "x", true), "empty");
    assert_eq!(
        sandbox.read("/list.md", None, None).unwrap(),
        "- todo\n- todo\n- done\n",
        "a refused edit changes nothing"
    );

    let written = sandbox.edit("/list.md", "- todo", "- done", true).unwrap();
    assert_eq!(written.bytes, 21);
    assert_eq!(
        sandbox.read("/list.md", None, None).unwrap(),
        "- done\n- done\n- done\n"
    );
}

#[test]
fn binary_files_are_readable_as_bytes_only() {
    let (base, thread, sandbox) = sandbox(LIMIT);
    fs::write(
        host_dir(base.path(), thread).join("image.bin"),
        [0xff, 0x00, 0xfe],
    )
    .unwrap();

    assert_eq!(
        sandbox.read_bytes("/image.bin").unwrap(),
        [0xff, 0x00, 0xfe]
    );
    assert_invalid(sandbox.read("/image.bin", None, None), "not a text file");
    assert_invalid(
        sandbox.edit("/image.bin", "a", "b", false),
        "not a text file",
    );
}

#[test]
fn an_edit_too_large_is_refused_before_it_is_built() {
    const MIB: usize = 1024 * 1024;
    let (_base, _thread, sandbox) = sandbox(2 * MIB as u64);
    sandbox.write("/a.txt", &"a".repeat(MIB)).unwrap();

    // Every one of a million `a`s becomes a mebibyte: a tebibyte, which is never allocated — the
    // size is computed from the occurrences and refused first.
    let refused = sandbox
        .edit("/a.txt", "a", &"b".repeat(MIB), true)
        .unwrap_err();
    match refused {
        SandboxError::TooLarge {
            scope, would_use, ..
        } => {
            assert_eq!(scope, QuotaScope::Thread);
            assert_eq!(would_use, (MIB as u64) * (MIB as u64));
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(sandbox.used_bytes().unwrap(), MIB as u64, "nothing changed");

    // A shrinking edit is computed the same way, and fits.
    let written = sandbox.edit("/a.txt", "aa", "c", true).unwrap();
    assert_eq!(written.bytes, (MIB / 2) as u64);
}

#[test]
fn directories_count_toward_the_entry_quota() {
    let base = tempfile::tempdir().unwrap();
    let mut limits = limits(LIMIT);
    limits.thread.entries = 5;
    let sandbox = Sandbox::open(base.path(), owner(), limits).unwrap();

    // Three directories and a file: four entries.
    sandbox.write("/a/b/c/d.txt", "").unwrap();
    let refused = sandbox.write("/a/b/e/f.txt", "").unwrap_err();
    match &refused {
        SandboxError::TooLarge {
            scope,
            unit,
            would_use,
            limit,
            ..
        } => {
            assert_eq!(
                (*scope, *unit, *would_use, *limit),
                (QuotaScope::Thread, QuotaUnit::Entries, 6, 5)
            );
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(
        refused.to_string().contains("files and folders"),
        "{refused}"
    );
    assert!(
        matches!(sandbox.ls("/a/b/e"), Err(SandboxError::NotFound(_))),
        "no directory was made"
    );
    // Replacing an existing file adds no entry; one new file fits exactly.
    sandbox.write("/a/b/c/d.txt", "again").unwrap();
    sandbox.write("/a/b/x.txt", "").unwrap();
    assert_eq!(sandbox.usage().unwrap().thread.entries, 5);
}

#[test]
fn quotas_hold_per_user_and_per_school() {
    let base = tempfile::tempdir().unwrap();
    let quota = |bytes| Quota {
        bytes,
        entries: 100,
    };
    let limits = SandboxLimits {
        thread: quota(100),
        user: quota(100),
        school: quota(150),
    };
    let first = owner();
    let open = |owner| Sandbox::open(base.path(), owner, limits).unwrap();
    let (mine, also_mine) = (open(first), open(sibling_of(first)));
    let colleague = open(SandboxOwner {
        user: UserId::new(),
        thread: ThreadId::new(),
        ..first
    });
    let elsewhere = open(owner());

    mine.write("/a.txt", &"a".repeat(60)).unwrap();
    let scope_of = |result: Result<_, SandboxError>| match result {
        Err(SandboxError::TooLarge { scope, unit, .. }) => (scope, unit),
        other => panic!("expected TooLarge, got {other:?}"),
    };
    // My other thread has room of its own, but not past my quota…
    assert_eq!(
        scope_of(also_mine.write("/b.txt", &"b".repeat(41))),
        (QuotaScope::User, QuotaUnit::Bytes)
    );
    also_mine.write("/b.txt", &"b".repeat(40)).unwrap();
    // …a colleague has room of their own, but not past the school's…
    assert_eq!(
        scope_of(colleague.write("/c.txt", &"c".repeat(51))),
        (QuotaScope::School, QuotaUnit::Bytes)
    );
    colleague.write("/c.txt", &"c".repeat(50)).unwrap();
    // …and another school's quota is its own.
    elsewhere.write("/d.txt", &"d".repeat(100)).unwrap();

    let usage = mine.usage().unwrap();
    assert_eq!(usage.thread.bytes, 60);
    assert_eq!(usage.user.bytes, 100);
    assert_eq!(usage.school.bytes, 150);
    assert_eq!(usage.school.entries, 3);
}

#[test]
fn the_sweep_removes_sandboxes_nobody_opened_for_too_long() {
    use rover_agent::sandbox::sweep;
    use std::time::{Duration, SystemTime};

    let base = tempfile::tempdir().unwrap();
    let day = Duration::from_secs(24 * 60 * 60);
    let age = |owner: SandboxOwner, by: Duration| {
        fs::File::open(host_dir(base.path(), owner))
            .unwrap()
            .set_modified(SystemTime::now() - by)
            .unwrap();
    };
    let (old, reopened, fresh) = (owner(), owner(), owner());
    let kept_sibling = sibling_of(old);
    for owner in [old, reopened, fresh, kept_sibling] {
        let sandbox = Sandbox::open(base.path(), owner, limits(LIMIT)).unwrap();
        sandbox.write("/notes/plan.md", "plan").unwrap();
    }
    age(old, 3 * day);
    age(reopened, 3 * day);
    // Opening a sandbox (every turn does) marks it used.
    Sandbox::open(base.path(), reopened, limits(LIMIT)).unwrap();

    let swept = sweep(base.path(), 2 * day).unwrap();
    assert_eq!(swept.threads, 1);
    assert!(!host_dir(base.path(), old).exists(), "the old one is gone");
    for kept in [reopened, fresh, kept_sibling] {
        assert!(host_dir(base.path(), kept).join("notes/plan.md").exists());
    }

    // When a user's last thread goes, so do their (and their school's) empty directories.
    age(reopened, 3 * day);
    assert_eq!(sweep(base.path(), 2 * day).unwrap().threads, 1);
    let school_dir = base.path().join(reopened.school.to_string());
    assert!(
        !school_dir.exists(),
        "empty user and school directories are removed"
    );
    assert_eq!(sweep(base.path(), 2 * day).unwrap().threads, 0);
}
