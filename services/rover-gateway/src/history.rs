//! The chat history a Hub reads back (`/api/chats`): a staff member's chats listed, searched,
//! reopened as AI SDK `UIMessage[]`, renamed and deleted; their export; feedback on a reply; a
//! school admin's erasure of one staff member's chats.
//!
//! Every route keys a chat by the caller and the client's chat id (the thread id is derived from
//! both, `crate::chat_id`), so a colleague's or another school's chat answers exactly as one that
//! does not exist. The rows are `rover_turnstore::chats`'; the messages are rebuilt from each
//! turn's recorded events by [`messages`], the same chunks the stream sent.
//!
//! - this file: the routes;
//! - [`api`]: the request and response types, and the audit events and permission of the writes;
//! - [`messages`]: a chat read back as `UIMessage`s;
//! - [`openapi`]: the history API's part of the OpenAPI document.

mod api;
mod messages;
pub(crate) mod openapi;

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use chrono::Utc;
use rover_contracts::ErrorCode;
use rover_contracts::ids::{ThreadId, UserId};
use rover_domain::audit::AuditChange;
use rover_domain::{Actor, TenantTx};
use rover_turnstore::chats::{self, Chat, Cursor, ListQuery};
use serde_json::json;

use self::api::{
    ChatDetail, ChatExport, ChatList, ChatSummary, DELETE_EVENT, ERASE_EVENT, ERASE_PERMISSION,
    Erased, FeedbackBody, ListParams, Rating, RenameChatBody,
};
use crate::audit;
use crate::auth::Principal;
use crate::authorize::authorize;
use crate::caller;
use crate::chat_id::thread_id;
use crate::error::ApiError;
use crate::extract::{Body, Campus, Params, PathId};
use crate::state::AppState;
use crate::stop::{Stopped, stop_thread, tell_workers_to_stop};

/// The chat routes of the history API.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/api/chats", get(list))
        .route("/api/chats/export", get(export))
        .route("/api/chats/{id}", get(read).patch(rename).delete(remove))
        .route(
            "/api/chats/{id}/messages/{message}/feedback",
            post(feedback),
        )
        .route("/api/staff/{id}/chats", delete(erase))
}

/// How many chats a page holds unless `limit` says otherwise.
pub(crate) const DEFAULT_PAGE: u32 = 20;
/// The most a page holds.
pub(crate) const MAX_PAGE: u32 = 100;
/// The longest search.
const MAX_SEARCH_BYTES: usize = 200;
/// The longest title.
const MAX_TITLE_CHARS: usize = 200;
/// The longest feedback comment.
const MAX_COMMENT_CHARS: usize = 2000;

fn not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "No chat with that id was found.")
}

/// The caller's thread for chat id `chat` (400 when it is no chat id).
fn thread(principal: &Principal, chat: &str) -> Result<ThreadId, ApiError> {
    thread_id(principal.user_id, chat)
}

/// A request whose arguments do not fit (400 `invalid_arguments`).
fn invalid(message: &str) -> ApiError {
    ApiError::new(ErrorCode::InvalidArguments, message.to_owned())
}

fn list_query(params: ListParams) -> Result<ListQuery, ApiError> {
    let limit = params.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(invalid("`limit` must be 1–100."));
    }
    let cursor = params
        .cursor
        .map(|token| Cursor::decode(&token).ok_or_else(|| invalid("`cursor` is not a cursor.")))
        .transpose()?;
    let search = params
        .q
        .map(|q| q.trim().to_owned())
        .filter(|q| !q.is_empty());
    if search
        .as_ref()
        .is_some_and(|q| q.len() > MAX_SEARCH_BYTES || q.chars().any(char::is_control))
    {
        return Err(invalid(
            "`q` must be at most 200 bytes without control characters.",
        ));
    }
    Ok(ListQuery {
        limit,
        cursor,
        search,
        campus: None,
    })
}

