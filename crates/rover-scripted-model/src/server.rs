//! The HTTP side of the test double: the axum router, the recorded requests, and the streaming
//! body with its latency knobs and deliberate failures.

use std::future::Future;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt as _;
use serde_json::{Value, json};

use crate::Config;
use crate::engine::{self, Reply};
use crate::openai::{ChatRequest, Meta, error_body};
use crate::rules::Fail;

/// The scripted model test double: its configuration and every request it has received.
///
/// Cloning is cheap and shares the recorded requests, so a test can keep a handle while the
/// server runs.
#[derive(Debug, Clone)]
pub struct ScriptedModel {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: Config,
    /// Request bodies, in arrival order, for `GET /v1/requests`.
    requests: Mutex<Vec<Value>>,
    /// Numbers the responses (`chatcmpl-scripted-N`).
    responses: AtomicU64,
    /// Chat requests failed on purpose so far (`Config::fail_first`).
    failed: AtomicU32,
}

impl ScriptedModel {
    /// A test double that follows `config`.
    pub fn new(config: Config) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                requests: Mutex::new(Vec::new()),
                responses: AtomicU64::new(0),
                failed: AtomicU32::new(0),
            }),
        }
    }

    /// The routes: `POST /v1/chat/completions`, `GET /v1/models`, `GET|DELETE /v1/requests`,
    /// `GET /healthz`.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route("/v1/models", get(models))
            .route("/v1/requests", get(list_requests).delete(clear_requests))
            .route("/healthz", get(|| async { "ok" }))
            .fallback(not_found)
            .with_state(self.clone())
    }

    /// Every request body received so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.recorded().clone()
    }

    /// Forgets the recorded requests.
    pub fn clear_requests(&self) {
        self.recorded().clear();
    }

    /// Records a request body, keeping at most `Config::keep_requests` of them.
    fn record(&self, body: Value) {
        let mut recorded = self.recorded();
        if let Some(keep) = self.inner.config.keep_requests {
            if keep == 0 {
                return;
            }
            if recorded.len() >= keep {
                let excess = recorded.len() + 1 - keep;
                recorded.drain(..excess);
            }
        }
        recorded.push(body);
    }

    fn recorded(&self) -> std::sync::MutexGuard<'_, Vec<Value>> {
        // A panic while holding the lock cannot leave a Vec<Value> half-written.
        self.inner
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Serves on `listener` until `shutdown` resolves.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let addr = listener
            .local_addr()
            .context("Failed to read the listener's address")?;
        tracing::info!(
            %addr,
            model = %self.inner.config.model,
            rules = self.inner.config.rules.names().count(),
            "scripted model test double listening on {addr}"
        );
        axum::serve(listener, self.router())
            .with_graceful_shutdown(shutdown)
            .await
            .context("The scripted model test double's HTTP server failed")
    }
}

async fn models(State(model): State<ScriptedModel>) -> Response {
    axum::Json(json!({
        "object": "list",
        "data": [{
            "id": model.inner.config.model,
            "object": "model",
            "created": 0,
            "owned_by": "rover-scripted-model (test double)",
        }],
    }))
    .into_response()
}

async fn list_requests(State(model): State<ScriptedModel>) -> Response {
    axum::Json(Value::Array(model.requests())).into_response()
}

async fn clear_requests(State(model): State<ScriptedModel>) -> StatusCode {
    model.clear_requests();
    StatusCode::NO_CONTENT
}

async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(error_body(
            "The scripted model test double has no such route.",
            "invalid_request_error",
            Some("unknown_url"),
        )),
    )
        .into_response()
}

fn bad_request(message: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(error_body(&message, "invalid_request_error", None)),
    )
        .into_response()
}

