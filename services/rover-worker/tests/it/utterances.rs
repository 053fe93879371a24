//! Each scripted utterance, for the right demo user, ends with the right tool calls and the right
//! effects in Postgres; for a user without the permission or capability, it is answered without a
//! write.

use rover_contracts::context::Subagent;
use rover_contracts::wire::FinishReason;

use crate::helpers::spawn_stack;

const ADMIN: &str = "admin@hill.school";
const AMINA: &str = "amina@hill.school";
const DOS: &str = "dos@hill.school";

#[tokio::test]
async fn supervisor_utterances_call_the_right_tools_and_change_the_right_rows() {
    let stack = spawn_stack().await;

    let turn = stack
        .turn(ADMIN, "Create a department called Sciences")
        .await;
    assert_eq!(turn.tool_names(), ["create_department"]);
    assert_eq!(turn.finish(), FinishReason::Stop);
    assert!(
        turn.text().contains("Sciences") && turn.text().contains("across the whole school"),
        "{}",
        turn.text()
    );
    let hill = stack.db.ids.hill.as_uuid();
    let sciences = stack
        .count(&format!(
            "SELECT count(*) FROM departments WHERE name = 'Sciences' AND school_id = '{hill}'"
        ))
        .await;
    assert_eq!(sciences, 1);

    let turn = stack.turn(ADMIN, "List the departments").await;
    assert_eq!(turn.tool_names(), ["list_departments"]);
    assert!(turn.text().contains("Languages"), "{}", turn.text());

    let turn = stack
        .turn(ADMIN, "Rename the Languages department to Modern Languages")
        .await;
    assert_eq!(turn.tool_names(), ["list_departments", "rename_department"]);
    let renamed = stack.count(&format!("SELECT count(*) FROM departments WHERE name = 'Modern Languages' AND school_id = '{hill}'")).await;
    assert_eq!(renamed, 1);

    let turn = stack.turn(ADMIN, "How many students do we have?").await;
    assert_eq!(turn.tool_names(), ["get_enrollment_summary"]);
    let total = stack
        .count(&format!(
            "SELECT count(*) FROM students WHERE school_id = '{hill}'"
        ))
        .await;
    assert!(
        turn.text().contains(&total.to_string()),
        "{} should contain {total}",
        turn.text()
    );

    let turn = stack.turn(ADMIN, "Find the student Nakato").await;
    assert_eq!(turn.tool_names(), ["find_students"]);
    assert!(turn.text().contains("Nakato"), "{}", turn.text());

    let turn = stack.turn(ADMIN, "What's the date today?").await;
    assert_eq!(turn.tool_names(), ["get_current_date"]);
    assert!(turn.text().contains(&stack.db.ids.year), "{}", turn.text());

    let turn = stack.turn(ADMIN, "What can you do?").await;
    assert_eq!(turn.tool_names(), ["list_agent_map"]);
    assert!(turn.text().contains("create_department"), "{}", turn.text());
}

#[tokio::test]
async fn the_class_teacher_subagent_records_attendance() {
    let stack = spawn_stack().await;
    let turn = stack
        .turn(
            AMINA,
            "Record attendance for S1 Blue: everyone present except Nakato",
        )
        .await;
    assert_eq!(
        turn.tool_calls(),
        [
            (None, "task".to_owned()),
            (Some(Subagent::ClassTeacher), "record_attendance".to_owned()),
        ]
    );
    let nakato = stack.db.ids.student("Nakato Sarah").as_uuid();
    let absent = stack
        .count(&format!(
            "SELECT count(*) FROM attendance WHERE NOT present AND student_id = '{nakato}'"
        ))
        .await;
    assert_eq!(absent, 1);
    let present = stack
        .count("SELECT count(*) FROM attendance WHERE present")
        .await;
    assert_eq!(present, 4);
    assert_eq!(turn.finish(), FinishReason::Stop);
}

#[tokio::test]
async fn the_subject_teacher_subagent_records_marks() {
    let stack = spawn_stack().await;
    let turn = stack
        .turn(
            AMINA,
            "Record Mathematics marks for S1 Blue: Nakato 78, Mugisha 64",
        )
        .await;
    assert_eq!(
        turn.tool_calls(),
        [
            (None, "task".to_owned()),
            (Some(Subagent::SubjectTeacher), "record_marks".to_owned()),
        ]
    );
    let nakato = stack.db.ids.student("Nakato Sarah").as_uuid();
    assert_eq!(
        stack
            .count(&format!(
                "SELECT count(*) FROM marks WHERE student_id = '{nakato}' AND score = 78"
            ))
            .await,
        1
    );
    assert_eq!(stack.count("SELECT count(*) FROM marks").await, 2);
}

