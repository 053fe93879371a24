//! Chaos: faults that take down what every test shares — the RabbitMQ node and the Postgres
//! server. Run alone and one test at a time by `make chaos` (never by `make test`, whose tests
//! would fail with them).

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story: its setup, the act and every assertion in one place"
)]

#[allow(dead_code)]
#[path = "../it/checker.rs"]
mod checker;
#[allow(dead_code)]
#[path = "../it/stack.rs"]
mod stack;

use std::process::Command;

use checker::{ADMIN, check, drained, say_watching, sciences, writes_once};
use stack::{Service, Stack, Turn};

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
    let sciences = sciences(&stack).await;
    // The write happened exactly when the client was told it did (a tool that could not reach
    // Postgres answers with an error the model passes on).
    let told_written = turn
        .of_type("tool-output-available")
        .iter()
        .filter(|c| c["output"]["data"]["name"] == "Sciences")
        .count();
    assert_eq!(
        sciences,
        i64::try_from(told_written).unwrap(),
        "written exactly when reported: {:#?}",
        turn.chunks
    );
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

/// Resident memory of a process, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        .unwrap()
        * 1024
}

/// The worker's `rover_turns_started_total`.
async fn turns_started(stack: &Stack) -> f64 {
    let text = stack
        .http
        .get(format!("http://{}/metrics", stack.worker_http))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("rover_turns_started_total "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_turns_survive_a_worker_killed_mid_load() {
    let _restore = Restore;
    let stack = Stack::start_with(
        // A model with realistic pacing: a first token after 150 ms, then a chunk every 5 ms.
        &["--first-token-delay-ms", "150", "--chunk-delay-ms", "5"],
        &[
            ("ROVER_AMQP__PREFETCH", "64"),
            // Mixed users each run many turns at once here; the per-user limit is tested elsewhere.
            ("ROVER_CHAT__MAX_CONCURRENT_TURNS_PER_USER", "0"),
            ("ROVER_CHAT__MAX_CONCURRENT_TURNS_PER_SCHOOL", "0"),
            // 200 requests at once on two cores: a pool sized and patient for this load (a
            // gateway past its pool answers 503, which is not what this test is about).
            ("ROVER_DATABASE__MAX_CONNECTIONS", "20"),
            ("ROVER_DATABASE__ACQUIRE_TIMEOUT_MS", "30000"),
        ],
    )
    .await;
    let gateway = stack.pid(Service::Gateway);
    let warm = stack.say(ADMIN, "chat-warm", "List the departments").await;
    assert_eq!(warm.finish_reason(), Some("stop"));
    let baseline = rss(gateway);

    let cases = [
        ("admin@hill.school", "List the departments"),
        ("admin@hill.school", "How many students do we have?"),
        ("kololo.admin@hill.school", "List the departments"),
        (
            "amina@hill.school",
            "Record attendance for S1 Blue: everyone present except Nakato",
        ),
        ("dos@hill.school", "What's the date today?"),
        ("bursar@hill.school", "Find the student Nakato"),
        ("admin@lakeside.college", "List the departments"),
    ];
    let turns = futures::future::join_all((0..200).map(|i| {
        let (user, text) = cases[i % cases.len()];
        let stack = &stack;
        async move {
            let chat = format!("chat-load-{i}");
            let live = stack.say(user, &chat, text).await;
            if live.finish_reason().is_some() || live.status != 200 {
                return live;
            }
            // The stream broke: resume it, as the Hub would.
            let resumed = stack
                .http
                .get(format!("http://{}/api/chat/{chat}/stream", stack.gateway))
                .bearer_auth(stack.token(user))
                .send()
                .await
                .unwrap();
            stack::read_stream(resumed).await
        }
    }));
    let fault = async {
        // Kill the worker once a good share of the turns are running; Kubernetes starts another.
        let mut every = tokio::time::interval(std::time::Duration::from_millis(20));
        while turns_started(&stack).await < 40.0 {
            every.tick().await;
        }
        stack.kill(Service::Worker);
        stack.restart(Service::Worker, &[], &[]);
    };
    let started = std::time::Instant::now();
    let (turns, ()) = tokio::join!(turns, fault);
    let took = started.elapsed();

    let by_reason = |reason: &str| {
        turns
            .iter()
            .filter(|t| t.finish_reason() == Some(reason))
            .count()
    };
    let odd: Vec<String> = turns
        .iter()
        .filter(|t| t.finish_reason() != Some("stop"))
        .map(|t| {
            format!(
                "{} {} {:?} last={:?} {:?}",
                t.status,
                t.of_type("start")
                    .first()
                    .map(|c| c["messageMetadata"]["turnId"].to_string())
                    .unwrap_or_default(),
                t.finish_reason(),
                t.chunks.last(),
                t.of_type("error")
                    .iter()
                    .map(|e| e["errorText"].to_string())
                    .collect::<Vec<_>>()
            )
        })
        .collect();
    assert_eq!(by_reason("stop"), 200, "every turn completed: {odd:#?}");
    for turn in &turns {
        assert_eq!(turn.of_type("start").len(), 1);
        assert_eq!(turn.of_type("finish").len(), 1);
    }
    // Writes: one inbox row, one audit row per write call, however often it was delivered.
    let writes = turns
        .iter()
        .flat_map(|t| t.tools())
        .filter(|tool| tool == "record_attendance")
        .count();
    writes_once(&stack, i64::try_from(writes).unwrap()).await;
    let depths = drained(&stack);
    for queue in ["rover.turns", "rover.tools"] {
        assert_eq!(depths.get(queue), Some(&0), "{queue} drained: {depths:?}");
    }
    let after = rss(gateway);
    eprintln!(
        "load: 200 turns in {took:?} with a worker killed; {writes} writes; gateway RSS {} MiB before, {} MiB after",
        baseline >> 20,
        after >> 20
    );
    assert!(
        after < baseline + (64 << 20),
        "the gateway's memory returns near its baseline: {baseline} -> {after}"
    );
}
