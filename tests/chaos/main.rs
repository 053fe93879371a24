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

use std::collections::HashMap;
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

/// The cases the cluster's load runs: reads, and a write (attendance) that must happen once.
const LOAD: [(&str, &str); 7] = [
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

/// One turn as the Hub ends up with it: the live stream, else a resume of it.
async fn load_turn(stack: &Stack, user: &str, chat: &str, text: &str) -> Turn {
    let live = stack.say(user, chat, text).await;
    or_resumed(stack, user, chat, live).await
}

/// `live` if it ended; else the chat's turn resumed, as the Hub does when a stream breaks (or the
/// test client's 60 s timeout cut a turn that waited behind the load).
async fn or_resumed(stack: &Stack, user: &str, chat: &str, live: Turn) -> Turn {
    if live.finish_reason().is_some() || live.status != 200 {
        return live;
    }
    let resumed = stack
        .http
        .get(format!("http://{}/api/chat/{chat}/stream", stack.gateway))
        .bearer_auth(stack.token(user))
        .send()
        .await
        .unwrap();
    stack::read_stream(resumed).await
}

/// A turn the Hub can tell apart: served (`finish` with `stop`), or refused or failed with an
/// error that says to try again — never a turn that just stops.
fn served_or_retryable(turn: &Turn) -> Result<bool, String> {
    let errors: Vec<String> = turn
        .of_type("error")
        .iter()
        .map(|e| e["errorText"].as_str().unwrap_or_default().to_owned())
        .collect();
    match (turn.status, turn.finish_reason()) {
        (200, Some("stop")) if turn.of_type("finish").len() == 1 => Ok(true),
        (200, Some(_)) if errors.iter().any(|e| e.contains("try again")) => Ok(false),
        (status, _) if status != 200 && turn.chunks.is_empty() => Ok(false),
        _ => Err(format!(
            "{} {:?} errors={errors:?} last={:?}",
            turn.status,
            turn.finish_reason(),
            turn.chunks.last()
        )),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_node_that_leads_the_turns_queue_loses_no_turn_twice_over() {
    let cluster = tokio::task::spawn_blocking(rover_testkit::LocalCluster::start)
        .await
        .unwrap();
    let stack = Stack::start_on(
        rover_testkit::TestVhost::create_on(cluster),
        &["--first-token-delay-ms", "150", "--chunk-delay-ms", "5"],
        &[
            ("ROVER_AMQP__PREFETCH", "64"),
            ("ROVER_CHAT__MAX_CONCURRENT_TURNS_PER_USER", "0"),
            ("ROVER_CHAT__MAX_CONCURRENT_TURNS_PER_SCHOOL", "0"),
            ("ROVER_DATABASE__MAX_CONNECTIONS", "20"),
            ("ROVER_DATABASE__ACQUIRE_TIMEOUT_MS", "30000"),
            // A node's death is noticed at once (its sockets close); a tool call whose reply
            // died with a node is asked again after this.
            ("ROVER_AMQP__RPC_ATTEMPT_TIMEOUT_MS", "5000"),
        ],
        &HashMap::new(),
    )
    .await;
    // Replicated on all three nodes: the turns queue, the dead-letter queues, the tools queue.
    let queues = stack
        .vhost
        .list("list_queues", &["name", "type", "members"]);
    for name in [
        "rover.turns",
        "rover.turns.dead",
        "rover.tools.dead",
        "rover.tools",
    ] {
        let queue = queues.iter().find(|q| q["name"] == name).unwrap();
        assert_eq!(queue["type"], "quorum", "{queue}");
        assert_eq!(
            queue["members"].as_array().map(Vec::len),
            Some(3),
            "{name} has a member on every node: {queue}"
        );
    }
    let warm = stack.say(ADMIN, "chat-warm", "List the departments").await;
    assert_eq!(warm.finish_reason(), Some("stop"));

    let mut killed = Vec::new();
    let mut all_turns = Vec::new();
    for round in 0..2 {
        let leader = stack.vhost.leader("rover.turns").expect("a leader");
        eprintln!("round {round}: the turns queue leads on rover-c{leader}; 200 turns start");
        assert!(
            !killed.contains(&leader),
            "another node each time: {killed:?} then {leader}"
        );
        let started_before = turns_started(&stack).await;
        let turns = futures::future::join_all((0..200).map(|i| {
            let (user, text) = LOAD[i % LOAD.len()];
            let stack = &stack;
            async move { load_turn(stack, user, &format!("chat-{round}-{i}"), text).await }
        }));
        let fault = async {
            let mut every = tokio::time::interval(std::time::Duration::from_millis(20));
            while turns_started(&stack).await < started_before + 40.0 {
                every.tick().await;
            }
            tokio::task::spawn_blocking(move || cluster.kill(leader))
                .await
                .unwrap();
            let killed_at = std::time::Instant::now();
            let before = turns_started(&stack).await;
            // New turns are served again: one sent after the kill is accepted (the gateway is
            // back on a live node and the turns queue's new leader confirmed its publish), and
            // the worker takes turns from that queue again. (The new turn itself then waits its
            // place behind the load's backlog, FIFO, before it runs.)
            let mut probe = 0;
            let mut pace = tokio::time::interval(std::time::Duration::from_millis(100));
            let (accepted, chat, response) = loop {
                pace.tick().await;
                probe += 1;
                let messages = serde_json::json!([{ "id": "u1", "role": "user", "parts": [{ "type": "text", "text": "What's the date today?" }] }]);
                let chat = format!("chat-probe-{round}-{probe}");
                let response = stack
                    .post(stack.gateway, &stack.token(ADMIN), &chat, messages)
                    .await;
                if response.status() == 200 {
                    break (killed_at.elapsed(), chat, response);
                }
                assert!(
                    killed_at.elapsed() < std::time::Duration::from_secs(30),
                    "no new turn accepted 30 s after the kill: {}",
                    response.status()
                );
            };
            while turns_started(&stack).await <= before {
                pace.tick().await;
            }
            let taking = killed_at.elapsed();
            let live = stack::read_stream(response).await;
            let probe = or_resumed(&stack, ADMIN, &chat, live).await;
            assert_eq!(
                probe.finish_reason(),
                Some("stop"),
                "the new turn is served: {probe:#?}"
            );
            (accepted, taking, killed_at.elapsed())
        };
        let ((turns, took), (accepted, taking, served)) = tokio::join!(
            async {
                let started = std::time::Instant::now();
                (turns.await, started.elapsed())
            },
            fault
        );
        eprintln!(
            "round {round}: killed rover-c{leader} (the turns queue's leader) while 200 turns ran \
             ({took:?} for all); after the kill a new turn was accepted in {accepted:?}, the worker \
             took turns again in {taking:?}, and the new turn finished in {served:?}"
        );
        assert!(
            accepted < std::time::Duration::from_secs(10)
                && taking < std::time::Duration::from_secs(10),
            "new turns served again within 10 s of the kill: accepted in {accepted:?}, taken in {taking:?}"
        );
        let outcomes: Vec<Result<bool, String>> = turns.iter().map(served_or_retryable).collect();
        let lost: Vec<&String> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
        assert!(
            lost.is_empty(),
            "every turn served or told to retry: {lost:#?}"
        );
        let retryable = outcomes.iter().filter(|o| matches!(o, Ok(false))).count();
        eprintln!(
            "round {round}: {} served, {retryable} told to try again",
            200 - retryable
        );
        killed.push(leader);
        all_turns.extend(turns);
        tokio::task::spawn_blocking(move || cluster.start_node(leader))
            .await
            .unwrap();
    }

    // Writes: each exactly once, each with its audit row, and none the client was not told of
    // unless its turn was the one told to try again.
    let reported = all_turns
        .iter()
        .flat_map(|t| t.tools())
        .filter(|tool| tool == "record_attendance")
        .count();
    let inbox = stack.count("SELECT count(*) FROM tool_call_inbox").await;
    let unaudited = stack
        .count(
            "SELECT count(*) FROM tool_call_inbox i WHERE NOT EXISTS \
             (SELECT 1 FROM audit_log a WHERE a.call_id = i.call_id)",
        )
        .await;
    assert_eq!(unaudited, 0, "no write without its audit row");
    writes_once(&stack, inbox).await;
    assert!(
        inbox >= i64::try_from(reported).unwrap(),
        "every reported write is in the inbox: {reported} reported, {inbox} in the inbox"
    );
    let depths = drained(&stack);
    for queue in ["rover.turns", "rover.tools"] {
        assert_eq!(depths.get(queue), Some(&0), "{queue} drained: {depths:?}");
    }
}
