//! `POST /api/chat` and `GET /api/chat/{id}/stream`: the AI SDK UI message stream over SSE, so a
//! `useChat` Hub works unchanged (`PROTOCOLS.md` §1).
//!
//! A POST takes only the last message from the body — history is the server's — mints the runtime
//! context from live rows, signs the turn identity, follows the turn's events, publishes the
//! turn and streams the events as UI message chunks. The turn runs in a worker, so a client that
//! disconnects does not cancel it; `GET …/stream` replays the thread's current (or last) turn from
//! its start, from the recorded events, and follows it live. Any gateway replica can serve either.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::Utc;
use futures::StreamExt as _;
use rover_contracts::ErrorCode;
use rover_contracts::context::Attachment;
use rover_contracts::identity::TurnGrant;
use rover_contracts::ids::{CampusId, SchoolId, ThreadId, TurnId};
use rover_contracts::wire::{self, FinishReason, TurnEvent, TurnEventKind, TurnInput, TurnRequest};
use rover_messaging::OutgoingMessage;
use rover_telemetry::metrics::{Gauge, Histogram};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tracing::Instrument as _;

use crate::auth::Principal;
use crate::error::ApiError;
use crate::events::Following;
use crate::limits::StreamSlot;
use crate::observe::{TRACE_HEADER, current_trace_id};
use crate::state::AppState;
use crate::{Settings, caller, input};

/// The chat routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/chat", post(post_chat))
        .route("/api/chat/{id}/stream", get(resume))
}

/// What one chat request may carry, from `http.max_json_depth` and the `chat.*` limits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InputLimits {
    pub(crate) max_json_depth: usize,
    pub(crate) max_message_bytes: usize,
    pub(crate) max_parts: usize,
    pub(crate) max_attachments: usize,
    pub(crate) max_attachment_url_bytes: usize,
    pub(crate) max_attachment_name_bytes: usize,
}

impl From<&Settings> for InputLimits {
    fn from(settings: &Settings) -> Self {
        Self {
            max_json_depth: settings.http.max_json_depth,
            max_message_bytes: settings.chat.max_message_bytes,
            max_parts: settings.chat.max_parts,
            max_attachments: settings.chat.max_attachments,
            max_attachment_url_bytes: settings.chat.max_attachment_url_bytes,
            max_attachment_name_bytes: settings.chat.max_attachment_name_bytes,
        }
    }
}

/// A chat request as the gateway acts on it.
#[derive(Debug)]
pub(crate) struct ChatTurn {
    pub(crate) thread: ThreadId,
    pub(crate) input: TurnInput,
    pub(crate) attachments: Vec<Attachment>,
    /// The campus named in the body, if any.
    pub(crate) campus: Option<CampusId>,
}

/// Reads a `POST /api/chat` body: the depth check, the JSON, the chat id, the last message and
/// the size limits. Every failure is a 400 or 413 [`ApiError`]; no input makes it panic (the
/// property tests in `chat_fuzz.rs` feed it arbitrary and mutated bodies).
pub(crate) fn parse_chat_request(body: &[u8], limits: &InputLimits) -> Result<ChatTurn, ApiError> {
    let body: ChatRequest = input::parse_json(body, limits.max_json_depth).map_err(|error| {
        // A chat body that does not fit is a malformed request, not a tool's bad arguments.
        ApiError::new(ErrorCode::InvalidRequest, error.message)
    })?;
    let thread = thread_id(&body.id)?;
    let (input, attachments) = turn_input(&body.messages, limits)?;
    Ok(ChatTurn {
        thread,
        input,
        attachments,
        campus: body.campus_id,
    })
}

/// `useChat`'s request body. Only the last message is used; the rest of `messages` is ignored.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ChatRequest {
    id: String,
    #[serde(default)]
    messages: Vec<UiMessage>,
    /// An optional campus for a school-wide user's chat.
    #[serde(default)]
    campus_id: Option<CampusId>,
}

#[derive(Debug, Deserialize)]
struct UiMessage {
    role: String,
    #[serde(default)]
    parts: Vec<Value>,
}

/// The header a Hub may use to pick the chat's campus.
const CAMPUS_HEADER: &str = "x-rover-campus";

