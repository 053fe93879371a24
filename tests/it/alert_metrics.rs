//! The series the alerts read beyond the turn counters move when the real thing happens: a turn
//! waiting in `rover.turns` with no worker left shows as messages and no consumer (the gateway's
//! gauges); approvals waiting in two schools are counted across both, past row-level security
//! (the worker's gauges); a model call answered by a fallback endpoint is counted.

use std::time::Duration;

use crate::approvals::require_approvals;
use crate::observability::{sample, scrape};
use crate::prometheus::eventually;
use crate::stack::{Service, Stack};

const TURNS_MESSAGES: &str = r#"rover_queue_messages{queue="rover.turns"}"#;
const TURNS_CONSUMERS: &str = r#"rover_queue_consumers{queue="rover.turns"}"#;

#[tokio::test]
async fn a_turn_waiting_with_no_worker_shows_as_messages_and_no_consumer() {
    let stack = Stack::start().await;
    let gateway = stack.gateway_metrics;
    let metrics = scrape(&stack, gateway).await;
    assert_eq!(sample(&metrics, TURNS_CONSUMERS), 1.0, "{metrics}");
    assert_eq!(sample(&metrics, TURNS_MESSAGES), 0.0, "{metrics}");
    // The tool server consumes once per RPC server (one per core).
    assert!(
        sample(&metrics, r#"rover_queue_consumers{queue="rover.tools"}"#) >= 1.0,
        "{metrics}"
    );

    stack.kill(Service::Worker);
    stack.exited(Service::Worker).await;
    // The gateway accepts the turn and publishes it; nothing takes it. (Its stream stays open
    // while the response is held.)
    let messages = serde_json::json!([{ "id": "u1", "role": "user",
        "parts": [{ "type": "text", "text": "List the departments" }] }]);
    let response = stack
        .post(
            stack.gateway,
            &stack.token("admin@hill.school"),
            "chat-no-worker",
            messages,
        )
        .await;
    assert_eq!(response.status(), 200);
    eventually(
        "the turn waits in rover.turns with no consumer",
        Duration::from_secs(30),
        || async {
            let metrics = scrape(&stack, gateway).await;
            (sample(&metrics, TURNS_MESSAGES) == 1.0 && sample(&metrics, TURNS_CONSUMERS) == 0.0)
                .then_some(())
                .ok_or(metrics)
        },
    )
    .await;
    drop(response);
}

#[tokio::test]
async fn approvals_waiting_in_every_school_are_counted_with_the_oldest_ones_age() {
    let stack = Stack::start().await;
    let worker = stack.worker_http;
    let metrics = scrape(&stack, worker).await;
    assert_eq!(
        sample(&metrics, "rover_approvals_waiting"),
        0.0,
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, "rover_approval_oldest_wait_seconds"),
        0.0,
        "{metrics}"
    );

    // A write waiting for approval in each school: the worker's pool sets no school, so only a
    // read past row-level security sees both.
    for (email, school, chat) in [
        ("admin@hill.school", stack.db.ids.hill, "chat-approval-hill"),
        (
            "admin@lakeside.college",
            stack.db.ids.lakeside,
            "chat-approval-lakeside",
        ),
    ] {
        require_approvals(&stack, school.as_uuid()).await;
        let paused = stack
            .say(email, chat, "Create a department called Sciences")
            .await;
        assert_eq!(
            paused.of_type("tool-approval-request").len(),
            1,
            "{:#?}",
            paused.chunks
        );
    }
    let metrics = scrape(&stack, worker).await;
    assert_eq!(
        sample(&metrics, "rover_approvals_waiting"),
        2.0,
        "{metrics}"
    );
    let oldest = sample(&metrics, "rover_approval_oldest_wait_seconds");
    assert!(oldest > 0.0 && oldest < 300.0, "{metrics}");

    // One runs out of time unanswered: it can no longer be answered, so it is not counted, even
    // before the sweep marks it.
    sqlx::query(
        "UPDATE approvals SET expires_at = now() - interval '1 second' WHERE school_id = $1",
    )
    .bind(stack.db.ids.lakeside.as_uuid())
    .execute(&stack.owner)
    .await
    .unwrap();
    let metrics = scrape(&stack, worker).await;
    assert_eq!(
        sample(&metrics, "rover_approvals_waiting"),
        1.0,
        "{metrics}"
    );
}

#[tokio::test]
async fn a_model_call_answered_by_a_fallback_endpoint_is_counted() {
    let stack = Stack::start().await;
    // The worker again, its primary endpoint a port nothing listens on (refused: retried, then
    // passed on), the scripted model its fallback; its health listener on a port of our choosing.
    let free = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    };
    let (closed, worker) = (free(), free());
    let primary = format!("http://{closed}/v1");
    let fallbacks = format!(
        r#"[{{base_url="{}", name="rover-scripted"}}]"#,
        stack.model_url()
    );
    let listen = worker.to_string();
    stack.restart(
        Service::Worker,
        &[],
        &[
            ("ROVER_MODEL__BASE_URL", primary.as_str()),
            ("ROVER_MODEL__FALLBACKS", fallbacks.as_str()),
            ("ROVER_MODEL__BACKOFF_MS", "10"),
            ("ROVER_HTTP__LISTEN", listen.as_str()),
        ],
    );
    let before = sample(&scrape(&stack, worker).await, "rover_model_fallbacks_total");
    let turn = stack
        .say("admin@hill.school", "chat-fallback", "List the departments")
        .await;
    assert_eq!(turn.finish_reason(), Some("stop"), "{:#?}", turn.chunks);
    let metrics = scrape(&stack, worker).await;
    // Both of the turn's model steps (the call, then the answer) fell back.
    assert_eq!(
        sample(&metrics, "rover_model_fallbacks_total") - before,
        2.0,
        "{metrics}"
    );
}
