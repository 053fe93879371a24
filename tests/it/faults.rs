//! Faults: processes killed at the worst moments, connections dropped. After each, a checker over
//! the database, the streams and the queues: the turn completed or failed visibly, every write
//! happened exactly once (audit rows = inbox rows = distinct write call ids = the rows changed),
//! no queue holds a stuck message, and the services serve again.

use futures::StreamExt as _;
use serde_json::json;

use crate::checker::{ADMIN, DOS, check, no_open_turns, say_watching, sciences};
use crate::stack::{Service, Stack};

/// The tool server dies at `point` during a write; it is restarted (without the fault) and the
/// worker's retry under the same call id completes the turn. The write happens exactly once.
async fn tool_server_dies_at(point: &str) {
    let stack = Stack::start_with(
        &[],
        &[
            ("ROVER_FAULT_CRASH_AT", point),
            ("ROVER_AMQP__RPC_ATTEMPT_TIMEOUT_MS", "1500"),
        ],
    )
    .await;
    let died = stack.exited(Service::Toolserver);
    let turn = stack.say(ADMIN, "chat-crash", "Create a department called Sciences");
    let restart = async {
        let status = died.await;
        assert!(!status.success(), "the tool server aborted at {point}");
        stack.restart(Service::Toolserver, &["ROVER_FAULT_CRASH_AT"], &[]);
    };
    let (turn, ()) = tokio::join!(turn, restart);
    assert_eq!(
        turn.finish_reason(),
        Some("stop"),
        "{point}: {:#?}",
        turn.chunks
    );
    assert!(
        turn.text().contains("I created the Sciences department"),
        "{point}: {}",
        turn.text()
    );
    assert_eq!(sciences(&stack).await, 1);
    check(&stack, &turn, 1).await;
}

#[tokio::test]
async fn the_tool_server_dying_before_its_commit_writes_once() {
    tool_server_dies_at("toolserver.before-commit").await;
}

#[tokio::test]
async fn the_tool_server_dying_after_its_commit_before_replying_writes_once() {
    tool_server_dies_at("toolserver.after-commit").await;
}

#[tokio::test]
async fn the_tool_server_dying_after_replying_before_its_ack_writes_once() {
    tool_server_dies_at("toolserver.after-reply").await;
}

/// A tool call that kills every tool server that runs it. The tools queue has no delivery limit
/// (each request is settled before it runs, so a dead server loses its delivery rather than
/// handing it on): the bound is the worker's attempts under the one call id. After the last
/// attempt the tool fails, the turn ends, and nothing runs the call again.
#[tokio::test]
async fn a_tool_call_that_kills_every_tool_server_stops_after_the_callers_attempts() {
    let stack = Stack::start_with(
        &[],
        &[
            ("ROVER_FAULT_CRASH_AT", "toolserver.before-commit"),
            ("ROVER_AMQP__RPC_ATTEMPT_TIMEOUT_MS", "1500"),
            ("ROVER_AMQP__RPC_ATTEMPTS", "3"),
        ],
    )
    .await;
    let turn = stack.say(
        ADMIN,
        "chat-poison-tool",
        "Create a department called Sciences",
    );
    // Kubernetes' part: every time the tool server dies, start it again — with the fault while
    // the call has attempts left, then without it, so a fourth run would write.
    let crashes = async {
        let mut crashes = 0;
        while crashes < 3 {
            let status = stack.exited(Service::Toolserver).await;
            assert!(!status.success(), "the tool server aborted");
            crashes += 1;
            let keep_fault: &[&str] = if crashes < 3 {
                &[]
            } else {
                &["ROVER_FAULT_CRASH_AT"]
            };
            stack.restart(Service::Toolserver, keep_fault, &[]);
        }
        crashes
    };
    let (turn, crashes) = tokio::join!(turn, crashes);
    assert_eq!(crashes, 3, "one crash per attempt");
    assert!(
        turn.finish_reason().is_some(),
        "the turn ended visibly: {:#?}",
        turn.chunks
    );
    assert_eq!(turn.tools(), ["create_department"], "{:#?}", turn.chunks);
    assert_eq!(sciences(&stack).await, 0, "no delivery ran the call again");
    check(&stack, &turn, 0).await;
}

