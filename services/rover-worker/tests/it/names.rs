//! Names as staff say them, end to end (scripted model, real broker and tool server): a name that
//! fits two students is never written on a guess — the worker asks which, with the candidates as
//! choices — and the staff member's answer lets the write run.

use rover_contracts::ids::ThreadId;
use rover_contracts::wire::{FinishReason, TurnEventKind, TurnInput};
use serde_json::Value;

use crate::helpers::spawn_stack;

const AMINA: &str = "amina@hill.school";

#[tokio::test]
async fn an_ambiguous_name_becomes_a_question_and_the_answer_lets_the_write_run() {
    let stack = spawn_stack().await;
    let thread = ThreadId::new();
    // Amina teaches Mathematics to S1 Blue (Nakato Sarah) and S2 Green (Nakato Mary).
    let asked = stack
        .turn_in(
            thread,
            AMINA,
            TurnInput::Message {
                text: "Give Nakato 75 for the Maths quiz".into(),
            },
        )
        .await;
    assert_eq!(
        asked.tool_names(),
        ["task", "record_marks", "ask_user"],
        "{:?}",
        asked.events
    );
    assert_eq!(asked.finish(), FinishReason::ToolCalls);
    let (call_id, input) = asked.question();
    let choices: Vec<&str> = input["choices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(choices.len(), 2, "{input}");
    assert!(
        choices
            .iter()
            .any(|c| c.starts_with("Nakato Mary (S2 Green")),
        "{choices:?}"
    );
    let sarah_choice = *choices
        .iter()
        .find(|c| c.starts_with("Nakato Sarah (S1 Blue"))
        .expect("Nakato Sarah among the choices");
    assert!(
        input["question"].as_str().unwrap().contains("Nakato"),
        "{input}"
    );
    // Nothing was written on a guess.
    assert_eq!(stack.count("SELECT count(*) FROM marks").await, 0);
    assert_eq!(stack.count("SELECT count(*) FROM audit_log").await, 0);

    let answered = stack
        .turn_in(
            thread,
            AMINA,
            TurnInput::AskUserAnswer {
                tool_call_id: call_id,
                output: Value::String(sarah_choice.to_owned()),
            },
        )
        .await;
    assert_eq!(
        answered.finish(),
        FinishReason::Stop,
        "{:?}",
        answered.events
    );
    assert_eq!(answered.tool_names(), ["task", "record_marks"]);
    let ids = &stack.db.ids;
    let sarah = ids.student("Nakato Sarah").as_uuid();
    assert_eq!(
        stack
            .count(&format!(
                "SELECT count(*) FROM marks WHERE student_id = '{sarah}' AND score = 75"
            ))
            .await,
        1
    );
    assert_eq!(stack.count("SELECT count(*) FROM marks").await, 1);
    // One audit row, with the words that named the student and the id they resolved to.
    assert_eq!(stack.count("SELECT count(*) FROM audit_log").await, 1);
    assert_eq!(
        stack
            .count(&format!(
                "SELECT count(*) FROM audit_log WHERE named #>> '{{students,0,id}}' = '{sarah}' \
                 AND named #>> '{{students,0,said}}' LIKE 'Nakato Sarah%' \
                 AND named #>> '{{subject,said}}' = 'Maths'"
            ))
            .await,
        1
    );
}

#[tokio::test]
async fn a_question_is_asked_by_rover_not_by_the_specialist() {
    let stack = spawn_stack().await;
    let asked = stack.turn(AMINA, "Give Nakato 75 for the Maths quiz").await;
    // The subagent's loop ends at the failed call (no model call after it); the question is
    // Rover's, so the thread waits on it and its answer can be given.
    let calls = asked.tool_calls();
    assert_eq!(
        calls
            .last()
            .map(|(subagent, name)| (subagent.is_none(), name.as_str())),
        Some((true, "ask_user")),
        "{calls:?}"
    );
    let requests = stack.model_requests().await;
    let after_failure = requests
        .iter()
        .filter(|r| {
            r["messages"]
                .as_array()
                .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
        })
        .count();
    assert_eq!(after_failure, 0, "no model call saw the failed result");
}

#[tokio::test]
async fn a_class_nobody_said_is_not_written_on_and_the_name_is_asked_about() {
    let stack = spawn_stack().await;
    // The double hands the mark on "for S1 Blue", which Amina never said: with that class the
    // name would fit one student (Nakato Sarah), a guess. The worker drops it, the students'
    // names must tell the class, and "Nakato" fits two.
    let asked = stack
        .turn(AMINA, "Put Nakato down for 75 in the Maths quiz")
        .await;
    assert_eq!(
        asked.tool_names(),
        ["task", "record_marks", "ask_user"],
        "{:?}",
        asked.events
    );
    let record = asked
        .events
        .iter()
        .find_map(|e| match &e.event {
            TurnEventKind::ToolInputAvailable {
                tool_name, input, ..
            } if tool_name == "record_marks" => Some(input.clone()),
            _ => None,
        })
        .expect("the record_marks call");
    assert!(record.get("class").is_none(), "shown as it ran: {record}");
    assert_eq!(record["subject"], "Maths", "said: kept");
    let (_, input) = asked.question();
    assert_eq!(
        input["choices"].as_array().map(Vec::len),
        Some(2),
        "{input}"
    );
    assert_eq!(stack.count("SELECT count(*) FROM marks").await, 0);
    assert_eq!(stack.count("SELECT count(*) FROM audit_log").await, 0);
}