/// `GET /api/chats`: the caller's chats in their scope (a campus-scoped caller sees the chats
/// opened in that campus), newest activity first.
#[tracing::instrument(name = "rover.gateway.chats.list", skip_all)]
async fn list(
    State(state): State<AppState>,
    principal: Principal,
    Campus(campus): Campus,
    Params(params): Params<ListParams>,
) -> Result<Json<ChatList>, ApiError> {
    let mut query = list_query(params)?;
    let mut tx = caller::tenant(&state, &principal).await?;
    let caller = caller::resolve(&mut tx, &principal, campus, Vec::new()).await?;
    query.campus = caller.scope().run_mode.campus().map(|c| c.id);
    let (chats, next) = chats::list(&mut tx, principal.user_id, &query).await?;
    tx.commit().await?;
    Ok(Json(ChatList {
        chats: chats.iter().map(ChatSummary::from).collect(),
        next_cursor: next.map(Cursor::encode),
    }))
}

/// `user`'s `chat`, with its messages and their ratings.
async fn detail(
    tx: &mut TenantTx,
    user: UserId,
    chat: &Chat,
) -> Result<ChatDetail, rover_domain::DomainError> {
    let turns = chats::turns(tx, chat.thread).await?;
    let feedback = chats::ratings(tx, chat.thread, user)
        .await?
        .into_iter()
        .map(|(message, rating, comment)| (message, Rating { rating, comment }))
        .collect();
    Ok(ChatDetail {
        chat: ChatSummary::from(chat),
        messages: messages::messages(turns),
        feedback,
    })
}

/// `GET /api/chats/{id}`: the chat as `UIMessage[]`.
#[tracing::instrument(name = "rover.gateway.chats.read", skip_all)]
async fn read(
    State(state): State<AppState>,
    principal: Principal,
    Path(chat): Path<String>,
) -> Result<Json<ChatDetail>, ApiError> {
    let thread = thread(&principal, &chat)?;
    let mut tx = caller::tenant(&state, &principal).await?;
    let found = chats::find(&mut tx, principal.user_id, thread)
        .await?
        .ok_or_else(not_found)?;
    let detail = detail(&mut tx, principal.user_id, &found).await?;
    tx.commit().await?;
    Ok(Json(detail))
}

/// `PATCH /api/chats/{id}`: a new title.
#[tracing::instrument(name = "rover.gateway.chats.rename", skip_all)]
async fn rename(
    State(state): State<AppState>,
    principal: Principal,
    Path(chat): Path<String>,
    Body(body): Body<RenameChatBody>,
) -> Result<Json<ChatSummary>, ApiError> {
    let thread = thread(&principal, &chat)?;
    let title = body.title.split_whitespace().collect::<Vec<_>>().join(" ");
    if title.is_empty() || title.chars().count() > MAX_TITLE_CHARS {
        return Err(invalid("The title must be 1–200 characters."));
    }
    let mut tx = caller::tenant(&state, &principal).await?;
    let renamed = chats::rename(&mut tx, principal.user_id, thread, &title)
        .await?
        .ok_or_else(not_found)?;
    tx.commit().await?;
    Ok(Json(ChatSummary::from(&renamed)))
}

