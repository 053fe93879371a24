//! Worker events as AI SDK UI message chunks (only the chunk types and fields the protocol
//! allows): what a turn's stream sends (`turns/stream.rs`), and what a chat read back is folded
//! from (`history/messages.rs`).

use std::collections::HashMap;

use rover_contracts::ids::TurnId;
use rover_contracts::wire::{FinishReason, TurnEvent, TurnEventKind};
use serde_json::{Value, json};

/// Turns worker events into AI SDK UI message chunks (only the chunk types and fields the protocol
/// allows). Subagent activity is attributed: its tool calls carry the agent in their label part,
/// and its text arrives as a `data-subagent` part once complete.
pub(crate) struct ChunkMapper {
    pub(crate) turn: TurnId,
    pub(crate) trace: String,
    pub(crate) subagent_text: HashMap<String, String>,
}

impl ChunkMapper {
    pub(crate) fn chunks(&mut self, event: TurnEvent) -> Vec<Value> {
        let agent = event.subagent.map_or("rover", |s| s.name());
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
            // A subagent's steps are steps too: a client's "is the last step answered?" (AI SDK's
            // `lastAssistantMessageIsCompleteWithApprovalResponses`) must see a subagent's call
            // waiting for approval apart from the `task` call that waits on it.
            TurnEventKind::StartStep => vec![json!({ "type": "start-step" })],
            TurnEventKind::FinishStep => vec![json!({ "type": "finish-step" })],
            text @ (TurnEventKind::TextStart { .. }
            | TurnEventKind::TextDelta { .. }
            | TurnEventKind::TextEnd { .. }) => match event.subagent {
                Some(_) => self.subagent_text(text, agent),
                None => text_chunks(text),
            },
            TurnEventKind::Error { message, .. } => {
                vec![json!({ "type": "error", "errorText": message })]
            }
            TurnEventKind::Finish {
                reason,
                usage,
                model,
            } => finish_chunks(reason, usage, model),
            tool => tool_chunks(tool, agent),
        }
    }

    /// A subagent's text arrives as one `data-subagent` part once complete.
    fn subagent_text(&mut self, event: TurnEventKind, agent: &str) -> Vec<Value> {
        match event {
            TurnEventKind::TextStart { id } => {
                self.subagent_text.insert(id, String::new());
                Vec::new()
            }
            TurnEventKind::TextDelta { id, delta } => {
                self.subagent_text.entry(id).or_default().push_str(&delta);
                Vec::new()
            }
            TurnEventKind::TextEnd { id } => {
                let text = self.subagent_text.remove(&id).unwrap_or_default();
                vec![
                    json!({ "type": "data-subagent", "id": id, "data": { "agent": agent, "text": text } }),
                ]
            }
            _ => Vec::new(),
        }
    }
}

/// Rover's own text, as it streams.
fn text_chunks(event: TurnEventKind) -> Vec<Value> {
    match event {
        TurnEventKind::TextStart { id } => vec![json!({ "type": "text-start", "id": id })],
        TurnEventKind::TextDelta { id, delta } => {
            vec![json!({ "type": "text-delta", "id": id, "delta": delta })]
        }
        TurnEventKind::TextEnd { id } => vec![json!({ "type": "text-end", "id": id })],
        _ => Vec::new(),
    }
}

/// A tool call's chunks; a subagent's calls carry the agent in their label part.
fn tool_chunks(event: TurnEventKind, agent: &str) -> Vec<Value> {
    let chunk = match event {
        TurnEventKind::ToolInputStart {
            tool_call_id,
            tool_name,
            label,
        } => {
            return vec![
                json!({ "type": "tool-input-start", "toolCallId": tool_call_id, "toolName": tool_name }),
                json!({
                    "type": "data-tool-label",
                    "id": tool_call_id,
                    "data": { "toolCallId": tool_call_id, "toolName": tool_name, "label": label, "agent": agent },
                    "transient": true,
                }),
            ];
        }
        TurnEventKind::ToolInputAvailable {
            tool_call_id,
            tool_name,
            input,
        } => {
            json!({ "type": "tool-input-available", "toolCallId": tool_call_id, "toolName": tool_name, "input": input })
        }
        TurnEventKind::ToolOutputAvailable {
            tool_call_id,
            output,
        } => {
            json!({ "type": "tool-output-available", "toolCallId": tool_call_id, "output": output })
        }
        TurnEventKind::ToolApprovalRequest {
            approval_id,
            tool_call_id,
        } => {
            json!({ "type": "tool-approval-request", "approvalId": approval_id, "toolCallId": tool_call_id })
        }
        TurnEventKind::ToolOutputDenied { tool_call_id } => {
            json!({ "type": "tool-output-denied", "toolCallId": tool_call_id })
        }
        TurnEventKind::ToolOutputError {
            tool_call_id,
            error_text,
        } => {
            json!({ "type": "tool-output-error", "toolCallId": tool_call_id, "errorText": error_text })
        }
        _ => return Vec::new(),
    };
    vec![chunk]
}

/// How the stream ends. Stopped: with `abort` (then `[DONE]`), not `finish`; the message's
/// metadata says it was stopped (`stopped: true`, which a reopened chat shows too: an `abort`
/// chunk leaves nothing in the message) and what the turn spent. Either way the metadata names
/// the model that answered (`model`), when the turn called one.
fn finish_chunks(
    reason: FinishReason,
    usage: Option<rover_contracts::wire::TokenUsage>,
    model: Option<String>,
) -> Vec<Value> {
    let mut metadata = usage.as_ref().map_or_else(|| json!({}), usage_metadata);
    if let Some(model) = model {
        metadata["model"] = Value::String(model);
    }
    if reason == FinishReason::Abort {
        metadata["stopped"] = Value::Bool(true);
        return vec![
            json!({ "type": "message-metadata", "messageMetadata": metadata }),
            json!({ "type": "abort", "reason": "stopped" }),
        ];
    }
    let reason = match reason {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool-calls",
        FinishReason::Error | FinishReason::Abort => "error",
    };
    let mut finish = json!({ "type": "finish", "finishReason": reason });
    if metadata.as_object().is_some_and(|m| !m.is_empty()) {
        finish["messageMetadata"] = metadata;
    }
    vec![finish]
}

/// A turn's token usage as message metadata.
fn usage_metadata(usage: &rover_contracts::wire::TokenUsage) -> Value {
    json!({ "usage": {
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "totalTokens": usage.input_tokens + usage.output_tokens,
    } })
}