#[tracing::instrument(skip_all, fields(model, messages, tools, rule, stream))]
#[expect(
    clippy::too_many_lines,
    reason = "the test double's one endpoint: request checks, knobs and the streamed body in order"
)]
async fn chat_completions(State(model): State<ScriptedModel>, body: Bytes) -> Response {
    let body: Value = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(error) => return bad_request(format!("The request body is not JSON: {error}")),
    };
    model.record(body.clone());
    let request: ChatRequest = match serde_json::from_value(body) {
        Ok(request) => request,
        Err(error) => {
            return bad_request(format!(
                "The request is not a chat completion request: {error}"
            ));
        }
    };
    if request.messages.is_empty() {
        return bad_request("`messages` must not be empty.".to_owned());
    }
    // Like OpenAI: a thread whose tool calls lack results is refused, so tests see a broken one.
    if let Some(problem) = request.tool_call_problem() {
        return bad_request(problem);
    }

    let config = &model.inner.config;
    if let Some(response) = failing_on_purpose(&model) {
        return response;
    }
    let conversation = request.conversation();
    let obeyed = config
        .obey_tool_text
        .then(|| engine::obey_planted(&conversation))
        .flatten();
    let mut decision = obeyed.unwrap_or_else(|| engine::decide(&config.rules, &conversation));
    if let Reply::Calls(calls) = &decision.reply
        && let Some(text) = crate::openai::calls_as_text(calls, config.tool_calls)
    {
        decision.reply = Reply::Say(text);
    }
    let stream = request.stream.unwrap_or(false);
    let model_name = request
        .model
        .clone()
        .unwrap_or_else(|| config.model.clone());
    let offered = conversation.offered.join(",");
    let span = tracing::Span::current();
    span.record("model", model_name.as_str());
    span.record("messages", request.messages.len());
    span.record("tools", offered.as_str());
    span.record("rule", decision.rule.as_str());
    span.record("stream", stream);
    tracing::info!(
        reply = reply_kind(&decision.reply),
        "scripted model test double answering"
    );

    let meta = Meta {
        id: format!(
            "chatcmpl-scripted-{}",
            model.inner.responses.fetch_add(1, Ordering::Relaxed) + 1
        ),
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        model: model_name,
        prompt_tokens: request.prompt_tokens(),
    };

    if let Reply::Fail(Fail::Http500, _) = decision.reply {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(error_body(
                &format!(
                    "The scripted model test double failed on purpose (rule `{}`).",
                    decision.rule
                ),
                "server_error",
                Some("scripted_failure"),
            )),
        )
            .into_response();
    }
    let drop_connection = matches!(decision.reply, Reply::Fail(Fail::MidStream, _));
    let delays = Delays {
        first: config.first_token_delay,
        between: config.chunk_delay,
    };

    if stream {
        let events: Vec<Bytes> = meta
            .chunks(&decision.reply, request.include_usage())
            .into_iter()
            .map(|chunk| Bytes::from(format!("data: {chunk}\n\n")))
            .chain((!drop_connection).then(|| Bytes::from_static(b"data: [DONE]\n\n")))
            .collect();
        return Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache")
            .body(delayed_body(events, delays, drop_connection))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
    }

    let completion = meta.completion(&decision.reply).to_string();
    let parts = if drop_connection {
        // Half the object, then the connection drops: the client cannot parse a response.
        let half = completion.len() / 2;
        let cut = (0..=half)
            .rev()
            .find(|i| completion.is_char_boundary(*i))
            .unwrap_or(0);
        vec![Bytes::from(completion[..cut].to_owned())]
    } else {
        vec![Bytes::from(completion)]
    };
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(delayed_body(parts, delays, drop_connection))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// The HTTP error a request gets while `Config::fail_first` still has failures to give.
fn failing_on_purpose(model: &ScriptedModel) -> Option<Response> {
    let fail = model.inner.config.fail_first?;
    let failed = model.inner.failed.fetch_add(1, Ordering::Relaxed);
    if failed >= fail.count {
        return None;
    }
    let status = StatusCode::from_u16(fail.status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let kind = match status.as_u16() {
        401 | 403 => "authentication_error",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    };
    tracing::info!(
        status = status.as_u16(),
        "scripted model test double failing on purpose"
    );
    Some(
        (
            status,
            axum::Json(error_body(
                &format!(
                    "The scripted model test double answers {} on purpose ({} of {}).",
                    status.as_u16(),
                    failed + 1,
                    fail.count
                ),
                kind,
                Some("scripted_failure"),
            )),
        )
            .into_response(),
    )
}

fn reply_kind(reply: &Reply) -> &'static str {
    match reply {
        Reply::Say(_) => "text",
        Reply::Calls(_) => "tool_calls",
        Reply::Fail(Fail::MidStream, _) => "fail mid-stream",
        Reply::Fail(Fail::Http500, _) => "fail http-500",
    }
}

/// How long a deliberately failing response waits before it drops the connection.
const DROP_AFTER: Duration = Duration::from_millis(20);

#[derive(Debug, Clone, Copy)]
struct Delays {
    /// Before the first piece (time to first token).
    first: Duration,
    /// Between pieces.
    between: Duration,
}

/// A body that sends `parts` with the configured delays, and ends in an I/O error when the
/// connection should drop (hyper then closes it without finishing the response).
fn delayed_body(parts: Vec<Bytes>, delays: Delays, drop_connection: bool) -> Body {
    let stream = futures::stream::iter(parts.into_iter().enumerate().map(Some))
        .chain(futures::stream::iter(drop_connection.then_some(None)))
        .then(move |piece| async move {
            let Some((index, bytes)) = piece else {
                // Let hyper flush what was sent before the connection drops; an error polled
                // while bytes are still buffered would discard them.
                tokio::time::sleep(DROP_AFTER.max(delays.between)).await;
                return Err(std::io::Error::other(
                    "the scripted model test double dropped the connection on purpose",
                ));
            };
            let delay = if index == 0 {
                delays.first
            } else {
                delays.between
            };
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Ok(bytes)
        });
    Body::from_stream(stream)
}
