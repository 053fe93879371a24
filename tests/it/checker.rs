//! The fault suites' checker and the helpers they share.

use std::collections::{HashMap, HashSet};

use futures::StreamExt as _;
use serde_json::{Value, json};

use crate::stack::{Stack, Turn, parse_sse};

pub(crate) const ADMIN: &str = "admin@hill.school";
pub(crate) const DOS: &str = "dos@hill.school";

/// Posts one message and reads the stream, calling `on_chunk` on each chunk as it arrives.
pub(crate) async fn say_watching(
    stack: &Stack,
    email: &str,
    chat: &str,
    text: &str,
    mut on_chunk: impl FnMut(&Value),
) -> Turn {
    let messages =
        json!([{ "id": "u1", "role": "user", "parts": [{ "type": "text", "text": text }] }]);
    let response = stack
        .post(stack.gateway, &stack.token(email), chat, messages)
        .await;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let mut body = String::new();
    let mut pending = String::new();
    let mut bytes = response.bytes_stream();
    while let Some(chunk) = bytes.next().await {
        let chunk = String::from_utf8_lossy(&chunk.unwrap()).into_owned();
        body.push_str(&chunk);
        pending.push_str(&chunk);
        while let Some(end) = pending.find('\n') {
            let line: String = pending.drain(..=end).collect();
            if let Some(data) = line.trim_end().strip_prefix("data: ")
                && let Ok(value) = serde_json::from_str::<Value>(data)
            {
                on_chunk(&value);
            }
        }
    }
    parse_sse(status, headers, &body)
}

/// The checker: writes exactly once, a coherent stream, empty work queues, services serving.
pub(crate) async fn check(stack: &Stack, turn: &Turn, writes: i64) {
    assert!(
        turn.done,
        "the stream ended with [DONE]: {:#?}",
        turn.chunks
    );
    assert_eq!(turn.of_type("finish").len(), 1, "one finish");
    assert_eq!(turn.of_type("start").len(), 1, "one start");
    let ids: Vec<&str> = turn
        .of_type("tool-input-available")
        .iter()
        .map(|c| c["toolCallId"].as_str().unwrap())
        .collect();
    let unique: HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(ids.len(), unique.len(), "no tool call shown twice: {ids:?}");
    let outputs =
        turn.of_type("tool-output-available").len() + turn.of_type("tool-output-error").len();
    if turn.finish_reason() == Some("stop") {
        assert_eq!(
            outputs,
            ids.len(),
            "every tool call of a completed turn has one result"
        );
    } else {
        assert!(outputs <= ids.len(), "no tool call has two results");
        assert_eq!(turn.of_type("error").len(), 1, "a failed turn says so once");
    }

    writes_once(stack, writes).await;
    let depths = drained(stack);
    for queue in ["rover.turns", "rover.tools"] {
        assert_eq!(
            depths.get(queue),
            Some(&0),
            "{queue} holds no stuck message: {depths:?}"
        );
    }
    // And it serves again.
    let again = stack
        .say(ADMIN, "chat-after-the-fault", "List the departments")
        .await;
    assert_eq!(again.finish_reason(), Some("stop"), "{:#?}", again.chunks);
}

/// No turn still counts against its user, school or thread: the worker closed each turn, once,
/// in the transaction that recorded its `finish`, however often it was delivered.
pub(crate) async fn no_open_turns(stack: &Stack) {
    assert_eq!(
        stack.count("SELECT count(*) FROM open_turns").await,
        0,
        "every ended turn was closed"
    );
}

/// The stack's queue depths once the work queues have drained, or as they stand after about 50
/// looks: each message is acked just after its answer went out, so a queue may still hold it for
/// a moment after the client saw the end.
pub(crate) fn drained(stack: &Stack) -> HashMap<String, u64> {
    let mut depths = stack.queue_depths();
    for _ in 0..50 {
        if depths.get("rover.turns") == Some(&0) && depths.get("rover.tools") == Some(&0) {
            break;
        }
        depths = stack.queue_depths();
    }
    depths
}

/// How many departments called "Sciences" Kampala Hill School has: the write the fault tests make.
pub(crate) async fn sciences(stack: &Stack) -> i64 {
    stack
        .count(&format!(
            "SELECT count(*) FROM departments WHERE name = 'Sciences' AND school_id = '{}'",
            stack.db.ids.hill
        ))
        .await
}

/// Every write happened exactly once: audit rows = distinct write call ids = inbox rows = `writes`,
/// however often a call was delivered.
pub(crate) async fn writes_once(stack: &Stack, writes: i64) {
    let audit = stack
        .count("SELECT count(*) FROM audit_log WHERE call_id IS NOT NULL")
        .await;
    let distinct = stack
        .count("SELECT count(DISTINCT call_id) FROM audit_log WHERE call_id IS NOT NULL")
        .await;
    let inbox = stack.count("SELECT count(*) FROM tool_call_inbox").await;
    assert_eq!(
        (audit, distinct, inbox),
        (writes, writes, writes),
        "audit rows = distinct write call ids = inbox rows = the writes made"
    );
}
