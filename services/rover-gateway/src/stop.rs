//! Stopping a chat's reply: `POST /api/chat/{id}/stop`, and what every route that stops turns
//! uses — [`stop_thread`] (Stop, and deleting a chat) and [`tell_workers_to_stop`] (also an
//! interrupting message, and an erasure): the stop is recorded in `open_turns`, then sent on the
//! control exchange.

use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use rover_contracts::ids::TurnId;
use rover_contracts::wire::{TurnEvent, TurnEventKind};
use rover_messaging::OutgoingMessage;

use crate::auth::Principal;
use crate::caller;
use crate::chat_id::thread_id;
use crate::error::ApiError;
use crate::state::AppState;

/// The Stop route.
pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/api/chat/{id}/stop", post(stop))
}

/// `POST /api/chat/{id}/stop`: stops the chat's running reply (and any queued behind it) on
/// whichever worker holds it. The stop is recorded before the workers are told, so it holds even
/// if the word is lost; the reply's stream — on any replica — ends with `abort`, keeping what was
/// said. Answers once the turns have ended, so the next message is accepted at once: 200
/// `{"stopped": [turn ids]}`; 202 `{"stopping": […]}` if they are still ending after
/// `chat.stop_wait_ms`; 204 when nothing was running (a second Stop is harmless). Only the chat's
/// owner may stop it: another user's chat is a 404.
#[tracing::instrument(name = "rover.gateway.stop", skip_all, fields(thread_id = tracing::field::Empty))]
async fn stop(
    State(state): State<AppState>,
    principal: Principal,
    Path(chat): Path<String>,
) -> Result<Response, ApiError> {
    let thread = thread_id(principal.user_id, &chat)?;
    tracing::Span::current().record("thread_id", tracing::field::display(thread));
    let (status, key, turns) = match stop_thread(&state, &principal, thread).await? {
        Stopped::Nothing => return Ok(StatusCode::NO_CONTENT.into_response()),
        Stopped::Ended(turns) => (StatusCode::OK, "stopped", turns),
        Stopped::Ending(turns) => (StatusCode::ACCEPTED, "stopping", turns),
    };
    Ok((status, axum::Json(serde_json::json!({ key: turns }))).into_response())
}

/// What [`stop_thread`] did.
#[derive(Debug)]
pub(crate) enum Stopped {
    /// Nothing was running.
    Nothing,
    /// These turns were asked to stop and have ended.
    Ended(Vec<TurnId>),
    /// These turns were asked to stop and are still ending after `chat.stop_wait_ms`.
    Ending(Vec<TurnId>),
}

/// Stops `thread`'s open turns (the caller's thread: another user's is `NotFound`): the stop is
/// recorded, the workers are told, and the turns' ends awaited for at most `chat.stop_wait_ms`.
pub(crate) async fn stop_thread(
    state: &AppState,
    principal: &Principal,
    thread: rover_contracts::ids::ThreadId,
) -> Result<Stopped, ApiError> {
    let mut tx = caller::tenant(state, principal).await?;
    rover_turnstore::threads::last_turn(&mut tx, thread, principal.user_id).await?;
    let turns = rover_turnstore::open_turns::request_stop(&mut tx, thread).await?;
    if turns.is_empty() {
        return Ok(Stopped::Nothing);
    }
    // Followed before the workers are told, so no turn's end can slip past.
    let ends: Vec<_> = turns
        .iter()
        .map(|turn| state.events.follow(*turn))
        .collect();
    tx.commit().await?;
    tell_workers_to_stop(state, &turns).await;
    tracing::info!(%thread, turns = turns.len(), "asked to stop the chat's reply");
    let wait = Duration::from_millis(state.settings.chat.stop_wait_ms);
    let ended = tokio::time::timeout(wait, async {
        for ((_following, live), turn) in ends.into_iter().zip(&turns) {
            wait_ended(state, principal, *turn, live).await?;
        }
        Ok::<_, ApiError>(())
    })
    .await;
    match ended {
        Ok(ended) => {
            ended?;
            Ok(Stopped::Ended(turns))
        }
        // A `finish` published while this replica's events subscription was reconnecting is
        // recorded all the same: one last look before answering that the turns are still ending.
        Err(_) => {
            for turn in &turns {
                if !finish_recorded(state, principal, *turn).await? {
                    return Ok(Stopped::Ending(turns));
                }
            }
            Ok(Stopped::Ended(turns))
        }
    }
}

/// Whether `turn`'s `finish` is recorded.
async fn finish_recorded(
    state: &AppState,
    principal: &Principal,
    turn: TurnId,
) -> Result<bool, ApiError> {
    let mut tx = caller::tenant(state, principal).await?;
    let recorded = rover_turnstore::events::events(&mut tx, turn).await?;
    tx.commit().await?;
    Ok(recorded
        .into_iter()
        .filter_map(|payload| serde_json::from_value::<TurnEvent>(payload).ok())
        .any(|event| matches!(event.event, TurnEventKind::Finish { .. })))
}

/// Waits until `turn` has ended: its `finish` recorded already, or arriving on `live`.
async fn wait_ended(
    state: &AppState,
    principal: &Principal,
    turn: TurnId,
    mut live: tokio::sync::mpsc::UnboundedReceiver<TurnEvent>,
) -> Result<(), ApiError> {
    if finish_recorded(state, principal, turn).await? {
        return Ok(());
    }
    while let Some(event) = live.recv().await {
        if matches!(event.event, TurnEventKind::Finish { .. }) {
            break;
        }
    }
    Ok(())
}

/// Tells every worker that `turns` were asked to stop (the one running each acts). Best effort:
/// the stop is already recorded, and a worker sees it at the turn's next step without the word.
pub(crate) async fn tell_workers_to_stop(state: &AppState, turns: &[TurnId]) {
    let exchange = state.topology.control_exchange();
    for turn in turns {
        let key = rover_messaging::stop_routing_key(&turn.to_string());
        let message = OutgoingMessage::new(Vec::new()).transient();
        match state.publisher.publish(&exchange, &key, message).await {
            Ok(()) | Err(rover_messaging::PublishError::Unroutable { .. }) => {}
            Err(error) => {
                tracing::warn!(%error, %turn, "could not tell the workers to stop a turn");
            }
        }
    }
}