/// The thread of a chat id: the id itself when it is a UUID, else a UUID derived from it, so any
/// client-chosen id names one global thread (and another user's is a 404).
fn thread_id(chat: &str) -> Result<ThreadId, ApiError> {
    if let Ok(id) = ThreadId::parse(chat) {
        return Ok(id);
    }
    let valid = !chat.is_empty()
        && chat.len() <= 200
        && chat
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "The chat id must be 1–200 letters, digits, '-' or '_'.",
        ));
    }
    const NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x6f1c_2a4e_9b7d_4c3a_8e21_5d0f_7a9b_c3e1);
    Ok(ThreadId::from_uuid(uuid::Uuid::new_v5(
        &NAMESPACE,
        chat.as_bytes(),
    )))
}

fn too_large(message: String) -> ApiError {
    ApiError::new(ErrorCode::TooLarge, message)
}

/// What the last message of the body asks for, and its attachments, within the limits.
fn turn_input(
    messages: &[UiMessage],
    limits: &InputLimits,
) -> Result<(TurnInput, Vec<Attachment>), ApiError> {
    let last = messages
        .last()
        .ok_or_else(|| ApiError::new(ErrorCode::InvalidRequest, "The request has no messages."))?;
    if last.parts.len() > limits.max_parts {
        return Err(too_large(format!(
            "The message has too many parts (at most {}).",
            limits.max_parts
        )));
    }
    match last.role.as_str() {
        "user" => {
            let text: Vec<&str> = last
                .parts
                .iter()
                .filter(|p| p["type"] == "text")
                .filter_map(|p| p["text"].as_str())
                .collect();
            let attachments: Vec<Attachment> = last
                .parts
                .iter()
                .filter(|p| p["type"] == "file")
                .filter_map(|p| {
                    Some(Attachment {
                        filename: p["filename"].as_str().map(str::to_owned),
                        media_type: p["mediaType"].as_str()?.to_owned(),
                        url: p["url"].as_str()?.to_owned(),
                    })
                })
                .collect();
            if attachments.len() > limits.max_attachments {
                return Err(too_large(format!(
                    "The message has too many attachments (at most {}).",
                    limits.max_attachments
                )));
            }
            attachments
                .iter()
                .try_for_each(|attachment| check_attachment(attachment, limits))?;
            let text = text.join("\n");
            if text.len() > limits.max_message_bytes {
                return Err(too_large(format!(
                    "The message is too long (at most {} bytes).",
                    limits.max_message_bytes
                )));
            }
            if text.trim().is_empty() && attachments.is_empty() {
                return Err(ApiError::new(
                    ErrorCode::InvalidRequest,
                    "The last message is empty.",
                ));
            }
            Ok((TurnInput::Message { text }, attachments))
        }
        // The one exception to "history is the server's": the answer to `ask_user`, which the
        // worker accepts only for the call the thread is waiting on.
        "assistant" => last
            .parts
            .iter()
            .rev()
            .find(|p| p["type"] == "tool-ask_user" && p["state"] == "output-available")
            .and_then(|p| {
                Some(TurnInput::AskUserAnswer {
                    tool_call_id: p["toolCallId"].as_str()?.to_owned(),
                    output: p["output"].clone(),
                })
            })
            .map(|input| (input, Vec::new()))
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::InvalidRequest,
                    "The last message answers no question.",
                )
            })
            .and_then(|(input, attachments)| match &input {
                TurnInput::AskUserAnswer { output, .. }
                    if output.to_string().len() > limits.max_message_bytes =>
                {
                    Err(too_large(format!(
                        "The answer is too long (at most {} bytes).",
                        limits.max_message_bytes
                    )))
                }
                _ => Ok((input, attachments)),
            }),
        _ => Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "The last message must be the user's.",
        )),
    }
}

