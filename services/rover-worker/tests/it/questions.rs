//! The thread stays valid whatever the model does with its tool calls: `ask_user` beside other
//! calls is refused with a result of its own, a thread stored with an unanswered call is
//! completed before the model sees it, and a local tool's arguments are checked against the
//! schema the model was shown before anything runs. (The scripted model refuses, as OpenAI does,
//! a request whose tool calls lack results.) And the chats' files: old ones are swept when the
//! worker starts.

use rover_contracts::ids::{ThreadId, TurnId};
use rover_contracts::wire::{FinishReason, TurnInput};
use serde_json::{Value, json};

use crate::helpers::{Knobs, Stack, spawn_stack, spawn_stack_with};

const ADMIN: &str = "admin@hill.school";

fn message(text: &str) -> TurnInput {
    TurnInput::Message {
        text: text.to_owned(),
    }
}

/// Asserts every assistant tool call in `messages` is followed, before the next non-tool
/// message, by its result.
fn assert_every_call_answered(messages: &[Value]) {
    let mut pending: Vec<&str> = Vec::new();
    for message in messages {
        if message["role"] == "tool" {
            let id = message["tool_call_id"].as_str().unwrap();
            assert!(pending.contains(&id), "a result for an unknown call {id}");
            pending.retain(|p| *p != id);
            continue;
        }
        assert!(pending.is_empty(), "calls without results: {pending:?}");
        pending = message["tool_calls"]
            .as_array()
            .map(|calls| calls.iter().map(|c| c["id"].as_str().unwrap()).collect())
            .unwrap_or_default();
    }
    assert!(pending.is_empty(), "calls without results: {pending:?}");
}

/// The thread's stored history, as the worker will load it.
async fn history(stack: &Stack, thread: ThreadId) -> Vec<Value> {
    let mut tx = rover_domain::begin_tenant(&stack.db.pool, stack.db.ids.hill)
        .await
        .unwrap();
    let history = rover_turnstore::conversation_log::history(&mut tx, thread)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    history
}

#[tokio::test]
async fn ask_user_beside_another_call_is_refused_and_the_thread_stays_valid() {
    let stack = spawn_stack().await;
    let thread = ThreadId::new();
    let turn = stack
        .turn_in(
            thread,
            ADMIN,
            message("Check the date and ask me which day I mean"),
        )
        .await;
    assert_eq!(turn.tool_names(), ["get_current_date", "ask_user"]);
    assert_eq!(turn.finish(), FinishReason::Stop, "the turn does not wait");
    let errors = turn.tool_errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("ask_user must be the only tool call"),
        "{errors:?}"
    );
    assert!(
        turn.text().contains("could not ask you yet"),
        "{}",
        turn.text()
    );

    // Every call of the stored step has its result, and nothing waits for an answer.
    let stored = history(&stack, thread).await;
    assert_every_call_answered(&stored);
    assert_eq!(rover_agent::pending_question(&stored), None);

    // The next message is accepted, and the model is sent a well-formed thread.
    let next = stack
        .turn_in(thread, ADMIN, message("What's the date today?"))
        .await;
    assert_eq!(next.finish(), FinishReason::Stop);
    assert!(next.errors().is_empty(), "{:?}", next.errors());
    assert!(next.text().starts_with("Today is"), "{}", next.text());
    let requests = stack.model_requests().await;
    let last = requests.last().unwrap()["messages"].as_array().unwrap();
    assert_every_call_answered(last);
}

#[tokio::test]
async fn a_new_message_instead_of_an_answer_is_accepted_and_the_question_gets_a_result() {
    let stack = spawn_stack().await;
    let thread = ThreadId::new();
    let question = stack
        .turn_in(
            thread,
            ADMIN,
            message("Please sort out the thing from yesterday"),
        )
        .await;
    assert_eq!(question.finish(), FinishReason::ToolCalls);
    // The staff member ignores the question and asks something else.
    let next = stack
        .turn_in(thread, ADMIN, message("What's the date today?"))
        .await;
    assert!(next.errors().is_empty(), "{:?}", next.errors());
    assert!(next.text().starts_with("Today is"), "{}", next.text());
    let requests = stack.model_requests().await;
    assert_every_call_answered(requests.last().unwrap()["messages"].as_array().unwrap());
}

