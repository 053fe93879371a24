//! A follow-up that refers back ("Rename it to Performing Arts"): the model reads earlier turns
//! as notes of what was done, with each call's arguments, and a note it writes itself for the
//! next call is that call — run, never shown as text.

use rover_contracts::ids::ThreadId;
use rover_contracts::wire::{FinishReason, TurnInput};

use crate::helpers::spawn_stack;

const ADMIN: &str = "admin@hill.school";

#[tokio::test]
async fn earlier_turns_are_notes_and_a_note_the_model_writes_is_the_call_it_makes() {
    let stack = spawn_stack().await;
    let thread = ThreadId::new();
    let text = |t: &str| TurnInput::Message { text: t.to_owned() };
    let created = stack
        .turn_in(thread, ADMIN, text("Create a department called Drama Club"))
        .await;
    assert_eq!(created.tool_names(), ["create_department"]);

    let renamed = stack
        .turn_in(thread, ADMIN, text("Now rename it to Performing Arts"))
        .await;
    assert_eq!(renamed.finish(), FinishReason::Stop, "{:?}", renamed.events);
    assert_eq!(renamed.tool_names(), ["rename_department"]);
    let said = renamed.text();
    assert!(
        !said.contains("What I did"),
        "the note is a call, not text: {said}"
    );
    assert!(said.contains("now Performing Arts"), "{said}");
    assert_eq!(
        stack
            .count(
                "SELECT count(*) FROM departments WHERE name = 'Performing Arts' \
                 AND NOT EXISTS (SELECT 1 FROM departments WHERE name = 'Drama Club')"
            )
            .await,
        1
    );
    assert_eq!(
        stack
            .count("SELECT count(*) FROM audit_log WHERE event = 'rename.department'")
            .await,
        1
    );

    // What the model read for the second turn: the first as a note with the call's arguments,
    // then its answer; no raw tool exchange of an earlier turn.
    let requests = stack.model_requests().await;
    let second = requests
        .iter()
        .find(|r| {
            r["messages"]
                .as_array()
                .and_then(|m| m.last())
                .is_some_and(|m| m["content"] == "Now rename it to Performing Arts")
        })
        .expect("the second turn's first request");
    let messages = second["messages"].as_array().unwrap();
    assert!(messages.iter().all(|m| m["role"] != "tool"), "{messages:?}");
    let note = messages
        .iter()
        .filter_map(|m| m["content"].as_str())
        .find(|c| c.starts_with("(What I did: create_department "))
        .expect("a note of the first turn");
    assert!(note.contains("\"name\":\"Drama Club\""), "{note}");
    assert!(note.contains("→ done)"), "{note}");
    // The thread keeps the call as a call.
    assert_eq!(
        stack
            .count(&format!(
                "SELECT count(*) FROM conversation_log WHERE thread_id = '{}' \
                 AND message #>> '{{tool_calls,0,function,name}}' = 'rename_department'",
                thread.as_uuid()
            ))
            .await,
        1
    );
}
