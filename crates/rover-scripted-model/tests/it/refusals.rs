//! Like a real model, the test double calls only tools it was offered, respects the capabilities
//! in the runtime context, and reports a tool's error instead of carrying on.

use serde_json::json;

use crate::helpers::{Chat, WHOLE_SCHOOL, context, ok, spawn_model, spawn_model_with_rules};

#[tokio::test]
async fn a_tool_that_is_not_offered_is_never_called() {
    let model = spawn_model().await;
    let chat = Chat::new(
        Some(&context("bursar")),
        &["get_current_date", "list_agent_map", "ask_user"],
    )
    .user("Create a department called Sciences");
    let turn = model.stream(&chat).await;
    assert_eq!(
        turn.only_text(),
        "I can't create departments for you: your access in this school doesn't include it."
    );
}

#[tokio::test]
async fn a_missing_capability_gets_the_unavailable_text() {
    let model = spawn_model().await;
    // Okello teaches but is no class teacher; `task` is offered (he has the subject teacher).
    let chat = Chat::new(
        Some(&context("okello")),
        &["get_current_date", "ask_user", "task"],
    )
    .user("Record attendance for S1 Blue: everyone present except Nakato");
    assert_eq!(
        model.stream(&chat).await.only_text(),
        "I can't record attendance for you: you aren't class teacher of a class in this school."
    );
}

#[tokio::test]
async fn without_a_runtime_context_capabilities_do_not_hold() {
    let model = spawn_model().await;
    let chat =
        Chat::new(None, &["ask_user", "task"]).user("Assign Okello to teach Physics in S1 Blue");
    assert_eq!(
        model.stream(&chat).await.only_text(),
        "I can't assign teachers for you: that is for the director of studies."
    );
}

#[tokio::test]
async fn a_later_step_whose_tool_is_not_offered_says_unavailable() {
    let model = spawn_model_with_rules(
        r#"
        [[rule]]
        name = "two-steps"
        when = "look then write"
        unavailable = "I may look but not write."
        steps = [
          { call = { tool = "look" } },
          { call = { tool = "write" } },
          { say = "Written." },
        ]
        "#,
    )
    .await;
    let mut chat = Chat::new(None, &["look"]).user("Look then write");
    let turn = model.stream(&chat).await;
    assert_eq!(turn.only_call().0, "look");
    chat.answer(&turn, &[ok(json!({}), WHOLE_SCHOOL)]);
    assert_eq!(
        model.stream(&chat).await.only_text(),
        "I may look but not write."
    );
}

#[tokio::test]
async fn an_error_envelope_stops_the_rule() {
    let model = spawn_model().await;
    let mut chat = Chat::new(
        Some(&context("admin")),
        &["list_departments", "rename_department"],
    )
    .user("Rename the Languages department to Modern Languages");
    let turn = model.stream(&chat).await;
    chat.answer(
        &turn,
        &[json!({"error": "Permission denied: read:Department"})],
    );
    assert_eq!(
        model.stream(&chat).await.only_text(),
        "I couldn't do that: Permission denied: read:Department"
    );
}

#[tokio::test]
async fn on_error_can_be_overridden_per_rule() {
    let model = spawn_model_with_rules(
        r#"
        [[rule]]
        name = "careful"
        when = "try"
        on_error = "The tool said no ({{error}})."
        steps = [{ call = { tool = "t" } }, { say = "Fine." }]
        "#,
    )
    .await;
    let mut chat = Chat::new(None, &["t"]).user("try it");
    let turn = model.stream(&chat).await;
    chat.answer(&turn, &[json!({"error": "Not found: class"})]);
    assert_eq!(
        model.stream(&chat).await.only_text(),
        "The tool said no (Not found: class)."
    );
}

#[tokio::test]
async fn a_name_that_matches_nothing_is_said_plainly_instead_of_a_bad_call() {
    let model = spawn_model().await;
    let mut chat = Chat::new(
        Some(&context("admin")),
        &["list_departments", "rename_department"],
    )
    .user("Rename the Drama department to Theatre");
    let turn = model.stream(&chat).await;
    chat.answer(
        &turn,
        &[ok(json!([{"id": "x", "name": "Languages"}]), WHOLE_SCHOOL)],
    );
    assert_eq!(
        model.stream(&chat).await.only_text(),
        "I couldn't find result.0.data[name=match.1].id in what I was given, so I stopped there."
    );
}