#[tokio::test]
async fn a_stored_thread_with_an_unanswered_call_is_completed_before_the_model_sees_it() {
    let stack = spawn_stack().await;
    let thread = ThreadId::new();
    // A thread stored before ask_user had to be asked alone: the date call has no result.
    let broken = [
        json!({ "role": "user", "content": "Check the date and ask me which day I mean" }),
        json!({ "role": "assistant", "content": null, "tool_calls": [
            { "id": "0-date", "type": "function", "function": { "name": "get_current_date", "arguments": "{}" } },
            { "id": "0-ask", "type": "function", "function": { "name": "ask_user", "arguments": "{\"question\":\"Which day?\"}" } },
        ] }),
    ];
    let mut tx = rover_domain::begin_tenant(&stack.db.pool, stack.db.ids.hill)
        .await
        .unwrap();
    rover_turnstore::threads::ensure_thread(&mut tx, thread, stack.db.ids.user(ADMIN))
        .await
        .unwrap();
    rover_turnstore::conversation_log::append(&mut tx, thread, TurnId::new(), &broken)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let answer = TurnInput::AskUserAnswer {
        tool_call_id: "0-ask".to_owned(),
        output: json!("Today"),
    };
    let reply = stack.turn_in(thread, ADMIN, answer).await;
    assert!(reply.errors().is_empty(), "{:?}", reply.errors());
    assert_eq!(reply.finish(), FinishReason::Stop);
    let requests = stack.model_requests().await;
    let sent = requests.last().unwrap()["messages"].as_array().unwrap();
    assert_every_call_answered(sent);
    let filled = sent
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "0-date")
        .expect("the date call's result");
    assert!(
        filled["content"]
            .as_str()
            .unwrap()
            .contains("has no result"),
        "{filled}"
    );
}

#[tokio::test]
async fn local_tool_arguments_are_checked_against_their_schema_before_running() {
    let stack = spawn_stack().await;
    // Every name fits the file system (under 255 bytes), but the path is longer than the 500
    // characters `write_file`'s schema allows.
    let name = ["a".repeat(200), "b".repeat(200), "c".repeat(150)].join("/");
    let turn = stack
        .turn(ADMIN, &format!("Save a note called {name} saying hello"))
        .await;
    assert_eq!(turn.tool_names(), ["write_file"]);
    let errors = turn.tool_errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("Invalid arguments for write_file")
            && errors[0].contains("Nothing was run"),
        "{errors:?}"
    );
    assert!(
        errors[0].chars().count() < 600,
        "the argument is not echoed whole"
    );

    // Nothing was written anywhere in the sandboxes.
    let mut pending = vec![stack.sandbox_dir().to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            assert!(
                entry.file_type().unwrap().is_dir(),
                "{} was written",
                entry.path().display()
            );
            pending.push(entry.path());
        }
    }
}

#[tokio::test]
async fn sandboxes_unused_for_too_long_are_removed_when_the_worker_starts() {
    fn prepare(base: &std::path::Path) {
        let (school, user) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
        for (thread, days) in [("old", 31), ("recent", 1)] {
            let dir = base.join(format!("{school}/{user}/{thread}"));
            std::fs::create_dir_all(dir.join("notes")).unwrap();
            std::fs::write(dir.join("notes/plan.md"), "plan").unwrap();
            let age = std::time::Duration::from_secs(days * 24 * 60 * 60);
            std::fs::File::open(&dir)
                .unwrap()
                .set_modified(std::time::SystemTime::now() - age)
                .unwrap();
        }
    }
    let stack = spawn_stack_with(Knobs {
        prepare_sandboxes: Some(prepare),
        ..Knobs::default()
    })
    .await;
    // The sweep runs before the worker consumes its first turn.
    let turn = stack.turn(ADMIN, "What's the date today?").await;
    assert_eq!(turn.finish(), FinishReason::Stop);

    let mut threads = Vec::new();
    for school in std::fs::read_dir(stack.sandbox_dir()).unwrap() {
        for user in std::fs::read_dir(school.unwrap().path()).unwrap() {
            for thread in std::fs::read_dir(user.unwrap().path()).unwrap() {
                threads.push(thread.unwrap().file_name().into_string().unwrap());
            }
        }
    }
    threads.sort();
    assert!(threads.contains(&"recent".to_owned()), "{threads:?}");
    assert!(!threads.contains(&"old".to_owned()), "{threads:?}");
}
