//! A chat POST's body, read and bounded: only the last message is taken (history is the
//! server's), its text, attachments and tool answers checked against the limits.

use axum::http::HeaderMap;
use rover_contracts::ErrorCode;
use rover_contracts::context::Attachment;
use rover_contracts::ids::{CampusId, ThreadId, UserId};
use rover_contracts::wire::TurnInput;
use serde::Deserialize;
use serde_json::Value;

use crate::chat_id::new_thread_id;
use crate::error::ApiError;
use crate::extract::CAMPUS_HEADER;
use crate::input;
use crate::settings::Settings;

#[derive(Debug, Clone, Copy)]
pub(crate) struct InputLimits {
    pub(crate) max_json_depth: usize,
    pub(crate) max_message_bytes: usize,
    pub(crate) max_stored_message_bytes: usize,
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
            max_stored_message_bytes: settings.chat.max_stored_message_bytes,
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
    /// The staff member's answers to approval requests (then `input` is a `Continue` whose chain
    /// the gateway learns when it records them).
    pub(crate) approvals: Vec<rover_turnstore::approvals::ApprovalAnswer>,
    /// The client's chat id.
    pub(crate) chat_id: String,
    /// The staff member's message as the client sent it (`id`, `role`, `parts`, `metadata`),
    /// kept so the chat reads back as the client held it; `None` for an answer.
    pub(crate) sent: Option<Value>,
}

/// Reads a `POST /api/chat` body: the depth check, the JSON, the chat id, the last message and
/// the size limits. Every failure is a 400 or 413 [`ApiError`]; no input makes it panic (the
/// property tests in `turns/fuzz.rs` feed it arbitrary and mutated bodies).
pub(crate) fn parse_chat_request(
    body: &[u8],
    limits: &InputLimits,
    user: UserId,
) -> Result<ChatTurn, ApiError> {
    let body: ChatRequest = input::parse_json(body, limits.max_json_depth).map_err(|error| {
        // A chat body that does not fit is a malformed request, not a tool's bad arguments.
        ApiError::new(ErrorCode::InvalidRequest, error.message)
    })?;
    let thread = new_thread_id(user, &body.id)?;
    let approvals = match body.messages.last() {
        Some(last) if last.role == "assistant" && last.parts.len() <= limits.max_parts => {
            super::approvals::answers(&last.parts)?
        }
        _ => Vec::new(),
    };
    let (input, attachments) = if approvals.is_empty() {
        turn_input(&body.messages, limits)?
    } else {
        (TurnInput::Continue { chain: Vec::new() }, Vec::new())
    };
    let sent = match (&input, body.messages.last()) {
        (TurnInput::Message { .. }, Some(last)) => Some(stored(last, limits)?),
        _ => None,
    };
    Ok(ChatTurn {
        thread,
        input,
        attachments,
        campus: body.campus_id,
        approvals,
        chat_id: body.id,
        sent,
    })
}

/// `useChat`'s request body. Only the last message is used; the rest of `messages` is ignored.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ChatRequest {
    id: String,
    #[serde(default)]
    messages: Vec<UiMessage>,
    /// An optional campus for a school-wide user's chat.
    #[serde(default)]
    campus_id: Option<CampusId>,
}

#[derive(Debug, Deserialize)]
pub(super) struct UiMessage {
    #[serde(default)]
    id: Option<String>,
    role: String,
    #[serde(default)]
    parts: Vec<Value>,
    #[serde(default)]
    metadata: Option<Value>,
}

impl UiMessage {
    /// The message as the client holds it (a missing id is left for the gateway to fill).
    fn as_sent(&self) -> Value {
        let mut sent = serde_json::json!({ "role": self.role, "parts": self.parts });
        if let Some(id) = &self.id {
            sent["id"] = Value::from(id.as_str());
        }
        if let Some(metadata) = self.metadata.as_ref().filter(|m| !m.is_null()) {
            sent["metadata"] = metadata.clone();
        }
        sent
    }
}

