//! The messages the services exchange over RabbitMQ, and their framing.
//!
//! Every message travels as `{"v":<version>,"kind":"<kind>","body":{…}}`. A service refuses a
//! message of another version with [`WireError::UnsupportedVersion`], which names both versions,
//! rather than misreading it.

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};

use crate::context::{RuntimeContext, Subagent};
use crate::envelope::AgentToolResult;
use crate::error::ErrorCode;
use crate::identity::SignedTurnIdentity;
use crate::ids::{ThreadId, ToolCallId, TurnId};

/// A message type that travels between services.
pub trait WireMessage: Serialize + DeserializeOwned {
    /// The `kind` written in the frame.
    const KIND: &'static str;
    /// The version this build writes and accepts. Bump it on any incompatible change.
    const VERSION: u16;
}

/// Why bytes could not be read as a message.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The frame names a version this service does not speak.
    #[error("unsupported {kind} message version {got} (this service speaks version {supported})")]
    UnsupportedVersion {
        /// The message kind.
        kind: &'static str,
        /// What the message carried.
        got: u16,
        /// What this build speaks.
        supported: u16,
    },
    /// A frame of another kind arrived where this one was expected.
    #[error("expected a {expected} message, got {got:?}")]
    WrongKind {
        /// What was expected.
        expected: &'static str,
        /// What arrived (truncated).
        got: String,
    },
    /// Not a frame, or the body does not match the kind.
    #[error("malformed {kind} message: {source}")]
    Malformed {
        /// The message kind.
        kind: &'static str,
        /// The parser's complaint.
        source: serde_json::Error,
    },
}

impl WireError {
    /// The stable code for this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            WireError::UnsupportedVersion { .. } => ErrorCode::UnsupportedVersion,
            WireError::WrongKind { .. } | WireError::Malformed { .. } => ErrorCode::InvalidRequest,
        }
    }
}

#[derive(Serialize)]
struct FrameOut<'a, M> {
    v: u16,
    kind: &'static str,
    body: &'a M,
}

#[derive(Deserialize)]
struct FrameIn<M> {
    v: u16,
    kind: String,
    body: M,
}

#[derive(Deserialize)]
struct Header {
    v: u16,
    kind: String,
    #[serde(rename = "body")]
    _body: IgnoredAny,
}

/// Frames and serialises a message.
pub fn encode<M: WireMessage>(message: &M) -> Vec<u8> {
    let frame = FrameOut {
        v: M::VERSION,
        kind: M::KIND,
        body: message,
    };
    // Room for a typical message from the start, rather than growing from a few bytes by
    // doubling (a tool reply of a few kilobytes was copied nine times on the way).
    let mut bytes = Vec::with_capacity(1024);
    // Wire types are plain data with string keys: serialising them cannot fail.
    match serde_json::to_writer(&mut bytes, &frame) {
        Ok(()) => bytes,
        Err(_) => Vec::new(),
    }
}

/// Reads a framed message, refusing other kinds and versions with a clear error.
pub fn decode<M: WireMessage>(bytes: &[u8]) -> Result<M, WireError> {
    match serde_json::from_slice::<FrameIn<M>>(bytes) {
        Ok(frame) => check_header(M::KIND, M::VERSION, frame.v, &frame.kind).map(|()| frame.body),
        // Diagnose: a frame of another version or kind explains the failure better than serde does.
        Err(source) => match serde_json::from_slice::<Header>(bytes) {
            Ok(header) => {
                check_header(M::KIND, M::VERSION, header.v, &header.kind)?;
                Err(WireError::Malformed {
                    kind: M::KIND,
                    source,
                })
            }
            Err(_) => Err(WireError::Malformed {
                kind: M::KIND,
                source,
            }),
        },
    }
}

fn check_header(
    kind: &'static str,
    version: u16,
    got_v: u16,
    got_kind: &str,
) -> Result<(), WireError> {
    if got_kind != kind {
        return Err(WireError::WrongKind {
            expected: kind,
            got: got_kind.chars().take(64).collect(),
        });
    }
    if got_v != version {
        return Err(WireError::UnsupportedVersion {
            kind,
            got: got_v,
            supported: version,
        });
    }
    Ok(())
}

