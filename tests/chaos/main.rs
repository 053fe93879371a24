//! Chaos: faults that take down what every test shares — the RabbitMQ node and the Postgres
//! server. Run alone and one test at a time by `make chaos` (never by `make test`, whose tests
//! would fail with them).

#[allow(dead_code)]
#[path = "../it/checker.rs"]
mod checker;
#[allow(dead_code)]
#[path = "../it/stack.rs"]
mod stack;

use std::process::Command;

use checker::{ADMIN, check, say_watching};
use stack::{Stack, Turn};

/// Runs `command`; panics with its output if it fails.
fn run(command: &str, args: &[&str]) {
    let output = Command::new(command).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{command} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Brings the shared services back whatever happens to the test.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/local/ensure-services.sh"
        );
        let _ = Command::new("bash").arg(script).status();
    }
}

fn postgres_version() -> String {
    let mut versions: Vec<String> = std::fs::read_dir("/etc/postgresql")
        .expect("a Postgres cluster under /etc/postgresql")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    versions.sort();
    versions.pop().expect("a Postgres version")
}

/// The turn as the client finally has it: the live stream if it ended, else a resume.
async fn whole_turn(stack: &Stack, chat: &str, live: Turn) -> Turn {
    if live.finish_reason().is_some() {
        return live;
    }
    let resumed = stack
        .http
        .get(format!("http://{}/api/chat/{chat}/stream", stack.gateway))
        .bearer_auth(stack.token(ADMIN))
        .send()
        .await
        .unwrap();
    stack::read_stream(resumed).await
}

async fn survives(fault: impl Fn(), chat: &str) {
    let _restore = Restore;
    let stack = Stack::start_with_model(&["--first-token-delay-ms", "200"]).await;
    let mut injected = false;
    let live = say_watching(
        &stack,
        ADMIN,
        chat,
        "Create a department called Sciences",
        |chunk| {
            if !injected && chunk["type"] == "tool-input-available" {
                injected = true;
                fault();
            }
        },
    )
    .await;
    assert!(injected);
    let turn = whole_turn(&stack, chat, live).await;
    assert!(
        turn.finish_reason().is_some(),
        "the turn completed or failed visibly: {:#?}",
        turn.chunks
    );
    let sciences = stack
        .count(&format!(
            "SELECT count(*) FROM departments WHERE name = 'Sciences' AND school_id = '{}'",
            stack.db.ids.hill
        ))
        .await;
    assert!(sciences <= 1, "written at most once");
    if turn.finish_reason() == Some("stop") {
        assert_eq!(sciences, 1, "a completed turn did its write");
    }
    check(&stack, &turn, sciences).await;
}

#[tokio::test]
async fn restarting_the_broker_mid_turn_loses_nothing() {
    survives(
        || {
            run("rabbitmqctl", &["-q", "stop_app"]);
            run("rabbitmqctl", &["-q", "start_app"]);
            run("rabbitmqctl", &["-q", "await_startup"]);
        },
        "chat-broker-restart",
    )
    .await;
}

#[tokio::test]
async fn restarting_postgres_mid_turn_loses_nothing() {
    let version = postgres_version();
    survives(
        || {
            run(
                "pg_ctlcluster",
                &["--skip-systemctl-redirect", &version, "main", "restart"],
            )
        },
        "chat-postgres-restart",
    )
    .await;
}