/// `DELETE /api/chats/{id}`: a running reply is stopped first, then the chat and everything it
/// owns go; the deletion is audited (the thread id and how many turns — no content).
#[tracing::instrument(name = "rover.gateway.chats.delete", skip_all, fields(thread_id = tracing::field::Empty))]
async fn remove(
    State(state): State<AppState>,
    principal: Principal,
    Campus(campus): Campus,
    Path(chat): Path<String>,
) -> Result<StatusCode, ApiError> {
    let thread = thread(&principal, &chat)?;
    tracing::Span::current().record("thread_id", tracing::field::display(thread));
    {
        let mut tx = caller::tenant(&state, &principal).await?;
        let found = chats::find(&mut tx, principal.user_id, thread).await?;
        tx.commit().await?;
        if found.is_none() {
            return Err(not_found());
        }
    }
    if let Stopped::Ending(turns) = stop_thread(&state, &principal, thread).await? {
        // Deleted all the same: a turn still ending can write nothing more to a deleted thread.
        tracing::warn!(
            turns = turns.len(),
            "deleting a chat whose reply is still ending"
        );
    }
    let mut tx = caller::tenant(&state, &principal).await?;
    let caller = caller::resolve(&mut tx, &principal, campus, Vec::new()).await?;
    let deleted = chats::delete(&mut tx, principal.user_id, thread)
        .await?
        .ok_or_else(not_found)?;
    let change = AuditChange {
        subject_id: thread.to_string(),
        before: Some(json!({ "turns": deleted.turns })),
        after: json!({ "deleted": true }),
        named: None,
    };
    audit::record(
        &mut tx,
        &Actor::from(&caller.identity()),
        &caller.scope(),
        DELETE_EVENT,
        &change,
    )
    .await?;
    tx.commit().await?;
    tracing::info!(%thread, turns = deleted.turns, "deleted a chat");
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /api/chats/export`: every chat of the caller, with its messages, as one JSON file.
#[tracing::instrument(name = "rover.gateway.chats.export", skip_all)]
async fn export(State(state): State<AppState>, principal: Principal) -> Result<Response, ApiError> {
    let mut tx = caller::tenant(&state, &principal).await?;
    let mut exported = Vec::new();
    for chat in chats::all(&mut tx, principal.user_id).await? {
        exported.push(detail(&mut tx, principal.user_id, &chat).await?);
    }
    tx.commit().await?;
    let export = ChatExport {
        exported_at: Utc::now(),
        user_id: principal.user_id,
        chats: exported,
    };
    Ok((
        [(
            header::CONTENT_DISPOSITION,
            "attachment; filename=\"rover-chats.json\"",
        )],
        Json(export),
    )
        .into_response())
}

/// `POST /api/chats/{id}/messages/{messageId}/feedback`: the caller's rating of one reply, kept
/// with the turn that wrote it and its trace; rating it again replaces the rating.
#[tracing::instrument(name = "rover.gateway.chats.feedback", skip_all)]
async fn feedback(
    State(state): State<AppState>,
    principal: Principal,
    Path((chat, message)): Path<(String, String)>,
    Body(body): Body<FeedbackBody>,
) -> Result<StatusCode, ApiError> {
    let thread = thread(&principal, &chat)?;
    let up = match body.rating.as_str() {
        "up" => true,
        "down" => false,
        _ => return Err(invalid("`rating` must be \"up\" or \"down\".")),
    };
    let comment = body
        .comment
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty());
    if comment.is_some_and(|c| c.chars().count() > MAX_COMMENT_CHARS) {
        return Err(invalid("`comment` must be at most 2000 characters."));
    }
    if message.is_empty() || message.len() > 200 {
        return Err(not_found());
    }
    let mut tx = caller::tenant(&state, &principal).await?;
    chats::find(&mut tx, principal.user_id, thread)
        .await?
        .ok_or_else(not_found)?;
    let rated = chats::rate(
        &mut tx,
        thread,
        principal.user_id,
        &chats::Feedback {
            message_id: &message,
            up,
            comment,
        },
    )
    .await?
    .ok_or_else(|| {
        ApiError::new(
            ErrorCode::NotFound,
            "No reply with that id was found in this chat.",
        )
    })?;
    tx.commit().await?;
    tracing::info!(turn_id = %rated.turn, up, "feedback on a reply");
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /api/staff/{id}/chats`: a school admin erases every chat of one staff member in their
/// scope (running replies are stopped by the deletion: their turns can write nothing more). Needs
/// `delete:Staff`; a staff member outside the caller's school or campus is not found. Audited.
#[tracing::instrument(name = "rover.gateway.chats.erase", skip_all)]
async fn erase(
    State(state): State<AppState>,
    principal: Principal,
    Campus(campus): Campus,
    PathId(staff): PathId<UserId>,
) -> Result<Json<Erased>, ApiError> {
    let mut tx = caller::tenant(&state, &principal).await?;
    let caller = caller::resolve(&mut tx, &principal, campus, Vec::new()).await?;
    authorize(&mut tx, principal.user_id, ERASE_PERMISSION).await?;
    let scope_campus = caller.scope().run_mode.campus().map(|c| c.id);
    if !chats::staff_in_scope(&mut tx, staff, scope_campus).await? {
        return Err(ApiError::new(
            ErrorCode::NotFound,
            "No staff member with that id was found.",
        ));
    }
    let (erased, stopping) = chats::erase(&mut tx, staff).await?;
    let change = AuditChange {
        subject_id: staff.to_string(),
        before: Some(json!({ "chats": erased })),
        after: json!({ "erased": true }),
        named: None,
    };
    audit::record(
        &mut tx,
        &Actor::from(&caller.identity()),
        &caller.scope(),
        ERASE_EVENT,
        &change,
    )
    .await?;
    tx.commit().await?;
    tell_workers_to_stop(&state, &stopping).await;
    tracing::info!(%staff, erased, "erased a staff member's chats");
    Ok(Json(Erased { erased }))
}
