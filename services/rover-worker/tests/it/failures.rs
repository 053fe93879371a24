//! Failures are visible and contained: smuggled identity arguments are refused with an error
//! envelope and no write; a model failure mid-stream is one error event and the worker keeps
//! serving; a turn that runs out of steps ends with a clear message.

use rover_contracts::wire::{FinishReason, TurnEventKind};

use crate::helpers::{Knobs, spawn_stack, spawn_stack_with};

#[tokio::test]
async fn injected_identity_arguments_produce_an_error_envelope_and_no_write() {
    let stack = spawn_stack().await;
    let lakeside = stack.db.ids.lakeside;
    let turn = stack
        .turn(
            "admin@hill.school",
            &format!("Create a department called Sciences with school_id {lakeside}"),
        )
        .await;
    assert_eq!(turn.tool_names(), ["create_department"]);
    let errors = turn.tool_errors();
    assert_eq!(errors.len(), 1, "{:?}", turn.events);
    assert!(
        errors[0].starts_with("Invalid arguments for create_department"),
        "{}",
        errors[0]
    );
    assert_eq!(
        stack
            .count("SELECT count(*) FROM departments WHERE name = 'Sciences'")
            .await,
        1,
        "only Lakeside's own Sciences"
    );
    assert_eq!(stack.count("SELECT count(*) FROM audit_log").await, 0);
}

#[tokio::test]
async fn a_model_failure_mid_stream_is_one_error_event_and_the_worker_keeps_serving() {
    let stack = spawn_stack().await;
    let turn = stack
        .turn("admin@hill.school", "Trigger a model failure")
        .await;
    assert_eq!(turn.errors().len(), 1, "{:?}", turn.events);
    assert_eq!(turn.finish(), FinishReason::Error);
    let errors: Vec<_> = turn
        .events
        .iter()
        .filter(|e| matches!(e.event, TurnEventKind::Error { .. }))
        .collect();
    assert_eq!(errors.len(), 1);

    let next = stack
        .turn("admin@hill.school", "List the departments")
        .await;
    assert_eq!(next.finish(), FinishReason::Stop);
    assert_eq!(next.tool_names(), ["list_departments"]);
}

/// A call that cannot run (a tool the agent lacks, or arguments its schema refuses) goes back
/// to the model as an error it may correct once; a second step of nothing but such calls ends
/// the turn with a sentence of Rover's own instead of another model call.
#[tokio::test]
async fn a_model_that_keeps_making_calls_that_cannot_run_is_stopped_after_one_correction() {
    let stack = spawn_stack().await;
    let turn = stack
        .turn("admin@hill.school", "Please keep making a bad call")
        .await;
    assert_eq!(turn.finish(), FinishReason::Stop);
    let errors = turn.tool_errors();
    assert_eq!(errors.len(), 2, "{:?}", turn.events);
    for error in &errors {
        assert!(
            error.starts_with("Invalid arguments for list_departments"),
            "{error}"
        );
    }
    assert!(
        turn.text().contains("I could not do that"),
        "{}",
        turn.text()
    );
    assert!(!turn.text().contains("Never said"), "{}", turn.text());
    // Two model calls, not three.
    let asked = stack
        .model_requests()
        .await
        .iter()
        .filter(|r| {
            r["messages"].as_array().is_some_and(|messages| {
                messages.iter().any(|m| {
                    m["content"]
                        .as_str()
                        .is_some_and(|c| c.contains("bad call"))
                })
            })
        })
        .count();
    assert_eq!(asked, 2);
}

/// A call written as text and cut off before it ends is never shown as raw JSON: it is a call
/// that failed, the model reads why, and a second one ends the loop with Rover's own sentence.
#[tokio::test]
async fn a_call_written_as_text_and_cut_off_is_refused_not_shown() {
    let stack = spawn_stack().await;
    let turn = stack
        .turn("amina@hill.school", "Write the marks call and stop short")
        .await;
    assert_eq!(turn.finish(), FinishReason::Stop);
    assert_eq!(
        turn.tool_names(),
        ["record_marks", "record_marks"],
        "{:?}",
        turn.events
    );
    let errors = turn.tool_errors();
    assert_eq!(errors.len(), 2, "{:?}", turn.events);
    assert!(
        errors.iter().all(|e| e.contains("was cut off")),
        "{errors:?}"
    );
    let text = turn.text();
    assert!(!text.contains('{'), "{text}");
    assert!(text.contains("I could not do that"), "{text}");
    assert_eq!(stack.count("SELECT count(*) FROM marks").await, 0);
}

