//! Feedback into evaluation: replies rated through `POST /api/chats/{id}/messages/{m}/feedback`
//! become `rover-eval` cases (`--from-feedback`) — the one rated up a regression case with the
//! tools and writes it made, which then passes on a fresh Rover; the one rated down a case for
//! review carrying the staff member's comment and the trace id.

use serde_json::{Value, json};

use crate::stack::Stack;

/// The last assistant message's id of `email`'s chat, read back from the history API.
async fn reply_id(stack: &Stack, email: &str, chat: &str) -> String {
    let chat = stack.get_json(email, &format!("/api/chats/{chat}")).await;
    chat["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "assistant"))
        .and_then(|m| m["id"].as_str())
        .unwrap_or_else(|| panic!("no reply in {chat:#}"))
        .to_owned()
}

async fn rate(stack: &Stack, email: &str, chat: &str, message: &str, body: Value) {
    let status = stack
        .http
        .post(format!(
            "http://{}/api/chats/{chat}/messages/{message}/feedback",
            stack.gateway
        ))
        .bearer_auth(stack.token(email))
        .json(&body)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 204);
}

#[tokio::test(flavor = "multi_thread")]
async fn rated_replies_become_eval_cases_and_the_one_rated_up_passes_again() {
    let stack = Stack::start().await;
    let admin = "admin@hill.school";
    stack
        .say(admin, "fb-write", "Create a department called Sciences")
        .await;
    stack.say(admin, "fb-read", "List the departments").await;
    let (write, read) = (
        reply_id(&stack, admin, "fb-write").await,
        reply_id(&stack, admin, "fb-read").await,
    );
    rate(&stack, admin, "fb-write", &write, json!({ "rating": "up" })).await;
    rate(
        &stack,
        admin,
        "fb-read",
        &read,
        json!({ "rating": "down", "comment": "It missed the Kololo ones" }),
    )
    .await;

    let text = rover_eval::feedback::cases_from_feedback(stack.db.owner_url())
        .await
        .expect("cases from feedback");
    let cases = rover_eval::cases::parse(&text).expect("the cases parse");
    assert_eq!(cases.len(), 2, "{text}");
    let up = &cases[0];
    assert_eq!(up.id, format!("feedback-{write}"));
    assert_eq!(up.user, admin);
    assert_eq!(up.text, "Create a department called Sciences");
    assert_eq!(up.kind, rover_eval::cases::Kind::Write);
    assert_eq!(up.tools, ["create_department"]);
    assert_eq!(up.writes.len(), 1, "{text}");
    assert_eq!(up.writes[0].event, "create.department");
    let down = &cases[1];
    assert_eq!(down.text, "List the departments");
    assert!(down.subsets.contains(&"needs-review".to_owned()), "{text}");
    assert!(text.contains("# said: It missed the Kololo ones"), "{text}");
    let trace: String =
        sqlx::query_scalar("SELECT trace_id FROM chat_feedback WHERE rating = 'down'")
            .fetch_one(&stack.owner)
            .await
            .unwrap();
    assert!(text.contains(&format!("# trace {trace}")), "{text}");

    // The case rated up passes on a fresh Rover (the scripted model).
    let report = rover_eval::run(rover_eval::Options {
        model: rover_eval::stack::ModelChoice::Scripted {
            rules: None,
            tool_calls: None,
        },
        cases: vec![up.clone()],
        subset: None,
        turn_timeout: std::time::Duration::from_secs(60),
        model_timeout_ms: 30_000,
        log_dir: None,
        on_result: None,
    })
    .await
    .expect("the eval runs");
    assert!(
        report.results.iter().all(|r| r.passed),
        "{}",
        report.table()
    );
}