/// An attachment is a link the Hub uploaded the file to: an `https` (or `http`) URL of bounded
/// length, with a bounded name and media type. It travels in the runtime context, and so in
/// every model call of the turn: inline `data:` URLs (the file itself) and other schemes are
/// refused.
fn check_attachment(attachment: &Attachment, limits: &InputLimits) -> Result<(), ApiError> {
    let url = attachment.url.as_str();
    if url.len() > limits.max_attachment_url_bytes {
        return Err(too_large(format!(
            "An attachment's URL is too long (at most {} bytes).",
            limits.max_attachment_url_bytes
        )));
    }
    let scheme = url
        .split_once(':')
        .map(|(scheme, _)| scheme.to_ascii_lowercase());
    if !matches!(scheme.as_deref(), Some("https" | "http")) {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "An attachment must be an https:// (or http://) link to the uploaded file.",
        ));
    }
    let name = attachment.filename.as_deref().unwrap_or_default();
    if name.len() > limits.max_attachment_name_bytes
        || attachment.media_type.len() > limits.max_attachment_name_bytes
    {
        return Err(too_large(format!(
            "An attachment's name or media type is too long (at most {} bytes).",
            limits.max_attachment_name_bytes
        )));
    }
    Ok(())
}

fn campus_choice(
    body: Option<CampusId>,
    headers: &HeaderMap,
) -> Result<Option<CampusId>, ApiError> {
    if body.is_some() {
        return Ok(body);
    }
    match headers
        .get(CAMPUS_HEADER)
        .map(|v| v.to_str().map(CampusId::parse))
    {
        None => Ok(None),
        Some(Ok(Ok(id))) => Ok(Some(id)),
        Some(_) => Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "The campus header is not a campus id.",
        )),
    }
}

#[tracing::instrument(name = "rover.gateway.chat", skip_all, fields(turn_id = tracing::field::Empty, thread_id = tracing::field::Empty))]
async fn post_chat(
    State(state): State<AppState>,
    principal: Principal,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let requested = Instant::now();
    input::require_json(&headers)?;
    let body = input::body_bytes(body)?;
    let ChatTurn {
        thread,
        input,
        attachments,
        campus,
    } = parse_chat_request(&body, &InputLimits::from(&state.settings))?;
    let campus = campus_choice(campus, &headers)?;
    let turn = TurnId::new();
    tracing::Span::current()
        .record("turn_id", tracing::field::display(turn))
        .record("thread_id", tracing::field::display(thread));

    // The runtime context, minted from live rows; the thread must be the caller's.
    let mut tx = caller::tenant(&state, &principal).await?;
    let caller = caller::resolve(&mut tx, &principal, campus, attachments).await?;
    rover_domain::conversation::ensure_thread(&mut tx, thread, principal.user_id).await?;
    // Counted until the worker ends the turn — a client that goes away frees nothing.
    rover_domain::conversation::open_turn(
        &mut tx,
        thread,
        turn,
        principal.user_id,
        turn_limits(&state.settings),
    )
    .await?
    .map_err(|refused| refusal(&state.settings, refused))?;
    rover_domain::conversation::start_turn(&mut tx, thread, turn).await?;

    let school = caller.school;
    let grant = TurnGrant {
        turn_id: turn,
        thread_id: thread,
        identity: caller.identity(),
        scope: caller.scope(),
    };
    let ttl =
        chrono::Duration::seconds(i64::try_from(state.settings.identity.ttl_secs).unwrap_or(1800));
    // Signed before the commit: a turn that cannot be signed is rolled back, not left open.
    let identity = state
        .signer
        .mint(grant, Utc::now(), ttl)
        .map_err(ApiError::internal)?;
    tx.commit().await?;
    let trace = current_trace_id();
    let request = TurnRequest {
        turn_id: turn,
        thread_id: thread,
        message_id: format!("msg-{turn}"),
        context: caller.context,
        identity,
        input,
    };

    // Follow before publishing, so no event can slip past.
    let (following, events) = state.events.follow(turn);
    let message = OutgoingMessage::new(wire::encode(&request)).with_message_id(turn.to_string());
    let published = state
        .publisher
        .publish(
            &state.topology.turns_exchange(),
            rover_messaging::TURN_ROUTING_KEY,
            message,
        )
        .await;
    if let Err(error) = published {
        // Unroutable, or nacked because the turns queue is full (`x-overflow: reject-publish`):
        // the turn never started, so it must not count against anyone.
        tracing::error!(%error, "could not publish the turn");
        close_unpublished(&state, school, turn).await;
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "The assistant is unavailable right now. Please try again.",
        )
        .retry_after(state.settings.chat.busy_retry_after_secs));
    }
    tracing::info!(%turn, %thread, "turn published");
    state.metrics.turns_published.inc();
    Ok(stream_response(
        &state,
        turn,
        trace,
        Vec::new(),
        Some(following),
        events,
        Some(requested),
        None,
    ))
}

