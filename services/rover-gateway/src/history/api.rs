//! The chat history API's surface, which its routes and its part of the OpenAPI document both
//! read: the request and response types (with their JSON Schemas), and the audit events and the
//! permission its writes carry.

use chrono::{DateTime, Utc};
use rover_contracts::ids::UserId;
use rover_contracts::permission::{Action, Permission, Subject};
use rover_turnstore::chats::Chat;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Deleting a chat, in the audit log.
pub(crate) const DELETE_EVENT: &str = "delete.chat";
/// Erasing a staff member's chats, in the audit log.
pub(crate) const ERASE_EVENT: &str = "erase.chats";
/// Who may erase a staff member's chats: who may delete staff.
pub(crate) const ERASE_PERMISSION: Permission = Permission::new(Action::Delete, Subject::Staff);

/// One chat, as the list shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ChatSummary {
    /// The client's chat id (what `useChat({ id })` and `POST /api/chat` use).
    pub id: String,
    /// The title: from the chat's first message until renamed.
    pub title: String,
    /// When the chat was opened.
    pub created_at: DateTime<Utc>,
    /// When a reply last started or ended.
    pub last_activity_at: DateTime<Utc>,
    /// `idle`, `running` (a reply is queued or running), `awaiting_approval` (a write waits for
    /// the staff member's answer), `approval_expired` (it waited past its time, nobody answered,
    /// and it was not run) or `awaiting_answer` (Rover asked a question).
    #[schemars(regex(
        pattern = r"^(idle|running|awaiting_approval|approval_expired|awaiting_answer)$"
    ))]
    pub status: String,
}

impl From<&Chat> for ChatSummary {
    fn from(chat: &Chat) -> Self {
        Self {
            id: chat.chat_id.clone(),
            title: chat.title.clone(),
            created_at: chat.created_at,
            last_activity_at: chat.last_activity_at,
            status: chat.status.as_str().to_owned(),
        }
    }
}

/// A page of chats.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ChatList {
    /// The chats, newest activity first.
    pub chats: Vec<ChatSummary>,
    /// Pass as `cursor` for the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// One chat with its messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ChatDetail {
    /// The chat.
    #[serde(flatten)]
    pub chat: ChatSummary,
    /// The chat as AI SDK `UIMessage`s, exactly as a client holds them after streaming it: hand
    /// them to `useChat({ id, messages })` to continue it.
    pub messages: Vec<Value>,
    /// Your ratings of its replies, by message id.
    pub feedback: std::collections::BTreeMap<String, Rating>,
    /// Each tool call's label and the agent that made it, by tool call id: what the stream's
    /// transient `data-tool-label` parts carried, which a client keeps beside the messages.
    pub tool_labels: std::collections::BTreeMap<String, ToolLabel>,
}

/// A tool call's activity label and who made it: the `data` of the stream's `data-tool-label`
/// part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ToolLabel {
    /// The tool call.
    pub tool_call_id: String,
    /// The tool.
    pub tool_name: String,
    /// What the Hub shows while it runs ("Creating a department…").
    pub label: String,
    /// The agent that made the call: `rover`, or the specialist (subagent) it delegated to.
    pub agent: String,
}

/// A rating of one reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Rating {
    /// `up` or `down`.
    pub rating: String,
    /// The comment given with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// `GET /api/chats`'s query.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ListParams {
    /// Chats per page (1–100, default 20).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    /// Where the page starts: a previous page's `nextCursor`.
    pub cursor: Option<String>,
    /// Only chats whose title or message text matches (web-search syntax: words, "phrases",
    /// -excluded, or).
    #[schemars(length(max = 200))]
    pub q: Option<String>,
}

/// The body of `PATCH /api/chats/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RenameChatBody {
    /// The chat's new title.
    #[schemars(length(min = 1, max = 200))]
    pub title: String,
}

/// The body of `POST /api/chats/{id}/messages/{messageId}/feedback`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct FeedbackBody {
    /// `up` or `down`.
    #[schemars(regex(pattern = r"^(up|down)$"))]
    pub rating: String,
    /// Why, in the staff member's words.
    #[schemars(length(max = 2000))]
    pub comment: Option<String>,
}

/// A staff member's chats, for them to keep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ChatExport {
    /// When the export was made.
    pub exported_at: DateTime<Utc>,
    /// Whose chats these are.
    pub user_id: UserId,
    /// Every chat, oldest first, with its messages.
    pub chats: Vec<ChatDetail>,
}

/// What an erasure removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Erased {
    /// How many chats were removed.
    pub erased: u64,
}