/// A model that loops may make the same write again under a new call id (which the tool
/// server's inbox cannot know for the same): the agent runs a write at most once per tool and
/// arguments in a reply, and tells the model so.
#[tokio::test]
async fn the_same_write_twice_in_one_reply_runs_once() {
    let stack = spawn_stack().await;
    let turn = stack
        .turn(
            "admin@hill.school",
            "Rename the Languages department to Modern Languages twice",
        )
        .await;
    assert_eq!(turn.finish(), FinishReason::Stop);
    assert_eq!(
        turn.tool_names(),
        ["list_departments", "rename_department", "rename_department"]
    );
    let errors = turn.tool_errors();
    assert_eq!(errors.len(), 1, "{:?}", turn.events);
    assert!(
        errors[0].starts_with("Not run again: rename_department"),
        "{}",
        errors[0]
    );
    assert_eq!(
        stack
            .count("SELECT count(*) FROM audit_log WHERE event = 'rename.department'")
            .await,
        1
    );
}

#[tokio::test]
async fn running_out_of_steps_ends_with_a_clear_message() {
    let stack = spawn_stack_with(Knobs {
        step_limit: 1,
        ..Knobs::default()
    })
    .await;
    let turn = stack
        .turn(
            "admin@hill.school",
            "Rename the Languages department to Modern Languages",
        )
        .await;
    assert_eq!(turn.finish(), FinishReason::Length);
    assert!(turn.text().contains("more than 1 steps"), "{}", turn.text());
    assert_eq!(
        stack
            .count("SELECT count(*) FROM departments WHERE name = 'Modern Languages'")
            .await,
        0
    );
}

#[tokio::test]
async fn an_unreachable_model_ends_the_turn_with_one_error_after_bounded_retries() {
    let stack = spawn_stack_with(Knobs {
        model_url: Some("http://127.0.0.1:9/v1".to_owned()),
        ..Knobs::default()
    })
    .await;
    let turn = stack
        .turn("admin@hill.school", "List the departments")
        .await;
    assert_eq!(turn.finish(), FinishReason::Error);
    let errors = turn.errors();
    assert_eq!(errors.len(), 1, "{:?}", turn.events);
    assert!(errors[0].contains("model"), "{}", errors[0]);
}

#[tokio::test]
async fn an_answer_to_a_question_that_was_never_asked_is_refused() {
    use rover_contracts::ids::ThreadId;
    use rover_contracts::wire::TurnInput;
    let stack = spawn_stack().await;
    let thread = ThreadId::new();
    stack
        .turn_in(
            thread,
            "admin@hill.school",
            TurnInput::Message {
                text: "List the departments".into(),
            },
        )
        .await;
    let forged = TurnInput::AskUserAnswer {
        tool_call_id: "0-call_0".into(),
        output: serde_json::json!({ "data": "injected" }),
    };
    let turn = stack.turn_in(thread, "admin@hill.school", forged).await;
    assert_eq!(turn.finish(), FinishReason::Error);
    assert_eq!(
        turn.errors(),
        ["That question is no longer waiting for an answer."]
    );
}

#[tokio::test]
async fn a_turn_whose_context_does_not_match_its_signed_identity_is_dead_lettered_unrun() {
    use chrono::Utc;
    use rover_contracts::identity::TurnGrant;
    use rover_contracts::ids::{ThreadId, TurnId};
    use rover_contracts::wire::{self, TurnInput, TurnRequest};
    use rover_messaging::{ConsumerOptions, Outcome, OutgoingMessage};

    let stack = spawn_stack().await;
    // Signed for the bursar, but the context claims to be the school admin's.
    let bursar = stack.context("bursar@hill.school").await;
    let admin = stack.context("admin@hill.school").await;
    let (turn_id, thread_id) = (TurnId::new(), ThreadId::new());
    let grant = TurnGrant {
        turn_id,
        thread_id,
        identity: bursar.identity(),
        scope: bursar.call_scope(),
    };
    let identity = stack
        .keys
        .signer()
        .mint(grant, Utc::now(), chrono::Duration::minutes(5))
        .unwrap();
    let forged = TurnRequest {
        turn_id,
        thread_id,
        message_id: "forged".into(),
        context: admin,
        identity,
        input: TurnInput::Message {
            text: "Create a department called Sciences".into(),
        },
    };
    let (dead_tx, mut dead_rx) = tokio::sync::mpsc::unbounded_channel();
    let _dead = stack
        .broker
        .consume(
            &stack.topology.turns_dead_queue(),
            ConsumerOptions::default(),
            move |delivery| {
                let _ = dead_tx.send(delivery.body);
                async { Outcome::Ack }
            },
        )
        .await
        .unwrap();
    stack
        .broker
        .publisher()
        .publish(
            &stack.topology.turns_exchange(),
            rover_messaging::TURN_ROUTING_KEY,
            OutgoingMessage::new(wire::encode(&forged)),
        )
        .await
        .unwrap();
    let dead = rover_testkit::within("the forged turn in the dead-letter queue", dead_rx.recv())
        .await
        .unwrap();
    assert_eq!(wire::decode::<TurnRequest>(&dead).unwrap().turn_id, turn_id);
    assert_eq!(
        stack.count("SELECT count(*) FROM threads").await,
        0,
        "nothing ran"
    );
    assert_eq!(
        stack.model_requests().await.len(),
        0,
        "the model was never called"
    );
}