/// The open-turn limits from settings; an open turn counts at most as long as its identity lives.
fn turn_limits(settings: &Settings) -> rover_domain::conversation::TurnLimits {
    rover_domain::conversation::TurnLimits {
        per_user: settings.chat.max_concurrent_turns_per_user,
        per_school: settings.chat.max_concurrent_turns_per_school,
        ttl: Duration::from_secs(settings.identity.ttl_secs),
    }
}

/// The answer to a turn that may not start: 409 on a busy thread, 429 over a limit.
fn refusal(settings: &Settings, refused: rover_domain::conversation::TurnRefused) -> ApiError {
    use rover_domain::conversation::TurnRefused;
    let busy = |message: String| {
        ApiError::new(ErrorCode::RateLimited, message)
            .retry_after(settings.chat.busy_retry_after_secs)
    };
    match refused {
        TurnRefused::ThreadBusy => ApiError::new(
            ErrorCode::TurnInProgress,
            "This chat already has a reply in progress. Wait for it to finish, then send again.",
        ),
        TurnRefused::UserBusy => busy(format!(
            "You already have {} replies in progress. Wait for one to finish, then try again.",
            settings.chat.max_concurrent_turns_per_user
        )),
        TurnRefused::SchoolBusy => busy(
            "Your school has too many replies in progress right now. Please try again shortly."
                .to_owned(),
        ),
    }
}

/// Closes a turn that was opened but never published, so it does not count until it expires.
async fn close_unpublished(state: &AppState, school: SchoolId, turn: TurnId) {
    let closed = async {
        let mut tx = rover_domain::begin_tenant(&state.pool, school).await?;
        rover_domain::conversation::close_turn(&mut tx, turn).await?;
        tx.commit().await
    };
    if let Err(error) = closed.await {
        tracing::warn!(%error, %turn, "could not close an unpublished turn; it expires by itself");
    }
}

async fn resume(
    State(state): State<AppState>,
    principal: Principal,
    Path(chat): Path<String>,
) -> Result<Response, ApiError> {
    let thread = thread_id(&chat)?;
    // Counted for as long as the stream lives; a page reloaded many times cannot pile them up.
    let slot = state
        .resumes
        .try_acquire(principal.user_id)
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::RateLimited,
                format!(
                    "You already have {} replies open. Close one, then try again.",
                    state.settings.chat.max_resumes_per_user
                ),
            )
            .retry_after(state.settings.chat.busy_retry_after_secs)
        })?;
    let mut tx = caller::tenant(&state, &principal).await?;
    let last = rover_domain::conversation::last_turn(&mut tx, thread, principal.user_id).await?;
    tx.commit().await?;
    let Some(turn) = last else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    // Follow first, then read what was recorded: together they miss nothing. Following is in
    // process, and no transaction is open across it.
    let (following, live) = state.events.follow(turn);
    let mut tx = caller::tenant(&state, &principal).await?;
    let recorded: Vec<TurnEvent> = rover_domain::conversation::events(&mut tx, turn)
        .await?
        .into_iter()
        .filter_map(|payload| serde_json::from_value(payload).ok())
        .collect();
    tx.commit().await?;
    // A finished turn is replayed from the record alone.
    let finished = recorded
        .iter()
        .any(|e| matches!(e.event, TurnEventKind::Finish { .. }));
    let following = (!finished).then_some(following);
    Ok(stream_response(
        &state,
        turn,
        current_trace_id(),
        recorded,
        following,
        live,
        None,
        Some(slot),
    ))
}

