//! The Hub console end to end, in a real browser: Debian's headless Chromium driven by
//! playwright-core (`tests/browser/console.mjs`; no browser is downloaded) against the whole stack,
//! the console served by the gateway at `/`. It signs in as a demo user, approves a write on its
//! card, rates a reply, reads the activity timeline, answers an `ask_user` question inline,
//! reloads mid-reply (the chat comes back from the server and the stream resumes), stops a reply
//! and sends the next message; then walks the chat history: the sidebar lists the chats, search and
//! rename, a chat opened from the sidebar (its messages from the server) is continued with an
//! approved write and deleted from the sidebar. It leaves a screenshot in
//! `target/console/console.png`, and checks that the browser keeps the session only. A second
//! script (`tests/browser/badge.mjs`) reloads a chat a specialist worked in and checks that each
//! row keeps its specialist badge; a third (`tests/browser/settings.mjs`) sets the school's approval
//! rules on the settings page.
//!
//! Needs `/usr/bin/chromium` (`deploy/local/ensure-chromium.sh`, which `make test` runs). The
//! console is built with `make console` (a no-op when `console/dist` is up to date) and the
//! script's packages installed from `tests/browser/package-lock.json` on first use.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use crate::stack::Stack;

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
const BROWSER_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/browser");
const BUILD_TIMEOUT: Duration = Duration::from_secs(300);
const BROWSER_TIMEOUT: Duration = Duration::from_secs(240);

/// Runs `command` to its end within `timeout` (the Node tests' runner); panics with its output if
/// it fails.
async fn run(command: Command, what: &str, timeout: Duration) -> std::process::Output {
    let output = crate::node::run(command, what, timeout).await;
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Holds a file lock while `f` runs: test processes run in parallel, and npm must not run twice
/// in one directory at once.
async fn locked<T>(name: &str, f: impl std::future::Future<Output = T>) -> T {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let lock = tokio::task::spawn_blocking(move || {
        let file = std::fs::File::create(&path).unwrap();
        file.lock().unwrap();
        file
    })
    .await
    .unwrap();
    let out = f.await;
    drop(lock);
    out
}

/// `console/dist`, built by `make console` (which skips the build when it is up to date).
async fn built_console() -> PathBuf {
    locked("rover-tests-console.lock", async {
        let mut make = Command::new("make");
        make.current_dir(REPO).args(["-s", "console"]);
        run(make, "make console", BUILD_TIMEOUT).await;
    })
    .await;
    let dist = Path::new(REPO).join("console/dist");
    assert!(
        dist.join("index.html").is_file(),
        "make console made no index.html"
    );
    dist.canonicalize().unwrap()
}

/// `tests/browser` with playwright-core installed (`npm ci` when missing or not the pinned one).
async fn playwright() -> PathBuf {
    let dir = PathBuf::from(BROWSER_DIR);
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.join("package.json")).unwrap()).unwrap();
    let pinned = manifest["dependencies"]["playwright-core"]
        .as_str()
        .expect("package.json pins playwright-core")
        .to_owned();
    let installed = |dir: &Path| -> Option<String> {
        let modules = dir.join("node_modules");
        // `npm ci` writes `.package-lock.json` last.
        modules.join(".package-lock.json").is_file().then_some(())?;
        let installed: Value = serde_json::from_slice(
            &std::fs::read(modules.join("playwright-core/package.json")).ok()?,
        )
        .ok()?;
        installed["version"].as_str().map(str::to_owned)
    };
    locked("rover-tests-browser-npm.lock", async {
        if installed(&dir).as_deref() != Some(pinned.as_str()) {
            let mut npm = Command::new("npm");
            npm.current_dir(&dir)
                .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"]);
            run(npm, "npm ci in tests/browser", BUILD_TIMEOUT).await;
        }
    })
    .await;
    assert_eq!(installed(&dir), Some(pinned));
    dir
}