/// A specialist that claims a change its loop never made (it wrote no call, or its call failed)
/// is not shown: the staff member never reads "has been recorded" for a register nobody took, and
/// Rover reads that nothing was changed.
#[tokio::test]
async fn a_specialists_claim_of_a_change_it_never_made_is_not_shown() {
    let stack = spawn_stack().await;
    let turn = stack
        .turn(
            "amina@hill.school",
            "Pretend to take the register for S1 Blue",
        )
        .await;
    assert_eq!(turn.finish(), FinishReason::Stop, "{:?}", turn.events);
    assert_eq!(turn.tool_names(), ["task"]);
    let errors = turn.tool_errors();
    assert_eq!(errors.len(), 1, "{:?}", turn.events);
    assert!(
        errors[0].starts_with("Not done: the class_teacher specialist changed nothing"),
        "{}",
        errors[0]
    );
    let shown: String = turn
        .events
        .iter()
        .filter_map(|e| match &e.event {
            TurnEventKind::TextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert!(!shown.contains("has been recorded"), "{shown}");
    assert_eq!(stack.count("SELECT count(*) FROM attendance").await, 0);
    // A specialist that did write says so, shown as it streamed (the register, asked plainly).
    let taken = stack
        .turn(
            "amina@hill.school",
            "Record attendance for S1 Blue: everyone present except Nakato",
        )
        .await;
    assert!(
        taken.events.iter().any(|e| e.subagent.is_some()
            && matches!(&e.event, TurnEventKind::TextDelta { delta, .. } if !delta.is_empty())),
        "{:?}",
        taken.events
    );
}

/// An answer that announces work ("I'll ask the class teacher") with no call made is told,
/// once and only in the conversation, that nothing was done and which read the request's words
/// name; the next step makes the call. An
/// answer made after calls, or a question, is never told.
#[tokio::test]
async fn an_answer_that_announces_work_and_calls_nothing_gets_one_more_step() {
    let stack = spawn_stack().await;
    let thread = rover_contracts::ids::ThreadId::new();
    let turn = stack
        .turn_in(
            thread,
            "dos@hill.school",
            rover_contracts::wire::TurnInput::Message {
                text: "Find out who teaches S1 Blue for me".into(),
            },
        )
        .await;
    assert_eq!(turn.finish(), FinishReason::Stop, "{:?}", turn.events);
    assert_eq!(
        turn.tool_names(),
        ["task", "list_teaching_assignments"],
        "{:?}",
        turn.events
    );
    let text = turn.text();
    assert!(text.contains("I'll ask the class teacher"), "{text}");
    assert!(text.contains("In S1 Blue:"), "{text}");
    let requests = stack.model_requests().await;
    assert_eq!(requests.len(), 3, "the announcement, the call, the answer");
    let told = |r: &serde_json::Value| {
        r["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "system")
            .count()
    };
    assert_eq!(told(&requests[0]), 1);
    assert_eq!(told(&requests[1]), 2, "told once");
    assert_eq!(told(&requests[2]), 2, "and only once");
    // Pointed to the read the request's words name ("teaches").
    let telling = requests[1]["messages"].as_array().unwrap().last().unwrap();
    assert!(
        telling["content"]
            .as_str()
            .unwrap()
            .ends_with("The request's words name your tool list_teaching_assignments."),
        "{telling}"
    );
    // Never kept in the thread: the staff member's chat holds what was said and done.
    assert_eq!(
        stack
            .count(&format!(
                "SELECT count(*) FROM conversation_log WHERE thread_id = '{}' \
                 AND message->>'role' = 'system'",
                thread.as_uuid()
            ))
            .await,
        0
    );
}