/// The SSE response: recorded events first, then live ones, in `seq` order without repeats, as UI
/// message chunks; `[DONE]` after `finish`. `slot`, the caller's resumed-stream slot, is released when
/// the stream ends or is dropped.
#[allow(clippy::too_many_arguments)]
fn stream_response(
    state: &AppState,
    turn: TurnId,
    trace: String,
    recorded: Vec<TurnEvent>,
    following: Option<Following>,
    live: mpsc::UnboundedReceiver<TurnEvent>,
    requested: Option<Instant>,
    slot: Option<StreamSlot>,
) -> Response {
    let settings = &state.settings.chat;
    let idle = Duration::from_millis(settings.idle_timeout_ms);
    let order = Ordering {
        next: 0,
        pending: BTreeMap::new(),
    };
    let mapper = ChunkMapper {
        turn,
        trace: trace.clone(),
        subagent_text: HashMap::new(),
    };
    // The stream outlives the request's span: its own span ends when the stream does.
    let span = tracing::info_span!(
        "rover.gateway.stream",
        turn_id = %turn,
        replayed = recorded.len(),
        rover.turn.finish_reason = tracing::field::Empty,
    );
    let first_token = requested.map(|at| (at, state.metrics.time_to_first_token.clone()));
    let state = StreamState {
        recorded: recorded.into_iter(),
        live,
        order,
        mapper,
        _following: following,
        idle,
        done: false,
        span,
        first_token,
        _open: OpenStream::new(&state.metrics.streams_open),
        _slot: slot,
    };
    let events = futures::stream::unfold(state, |state| {
        let span = state.span.clone();
        next_events(state).instrument(span)
    })
    .flat_map(futures::stream::iter);
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_millis(settings.keepalive_ms)))
        .into_response();
    let headers = response.headers_mut();
    headers.insert(
        "x-vercel-ai-ui-message-stream",
        HeaderValue::from_static("v1"),
    );
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    if let Ok(value) = HeaderValue::from_str(&trace) {
        headers.insert(TRACE_HEADER, value);
    }
    response
}

struct StreamState {
    recorded: std::vec::IntoIter<TurnEvent>,
    live: mpsc::UnboundedReceiver<TurnEvent>,
    order: Ordering,
    mapper: ChunkMapper,
    /// Held so the turn is followed exactly as long as the stream lives (dropped on disconnect).
    _following: Option<Following>,
    idle: Duration,
    done: bool,
    span: tracing::Span,
    /// When the chat request arrived, until the first text is sent (time to first token).
    first_token: Option<(Instant, Histogram)>,
    _open: OpenStream,
    /// The caller's resumed-stream slot (resumes only), held for as long as the stream lives.
    _slot: Option<StreamSlot>,
}

/// Counts a stream in the open-streams gauge for as long as it lives.
struct OpenStream(Gauge);

