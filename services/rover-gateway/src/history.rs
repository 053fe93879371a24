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

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use chrono::Utc;
use futures::StreamExt as _;
use rover_contracts::ErrorCode;
use rover_contracts::ids::{SchoolId, ThreadId, UserId};
use rover_domain::audit::AuditChange;
use rover_domain::{Actor, TenantTx, text};
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
        // `export` is a reserved chat id (`crate::chat_id::RESERVED`): no chat is shadowed here.
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
    let timed_out = rover_turnstore::approvals::timed_out_in(tx, chat.thread).await?;
    let rebuilt = messages::messages(turns, &timed_out);
    Ok(ChatDetail {
        chat: ChatSummary::from(chat),
        messages: rebuilt.messages,
        feedback,
        tool_labels: rebuilt.tool_labels,
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
    // One line, its whitespace collapsed; then the check every name passes.
    let title = body.title.split_whitespace().collect::<Vec<_>>().join(" ");
    let title = text::clean_text(&title, "title", MAX_TITLE_CHARS)?;
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

/// `GET /api/chats/export`: every chat of the caller, with its messages, as one JSON file —
/// streamed. The chats are listed first (their summaries only); then each is read in a short
/// transaction of its own when the client has taken the one before, so the gateway holds one chat
/// at a time and no connection while the client reads, however many chats there are. The bytes
/// are exactly `ChatExport`'s JSON. A failure part-way ends the response without its closing
/// bracket (the client sees an unfinished download, never a short export that parses).
#[tracing::instrument(name = "rover.gateway.chats.export", skip_all)]
async fn export(State(state): State<AppState>, principal: Principal) -> Result<Response, ApiError> {
    let mut tx = caller::tenant(&state, &principal).await?;
    let school = tx.school_id();
    let listed = chats::all(&mut tx, principal.user_id).await?;
    tx.commit().await?;
    tracing::info!(chats = listed.len(), "exporting chats");
    let head = export_head(Utc::now(), principal.user_id);
    let exporting = Exporting {
        pool: state.pool.clone(),
        school,
        user: principal.user_id,
        chats: listed.into_iter(),
        written: 0,
        ended: false,
    };
    let rest = futures::stream::try_unfold(exporting, next_piece);
    let body = futures::stream::once(async move { Ok(head) }).chain(rest);
    Ok((
        [
            (header::CONTENT_TYPE, "application/json"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"rover-chats.json\"",
            ),
        ],
        axum::body::Body::from_stream(body),
    )
        .into_response())
}

/// The export's first bytes: `ChatExport` up to the opening of its `chats` array.
fn export_head(exported_at: chrono::DateTime<Utc>, user: UserId) -> Bytes {
    let empty = ChatExport {
        exported_at,
        user_id: user,
        chats: Vec::new(),
    };
    let mut head = serde_json::to_vec(&empty).unwrap_or_default();
    // `…"chats":[]}` without `]}`; the chats and `EXPORT_TAIL` follow.
    head.truncate(head.len().saturating_sub(EXPORT_TAIL.len()));
    Bytes::from(head)
}

/// The export's last bytes: the end of the `chats` array and of the object.
const EXPORT_TAIL: &[u8] = b"]}";

/// Where a streamed export stands.
struct Exporting {
    pool: sqlx::PgPool,
    school: SchoolId,
    user: UserId,
    /// The chats still to write.
    chats: std::vec::IntoIter<Chat>,
    /// How many chats were written (a comma goes before every one but the first).
    written: usize,
    /// The tail was written.
    ended: bool,
}

/// The export's next piece: the next chat still there (one deleted meanwhile is left out), then
/// [`EXPORT_TAIL`], then nothing.
async fn next_piece(mut export: Exporting) -> Result<Option<(Bytes, Exporting)>, std::io::Error> {
    if export.ended {
        return Ok(None);
    }
    while let Some(listed) = export.chats.next() {
        let piece = export_chat(&export, &listed).await.map_err(|error| {
            tracing::warn!(%error, chats_written = export.written, "the export failed part-way");
            std::io::Error::other(error.to_string())
        })?;
        let Some(chat) = piece else { continue };
        let mut piece = if export.written == 0 {
            Vec::new()
        } else {
            vec![b',']
        };
        piece.extend_from_slice(&chat);
        export.written += 1;
        return Ok(Some((Bytes::from(piece), export)));
    }
    export.ended = true;
    Ok(Some((Bytes::from_static(EXPORT_TAIL), export)))
}

/// One chat of an export as JSON, read in its own transaction; `None` when it is gone.
async fn export_chat(export: &Exporting, listed: &Chat) -> Result<Option<Vec<u8>>, ApiError> {
    let mut tx = rover_domain::begin_tenant(&export.pool, export.school).await?;
    let Some(chat) = chats::find(&mut tx, export.user, listed.thread).await? else {
        tx.commit().await?;
        return Ok(None);
    };
    let detail = detail(&mut tx, export.user, &chat).await?;
    tx.commit().await?;
    let json = serde_json::to_vec(&detail)
        .map_err(|error| ApiError::internal(format!("Failed to write a chat: {error}")))?;
    Ok(Some(json))
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
    // Lines of text, checked as names are; a blank comment is none.
    let comment = body
        .comment
        .as_deref()
        .filter(|c| !c.trim().is_empty())
        .map(|c| text::clean_lines(c, "comment", MAX_COMMENT_CHARS))
        .transpose()?;
    if message.is_empty() || message.len() > 200 || message.chars().any(char::is_control) {
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
            comment: comment.as_deref(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn detail(id: &str, text: &str) -> ChatDetail {
        let at = chrono::DateTime::from_timestamp(1_764_800_000, 0).unwrap();
        ChatDetail {
            chat: ChatSummary {
                id: id.to_owned(),
                title: format!("Title \"{id}\""),
                created_at: at,
                last_activity_at: at,
                status: "idle".to_owned(),
            },
            messages: vec![
                json!({ "id": "m", "role": "user", "parts": [{ "type": "text", "text": text }] }),
            ],
            tool_labels: std::collections::BTreeMap::new(),
            feedback: std::collections::BTreeMap::from([(
                "m".to_owned(),
                Rating {
                    rating: "up".to_owned(),
                    comment: Some("Ünïcode, \"quotes\" and a\nline".to_owned()),
                },
            )]),
        }
    }

    /// The streamed export is, byte for byte, the `ChatExport` the gateway used to build whole.
    #[test]
    fn the_streamed_export_is_byte_for_byte_the_whole_one() {
        let at = Utc::now();
        let user = UserId::from_uuid(uuid::Uuid::from_u128(42));
        for count in 0..3 {
            let chats: Vec<ChatDetail> = (0..count)
                .map(|i| detail(&format!("chat-{i}"), "How many students?"))
                .collect();
            let whole = serde_json::to_vec(&ChatExport {
                exported_at: at,
                user_id: user,
                chats: chats.clone(),
            })
            .unwrap();
            let mut streamed = export_head(at, user).to_vec();
            for (i, chat) in chats.iter().enumerate() {
                if i > 0 {
                    streamed.push(b',');
                }
                streamed.extend(serde_json::to_vec(chat).unwrap());
            }
            streamed.extend_from_slice(EXPORT_TAIL);
            assert_eq!(
                String::from_utf8(streamed).unwrap(),
                String::from_utf8(whole).unwrap(),
                "{count} chats"
            );
        }
    }
}
