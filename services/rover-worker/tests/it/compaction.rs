//! Long threads: a 300-turn thread still answers, every request the model is sent stays under
//! the context budget (prompt and tools counted), the oldest turns become a stored summary, a
//! large earlier tool result is a stub naming its call, and no tool call is cut from its result.

use rover_agent::compact::{self, SUMMARY_HEADING};
use rover_contracts::ids::{ThreadId, TurnId};
use rover_contracts::wire::{FinishReason, TurnInput};
use serde_json::{Value, json};

use crate::helpers::{Knobs, spawn_stack_with};

const BUDGET: usize = 12_000;
const TOOL_RESULT_MAX: usize = 500;

/// Turn `n` of the seeded thread: a question, a `list_departments` call, its result (large in
/// turn 297), the answer.
fn seeded_turn(n: usize) -> Vec<Value> {
    let id = format!("seeded-{n}-call");
    let result = if n == 297 {
        json!({ "data": vec!["Languages"; 2_000], "scopeContext": "across the whole school" })
    } else {
        json!({ "data": [format!("Department {n}")], "scopeContext": "across the whole school" })
    };
    vec![
        json!({ "role": "user", "content": format!("Request number {n}: list the departments") }),
        json!({ "role": "assistant", "content": null, "tool_calls": [{
            "id": id, "type": "function",
            "function": { "name": "list_departments", "arguments": "{}" } }] }),
        json!({ "role": "tool", "tool_call_id": id, "content": result.to_string() }),
        json!({ "role": "assistant", "content": format!("Answer number {n}: one department.") }),
    ]
}

/// The estimated tokens of a request as the model received it.
fn request_cost(request: &Value) -> usize {
    let all = |key: &str| {
        request[key].as_array().map_or(0, |items| {
            items.iter().map(compact::estimate).sum::<usize>()
        })
    };
    all("messages") + all("tools")
}

fn is_compaction(request: &Value) -> bool {
    request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .is_some_and(|text| text.starts_with("[rover:compact]"))
}

/// Every tool message in `messages` follows an assistant message that made that call.
fn pairs_are_whole(messages: &[Value]) -> bool {
    messages.iter().enumerate().all(|(i, message)| {
        message["role"] != "tool"
            || messages[..i].iter().any(|earlier| {
                earlier["tool_calls"]
                    .as_array()
                    .is_some_and(|calls| calls.iter().any(|c| c["id"] == message["tool_call_id"]))
            })
    })
}

#[tokio::test]
async fn a_300_turn_thread_answers_within_the_budget_through_a_stored_summary() {
    let stack = spawn_stack_with(Knobs {
        context: Some((BUDGET, TOOL_RESULT_MAX)),
        ..Knobs::default()
    })
    .await;
    let context = stack.context("admin@hill.school").await;
    let thread = ThreadId::new();
    let app = sqlx::PgPool::connect(stack.db.app_url())
        .await
        .expect("app pool");
    let mut tx = rover_domain::begin_tenant(&app, context.user_details.school.id)
        .await
        .expect("tenant");
    rover_turnstore::threads::ensure_thread(&mut tx, thread, context.user_details.user_id)
        .await
        .expect("thread");
    for n in 0..300 {
        rover_turnstore::conversation_log::append(&mut tx, thread, TurnId::new(), &seeded_turn(n))
            .await
            .expect("append");
    }
    tx.commit().await.expect("commit");

    let text = |t: &str| TurnInput::Message { text: t.to_owned() };
    let turn = stack
        .turn_in(thread, "admin@hill.school", text("List the departments"))
        .await;
    assert_eq!(turn.finish(), FinishReason::Stop, "{:?}", turn.errors());
    assert_eq!(turn.tool_names(), ["list_departments"]);
    assert!(!turn.text().is_empty());

    let requests = stack.model_requests().await;
    let (summaries, turns): (Vec<&Value>, Vec<&Value>) =
        requests.iter().partition(|r| is_compaction(r));
    assert!(!summaries.is_empty(), "the oldest turns were summarised");
    assert_eq!(turns.len(), 2, "the turn: a tool call, then the answer");
    for request in &requests {
        let cost = request_cost(request);
        assert!(
            cost <= BUDGET,
            "a request of ~{cost} tokens exceeds the budget of {BUDGET}"
        );
    }
    for request in &turns {
        let messages = request["messages"].as_array().expect("messages");
        let system = messages[0]["content"].as_str().expect("system prompt");
        assert!(
            !system.contains(SUMMARY_HEADING),
            "the summary is data: never in the system prompt"
        );
        let summary = messages[1]["content"].as_str().expect("the summary");
        assert_eq!(messages[1]["role"], "assistant", "Rover's own notes");
        assert!(summary.starts_with("<conversation_summary>"), "{summary}");
        assert!(summary.contains(SUMMARY_HEADING));
        assert!(summary.contains("Summary of the earlier conversation"));
        assert_eq!(
            messages.iter().filter(|m| m["role"] == "system").count(),
            1,
            "one system message"
        );
        assert!(
            pairs_are_whole(messages),
            "a tool result was cut from its call"
        );
        assert!(messages.len() < 300, "the thread was not sent whole");
        // Earlier turns reach the model as notes of what was done (`earlier_as_text`): the large
        // result's turn is recent enough to be kept, as its note and answer, without the result.
        assert!(
            messages
                .iter()
                .any(|m| m["content"].as_str().is_some_and(|c| c
                    .starts_with("(What I did: list_departments {} → done)")
                    && c.contains("Answer number 297"))),
            "the large result's turn is recent enough to be kept"
        );
        assert!(
            messages
                .iter()
                .all(|m| !m.to_string().contains("Languages\",\"Languages")),
            "the large result is not sent"
        );
    }
    let covers = stack
        .count(&format!(
            "SELECT summary_covers::bigint FROM threads WHERE id = '{}'",
            thread.as_uuid()
        ))
        .await;
    assert!(
        covers > 0 && covers < 1_200,
        "the summary covers {covers} messages"
    );
    let full = stack
        .count(&format!(
            "SELECT count(*) FROM conversation_log WHERE thread_id = '{}' AND message::text LIKE '%Languages%'",
            thread.as_uuid()
        ))
        .await;
    assert!(full >= 1, "the full tool result stays stored");

    // The next turn fits beside the stored summary without summarising again.
    let before = summaries.len();
    let again = stack
        .turn_in(thread, "admin@hill.school", text("List the departments"))
        .await;
    assert_eq!(again.finish(), FinishReason::Stop, "{:?}", again.errors());
    let requests = stack.model_requests().await;
    assert_eq!(requests.iter().filter(|r| is_compaction(r)).count(), before);
    assert!(requests.iter().all(|r| request_cost(r) <= BUDGET));
    // Summarising is paid for like any model call: every request is in the turns' usage.
    let paid = stack
        .count("SELECT coalesce(sum(model_calls), 0)::bigint FROM token_usage")
        .await;
    assert_eq!(usize::try_from(paid).unwrap(), requests.len());
}
