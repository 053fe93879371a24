//! The client's chat id (what `useChat({ id })` sends) and the thread it names: derived from the
//! caller and the id, so every chat route — the turn routes, Stop, the history — reaches only the
//! caller's own chat. A new chat may not take an id that names a route of its own under
//! `/api/chats/` ([`RESERVED`]): its owner could never open it there.

use rover_contracts::ErrorCode;
use rover_contracts::ids::{ThreadId, UserId};

use crate::error::ApiError;

/// The thread of `user`'s chat id: a UUID derived from the user (and so their school) and the id.
/// A chat is keyed by (school, user, id): the same id names another thread for every staff member,
/// so a colleague can neither claim an id first nor learn that it is in use — every chat route
/// answers a colleague's id exactly as an unused one.
pub(crate) fn thread_id(user: UserId, chat: &str) -> Result<ThreadId, ApiError> {
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
        format!("{user}/{chat}").as_bytes(),
    )))
}

/// Chat ids that are routes of the history API (`/api/chats/export`): a chat with such an id would
/// be shadowed by the route, so no new chat may take one (`tests/it/chats.rs` checks this list
/// against every route of the OpenAPI document).
pub(crate) const RESERVED: [&str; 1] = ["export"];

/// The thread of `user`'s chat id for a chat POST, which may open a new chat: [`thread_id`], and
/// an id in [`RESERVED`] refused.
pub(crate) fn new_thread_id(user: UserId, chat: &str) -> Result<ThreadId, ApiError> {
    if RESERVED.contains(&chat) {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            format!(
                "The chat id \"{chat}\" is reserved: it names a route of the chat history API."
            ),
        ));
    }
    thread_id(user, chat)
}