#[tokio::test]
async fn a_worker_killed_mid_turn_is_resumed_by_another_without_repeating_a_call() {
    // A slow model keeps the turn running after its write.
    let stack = Stack::start_with_model(&["--first-token-delay-ms", "300"]).await;
    let mut killed = false;
    let turn = say_watching(
        &stack,
        DOS,
        "chat-resume",
        "Assign Okello to teach Physics in S1 Blue",
        |chunk| {
            // The write's result is out: the specialist's answer and Rover's are still to come.
            if !killed
                && chunk["type"] == "tool-output-available"
                && chunk["output"]["data"]["teacher"].is_object()
            {
                killed = true;
                stack.kill(Service::Worker);
                stack.restart(Service::Worker, &[], &[]);
            }
        },
    )
    .await;
    assert!(killed, "the worker was killed mid-turn: {:#?}", turn.chunks);
    assert_eq!(turn.finish_reason(), Some("stop"), "{:#?}", turn.chunks);
    assert_eq!(turn.tools(), ["task", "assign_subject_teacher"]);
    let text = turn.text();
    assert!(
        text.starts_with("Done — James Okello now teaches Physics to S1 Blue")
            && text.matches("Done").count() == 1,
        "one coherent answer: {text}"
    );
    // The write ran once: the tool server saw its call id once (the resumed worker replayed the
    // recorded result instead of calling again).
    let metrics = reqwest::get(format!("http://{}/metrics", stack.toolserver_http))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let calls: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("rover_tool_calls_total{event=\"assign.subject_teacher\""))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum();
    assert_eq!(calls, 1.0, "assign.subject_teacher ran once:\n{metrics}");
    check(&stack, &turn, 1).await;
    no_open_turns(&stack).await;
}

#[tokio::test]
async fn a_turn_that_keeps_killing_workers_ends_with_an_error_and_is_dead_lettered() {
    let stack = Stack::start_with(
        &[],
        &[
            ("ROVER_FAULT_CRASH_AT", "worker.turn"),
            ("ROVER_AMQP__DELIVERY_LIMIT", "3"),
        ],
    )
    .await;
    let turn = stack.say(ADMIN, "chat-poison", "Create a department called Sciences");
    // Kubernetes' part: every time the worker dies, start it again (with the same fault).
    let restarts = async {
        let mut restarts = 0;
        loop {
            let status = stack.exited(Service::Worker).await;
            if status.success() {
                break;
            }
            restarts += 1;
            stack.restart(Service::Worker, &[], &[]);
            if restarts == 2 {
                break;
            }
        }
        restarts
    };
    let (turn, restarts) = tokio::join!(turn, restarts);
    assert_eq!(restarts, 2, "two deliveries killed a worker");
    assert_eq!(turn.finish_reason(), Some("error"), "{:#?}", turn.chunks);
    let errors = turn.of_type("error");
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0]["errorText"]
            .as_str()
            .unwrap()
            .contains("failed repeatedly"),
        "{errors:?}"
    );
    assert_eq!(sciences(&stack).await, 0);
    // The turn is settled (rejected to the dead-letter queue) just after its `finish` is sent.
    let mut depths = stack.queue_depths();
    for _ in 0..50 {
        if depths.get("rover.turns.dead") == Some(&1) {
            break;
        }
        depths = stack.queue_depths();
    }
    assert_eq!(depths.get("rover.turns.dead"), Some(&1), "{depths:?}");
    assert_eq!(depths.get("rover.turns"), Some(&0), "{depths:?}");
    // Stopped is ended: it no longer counts against the user or blocks the chat.
    no_open_turns(&stack).await;
}

