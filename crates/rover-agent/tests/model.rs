//! The model client against real HTTP endpoints (the scripted model test double): retry with
//! backoff and fallback to the next endpoint on overload, errors and silence before the first
//! chunk; refusals fail at once; every attempt is a span of its own.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story: its setup, the act and every assertion in one place"
)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use rover_agent::model::{ModelClient, ModelEndpoint, ModelError, ModelOptions, ModelStream};
use rover_scripted_model::{Config, FailFirst, ScriptedModel};
use serde_json::{Value, json};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt as _};

/// A scripted model served on a free port, and the base URL to reach it.
async fn serve(config: Config) -> (ScriptedModel, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let model = ScriptedModel::new(config);
    tokio::spawn(model.clone().serve(listener, std::future::pending()));
    (model, url)
}

fn failing(count: u32, status: u16) -> Config {
    Config {
        fail_first: Some(FailFirst { count, status }),
        ..Config::default()
    }
}

fn endpoint(url: &str, model: &str) -> ModelEndpoint {
    ModelEndpoint {
        base_url: url.to_owned(),
        api_key: "scripted".to_owned(),
        model: model.to_owned(),
        text_tool_calls: true,
        provider: "openai".to_owned(),
    }
}

fn client(primary: &str, fallbacks: &[&str], attempts: u32, timeout: Duration) -> ModelClient {
    ModelClient::new(ModelOptions {
        base_url: primary.to_owned(),
        api_key: "scripted".to_owned(),
        model: "primary".to_owned(),
        text_tool_calls: true,
        provider: "openai".to_owned(),
        fallbacks: fallbacks
            .iter()
            .enumerate()
            .map(|(i, url)| endpoint(url, &format!("fallback-{}", i + 1)))
            .collect(),
        timeout,
        attempts,
        backoff: Duration::from_millis(10),
    })
}

fn conversation() -> Vec<Value> {
    vec![json!({"role": "user", "content": "What can you do?"})]
}

/// Reads a started call to its end, returning how many chunks it had.
async fn drain(mut stream: ModelStream) -> usize {
    let mut chunks = 0;
    while let Some(chunk) = stream.chunks.next().await {
        chunk.expect("every chunk after the first arrives");
        chunks += 1;
    }
    chunks
}

#[tokio::test]
async fn a_streamed_request_carries_the_model_the_messages_and_the_tools_as_given() {
    let (model, url) = serve(Config::default()).await;
    let tool = json!({
        "type": "function",
        "function": {
            "name": "list_departments",
            "description": "Lists the school's departments — \"all\" of them.",
            "parameters": { "type": "object", "properties": {} },
        },
    });
    let client = client(&url, &[], 1, Duration::from_secs(5));
    drain(client.stream(&conversation(), &[&tool]).await.unwrap()).await;
    drain(client.stream(&conversation(), &[]).await.unwrap()).await;
    let requests = model.requests();
    assert_eq!(
        requests[0],
        json!({
            "model": "primary",
            "messages": conversation(),
            "stream": true,
            "stream_options": { "include_usage": true },
            "tools": [tool],
        })
    );
    // No tools: no `tools` key at all (some servers refuse an empty list).
    assert_eq!(
        requests[1],
        json!({
            "model": "primary",
            "messages": conversation(),
            "stream": true,
            "stream_options": { "include_usage": true },
        })
    );
}

#[tokio::test]
async fn an_overloaded_endpoint_is_retried_with_the_same_request() {
    let (model, url) = serve(failing(1, 429)).await;
    let stream = client(&url, &[], 2, Duration::from_secs(5))
        .stream(&conversation(), &[])
        .await
        .expect("the second attempt answers");
    assert_eq!(stream.model, "primary");
    assert!(drain(stream).await > 1);
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "one 429, then the answer");
    assert_eq!(requests[0], requests[1], "the retry is the same request");
}

#[tokio::test]
async fn server_errors_and_unreachable_endpoints_move_on_to_the_next_fallback() {
    // The primary keeps failing with 503; the first fallback is not listening at all.
    let (primary, primary_url) = serve(failing(u32::MAX, 503)).await;
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/v1", listener.local_addr().unwrap())
    };
    let (fallback, fallback_url) = serve(Config::default()).await;

    let stream = client(
        &primary_url,
        &[&closed, &fallback_url],
        2,
        Duration::from_secs(5),
    )
    .stream(&conversation(), &[])
    .await
    .expect("the second fallback answers");
    assert_eq!(stream.model, "fallback-2");
    assert!(drain(stream).await > 1);
    assert_eq!(primary.requests().len(), 2, "the primary was tried twice");
    let asked = fallback.requests();
    assert_eq!(asked.len(), 1);
    assert_eq!(
        asked[0]["model"], "fallback-2",
        "each endpoint gets its own model name"
    );
}

#[tokio::test]
async fn silence_before_the_first_chunk_moves_on_to_the_fallback() {
    let (slow, slow_url) = serve(Config {
        first_token_delay: Duration::from_secs(5),
        ..Config::default()
    })
    .await;
    let (_fallback, fallback_url) = serve(Config::default()).await;
    let stream = client(&slow_url, &[&fallback_url], 1, Duration::from_millis(300))
        .stream(&conversation(), &[])
        .await
        .expect("the fallback answers");
    assert_eq!(stream.model, "fallback-1");
    assert_eq!(slow.requests().len(), 1);
}