/// Gateway → worker: run one turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnRequest {
    /// The turn.
    pub turn_id: TurnId,
    /// Its thread.
    pub thread_id: ThreadId,
    /// The assistant message id the client sees in `start`.
    pub message_id: String,
    /// Who, where, what they may do — minted from live rows.
    pub context: RuntimeContext,
    /// The same identity and scope, signed by the gateway, for the tool server.
    pub identity: SignedTurnIdentity,
    /// What the user said this turn.
    pub input: TurnInput,
}

impl WireMessage for TurnRequest {
    const KIND: &'static str = "turn_request";
    const VERSION: u16 = 1;
}

/// What starts a turn: a new message, or the answer to an `ask_user` call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TurnInput {
    /// A user message.
    Message {
        /// Its text.
        text: String,
    },
    /// The staff member's answer to the model's question.
    AskUserAnswer {
        /// The `ask_user` call being answered.
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        /// The answer, as the client sent it.
        output: serde_json::Value,
    },
    /// The staff member answered the approval requests a turn paused on (the gateway recorded the
    /// answers, bound to this turn): the paused turn's loop continues from its journal.
    Continue {
        /// The paused chain of turns, root first: each paused and was continued by the next.
        chain: Vec<TurnId>,
    },
}

/// Worker → gateway: one event of a turn, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnEvent {
    /// The turn.
    pub turn_id: TurnId,
    /// Position in the turn, from 0, without gaps: a gateway replays and de-duplicates by it.
    pub seq: u64,
    /// The subagent that produced it; absent for Rover itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent: Option<Subagent>,
    /// What happened.
    pub event: TurnEventKind,
}

impl WireMessage for TurnEvent {
    const KIND: &'static str = "turn_event";
    const VERSION: u16 = 1;
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FinishReason {
    /// The model answered.
    Stop,
    /// The step limit was reached.
    Length,
    /// The turn is waiting for the user (`ask_user`).
    ToolCalls,
    /// The turn failed.
    Error,
    /// The staff member stopped it (`POST /api/chat/{id}/stop`, or a newer message that
    /// interrupts it); what it said and did until then is kept. The stream ends with `abort`.
    Abort,
}

/// The events of a turn. They map one-to-one onto the AI SDK UI message stream chunks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
pub enum TurnEventKind {
    /// The turn started.
    Start {
        /// The assistant message id.
        message_id: String,
        /// The W3C trace id of the turn, when traces are recorded, so a replayed stream quotes
        /// the trace the turn actually ran in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace_id: Option<String>,
    },
    /// A model step started.
    StartStep,
    /// A model step ended.
    FinishStep,
    /// A text part opens.
    TextStart {
        /// The part id.
        id: String,
    },
    /// More text.
    TextDelta {
        /// The part id.
        id: String,
        /// The new text.
        delta: String,
    },
    /// A text part closes.
    TextEnd {
        /// The part id.
        id: String,
    },
    /// The model started a tool call.
    ToolInputStart {
        /// The call.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The activity line ("Creating a department…").
        label: String,
    },
    /// The call's arguments are complete.
    ToolInputAvailable {
        /// The call.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The arguments.
        input: serde_json::Value,
    },
    /// The call succeeded; `output` is the envelope.
    ToolOutputAvailable {
        /// The call.
        tool_call_id: String,
        /// The envelope the model read.
        output: serde_json::Value,
    },
    /// The call is a write that waits for the staff member's approval; the turn pauses.
    ToolApprovalRequest {
        /// The id the client answers with (`addToolApprovalResponse`).
        approval_id: String,
        /// The call.
        tool_call_id: String,
    },
    /// The staff member declined the call; it did not run.
    ToolOutputDenied {
        /// The call.
        tool_call_id: String,
    },
    /// The call failed; the Hub hides failed rows and lets Rover's reply carry the news.
    ToolOutputError {
        /// The call.
        tool_call_id: String,
        /// The envelope's error text.
        error_text: String,
    },
    /// The turn failed.
    Error {
        /// The stable code.
        code: ErrorCode,
        /// A plain sentence for the user.
        message: String,
    },
    /// The turn ended.
    Finish {
        /// Why.
        reason: FinishReason,
        /// The tokens the turn's model calls used, as the model reported them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<TokenUsage>,
        /// The model that answered the turn's last model call (the name its response gave);
        /// absent when the turn called none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
}

/// Tokens a turn's model calls used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    /// Prompt tokens, summed over the turn's model calls.
    pub input_tokens: u64,
    /// Completion tokens, summed over the turn's model calls.
    pub output_tokens: u64,
}

/// Worker → tool server: run one RPC tool as the signed identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The idempotency key: the same id always gets the same reply.
    pub call_id: ToolCallId,
    /// The tool's event (also the routing key).
    pub event: String,
    /// Who the call acts as, signed by the gateway. Never taken from the model.
    pub identity: SignedTurnIdentity,
    /// The model's arguments, checked by the tool server against the tool's schema.
    pub args: serde_json::Value,
}