#[tokio::test]
async fn a_gateway_killed_mid_stream_is_resumed_whole_on_another_replica() {
    let mut stack = Stack::start_with_model(&["--chunk-delay-ms", "40"]).await;
    let other = stack.another_gateway();
    let token = stack.token(ADMIN);
    let messages = json!([{ "id": "u1", "role": "user", "parts": [{ "type": "text", "text": "Rename the Languages department to Modern Languages" }] }]);
    let response = stack
        .post(stack.gateway, &token, "chat-gateway-dies", messages)
        .await;
    let mut bytes = response.bytes_stream();
    let first = bytes.next().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("\"start\""));
    stack.kill(Service::Gateway);
    // The client's connection breaks; it resumes on the other replica.
    while let Some(Ok(_)) = bytes.next().await {}
    let resumed = stack
        .http
        .get(format!("http://{other}/api/chat/chat-gateway-dies/stream"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    let turn = crate::stack::read_stream(resumed).await;
    assert_eq!(turn.finish_reason(), Some("stop"), "{:#?}", turn.chunks);
    assert_eq!(turn.tools(), ["list_departments", "rename_department"]);
    assert!(turn.text().contains("is now called Modern Languages"));
    assert_eq!(turn.of_type("start").len(), 1, "the whole turn, once");
}

#[tokio::test]
async fn closing_every_broker_connection_mid_turn_loses_nothing() {
    let stack = Stack::start_with_model(&["--first-token-delay-ms", "200"]).await;
    let mut closed = false;
    let turn = say_watching(
        &stack,
        ADMIN,
        "chat-connections",
        "Create a department called Sciences",
        |chunk| {
            if !closed && chunk["type"] == "tool-input-available" {
                closed = true;
                // Blocking for the length of a rabbitmqctl call is fine for this test.
                rover_testkit::rabbitmqctl(&[
                    "close_all_connections",
                    "--vhost",
                    &stack.vhost.name,
                    "fault injected",
                ]);
            }
        },
    )
    .await;
    assert!(closed);
    // The gateway's subscription was cut too: the client resumes to see the whole turn.
    let turn = if turn.done {
        turn
    } else {
        let resumed = stack
            .http
            .get(format!(
                "http://{}/api/chat/chat-connections/stream",
                stack.gateway
            ))
            .bearer_auth(stack.token(ADMIN))
            .send()
            .await
            .unwrap();
        crate::stack::read_stream(resumed).await
    };
    assert!(
        turn.finish_reason().is_some(),
        "the turn completed or failed visibly: {:#?}",
        turn.chunks
    );
    let sciences = sciences(&stack).await;
    assert!(sciences <= 1);
    check(&stack, &turn, sciences).await;
}

#[tokio::test]
async fn the_brokers_consumer_timeout_outlasts_the_longest_turn() {
    let printed = rover_stack::command("rover-worker")
        .unwrap()
        .arg("--print-config")
        .output()
        .unwrap();
    let config: toml::Value = toml::from_str(&String::from_utf8_lossy(&printed.stdout)).unwrap();
    let longest_turn = config["agent"]["turn_timeout_ms"].as_integer().unwrap();
    let answer = rover_testkit::rabbitmqctl(&[
        "-q",
        "eval",
        "application:get_env(rabbit, consumer_timeout).",
    ]);
    let timeout: i64 = answer
        .trim()
        .trim_start_matches("{ok,")
        .trim_end_matches('}')
        .parse()
        .unwrap_or_else(|_| panic!("consumer_timeout is not set explicitly: {answer}"));
    assert!(
        timeout > longest_turn,
        "RabbitMQ would cancel a worker mid-turn: consumer_timeout {timeout} ms <= turn_timeout_ms {longest_turn}"
    );
}

#[tokio::test]
async fn a_worker_dying_between_recording_and_publishing_the_end_still_ends_the_stream() {
    let stack = Stack::start_with(&[], &[("ROVER_FAULT_CRASH_AT", "worker.finish-recorded")]).await;
    let died = stack.exited(Service::Worker);
    let turn = stack.say(
        ADMIN,
        "chat-unsent-end",
        "Create a department called Sciences",
    );
    let restart = async {
        assert!(
            !died.await.success(),
            "the worker aborted with its end unsent"
        );
        stack.restart(Service::Worker, &["ROVER_FAULT_CRASH_AT"], &[]);
    };
    let (turn, ()) = tokio::join!(turn, restart);
    assert_eq!(turn.finish_reason(), Some("stop"), "{:#?}", turn.chunks);
    assert!(turn.text().contains("I created the Sciences department"));
    check(&stack, &turn, 1).await;
    no_open_turns(&stack).await;
}
