//! The routes around the completions: recorded requests, the model list, health, unknown
//! routes, and the latency knobs benchmarks use.

use std::time::{Duration, Instant};

use rover_scripted_model::Config;
use serde_json::{Value, json};

use crate::helpers::{Chat, context, spawn_model, spawn_model_with};

#[tokio::test]
async fn recorded_requests_show_what_the_model_was_sent_in_order_and_can_be_cleared() {
    let model = spawn_model().await;
    let first =
        Chat::new(Some(&context("admin")), &["list_departments"]).user("List the departments");
    let second = Chat::new(None, &["get_enrollment_summary"]).user("How many students do we have?");
    model.stream(&first).await;
    model.complete(&second).await.expect("completes");

    let (status, body) = model.http("GET", "/v1/requests", None).await;
    assert_eq!(status, 200);
    let recorded: Vec<Value> = serde_json::from_str(&body).expect("a JSON array");
    assert_eq!(recorded.len(), 2);
    assert_eq!(recorded[0]["stream"], json!(true));
    assert_eq!(
        recorded[0]["tools"][0]["function"]["name"],
        "list_departments"
    );
    let system = recorded[0]["messages"][0]["content"]
        .as_str()
        .expect("system text");
    assert!(system.contains("<runtime_context>"), "{system}");
    assert_eq!(
        recorded[1]["messages"][1]["content"],
        "How many students do we have?"
    );
    assert_eq!(recorded[1]["model"], "gpt-test");

    let (status, _) = model.http("DELETE", "/v1/requests", None).await;
    assert_eq!(status, 204);
    let (_, body) = model.http("GET", "/v1/requests", None).await;
    assert_eq!(body, "[]");
}

/// A long run keeps only the last requests (`--keep-requests`): recording every one grew the
/// double by ≈ 90 MB a minute in the bench's soak.
#[tokio::test]
async fn a_bounded_record_keeps_only_the_last_requests() {
    let model = spawn_model_with(Config {
        keep_requests: Some(2),
        ..Config::default()
    })
    .await;
    for said in [
        "List the departments",
        "What can you do?",
        "What's the date?",
    ] {
        let chat = Chat::new(Some(&context("admin")), &["list_departments"]).user(said);
        model.complete(&chat).await.expect("completes");
    }
    let (_, body) = model.http("GET", "/v1/requests", None).await;
    let recorded: Vec<Value> = serde_json::from_str(&body).expect("a JSON array");
    let said: Vec<&Value> = recorded
        .iter()
        .map(|r| &r["messages"][1]["content"])
        .collect();
    assert_eq!(
        said,
        [&json!("What can you do?"), &json!("What's the date?")]
    );
}

#[tokio::test]
async fn models_health_and_unknown_routes() {
    let model = spawn_model_with(Config {
        model: "scripted-for-tests".to_owned(),
        ..Config::default()
    })
    .await;
    let (status, body) = model.http("GET", "/v1/models", None).await;
    assert_eq!(status, 200);
    let list: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(list["object"], "list");
    assert_eq!(list["data"][0]["id"], "scripted-for-tests");
    assert_eq!(list["data"][0]["object"], "model");

    assert_eq!(
        model.http("GET", "/healthz", None).await,
        (200, "ok".to_owned())
    );

    let (status, body) = model.http("GET", "/v1/embeddings", None).await;
    assert_eq!(status, 404);
    assert!(body.contains("invalid_request_error"), "{body}");

    let (status, body) = model
        .http(
            "POST",
            "/v1/chat/completions",
            Some(&json!({"model": "m", "messages": []})),
        )
        .await;
    assert_eq!(status, 400);
    assert!(body.contains("must not be empty"), "{body}");
}

#[tokio::test]
async fn latency_knobs_delay_the_first_chunk_and_space_the_rest() {
    let first_token = Duration::from_millis(300);
    let between = Duration::from_millis(20);
    let model = spawn_model_with(Config {
        first_token_delay: first_token,
        chunk_delay: between,
        ..Config::default()
    })
    .await;
    let chat = Chat::new(Some(&context("admin")), &["create_department"])
        .user("Create a department called Sciences");

    let started = Instant::now();
    let turn = model.stream(&chat).await;
    let total = started.elapsed();
    let first = turn.first_chunk_after.expect("a first chunk");
    assert!(first >= first_token, "first chunk after {first:?}");
    let spaced = first_token + between * u32::try_from(turn.chunks - 1).expect("few chunks");
    assert!(total >= spaced, "{} chunks took {total:?}", turn.chunks);

    let started = Instant::now();
    model.complete(&chat).await.expect("completes");
    assert!(
        started.elapsed() >= first_token,
        "non-streamed responses wait too"
    );
}