/// Debian's Chromium; never a downloaded one.
fn chromium() -> PathBuf {
    let path = PathBuf::from(
        std::env::var("ROVER_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned()),
    );
    assert!(
        path.is_file(),
        "{} is missing: run deploy/local/ensure-chromium.sh (make test does), which installs \
         Debian's chromium package",
        path.display()
    );
    path
}

fn text(report: &Value, field: &str) -> String {
    report[field]
        .as_str()
        .unwrap_or_else(|| panic!("no {field} in the report: {report:#}"))
        .to_owned()
}

fn texts(report: &Value, field: &str) -> Vec<String> {
    report[field]
        .as_array()
        .unwrap_or_else(|| panic!("no {field} in the report: {report:#}"))
        .iter()
        .map(|v| v.as_str().unwrap_or_default().to_owned())
        .collect()
}

fn json_text(report: &Value, field: &str) -> Value {
    serde_json::from_str(&text(report, field))
        .unwrap_or_else(|e| panic!("{field} is not JSON ({e}): {report:#}"))
}

/// The ids of the chats a `listed`-shaped field of the report holds, in order.
fn chat_ids(report: &Value, field: &str) -> Vec<String> {
    report[field]
        .as_array()
        .unwrap_or_else(|| panic!("no {field} in the report: {report:#}"))
        .iter()
        .map(|chat| chat["id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The title the sidebar showed for `id` in a `listed`-shaped field.
fn title_of(report: &Value, field: &str, id: &str) -> String {
    report[field]
        .as_array()
        .and_then(|chats| chats.iter().find(|chat| chat["id"] == id))
        .and_then(|chat| chat["title"].as_str())
        .unwrap_or_else(|| panic!("{id} is not in {field}: {report:#}"))
        .to_owned()
}

/// A stack whose gateway serves the built console (the scripted model started with
/// `model_flags`).
async fn with_console(model_flags: &[&str]) -> Stack {
    let dist = built_console().await;
    Stack::start_with(
        model_flags,
        &[("ROVER_HTTP__CONSOLE_DIR", &dist.display().to_string())],
    )
    .await
}

/// Runs the browser script `script` of `tests/browser` against `stack` (its gateway's URL, then
/// `args`), and answers the JSON report it printed.
async fn browse(stack: &Stack, script: &str, args: &[&str]) -> Value {
    let dir = playwright().await;
    let mut node = Command::new("node");
    node.current_dir(&dir)
        .env("ROVER_CHROMIUM", chromium())
        .arg(script)
        .arg(format!("http://{}", stack.gateway))
        .args(args);
    let output = run(node, &format!("node {script}"), BROWSER_TIMEOUT).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("the browser saw: {}", stdout.trim());
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the script's report is not JSON ({e}):\n{stdout}"))
}

/// Runs the console's walk-through against `stack`, and answers what it saw.
async fn walk_the_console(stack: &Stack, screenshot: &Path) -> Value {
    browse(stack, "console.mjs", &[&screenshot.display().to_string()]).await
}

#[tokio::test]
async fn the_console_chats_and_keeps_its_history_on_the_server_in_chromium() {
    // 120 ms between the model's chunks: a reply streams for long enough to reload or stop it in
    // the middle.
    let stack = with_console(&["--chunk-delay-ms", "120"]).await;
    // Writes wait for the staff member's approval, so the page draws the card.
    crate::approvals::require_approvals(&stack, stack.db.ids.hill.as_uuid()).await;
    let screenshots = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("console");
    std::fs::create_dir_all(&screenshots).unwrap();
    let screenshot = screenshots.join("console.png");
    let _ = std::fs::remove_file(&screenshot);

    let report = walk_the_console(&stack, &screenshot).await;

    chatting(&report);
    reloading(&report);
    stopping(&report);
    history(&report);
    storage(&report);
    // The page ran under the gateway's CSP (its own scripts only) without an error.
    assert_eq!(report["pageErrors"], serde_json::json!([]), "{report:#}");
    // On the server: the deleted chat is gone with its events, and the stopped chat holds its two
    // turns (one per message sent: nothing was sent twice).
    assert_eq!(stack.count("SELECT count(*) FROM threads").await, 1);
    assert_eq!(
        stack
            .count("SELECT count(DISTINCT turn_id) FROM turn_events")
            .await,
        2
    );
    // One department each: nothing was sent twice, by the reload or anything else.
    for name in ["Sciences", "Arts"] {
        assert_eq!(
            stack
                .count(&format!(
                    "SELECT count(*) FROM departments d JOIN schools s ON s.id = d.school_id \
                     WHERE s.name = 'Kampala Hill School' AND d.name = '{name}'"
                ))
                .await,
            1,
            "{name}"
        );
    }
    let png = std::fs::read(&screenshot).expect("the screenshot was saved");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{}",
        png.len()
    );
}

/// Signed in; a write approved on its card, a rated reply, the timeline, `ask_user` inline.
fn chatting(report: &Value) {
    // Signed in with a development token from the gateway.
    assert!(
        text(report, "who").contains("Kampala Hill School"),
        "{report:#}"
    );
    // The approval card names the tool by its registry label and shows exactly what will run.
    assert!(
        text(report, "approvalLabel").contains("Creating a department"),
        "{report:#}"
    );
    assert!(
        text(report, "approvalCard").contains("create_department"),
        "{report:#}"
    );
    assert_eq!(
        json_text(report, "approvalInput"),
        serde_json::json!({ "name": "Sciences" })
    );
    // One timeline row per tool call, with the registry's label, then the reply.
    let rows = texts(report, "createRows");
    assert_eq!(rows.len(), 1, "{report:#}");
    assert!(rows[0].contains("Creating a department…"), "{rows:?}");
    assert!(
        text(report, "createReply").starts_with("Done — I created the Sciences department"),
        "{report:#}"
    );
    // Under the reply: the model that answered, as the scripted model named itself.
    assert_eq!(
        text(report, "createAnsweredBy"),
        "answered by rover-scripted",
        "{report:#}"
    );
    // Feedback on that reply: its message id, the rating and the comment, accepted.
    let chat = text(report, "chatId");
    let rated = text(report, "ratedMessageId");
    assert!(rated.starts_with("msg-"), "{rated}");
    assert_eq!(report["feedbackStatus"], 204, "{report:#}");
    assert_eq!(
        text(report, "feedbackPath"),
        format!("/api/chats/{chat}/messages/{rated}/feedback")
    );
    assert_eq!(
        report["feedbackBody"],
        serde_json::json!({ "rating": "up", "comment": "Quick and right" })
    );
    // A failed tool call (ask_user beside another call) has no row; the successful one has.
    let failed = report["failedRows"].as_array().expect("failedRows");
    assert_eq!(failed.len(), 1, "{report:#}");
    assert_eq!(failed[0]["tool"], "get_current_date");
    assert!(
        failed[0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Checking the date…"))
    );
    // ask_user: the question inline, the answer sent back, the turn carried on.
    assert!(
        text(report, "question").contains("I'm not sure what you'd like me to do"),
        "{report:#}"
    );
    assert!(text(report, "answered").contains("The attendance for S1 Blue"));
    assert!(
        text(report, "answerReply").starts_with("Thanks."),
        "{report:#}"
    );
}

/// Reloaded mid-reply: the chat came back from the server (running), the stream resumed
/// (GET …/stream, 200) and the reply completed, the thread's earlier messages still there.
fn reloading(report: &Value) {
    assert_eq!(report["statusOnReload"], "running", "{report:#}");
    assert_eq!(report["resumeStatus"], 200, "{report:#}");
    let before = text(report, "beforeReload");
    let after = text(report, "afterReload");
    assert!(
        after.starts_with("There are ") && after.contains(" students"),
        "{after}"
    );
    assert!(
        before.len() < after.len(),
        "the page reloaded after the reply had finished ({before:?}); the reload was not mid-reply"
    );
    assert_eq!(
        texts(report, "historyAfterReload"),
        [
            "Create a department called Sciences",
            "Check the date and ask me which day I mean",
            "Please sort out the thing from yesterday",
            "How many students do we have?",
        ]
    );
    assert!(
        report["stoppable"].as_bool().unwrap_or_default(),
        "{report:#}"
    );
}

/// Stop: the page shows the reply stopped where it was, takes the next message and answers it;
/// the server kept what was said. Which status the stop endpoint gave (200 once stopped, 202
/// while still ending, 204 when nothing ran) is a timing race, so it is only printed.
fn stopping(report: &Value) {
    // The scripted model's `describe-how-you-work` reply begins and ends so.
    const BEGINS: &str = "I work in small steps.";
    const ENDS: &str = "which campus the answer covers.";
    eprintln!("the page's Stop got {}", report["stopStatus"]);
    assert_eq!(text(report, "stoppedMark"), "Stopped.", "{report:#}");
    let stopped = text(report, "stoppedReply");
    let stopped = stopped.trim_end();
    assert!(
        !stopped.is_empty() && (BEGINS.starts_with(stopped) || stopped.starts_with(BEGINS)),
        "{stopped:?}"
    );
    assert!(
        !stopped.ends_with(ENDS),
        "the reply had finished before Stop: {stopped:?}"
    );
    let next = text(report, "afterStop");
    assert!(
        next.starts_with("There are ") && next.contains(" students"),
        "{next}"
    );
    // Reopened from the server: both messages, the stopped reply as far as it went (at least as
    // far as the page saw), then the answer.
    let reopened = &report["stoppedChat"];
    assert_eq!(
        reopened["users"],
        serde_json::json!(["Describe how you work", "How many students do we have?"]),
        "{report:#}"
    );
    let replies = reopened["replies"].as_array().expect("replies");
    assert_eq!(replies.len(), 2, "{report:#}");
    assert!(
        replies[0]
            .as_str()
            .is_some_and(|kept| kept.starts_with(stopped)),
        "{report:#}"
    );
    assert_eq!(replies[1].as_str(), Some(next.as_str()));
}

/// The sidebar: both chats listed newest first with the server's titles, search, rename; the
/// first chat opened from it shows exactly what the page showed live, is continued with an
/// approved write, and is deleted from the sidebar.
fn history(report: &Value) {
    let first = text(report, "chatId");
    let second = text(report, "secondChatId");
    assert!(
        chat_ids(report, "firstListed").contains(&first),
        "{report:#}"
    );
    assert_eq!(chat_ids(report, "listed"), [second.clone(), first.clone()]);
    assert!(
        title_of(report, "listed", &first).contains("Sciences"),
        "{report:#}"
    );
    assert!(
        title_of(report, "listed", &second).contains("work"),
        "{report:#}"
    );
    assert_eq!(chat_ids(report, "searched"), [first.as_str()]);
    assert_eq!(
        title_of(report, "renamed", &first),
        "Sciences and more",
        "{report:#}"
    );
    // Opened from the sidebar: the messages came back from the server as the page had them.
    assert_eq!(report["openStatus"], 200, "{report:#}");
    assert_eq!(text(report, "urlChatAfterOpen"), first);
    assert_eq!(report["reopened"], report["firstChat"], "{report:#}");
    // Every reply names the model that answered it, reopened from the server too.
    for chat in ["firstChat", "stoppedChat"] {
        let answered = &report[chat]["answeredBy"];
        assert_eq!(
            answered.as_array().map(Vec::len),
            report[chat]["messageIds"].as_array().map(Vec::len),
            "{chat}: {report:#}"
        );
        assert!(
            answered
                .as_array()
                .is_some_and(|all| all.iter().all(|a| a == "answered by rover-scripted")),
            "{chat}: {report:#}"
        );
    }
    assert_eq!(
        report["ratedOnReopen"], 1,
        "the rating shows again: {report:#}"
    );
    assert_eq!(
        report["stoppedOnReopen"], 1,
        "the stop shows again: {report:#}"
    );
    // Continued: the approval card with the label and the exact input, approved, answered.
    assert!(
        text(report, "continuedLabel").contains("Creating a department"),
        "{report:#}"
    );
    assert_eq!(
        json_text(report, "continuedInput"),
        serde_json::json!({ "name": "Arts" })
    );
    assert!(
        text(report, "continuedReply").starts_with("Done — I created the Arts department"),
        "{report:#}"
    );
    assert_eq!(texts(report, "continuedRows").len(), 1, "{report:#}");
    // Deleted from the sidebar: gone from the list, from the server, and off the page.
    assert_eq!(chat_ids(report, "afterDelete"), [second.as_str()]);
    assert_ne!(text(report, "afterDeleteUrlChat"), first);
    assert_eq!(
        report["serverAfterDelete"],
        serde_json::json!({ "listed": [second], "status": 404 })
    );
    // One POST per message or answer, each carrying only the last message: the first chat's six
    // turns before the reload and two after (the Arts message and its approval), the second's two.
    let posts = report["posts"].as_array().expect("posts");
    let of = |chat: &str| posts.iter().filter(|p| p["chat"] == chat).count();
    assert_eq!(of(&first), 8, "{report:#}");
    assert_eq!(of(&text(report, "secondChatId")), 2, "{report:#}");
    assert!(posts.iter().all(|p| p["sent"] == 1), "{report:#}");
}

/// The browser keeps the session and nothing else (no chat, no message); signing out forgets it.
fn storage(report: &Value) {
    let before = &report["storedBeforeSignOut"];
    let local = before["local"].as_object().expect("local storage");
    assert_eq!(
        local.keys().collect::<Vec<_>>(),
        ["rover.console.session"],
        "{report:#}"
    );
    assert_eq!(before["session"], serde_json::json!({}), "{report:#}");
    let session = local["rover.console.session"].as_str().unwrap_or_default();
    for content in [
        text(report, "chatId"),
        text(report, "secondChatId"),
        "Sciences".to_owned(),
        "students".to_owned(),
    ] {
        assert!(!session.contains(&content), "{content} in {session}");
    }
    assert_eq!(
        report["storedAfterSignOut"],
        serde_json::json!({ "local": {}, "session": {} }),
        "{report:#}"
    );
}

/// A reopened chat keeps each tool call's specialist badge: the page reloaded after a class
/// teacher's request (which Rover hands to its class-teacher specialist) draws the same timeline,
/// badges included, from the history read (`toolLabels`) as it drew live from the stream.
#[tokio::test]
async fn a_reopened_chat_keeps_the_specialists_badge_in_chromium() {
    let stack = with_console(&[]).await;
    let report = browse(&stack, "badge.mjs", &[]).await;
    assert_eq!(report["readStatus"], 200, "{report:#}");
    let badge = |rows: &Value| -> Option<String> {
        rows.as_array()?
            .iter()
            .find(|row| row["tool"] == "record_attendance")?["agent"]
            .as_str()
            .map(str::to_owned)
    };
    assert_eq!(
        badge(&report["live"]).as_deref(),
        Some("class teacher"),
        "{report:#}"
    );
    assert_eq!(report["reopened"], report["live"], "{report:#}");
}

/// The settings page sets the school's approval rules: the school admin sees the rules, adds one
/// (teachers' writes run without approval) and saves; the rule is there after a reload, stored
/// through `PUT /api/approval-policy` (audited once); a teacher opening the page sees the server's
/// refusal and no form.
#[tokio::test]
async fn the_console_sets_the_approval_rules_in_chromium() {
    const ADMIN: &str = "admin@hill.school";
    let stack = with_console(&[]).await;
    let report = browse(&stack, "settings.mjs", &[]).await;

    // The demo school's rule, as the page shows it.
    let any_write_runs = serde_json::json!({
        "role": "*", "tool": "*", "mode": "never",
        "shown": "any role · any write · runs without approval",
    });
    let teachers_run = serde_json::json!({
        "role": "teacher", "tool": "*", "mode": "never",
        "shown": "teacher · any write · runs without approval",
    });
    assert_eq!(report["adminReadStatus"], 200, "{report:#}");
    assert_eq!(
        report["rulesBefore"],
        serde_json::json!([any_write_runs]),
        "{report:#}"
    );
    // Saved: the page said so, and after a reload shows the rules as stored, most specific first.
    assert_eq!(report["saveStatus"], 200, "{report:#}");
    assert_eq!(text(&report, "saved"), "Saved.", "{report:#}");
    assert_eq!(
        report["rulesAfterReload"],
        serde_json::json!([teachers_run, any_write_runs]),
        "{report:#}"
    );
    assert_eq!(report["settingsAfterBack"], 0, "{report:#}");

    // On the server: the rule is stored, and the replacement audited once.
    let policy = stack.get_json(ADMIN, "/api/approval-policy").await;
    let rules = policy["rules"].as_array().expect("rules");
    assert!(
        rules.contains(&serde_json::json!({ "role": "teacher", "tool": "*", "mode": "never" })),
        "{policy:#}"
    );
    assert_eq!(
        stack
            .count("SELECT count(*) FROM audit_log WHERE event = 'update.approval_policy'")
            .await,
        1
    );

    // A teacher may not read the rules: the server's refusal, and no form.
    assert_eq!(report["teacherStatus"], 403, "{report:#}");
    assert!(
        text(&report, "teacherSees").contains("Permission denied"),
        "{report:#}"
    );
    assert_eq!(report["teacherForms"], 0, "{report:#}");
    // The page ran under the gateway's CSP without an error.
    assert_eq!(report["pageErrors"], serde_json::json!([]), "{report:#}");
}

/// Edit before approve on the console's card: the form built from the tool's schema holds the
/// proposed input; the staff member changes it and approves, and the edited write runs (the
/// reply says so); another is edited as raw JSON; both show their edits when the chat is reopened
/// from the server. The proposed inputs never ran.
#[tokio::test]
async fn the_console_edits_a_proposed_write_before_approving_it_in_chromium() {
    let stack = with_console(&[]).await;
    crate::approvals::require_approvals(&stack, stack.db.ids.hill.as_uuid()).await;
    let report = browse(&stack, "edit.mjs", &[]).await;

    assert_eq!(
        report["formFields"],
        serde_json::json!([{ "field": "edit-name", "value": "Sciences" }, { "field": "edit-raw", "value": false }]),
        "{report:#}"
    );
    let edited = text(&report, "editedReply");
    assert!(
        edited.starts_with("Done — I created the Natural Sciences department")
            && edited.contains("edited this call"),
        "{report:#}"
    );
    assert!(
        text(&report, "editedNote").contains("Natural Sciences"),
        "{report:#}"
    );
    assert!(
        text(&report, "rawReply").contains("Fine Arts"),
        "{report:#}"
    );
    let reopened = texts(&report, "reopenedNotes");
    assert_eq!(reopened.len(), 2, "{report:#}");
    assert!(reopened[0].contains("Natural Sciences") && reopened[1].contains("Fine Arts"));
    let count = |name: &str| {
        format!(
            "SELECT count(*) FROM departments WHERE school_id = '{}' AND name = '{name}'",
            stack.db.ids.hill
        )
    };
    for (name, expected) in [
        ("Natural Sciences", 1),
        ("Fine Arts", 1),
        ("Sciences", 0),
        ("Arts", 0),
    ] {
        assert_eq!(stack.count(&count(name)).await, expected, "{name}");
    }
    assert_eq!(report["pageErrors"], serde_json::json!([]), "{report:#}");
}