#[tokio::test]
async fn a_refusal_fails_at_once_with_a_clear_error_and_no_fallback() {
    for status in [401, 403, 400, 404] {
        let (primary, primary_url) = serve(failing(1, status)).await;
        let (fallback, fallback_url) = serve(Config::default()).await;
        let error = client(&primary_url, &[&fallback_url], 3, Duration::from_secs(5))
            .stream(&conversation(), &[])
            .await
            .expect_err("a refusal is final");
        assert!(
            matches!(&error, ModelError::Refused { status: s, .. } if s.starts_with(&status.to_string())),
            "{status}: {error:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains("refused") && text.contains("on purpose"),
            "the error says what the endpoint said: {text}"
        );
        assert_eq!(primary.requests().len(), 1, "{status}: not retried");
        assert!(fallback.requests().is_empty(), "{status}: not passed on");
    }
}

#[tokio::test]
async fn when_every_endpoint_fails_the_last_failure_is_reported() {
    let (primary, primary_url) = serve(failing(u32::MAX, 500)).await;
    let (fallback, fallback_url) = serve(failing(u32::MAX, 502)).await;
    let error = client(&primary_url, &[&fallback_url], 2, Duration::from_secs(5))
        .stream(&conversation(), &[])
        .await
        .expect_err("nobody answers");
    assert!(
        matches!(&error, ModelError::Transport(text) if text.contains("502")),
        "{error:?}"
    );
    assert_eq!(primary.requests().len(), 2);
    assert_eq!(fallback.requests().len(), 2);
}

/// A span's fields as recorded, in order: (name, value).
type SpanFields = Vec<(String, String)>;

/// The `rover.model.attempt` spans opened, with their fields.
#[derive(Clone, Default)]
struct Attempts(Arc<Mutex<Vec<(Id, SpanFields)>>>);

struct Fields<'a>(&'a mut SpanFields);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Attempts {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        if attrs.metadata().name() == "rover.model.attempt" {
            let mut fields = Vec::new();
            attrs.record(&mut Fields(&mut fields));
            self.0.lock().unwrap().push((id.clone(), fields));
        }
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let mut attempts = self.0.lock().unwrap();
        if let Some((_, fields)) = attempts.iter_mut().find(|(seen, _)| seen == id) {
            values.record(&mut Fields(fields));
        }
    }
}

impl Attempts {
    fn field(&self, index: usize, name: &str) -> Option<String> {
        self.0.lock().unwrap()[index]
            .1
            .iter()
            .rev()
            .find(|(field, _)| field == name)
            .map(|(_, value)| value.clone())
    }
}

#[tokio::test]
async fn the_trace_shows_each_attempt_and_why_it_failed() {
    let attempts = Attempts::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(attempts.clone()));
    let (_primary, primary_url) = serve(failing(u32::MAX, 503)).await;
    let (_fallback, fallback_url) = serve(Config::default()).await;
    let stream = client(&primary_url, &[&fallback_url], 2, Duration::from_secs(5))
        .stream(&conversation(), &[])
        .await
        .expect("the fallback answers");
    drain(stream).await;

    assert_eq!(
        attempts.0.lock().unwrap().len(),
        3,
        "two on the primary, one on the fallback"
    );
    let expected = [
        ("primary", "0", "1", Some("transport")),
        ("primary", "0", "2", Some("transport")),
        ("fallback-1", "1", "1", None),
    ];
    for (index, (model, endpoint, attempt, error)) in expected.into_iter().enumerate() {
        assert_eq!(
            attempts.field(index, "gen_ai.request.model").as_deref(),
            Some(model)
        );
        assert_eq!(
            attempts.field(index, "rover.model.endpoint").as_deref(),
            Some(endpoint)
        );
        assert_eq!(
            attempts.field(index, "rover.model.attempt").as_deref(),
            Some(attempt)
        );
        assert_eq!(
            attempts.field(index, "error.type").as_deref(),
            error,
            "attempt {index}"
        );
        assert!(
            attempts
                .field(index, "server.address")
                .is_some_and(|a| a.starts_with("127.0.0.1:"))
        );
    }
}

#[tokio::test]
async fn the_warm_up_asks_the_primary_once_for_one_token_after_the_rules() {
    let (primary, primary_url) = serve(Config::default()).await;
    let (fallback, fallback_url) = serve(Config::default()).await;
    let model = client(&primary_url, &[&fallback_url], 2, Duration::from_secs(5));
    rover_agent::warm::warm_prompt_cache(&model)
        .await
        .expect("the warm-up is answered");
    let requests = primary.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let request = &requests[0];
    assert_eq!(request["model"], "primary");
    assert_eq!(request["max_tokens"], 1);
    assert_eq!(request["stream"], false);
    assert!(request.get("tools").is_none(), "{request:#}");
    assert_eq!(request["messages"][0]["role"], "system");
    assert_eq!(
        request["messages"][0]["content"],
        rover_agent::warm::rules_prefix()
    );
    assert!(fallback.requests().is_empty());

    // An endpoint that fails is asked once: no retry, no fallback; the failure is the answer.
    let (failing_primary, failing_url) = serve(failing(1, 503)).await;
    let model = client(&failing_url, &[&fallback_url], 2, Duration::from_secs(5));
    let error = rover_agent::warm::warm_prompt_cache(&model)
        .await
        .expect_err("a 503 fails the warm-up");
    assert!(matches!(error, ModelError::Transport(_)), "{error:?}");
    assert_eq!(failing_primary.requests().len(), 1);
    assert!(fallback.requests().is_empty());
}
