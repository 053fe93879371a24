//! A chat's turns: `POST /api/chat` and `GET /api/chat/{id}/stream`, the AI SDK UI message stream
//! over SSE, so a `useChat` Hub works unchanged (`docs/protocols.md` §1). Stopping a turn is
//! `crate::stop`'s; reading a chat back is `crate::history`'s.
//!
//! A POST takes only the last message from the body — history is the server's — mints the runtime
//! context from live rows, signs the turn identity, follows the turn's events, publishes the
//! turn and streams the events as UI message chunks. The turn runs in a worker, so a client that
//! disconnects does not cancel it; `GET …/stream` replays the thread's current (or last) turn from
//! its start, from the recorded events, and follows it live. Any gateway replica can serve either.
//!
//! - this file: the routes, opening and publishing a turn;
//! - [`request`]: the POST's body, read and bounded; [`approvals`]: the approval answers it carries;
//! - [`stream`]: the SSE response.

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::Utc;
use rover_contracts::ErrorCode;
use rover_contracts::identity::TurnGrant;
use rover_contracts::ids::{SchoolId, TurnId};
use rover_contracts::wire::{self, TurnEvent, TurnEventKind, TurnRequest};
use rover_messaging::OutgoingMessage;
use rover_turnstore::open_turns::WhenBusy;
use tracing::Instrument as _;

use self::request::{ChatTurn, InputLimits, campus_choice, opening, parse_chat_request};
use self::stream::stream_response;
use crate::auth::Principal;
use crate::chat_id::thread_id;
use crate::error::ApiError;
use crate::observe::current_trace_id;
use crate::settings::{DoubleTexting, Settings};
use crate::state::AppState;
use crate::stop::tell_workers_to_stop;
use crate::{caller, input};

mod approvals;
mod request;
mod stream;

/// The turn routes.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/api/chat", post(post_chat))
        .route("/api/chat/{id}/stream", get(resume))
}

/// What one chat request may carry, from `http.max_json_depth` and the `chat.*` limits.

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
    let chat = parse_chat_request(
        &body,
        &InputLimits::from(&state.settings),
        principal.user_id,
    )?;
    let campus = campus_choice(chat.campus, &headers)?;
    let turn = TurnId::new();
    tracing::Span::current()
        .record("turn_id", tracing::field::display(turn))
        .record("thread_id", tracing::field::display(chat.thread));
    let trace = current_trace_id();
    // Opened and published in a task of its own: a client that disconnects drops this handler,
    // and must not cancel it between the commit and the publish (a turn committed open but never
    // published would hold the chat until its identity expired, and a Stop would wait for an end
    // that never comes). Dropping the handle does not cancel the task.
    let opened = tokio::spawn(
        {
            let (state, trace) = (state.clone(), trace.clone());
            async move {
                let (request, school, interrupted) =
                    open_chat_turn(&state, &principal, turn, campus, chat, &trace).await?;
                tell_workers_to_stop(&state, &interrupted).await;
                // Follow before publishing, so no event can slip past.
                let followed = state.events.follow(turn);
                publish_turn(&state, &request, school).await?;
                tracing::info!(%turn, thread = %request.thread_id, "turn published");
                state.metrics.turns_published.inc();
                Ok::<_, ApiError>(followed)
            }
        }
        .in_current_span(),
    );
    let (following, events) = opened.await.map_err(ApiError::internal)??;
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

