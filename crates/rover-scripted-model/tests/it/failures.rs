//! Deliberate failures, for the worker's model-failure tests: a stream that drops mid-way, and
//! an HTTP 500 with an OpenAI-style error body.

use async_openai::error::OpenAIError;
use serde_json::{Value, json};

use crate::helpers::{Chat, context, spawn_model};

fn failure_chat(text: &str) -> Chat {
    Chat::new(Some(&context("admin")), &["list_departments", "ask_user"]).user(text)
}

#[tokio::test]
async fn mid_stream_failure_ends_the_async_openai_stream_with_an_error() {
    let model = spawn_model().await;
    let (partial, error) = model
        .try_stream(&failure_chat("Trigger a model failure"), true)
        .await
        .expect_err("the stream must fail");
    assert!(
        matches!(error, OpenAIError::StreamError(_) | OpenAIError::Reqwest(_)),
        "a transport error, not a clean end: {error:?}"
    );
    assert!(
        !partial.text.is_empty(),
        "some content arrived first: {partial:#?}"
    );
    assert!(partial.finish.is_none(), "no finish_reason: {partial:#?}");
    assert!(partial.usage.is_none(), "no usage chunk: {partial:#?}");
}

#[tokio::test]
async fn mid_stream_failure_sends_no_done_on_the_wire() {
    let model = spawn_model().await;
    let body = serde_json::to_value(failure_chat("Trigger a model failure").request(true, false))
        .expect("request JSON");
    let (status, sse) = model
        .http("POST", "/v1/chat/completions", Some(&body))
        .await;
    assert_eq!(status, 200);
    assert!(sse.starts_with("data: {"), "{sse}");
    assert!(!sse.contains("[DONE]"), "{sse}");
    assert!(!sse.contains("finish_reason\":\"stop"), "{sse}");
}

#[tokio::test]
async fn mid_stream_failure_without_streaming_fails_the_request() {
    let model = spawn_model().await;
    let error = model
        .complete(&failure_chat("Trigger a model failure"))
        .await
        .expect_err("a dropped connection");
    assert!(
        matches!(
            error,
            OpenAIError::Reqwest(_) | OpenAIError::JSONDeserialize(..)
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn http_500_is_an_openai_style_server_error() {
    let model = spawn_model().await;
    let chat = failure_chat("Trigger a server error");
    let body = serde_json::to_value(chat.request(false, false)).expect("request JSON");
    let (status, text) = model
        .http("POST", "/v1/chat/completions", Some(&body))
        .await;
    assert_eq!(status, 500);
    let error: Value = serde_json::from_str(&text).expect("a JSON error body");
    assert_eq!(error["error"]["type"], "server_error");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("test double"))
    );

    // async-openai retries server errors, then reports the status.
    let failed = model.complete(&chat).await.expect_err("a server error");
    match failed {
        OpenAIError::ApiError(api) => assert_eq!(api.status_code.as_u16(), 500),
        other => panic!("expected an API error, got {other:?}"),
    }
    let (_, recorded) = model.http("GET", "/v1/requests", None).await;
    let recorded: Vec<Value> = serde_json::from_str(&recorded).expect("JSON");
    assert!(recorded.len() >= 2, "every attempt is recorded");
    assert_eq!(
        recorded[0]["messages"][1],
        json!({"role": "user", "content": "Trigger a server error"})
    );
}