impl WireMessage for ToolCall {
    const KIND: &'static str = "tool_call";
    const VERSION: u16 = 1;
}

/// How a tool call went, for metrics and the Hub (the model reads only the envelope).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolOutcome {
    /// Succeeded.
    Ok,
    /// Refused by policy, relationship, identity or tenant checks.
    Denied,
    /// Arguments did not match the schema, or the tool is unknown.
    Invalid,
    /// The target does not exist in the caller's scope.
    NotFound,
    /// Conflicts with existing data.
    Conflict,
    /// A name fits more than one thing in scope: nothing ran, and the error asks which.
    Ambiguous,
    /// A write the school's policy says needs the staff member's approval, sent without one
    /// bound to this very call: nothing ran.
    ApprovalRequired,
    /// Failed for another reason.
    Error,
}

impl ToolOutcome {
    /// The outcome as a metric label (`ok`, `denied`, `invalid`, `not_found`, `conflict`,
    /// `ambiguous`, `approval_required`, `error`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Denied => "denied",
            Self::Invalid => "invalid",
            Self::NotFound => "not_found",
            Self::Conflict => "conflict",
            Self::Ambiguous => "ambiguous",
            Self::ApprovalRequired => "approval_required",
            Self::Error => "error",
        }
    }
}

/// Tool server → worker: the reply to a [`ToolCall`].
///
/// A caller reads the data as a [`serde_json::Value`] (the default). The tool server writes it as
/// a [`serde_json::value::RawValue`]: the domain's output serialised once, straight into the
/// reply's bytes, with no `Value` built in between (decision 0021). The bytes are the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolReply<D = serde_json::Value> {
    /// The call answered.
    pub call_id: ToolCallId,
    /// How it went.
    pub outcome: ToolOutcome,
    /// What the model reads.
    pub result: AgentToolResult<D>,
}

impl<D: Serialize + DeserializeOwned> WireMessage for ToolReply<D> {
    const KIND: &'static str = "tool_reply";
    const VERSION: u16 = 1;
}

impl ToolReply {
    /// What a caller hands on from a tool call: the reply's outcome (as a metric label) and
    /// envelope, or an error envelope when the reply cannot be read or never came (`None`: the
    /// deadline passed or the broker failed; the caller logs why).
    pub fn read(bytes: Option<&[u8]>) -> (&'static str, AgentToolResult<serde_json::Value>) {
        let Some(bytes) = bytes else {
            return (
                "error",
                AgentToolResult::error("The tool did not answer in time. Try again in a moment."),
            );
        };
        match decode::<ToolReply>(bytes) {
            Ok(reply) => (reply.outcome.as_str(), reply.result),
            Err(error) => (
                "error",
                AgentToolResult::error(format!(
                    "The tool server's reply could not be read: {error}."
                )),
            ),
        }
    }
}