/// Opens `turn` on the chat, in one transaction: the runtime context minted from live rows (the
/// thread must be the caller's), the double-texting policy and the open-turn limits applied,
/// answers to approval requests bound to this turn, and the turn identity signed. Returns the
/// request to publish, its school, and the turns this message interrupts (to stop once
/// committed).
async fn open_chat_turn(
    state: &AppState,
    principal: &Principal,
    turn: TurnId,
    campus: Option<rover_contracts::ids::CampusId>,
    mut chat: ChatTurn,
    trace: &str,
) -> Result<(TurnRequest, SchoolId, Vec<TurnId>), ApiError> {
    let thread = chat.thread;
    let mut tx = caller::tenant(state, principal).await?;
    let attachments = std::mem::take(&mut chat.attachments);
    let caller = caller::resolve(&mut tx, principal, campus, attachments).await?;
    // The caller's chat (a message on the id of a chat deleted earlier opens it afresh).
    rover_turnstore::threads::open_thread(&mut tx, thread, principal.user_id).await?;
    // A message on a chat whose reply still runs: refused, queued behind it, or it interrupts it
    // (the stop is committed with the new turn, or not at all).
    let (when_busy, interrupted) = match state.settings.chat.double_texting {
        DoubleTexting::Reject => (WhenBusy::Refuse, Vec::new()),
        DoubleTexting::Enqueue => (WhenBusy::Queue, Vec::new()),
        DoubleTexting::Interrupt => (
            WhenBusy::Queue,
            rover_turnstore::open_turns::request_stop(&mut tx, thread).await?,
        ),
    };
    // Counted until the worker ends the turn — a client that goes away frees nothing.
    let limits = turn_limits(&state.settings);
    rover_turnstore::open_turns::open_turn(
        &mut tx,
        thread,
        turn,
        principal.user_id,
        limits,
        when_busy,
    )
    .await?
    .map_err(|refused| refusal(&state.settings, refused))?;
    let opening = opening(&chat, &caller, turn, trace);
    rover_turnstore::chats::record_turn(&mut tx, thread, turn, &opening).await?;
    let (input, message_id) = approvals::bind(
        &mut tx,
        principal,
        thread,
        turn,
        chat.input,
        &chat.approvals,
    )
    .await?;
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
    let request = TurnRequest {
        turn_id: turn,
        thread_id: thread,
        message_id,
        context: caller.context,
        identity,
        input,
    };
    Ok((request, caller.school, interrupted))
}

/// Publishes the turn for a worker. Unroutable, or nacked because the turns queue is full
/// (`x-overflow: reject-publish`): the turn never started, so it must not count against anyone.
async fn publish_turn(
    state: &AppState,
    request: &TurnRequest,
    school: SchoolId,
) -> Result<(), ApiError> {
    let turn = request.turn_id;
    let message = OutgoingMessage::new(wire::encode(request)).with_message_id(turn.to_string());
    let published = state
        .publisher
        .publish(
            &state.topology.turns_exchange(),
            rover_messaging::TURN_ROUTING_KEY,
            message,
        )
        .await;
    let Err(error) = published else {
        return Ok(());
    };
    tracing::error!(%error, "could not publish the turn");
    close_unpublished(state, school, turn).await;
    Err(ApiError::new(
        ErrorCode::Unavailable,
        "The assistant is unavailable right now. Please try again.",
    )
    .retry_after(state.settings.chat.busy_retry_after_secs))
}

/// The open-turn limits from settings; an open turn counts at most as long as its identity lives.
fn turn_limits(settings: &Settings) -> rover_turnstore::open_turns::TurnLimits {
    rover_turnstore::open_turns::TurnLimits {
        per_user: settings.chat.max_concurrent_turns_per_user,
        per_school: settings.chat.max_concurrent_turns_per_school,
        ttl: Duration::from_secs(settings.identity.ttl_secs),
    }
}

/// The answer to a turn that may not start: 409 on a busy thread, 429 over a limit.
fn refusal(settings: &Settings, refused: rover_turnstore::open_turns::TurnRefused) -> ApiError {
    use rover_turnstore::open_turns::TurnRefused;
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
        rover_turnstore::open_turns::close_turn(&mut tx, turn).await?;
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
    let thread = thread_id(principal.user_id, &chat)?;
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
    let last = rover_turnstore::threads::last_turn(&mut tx, thread, principal.user_id).await?;
    tx.commit().await?;
    let Some(turn) = last else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    // Follow first, then read what was recorded: together they miss nothing. Following is in
    // process, and no transaction is open across it.
    let (following, live) = state.events.follow(turn);
    let mut tx = caller::tenant(&state, &principal).await?;
    let recorded: Vec<TurnEvent> = rover_turnstore::events::events(&mut tx, turn)
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

#[cfg(test)]
mod fuzz;
