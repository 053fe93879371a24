//! Worker events as AI SDK UI message chunks (only the chunk types and fields the protocol
//! allows).

use std::collections::HashMap;

use rover_contracts::ids::TurnId;
use rover_contracts::wire::{FinishReason, TurnEvent, TurnEventKind};
use serde_json::{Value, json};

/// Turns worker events into AI SDK UI message chunks (only the chunk types and fields the protocol
/// allows). Subagent activity is attributed: its tool calls carry the agent in their label part,
/// and its text arrives as a `data-subagent` part once complete.
pub(super) struct ChunkMapper {
    pub(super) turn: TurnId,
    pub(super) trace: String,
    pub(super) subagent_text: HashMap<String, String>,
}

impl ChunkMapper {
    pub(super) fn chunks(&mut self, event: TurnEvent) -> Vec<Value> {
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
            // A subagent's steps are steps too: a client's "is the last step answered?" (AI SDK's
            // `lastAssistantMessageIsCompleteWithApprovalResponses`) must see a subagent's call
            // waiting for approval apart from the `task` call that waits on it.
            TurnEventKind::StartStep => vec![json!({ "type": "start-step" })],
            TurnEventKind::FinishStep => vec![json!({ "type": "finish-step" })],
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
            TurnEventKind::ToolApprovalRequest {
                approval_id,
                tool_call_id,
            } => vec![
                json!({ "type": "tool-approval-request", "approvalId": approval_id, "toolCallId": tool_call_id }),
            ],
            TurnEventKind::ToolOutputDenied { tool_call_id } => {
                vec![json!({ "type": "tool-output-denied", "toolCallId": tool_call_id })]
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
            // Stopped: the stream ends with `abort` (then `[DONE]`), not `finish`; what the turn
            // spent still reaches the message's metadata.
            TurnEventKind::Finish {
                reason: FinishReason::Abort,
                usage,
            } => {
                let mut chunks = Vec::new();
                if let Some(usage) = usage {
                    chunks.push(json!({ "type": "message-metadata", "messageMetadata": usage_metadata(&usage) }));
                }
                chunks.push(json!({ "type": "abort", "reason": "stopped" }));
                chunks
            }
            TurnEventKind::Finish { reason, usage } => {
                let reason = match reason {
                    FinishReason::Stop => "stop",
                    FinishReason::Length => "length",
                    FinishReason::ToolCalls => "tool-calls",
                    FinishReason::Error | FinishReason::Abort => "error",
                };
                let mut finish = json!({ "type": "finish", "finishReason": reason });
                if let Some(usage) = usage {
                    finish["messageMetadata"] = usage_metadata(&usage);
                }
                vec![finish]
            }
        }
    }
}

/// A turn's token usage as message metadata.
fn usage_metadata(usage: &rover_contracts::wire::TokenUsage) -> Value {
    json!({ "usage": {
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "totalTokens": usage.input_tokens + usage.output_tokens,
    } })
}