impl OpenStream {
    fn new(gauge: &Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Puts events back in `seq` order and drops repeats.
struct Ordering {
    next: u64,
    pending: BTreeMap<u64, TurnEvent>,
}

impl Ordering {
    fn push(&mut self, event: TurnEvent) -> Vec<TurnEvent> {
        if event.seq >= self.next {
            self.pending.insert(event.seq, event);
        }
        let mut ready = Vec::new();
        while let Some(event) = self.pending.remove(&self.next) {
            self.next += 1;
            ready.push(event);
        }
        ready
    }
}

async fn next_events(
    mut state: StreamState,
) -> Option<(Vec<Result<Event, Infallible>>, StreamState)> {
    if state.done {
        return None;
    }
    let ready = match state.recorded.next() {
        Some(event) => state.order.push(event),
        None => match tokio::time::timeout(state.idle, state.live.recv()).await {
            Ok(Some(event)) => state.order.push(event),
            // The subscription ended (a finished turn being replayed has none): end the stream.
            Ok(None) => {
                state.done = true;
                return Some((vec![Ok(Event::default().data("[DONE]"))], state));
            }
            Err(_) => {
                state.done = true;
                let chunks = [
                    json!({ "type": "error", "errorText": "The assistant stopped responding." }),
                    json!({ "type": "finish", "finishReason": "error" }),
                ];
                let mut events: Vec<_> = chunks
                    .iter()
                    .map(|c| Ok(Event::default().data(c.to_string())))
                    .collect();
                events.push(Ok(Event::default().data("[DONE]")));
                return Some((events, state));
            }
        },
    };
    let mut out = Vec::new();
    for event in ready {
        if let TurnEventKind::Finish { reason, .. } = &event.event {
            state
                .span
                .record("rover.turn.finish_reason", tracing::field::debug(reason));
        }
        if matches!(event.event, TurnEventKind::TextDelta { .. })
            && event.subagent.is_none()
            && let Some((requested, histogram)) = state.first_token.take()
        {
            histogram.observe(requested.elapsed().as_secs_f64());
        }
        let finished = matches!(event.event, TurnEventKind::Finish { .. });
        out.extend(
            state
                .mapper
                .chunks(event)
                .into_iter()
                .map(|chunk| Ok(Event::default().data(chunk.to_string()))),
        );
        if finished {
            state.done = true;
            out.push(Ok(Event::default().data("[DONE]")));
            break;
        }
    }
    Some((out, state))
}

/// Turns worker events into AI SDK UI message chunks (only the chunk types and fields the protocol
/// allows). Subagent activity is attributed: its tool calls carry the agent in their label part,
/// and its text arrives as a `data-subagent` part once complete.
struct ChunkMapper {
    turn: TurnId,
    trace: String,
    subagent_text: HashMap<String, String>,
}

impl ChunkMapper {
    fn chunks(&mut self, event: TurnEvent) -> Vec<Value> {
        let agent = event.subagent.map_or("rover", |s| s.name());
        let from_subagent = event.subagent.is_some();
        match event.event {
            TurnEventKind::Start {
                message_id,
                trace_id,
            } => vec![json!({
                "type": "start",
                "messageId": message_id,
                "messageMetadata": {
                    "turnId": self.turn,
                    "traceId": trace_id.as_deref().unwrap_or(&self.trace),
                },
            })],
            TurnEventKind::StartStep if !from_subagent => vec![json!({ "type": "start-step" })],
            TurnEventKind::FinishStep if !from_subagent => vec![json!({ "type": "finish-step" })],
            TurnEventKind::StartStep | TurnEventKind::FinishStep => Vec::new(),
            TurnEventKind::TextStart { id } if from_subagent => {
                self.subagent_text.insert(id, String::new());
                Vec::new()
            }
            TurnEventKind::TextDelta { id, delta } if from_subagent => {
                self.subagent_text.entry(id).or_default().push_str(&delta);
                Vec::new()
            }
            TurnEventKind::TextEnd { id } if from_subagent => {
                let text = self.subagent_text.remove(&id).unwrap_or_default();
                vec![
                    json!({ "type": "data-subagent", "id": id, "data": { "agent": agent, "text": text } }),
                ]
            }
            TurnEventKind::TextStart { id } => vec![json!({ "type": "text-start", "id": id })],
            TurnEventKind::TextDelta { id, delta } => {
                vec![json!({ "type": "text-delta", "id": id, "delta": delta })]
            }
            TurnEventKind::TextEnd { id } => vec![json!({ "type": "text-end", "id": id })],
            TurnEventKind::ToolInputStart {
                tool_call_id,
                tool_name,
                label,
            } => vec![
                json!({ "type": "tool-input-start", "toolCallId": tool_call_id, "toolName": tool_name }),
                json!({
                    "type": "data-tool-label",
                    "id": tool_call_id,
                    "data": { "toolCallId": tool_call_id, "toolName": tool_name, "label": label, "agent": agent },
                    "transient": true,
                }),
            ],
            TurnEventKind::ToolInputAvailable {
                tool_call_id,
                tool_name,
                input,
            } => {
                vec![
                    json!({ "type": "tool-input-available", "toolCallId": tool_call_id, "toolName": tool_name, "input": input }),
                ]
            }
            TurnEventKind::ToolOutputAvailable {
                tool_call_id,
                output,
            } => {
                vec![
                    json!({ "type": "tool-output-available", "toolCallId": tool_call_id, "output": output }),
                ]
            }
            TurnEventKind::ToolOutputError {
                tool_call_id,
                error_text,
            } => {
                vec![
                    json!({ "type": "tool-output-error", "toolCallId": tool_call_id, "errorText": error_text }),
                ]
            }
            TurnEventKind::Error { message, .. } => {
                vec![json!({ "type": "error", "errorText": message })]
            }
            TurnEventKind::Finish { reason, usage } => {
                let reason = match reason {
                    FinishReason::Stop => "stop",
                    FinishReason::Length => "length",
                    FinishReason::ToolCalls => "tool-calls",
                    FinishReason::Error => "error",
                };
                let mut finish = json!({ "type": "finish", "finishReason": reason });
                if let Some(usage) = usage {
                    finish["messageMetadata"] = json!({ "usage": {
                        "inputTokens": usage.input_tokens,
                        "outputTokens": usage.output_tokens,
                        "totalTokens": usage.input_tokens + usage.output_tokens,
                    } });
                }
                vec![finish]
            }
        }
    }
}

#[cfg(test)]
mod fuzz;
