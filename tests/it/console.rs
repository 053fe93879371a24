//! The Hub console end to end, in a real browser: Debian's headless Chromium driven by
//! playwright-core (`tests/browser/console.mjs`; no browser is downloaded) against the whole stack,
//! the console served by the gateway at `/`. It signs in as a demo user, chats, reads the activity
//! timeline, answers an `ask_user` question inline, reloads mid-reply and sees the stream resume,
//! stops a reply, and leaves a screenshot in `target/console/console.png`.
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

#[tokio::test]
async fn the_console_chats_answers_questions_and_resumes_after_a_reload_in_chromium() {
    let dist = built_console().await;
    let dir = playwright().await;
    let chromium = chromium();
    // 120 ms between the model's chunks: a reply streams for long enough to reload in the middle.
    let stack = Stack::start_with(
        &["--chunk-delay-ms", "120"],
        &[("ROVER_HTTP__CONSOLE_DIR", &dist.display().to_string())],
    )
    .await;
    // Writes wait for the staff member's approval, so the page draws the card.
    crate::approvals::require_approvals(&stack, stack.db.ids.hill.as_uuid()).await;
    let screenshots = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("console");
    std::fs::create_dir_all(&screenshots).unwrap();
    let screenshot = screenshots.join("console.png");
    let _ = std::fs::remove_file(&screenshot);

    let mut node = Command::new("node");
    node.current_dir(&dir)
        .env("ROVER_CHROMIUM", &chromium)
        .args([
            "console.mjs",
            &format!("http://{}", stack.gateway),
            &screenshot.display().to_string(),
        ]);
    let output = run(node, "node console.mjs", BROWSER_TIMEOUT).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("the browser saw: {}", stdout.trim());
    let report: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the script's report is not JSON ({e}):\n{stdout}"));

    // Signed in with a development token from the gateway.
    assert!(
        text(&report, "who").contains("Kampala Hill School"),
        "{report:#}"
    );
    // The approval card names the tool and shows exactly what will run.
    assert!(
        text(&report, "approvalCard").contains("Creating a department"),
        "{report:#}"
    );
    let shown: Value = serde_json::from_str(&text(&report, "approvalInput")).expect("JSON");
    assert_eq!(shown, serde_json::json!({ "name": "Sciences" }));
    // One timeline row per tool call, with the registry's label, then the reply.
    let rows = texts(&report, "createRows");
    assert_eq!(rows.len(), 1, "{report:#}");
    assert!(rows[0].contains("Creating a department…"), "{rows:?}");
    assert!(
        text(&report, "createReply").starts_with("Done — I created the Sciences department"),
        "{report:#}"
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
        text(&report, "question").contains("I'm not sure what you'd like me to do"),
        "{report:#}"
    );
    assert!(text(&report, "answered").contains("The attendance for S1 Blue"));
    assert!(
        text(&report, "answerReply").starts_with("Thanks."),
        "{report:#}"
    );
    // Reloaded mid-reply: the stream resumed (GET …/stream, 200) and the reply completed; the
    // thread's earlier messages are still on the page.
    assert_eq!(report["resumeStatus"], 200, "{report:#}");
    let before = text(&report, "beforeReload");
    let after = text(&report, "afterReload");
    assert!(
        after.starts_with("There are ") && after.contains(" students"),
        "{after}"
    );
    assert!(
        before.len() < after.len(),
        "the page reloaded after the reply had finished ({before:?}); the reload was not mid-reply"
    );
    assert_eq!(
        texts(&report, "historyAfterReload"),
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
    // Stop: the page stops the reply and asks the gateway to stop the turn (200 once it has
    // stopped, 204 when it had ended already — the page's Stop may lose that race).
    assert!(
        matches!(report["stopStatus"].as_u64(), Some(200 | 204)),
        "{report:#}"
    );
    assert_eq!(report["pageErrors"], serde_json::json!([]), "{report:#}");
    // The page ran under the gateway's CSP (its own scripts only) without an error, and signing
    // out left nothing of the session or the chats in the browser.
    assert!(
        report["storedBeforeSignOut"].as_u64().unwrap_or_default() > 0,
        "{report:#}"
    );
    assert_eq!(
        report["storedAfterSignOut"],
        serde_json::json!([]),
        "{report:#}"
    );

    // Nothing was sent twice by the reloads: in the first chat, one turn per message sent (the
    // answer to the question and the approval are turns of their own), and one department.
    assert_eq!(
        stack
            .count(
                "SELECT count(DISTINCT e.turn_id) FROM turn_events e \
                 WHERE e.thread_id = (SELECT id FROM threads ORDER BY created_at LIMIT 1)"
            )
            .await,
        6
    );
    assert_eq!(
        stack
            .count(
                "SELECT count(*) FROM departments d JOIN schools s ON s.id = d.school_id \
                 WHERE s.name = 'Kampala Hill School' AND d.name = 'Sciences'"
            )
            .await,
        1
    );
    let png = std::fs::read(&screenshot).expect("the screenshot was saved");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{}",
        png.len()
    );
}
