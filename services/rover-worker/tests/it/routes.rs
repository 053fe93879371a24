//! Rover holds its specialists' tools: a call it makes to one is handed to the specialist that
//! owns the tool, which makes it as its one step. The client sees a `task` and the specialist's
//! call, as for any delegation; the thread keeps the call Rover's model made; no model call of the specialist's is made on either
//! side; the call keeps every guarantee a specialist's call has (one write, one audit row, a
//! name that fits two students asked about, the same write not made twice in one reply).

use rover_contracts::context::Subagent;
use rover_contracts::ids::ThreadId;
use rover_contracts::wire::{FinishReason, TurnEventKind, TurnInput};
use serde_json::Value;

use crate::helpers::{Transcript, spawn_stack};

const AMINA: &str = "amina@hill.school";

/// The input a call to `tool` was shown with.
fn input_of(turn: &Transcript, tool: &str) -> Value {
    turn.events
        .iter()
        .find_map(|e| match &e.event {
            TurnEventKind::ToolInputAvailable {
                tool_name, input, ..
            } if tool_name == tool => Some(input.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("a {tool} call in {:?}", turn.events))
}

/// The system prompts of the model requests made so far, by who they were for.
async fn requested_by(stack: &crate::helpers::Stack) -> Vec<String> {
    stack
        .model_requests()
        .await
        .iter()
        .map(|r| {
            let system = r["messages"][0]["content"].as_str().unwrap_or_default();
            if system.starts_with("You are Rover") {
                "rover".to_owned()
            } else if system.contains("specialist working for Rover") {
                "specialist".to_owned()
            } else {
                system.chars().take(80).collect()
            }
        })
        .collect()
}

#[tokio::test]
async fn a_call_to_a_specialists_tool_runs_with_that_specialist_and_no_model_call_of_its_own() {
    let stack = spawn_stack().await;
    let thread = ThreadId::new();
    let request = "Straight to the register for S1 Blue: Nakato is away";
    let turn = stack
        .turn_in(
            thread,
            AMINA,
            TurnInput::Message {
                text: request.into(),
            },
        )
        .await;
    assert_eq!(
        turn.tool_calls(),
        [
            (None, "task".to_owned()),
            (Some(Subagent::ClassTeacher), "record_attendance".to_owned()),
        ],
        "{:?}",
        turn.events
    );
    let task = input_of(&turn, "task");
    assert_eq!(task["subagent"], "class_teacher");
    assert_eq!(task["description"], request, "the staff member's words");
    assert_eq!(input_of(&turn, "record_attendance")["class"], "S1 Blue");
    // The call started as the `task` it became: a client never sees a tool row change its name.
    let started: Vec<&str> = turn
        .events
        .iter()
        .filter(|e| e.subagent.is_none())
        .filter_map(|e| match &e.event {
            TurnEventKind::ToolInputStart { tool_name, .. } => Some(tool_name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(started, ["task"]);
    assert_eq!(turn.finish(), FinishReason::Stop);
    assert!(turn.text().contains("Nakato Sarah"), "{}", turn.text());

    // Rover's model made the call and read its result; the specialist's model was never asked.
    assert_eq!(requested_by(&stack).await, ["rover", "rover"]);
    // The `task`'s result is the tool's own envelope, read as the result of the call the model
    // made.
    let requests = stack.model_requests().await;
    let last = requests.last().unwrap()["messages"].as_array().unwrap();
    let content = last.last().unwrap()["content"].as_str().unwrap();
    assert!(
        content.starts_with("<tool_result name=\"record_attendance\">"),
        "{content}"
    );
    let (_, envelope) = content.split_once('\n').unwrap();
    let (envelope, _) = envelope.rsplit_once('\n').unwrap();
    let result: Value = serde_json::from_str(envelope).unwrap();
    assert_eq!(result["data"]["class"]["name"], "S1 Blue", "{result}");

    let nakato = stack.db.ids.student("Nakato Sarah").as_uuid();
    assert_eq!(
        stack
            .count(&format!(
                "SELECT count(*) FROM attendance WHERE NOT present AND student_id = '{nakato}'"
            ))
            .await,
        1
    );
    assert_eq!(stack.count("SELECT count(*) FROM attendance").await, 5);
    assert_eq!(
        stack
            .count("SELECT count(*) FROM audit_log WHERE event = 'record.attendance'")
            .await,
        1
    );
    // The thread keeps the call as Rover's model made it, and its result under its name: in a
    // later turn the model reads the call to make again, not a `task` it never wrote.
    let thread_has = |sql: &str| {
        format!(
            "SELECT count(*) FROM conversation_log WHERE thread_id = '{}' AND {sql}",
            thread.as_uuid()
        )
    };
    assert_eq!(
        stack
            .count(&thread_has(
                "message #>> '{tool_calls,0,function,name}' = 'record_attendance'"
            ))
            .await,
        1
    );
    assert_eq!(
        stack
            .count(&thread_has(
                "message->>'role' = 'tool' \
                 AND message->>'content' LIKE '<tool_result name=\"record_attendance\">%'"
            ))
            .await,
        1
    );
    assert_eq!(
        stack
            .count(&thread_has("message::text LIKE '%\"task\"%'"))
            .await,
        0
    );
}

#[tokio::test]
async fn the_same_call_to_a_specialists_tool_twice_in_one_reply_runs_once() {
    let stack = spawn_stack().await;
    let turn = stack
        .turn(
            AMINA,
            "Straight to the register twice for S1 Blue: Nakato is away",
        )
        .await;
    assert_eq!(
        turn.tool_names(),
        ["task", "record_attendance", "task"],
        "the second is not handed on: {:?}",
        turn.events
    );
    assert!(
        turn.text().contains("Not run again: record_attendance"),
        "{}",
        turn.text()
    );
    assert_eq!(
        stack
            .count("SELECT count(*) FROM audit_log WHERE event = 'record.attendance'")
            .await,
        1
    );
    assert_eq!(stack.count("SELECT count(*) FROM attendance").await, 5);
}

#[tokio::test]
async fn a_name_that_fits_two_students_in_rovers_own_call_is_asked_about_then_written() {
    let stack = spawn_stack().await;
    let thread = ThreadId::new();
    let asked = stack
        .turn_in(
            thread,
            AMINA,
            TurnInput::Message {
                text: "Straight to the marks: Nakato gets 75 in the Maths quiz".into(),
            },
        )
        .await;
    assert_eq!(
        asked.tool_calls(),
        [
            (None, "task".to_owned()),
            (Some(Subagent::SubjectTeacher), "record_marks".to_owned()),
            (None, "ask_user".to_owned()),
        ],
        "{:?}",
        asked.events
    );
    assert_eq!(asked.finish(), FinishReason::ToolCalls);
    let (call_id, question) = asked.question();
    let sarah = question["choices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find(|c| c.starts_with("Nakato Sarah (S1 Blue"))
        .expect("Nakato Sarah among the choices")
        .to_owned();
    assert_eq!(stack.count("SELECT count(*) FROM marks").await, 0);
    assert_eq!(stack.count("SELECT count(*) FROM audit_log").await, 0);

    let answered = stack
        .turn_in(
            thread,
            AMINA,
            TurnInput::AskUserAnswer {
                tool_call_id: call_id,
                output: Value::String(sarah),
            },
        )
        .await;
    assert_eq!(
        answered.tool_calls(),
        [
            (None, "task".to_owned()),
            (Some(Subagent::SubjectTeacher), "record_marks".to_owned()),
        ],
        "{:?}",
        answered.events
    );
    assert_eq!(answered.finish(), FinishReason::Stop);
    let sarah = stack.db.ids.student("Nakato Sarah").as_uuid();
    assert_eq!(
        stack
            .count(&format!(
                "SELECT count(*) FROM marks WHERE student_id = '{sarah}' AND score = 75"
            ))
            .await,
        1
    );
    assert_eq!(stack.count("SELECT count(*) FROM audit_log").await, 1);
    let requested = requested_by(&stack).await;
    assert!(
        !requested.contains(&"specialist".to_owned()),
        "no specialist's model call: {requested:?}"
    );
}