#[tokio::test]
async fn the_director_of_studies_subagent_assigns_a_teacher() {
    let stack = spawn_stack().await;
    let turn = stack
        .turn(DOS, "Assign Okello to teach Physics in S1 Blue")
        .await;
    assert_eq!(
        turn.tool_calls(),
        [
            (None, "task".to_owned()),
            (
                Some(Subagent::DirectorOfStudies),
                "assign_subject_teacher".to_owned()
            ),
        ]
    );
    let ids = &stack.db.ids;
    let sql = format!(
        "SELECT count(*) FROM teaching_assignments WHERE teacher_id = '{}' AND class_id = '{}' AND subject_id = '{}'",
        ids.user("okello@hill.school").as_uuid(),
        ids.class("S1 Blue").as_uuid(),
        ids.subject("Physics").as_uuid()
    );
    assert_eq!(stack.count(&sql).await, 1);
}

#[tokio::test]
async fn what_cannot_be_placed_is_a_question_and_the_turn_waits() {
    let stack = spawn_stack().await;
    let turn = stack
        .turn(ADMIN, "Please sort out the thing from yesterday")
        .await;
    assert_eq!(turn.tool_names(), ["ask_user"]);
    assert_eq!(turn.finish(), FinishReason::ToolCalls);
}

#[tokio::test]
async fn users_without_the_permission_or_capability_get_an_answer_and_no_write() {
    let stack = spawn_stack().await;
    let before = stack.count("SELECT (SELECT count(*) FROM departments) + (SELECT count(*) FROM attendance) + (SELECT count(*) FROM marks) + (SELECT count(*) FROM teaching_assignments)").await;

    let turn = stack
        .turn("bursar@hill.school", "Create a department called Sciences")
        .await;
    assert!(turn.tool_names().is_empty(), "{:?}", turn.tool_names());
    assert!(
        turn.text().to_lowercase().contains("can't"),
        "{}",
        turn.text()
    );

    let turn = stack
        .turn(
            "okello@hill.school",
            "Record attendance for S1 Blue: everyone present except Nakato",
        )
        .await;
    assert!(
        turn.tool_names().is_empty(),
        "okello is no class teacher: {:?}",
        turn.tool_names()
    );
    let turn = stack
        .turn(
            "bursar@hill.school",
            "Assign Okello to teach Physics in S1 Blue",
        )
        .await;
    assert!(turn.tool_names().is_empty(), "{:?}", turn.tool_names());
    assert!(!turn.text().is_empty());

    let after = stack.count("SELECT (SELECT count(*) FROM departments) + (SELECT count(*) FROM attendance) + (SELECT count(*) FROM marks) + (SELECT count(*) FROM teaching_assignments)").await;
    assert_eq!(before, after);
    assert_eq!(stack.count("SELECT count(*) FROM audit_log").await, 0);
}

#[tokio::test]
async fn an_answer_to_ask_user_becomes_that_calls_result_and_the_turn_continues() {
    use rover_contracts::ids::ThreadId;
    use rover_contracts::wire::{TurnEventKind, TurnInput};
    let stack = spawn_stack().await;
    let thread = ThreadId::new();
    let question = stack
        .turn_in(
            thread,
            ADMIN,
            TurnInput::Message {
                text: "Please sort out the thing from yesterday".into(),
            },
        )
        .await;
    assert_eq!(question.finish(), FinishReason::ToolCalls);
    let call_id = question
        .events
        .iter()
        .find_map(|e| match &e.event {
            TurnEventKind::ToolInputAvailable {
                tool_call_id,
                tool_name,
                ..
            } if tool_name == "ask_user" => Some(tool_call_id.clone()),
            _ => None,
        })
        .expect("an ask_user call");
    let answer = TurnInput::AskUserAnswer {
        tool_call_id: call_id.clone(),
        output: serde_json::json!("The attendance for S1 Blue"),
    };
    let reply = stack.turn_in(thread, ADMIN, answer).await;
    assert_eq!(reply.finish(), FinishReason::Stop);
    assert!(!reply.text().is_empty());
    // The model saw the whole thread from the server's store, with the answer as the call's result.
    let requests = stack.model_requests().await;
    let last = requests.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        last.iter()
            .any(|m| m["role"] == "user"
                && m["content"] == "Please sort out the thing from yesterday")
    );
    let result = last
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the answer as a tool message");
    assert_eq!(result["tool_call_id"], call_id);
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("The attendance for S1 Blue")
    );
}

#[tokio::test]
async fn sandbox_files_become_artifacts_and_skills_are_read_on_demand() {
    let stack = spawn_stack().await;
    let turn = stack
        .turn(
            ADMIN,
            "Save a note called plan saying Term 3 starts on Monday",
        )
        .await;
    assert_eq!(turn.tool_names(), ["write_file", "save_artifact"]);
    assert!(turn.tool_errors().is_empty(), "{:?}", turn.tool_errors());
    let content: Vec<u8> =
        sqlx::query_scalar("SELECT content FROM artifacts WHERE filename = 'plan'")
            .fetch_one(&stack.owner)
            .await
            .unwrap();
    assert_eq!(content, b"Term 3 starts on Monday");

    let turn = stack.turn(ADMIN, "Read the scope-context skill").await;
    assert_eq!(turn.tool_names(), ["read_file"]);
    assert!(turn.tool_errors().is_empty(), "{:?}", turn.tool_errors());
    assert!(
        turn.text().to_lowercase().contains("scopecontext"),
        "{}",
        turn.text()
    );
}