/// The staff member's message as the chat keeps it, within `max_stored_message_bytes` as a whole:
/// the text limit bounds what the model reads, this bounds what is stored and served again (the
/// client's metadata and every part, whatever its type).
fn stored(last: &UiMessage, limits: &InputLimits) -> Result<Value, ApiError> {
    let sent = last.as_sent();
    if sent.to_string().len() > limits.max_stored_message_bytes {
        return Err(too_large(format!(
            "The message is too large as a whole — its parts and metadata together (at most {} \
             bytes).",
            limits.max_stored_message_bytes
        )));
    }
    Ok(sent)
}

pub(super) fn too_large(message: String) -> ApiError {
    ApiError::new(ErrorCode::TooLarge, message)
}

/// What the last message of the body asks for, and its attachments, within the limits.
pub(super) fn turn_input(
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
        "user" => user_message(last, limits),
        // The one exception to "history is the server's": the answer to `ask_user`, which the
        // worker accepts only for the call the thread is waiting on.
        "assistant" => Ok((question_answer(last, limits)?, Vec::new())),
        _ => Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "The last message must be the user's.",
        )),
    }
}

/// A staff member's message: its text and attachments, within the limits, not empty.
fn user_message(
    last: &UiMessage,
    limits: &InputLimits,
) -> Result<(TurnInput, Vec<Attachment>), ApiError> {
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

/// The answer to `ask_user` in an assistant message, within the limits.
fn question_answer(last: &UiMessage, limits: &InputLimits) -> Result<TurnInput, ApiError> {
    let answered = last
        .parts
        .iter()
        .rev()
        .find(|p| p["type"] == "tool-ask_user" && p["state"] == "output-available");
    let (Some(part), Some(tool_call_id)) =
        (answered, answered.and_then(|p| p["toolCallId"].as_str()))
    else {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "The last message answers no question.",
        ));
    };
    let output = part["output"].clone();
    if output.to_string().len() > limits.max_message_bytes {
        return Err(too_large(format!(
            "The answer is too long (at most {} bytes).",
            limits.max_message_bytes
        )));
    }
    Ok(TurnInput::AskUserAnswer {
        tool_call_id: tool_call_id.to_owned(),
        output,
    })
}

/// An attachment is a link the Hub uploaded the file to: an `https` (or `http`) URL of bounded
/// length, with a bounded name and media type. It travels in the runtime context, and so in
/// every model call of the turn: inline `data:` URLs (the file itself) and other schemes are
/// refused.
pub(super) fn check_attachment(
    attachment: &Attachment,
    limits: &InputLimits,
) -> Result<(), ApiError> {
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

pub(super) fn campus_choice(
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

/// What the chat keeps of this POST, so it reads back as the client held it: the staff member's
/// message (its id filled in if the client sent none), or the answers it carried; a new chat's
/// title comes from its first message.
pub(super) fn opening<'a>(
    chat: &'a ChatTurn,
    caller: &crate::caller::Caller,
    turn: rover_contracts::ids::TurnId,
    trace: &str,
) -> rover_turnstore::chats::Opening<'a> {
    let sent = chat.sent.clone().map(|mut sent| {
        if sent.get("id").is_none() {
            sent["id"] = serde_json::Value::from(format!("user-{turn}"));
        }
        sent
    });
    let title = match &chat.input {
        TurnInput::Message { text } => rover_turnstore::chats::title_from(text),
        _ => None,
    };
    let answers = match &chat.input {
        TurnInput::AskUserAnswer {
            tool_call_id,
            output,
        } => {
            Some(serde_json::json!({ "answer": { "toolCallId": tool_call_id, "output": output } }))
        }
        _ if !chat.approvals.is_empty() => Some(serde_json::json!({
            "approvals": chat.approvals.iter().map(|a| serde_json::json!({
                "approvalId": a.approval_id,
                "approved": a.approved,
                "reason": a.reason,
                "editedInput": a.edited,
            })).collect::<Vec<_>>(),
        })),
        _ => None,
    };
    rover_turnstore::chats::Opening {
        chat_id: &chat.chat_id,
        campus: caller.scope().run_mode.campus().map(|c| c.id),
        title,
        sent,
        answers,
        trace_id: (!trace.is_empty()).then(|| trace.to_owned()),
    }
}
