//! A chat read back as AI SDK `UIMessage`s, exactly as a `useChat` client holds them after
//! streaming it: each turn's recorded events become the very chunks the stream sent
//! ([`ChunkMapper`]), and the chunks are folded into messages the way the client's
//! `processUIMessageStream` folds them (only the chunk types Rover sends). The staff member's
//! messages are kept as the client sent them; an answer (approval, `ask_user`) is applied to the
//! message it answers, as `addToolApprovalResponse` / `addToolOutput` do, before the turn that
//! continues it streams into that message. The stream's transient parts reach no message: the
//! tool calls' labels (`data-tool-label`) are returned beside the messages.
//!
//! Checked against the real `ai@6` and `ai@7` clients in `tests/it/chats.rs`.

use std::collections::{BTreeMap, HashMap};

use rover_contracts::wire::TurnEvent;
use rover_turnstore::chats::ChatTurn;
use serde_json::{Map, Value, json};

use super::api::ToolLabel;
use crate::ui_chunks::ChunkMapper;

/// A chat rebuilt from its turns.
#[derive(Debug, Default)]
pub(crate) struct Rebuilt {
    /// The chat's messages, oldest first.
    pub(crate) messages: Vec<Value>,
    /// What the stream's transient `data-tool-label` parts said of each tool call (its label and
    /// the agent that made it), by tool call id: a client keeps them beside the messages, not in
    /// them, so a reopened chat gets them here.
    pub(crate) tool_labels: BTreeMap<String, ToolLabel>,
}

/// The chat's messages, oldest first, and its tool calls' labels. A call whose approval ran out
/// of time unanswered (`timed_out`: approval id, seconds it could wait) reads as declined, with
/// why (`output-denied`, as after a denial): its card says it expired and nothing was run.
pub(crate) fn messages(turns: Vec<ChatTurn>, timed_out: &[(uuid::Uuid, i64)]) -> Rebuilt {
    let mut messages: Vec<Value> = Vec::new();
    let mut tool_labels = BTreeMap::new();
    for turn in turns {
        if let Some(sent) = turn.sent {
            messages.push(sent);
        }
        if let Some(answers) = &turn.answers {
            answer(&mut messages, answers);
        }
        let mut mapper = ChunkMapper {
            turn: turn.turn,
            trace: turn.trace_id.unwrap_or_default(),
            subagent_text: HashMap::new(),
        };
        let chunks: Vec<Value> = turn
            .events
            .into_iter()
            .filter_map(|payload| serde_json::from_value::<TurnEvent>(payload).ok())
            .flat_map(|event| mapper.chunks(event))
            .collect();
        if chunks.is_empty() {
            continue;
        }
        tool_labels.extend(
            chunks
                .iter()
                .filter(|c| c["type"] == "data-tool-label")
                .filter_map(|c| serde_json::from_value::<ToolLabel>(c["data"].clone()).ok())
                .map(|label| (label.tool_call_id.clone(), label)),
        );
        stream_into(&mut messages, &chunks);
    }
    expire(&mut messages, timed_out);
    Rebuilt {
        messages,
        tool_labels,
    }
}

/// Marks the calls whose approval ran out of time unanswered as declined, saying why.
fn expire(messages: &mut [Value], timed_out: &[(uuid::Uuid, i64)]) {
    for (approval, secs) in timed_out {
        let id = approval.to_string();
        for part in tool_parts(messages) {
            if part["state"] == "approval-requested" && part["approval"]["id"] == id.as_str() {
                part["state"] = json!("output-denied");
                part["approval"] = json!({
                    "id": id,
                    "approved": false,
                    "reason": rover_turnstore::approvals::too_late(*secs),
                });
            }
        }
    }
}

/// Applies a continuation's answers to the message holding the parts they answer.
fn answer(messages: &mut [Value], answers: &Value) {
    for approval in answers["approvals"].as_array().into_iter().flatten() {
        let id = &approval["approvalId"];
        for part in tool_parts(messages) {
            if part["state"] == "approval-requested" && &part["approval"]["id"] == id {
                part["state"] = json!("approval-responded");
                let mut answered = part["approval"].as_object().cloned().unwrap_or_default();
                answered.insert("approved".to_owned(), approval["approved"].clone());
                if approval["reason"].is_string() {
                    answered.insert("reason".to_owned(), approval["reason"].clone());
                }
                // Approved with the staff member's edits: what they changed the input to.
                if approval["editedInput"].is_object() && approval["approved"] == true {
                    answered.insert("editedInput".to_owned(), approval["editedInput"].clone());
                }
                part["approval"] = Value::Object(answered);
            }
        }
    }
    let answer = &answers["answer"];
    if let Some(call) = answer["toolCallId"].as_str() {
        for part in tool_parts(messages) {
            if part["toolCallId"] == call {
                part["state"] = json!("output-available");
                part["output"] = answer["output"].clone();
                if let Some(part) = part.as_object_mut() {
                    part.remove("errorText");
                }
            }
        }
    }
}

fn tool_parts(messages: &mut [Value]) -> impl Iterator<Item = &mut Value> {
    messages
        .iter_mut()
        .filter_map(|m| m["parts"].as_array_mut())
        .flatten()
        .filter(|p| is_tool(p))
}

fn is_tool(part: &Value) -> bool {
    part["type"]
        .as_str()
        .is_some_and(|t| t.starts_with("tool-") || t == "dynamic-tool")
}

/// One turn's stream: it continues the last message when that is the assistant's (a copy, as the
/// client's streaming state is), and the result replaces it when the stream kept its id, or is
/// added after it otherwise.
fn stream_into(messages: &mut Vec<Value>, chunks: &[Value]) {
    let last = messages.last().filter(|m| m["role"] == "assistant");
    let continued = last.map(|m| m["id"].clone());
    let mut state = Streaming {
        message: last.cloned().unwrap_or_else(
            || json!({ "id": chunks_message_id(chunks), "role": "assistant", "parts": [] }),
        ),
        active_text: HashMap::new(),
    };
    for chunk in chunks {
        state.fold(chunk);
    }
    if continued.as_ref() == Some(&state.message["id"]) {
        if let Some(last) = messages.last_mut() {
            *last = state.message;
        }
    } else {
        messages.push(state.message);
    }
}

/// The id a new assistant message gets before its `start` names it.
fn chunks_message_id(chunks: &[Value]) -> Value {
    chunks
        .iter()
        .find(|c| c["type"] == "start")
        .map(|c| c["messageId"].clone())
        .unwrap_or_default()
}

/// The client's streaming state of one message.
struct Streaming {
    message: Value,
    /// Text parts still streaming, by chunk id: their index in `parts`.
    active_text: HashMap<String, usize>,
}

impl Streaming {
    fn parts(&mut self) -> &mut Vec<Value> {
        if !self.message["parts"].is_array() {
            self.message["parts"] = json!([]);
        }
        self.message["parts"]
            .as_array_mut()
            .expect("parts was made an array")
    }

    fn fold(&mut self, chunk: &Value) {
        let kind = chunk["type"].as_str().unwrap_or_default();
        match kind {
            "start" => {
                if chunk["messageId"].is_string() {
                    self.message["id"] = chunk["messageId"].clone();
                }
                self.metadata(&chunk["messageMetadata"]);
            }
            "finish" | "message-metadata" => self.metadata(&chunk["messageMetadata"]),
            "start-step" => self.parts().push(json!({ "type": "step-start" })),
            "finish-step" => self.active_text.clear(),
            "text-start" => {
                let index = self.parts().len();
                self.parts()
                    .push(json!({ "type": "text", "text": "", "state": "streaming" }));
                self.active_text.insert(id(chunk, "id"), index);
            }
            "text-delta" => {
                if let Some(&index) = self.active_text.get(&id(chunk, "id")) {
                    let delta = chunk["delta"].as_str().unwrap_or_default().to_owned();
                    let part = &mut self.parts()[index];
                    let text = format!("{}{delta}", part["text"].as_str().unwrap_or_default());
                    part["text"] = Value::from(text);
                }
            }
            "text-end" => {
                if let Some(index) = self.active_text.remove(&id(chunk, "id")) {
                    self.parts()[index]["state"] = json!("done");
                }
            }
            "tool-input-start" => self.tool_input(chunk, "input-streaming", None),
            "tool-input-available" => {
                self.tool_input(chunk, "input-available", Some(chunk["input"].clone()));
            }
            "tool-output-available" => self.tool_result(chunk, "output-available"),
            "tool-output-error" => self.tool_result(chunk, "output-error"),
            "tool-approval-request" => {
                if let Some(part) = self.invocation(&id(chunk, "toolCallId")) {
                    part["state"] = json!("approval-requested");
                    part["approval"] = json!({ "id": chunk["approvalId"] });
                }
            }
            "tool-output-denied" => {
                if let Some(part) = self.invocation(&id(chunk, "toolCallId")) {
                    part["state"] = json!("output-denied");
                }
            }
            data if data.starts_with("data-") && chunk["transient"] != true => {
                self.data(chunk);
            }
            // `error` and `abort` change no message; transient data parts never reach one.
            _ => {}
        }
    }

    fn metadata(&mut self, metadata: &Value) {
        if metadata.is_null() {
            return;
        }
        let merged = match self.message.get("metadata") {
            Some(existing) if !existing.is_null() => merge(existing, metadata),
            _ => metadata.clone(),
        };
        self.message["metadata"] = merged;
    }

    /// The current step's parts: those after the last `step-start`.
    fn current_step_start(&mut self) -> usize {
        self.parts()
            .iter()
            .rposition(|p| p["type"] == "step-start")
            .map_or(0, |i| i + 1)
    }

    /// `tool-input-start` / `tool-input-available`: the current step's part for the call is
    /// updated (its output and error dropped), or a new one is added.
    fn tool_input(&mut self, chunk: &Value, state: &str, input: Option<Value>) {
        let call = id(chunk, "toolCallId");
        let kind = format!("tool-{}", chunk["toolName"].as_str().unwrap_or_default());
        let from = self.current_step_start();
        let existing = self.parts()[from..]
            .iter()
            .position(|p| is_tool(p) && p["type"] != "dynamic-tool" && p["toolCallId"] == call)
            .map(|i| i + from);
        let Some(index) = existing else {
            let mut part = json!({ "type": kind, "toolCallId": call, "state": state });
            if let Some(input) = input {
                part["input"] = input;
            }
            self.parts().push(part);
            return;
        };
        let part = &mut self.parts()[index];
        part["state"] = Value::from(state);
        part["type"] = Value::from(kind);
        let object = part.as_object_mut().expect("a tool part is an object");
        for gone in [
            "output",
            "errorText",
            "rawInput",
            "inputEncoding",
            "preliminary",
        ] {
            object.remove(gone);
        }
        match input {
            Some(input) => {
                object.insert("input".to_owned(), input);
            }
            None => {
                object.remove("input");
            }
        }
    }

    /// `tool-output-available` / `tool-output-error` on the call's part (the current step's, or
    /// the latest before it).
    fn tool_result(&mut self, chunk: &Value, state: &str) {
        let Some(part) = self.invocation(&id(chunk, "toolCallId")) else {
            return;
        };
        part["state"] = Value::from(state);
        let object = part.as_object_mut().expect("a tool part is an object");
        for gone in ["output", "errorText", "preliminary"] {
            object.remove(gone);
        }
        if state == "output-available" {
            object.remove("rawInput");
            object.insert("output".to_owned(), chunk["output"].clone());
        } else {
            object.insert("errorText".to_owned(), chunk["errorText"].clone());
        }
    }

    /// The call's part: in the current step, else the latest anywhere in the message.
    fn invocation(&mut self, call: &str) -> Option<&mut Value> {
        let from = self.current_step_start();
        let parts = self.parts();
        let index = parts[from..]
            .iter()
            .position(|p| is_tool(p) && p["toolCallId"] == call)
            .map(|i| i + from)
            .or_else(|| {
                parts
                    .iter()
                    .rposition(|p| is_tool(p) && p["toolCallId"] == call)
            })?;
        parts.get_mut(index)
    }

    /// A persistent data part: one with the same type and id is updated, else it is added as
    /// the chunk itself.
    fn data(&mut self, chunk: &Value) {
        let parts = self.parts();
        let existing = chunk.get("id").filter(|id| !id.is_null()).and_then(|id| {
            parts
                .iter_mut()
                .find(|p| p["type"] == chunk["type"] && p.get("id") == Some(id))
        });
        match existing {
            Some(part) => part["data"] = chunk["data"].clone(),
            None => parts.push(chunk.clone()),
        }
    }
}

fn id(chunk: &Value, field: &str) -> String {
    chunk[field].as_str().unwrap_or_default().to_owned()
}

/// The client's `mergeObjects`: objects merge key by key (recursively); anything else is
/// replaced.
fn merge(base: &Value, overrides: &Value) -> Value {
    match (base, overrides) {
        (Value::Object(base), Value::Object(overrides)) => {
            let mut merged: Map<String, Value> = base.clone();
            for (key, value) in overrides {
                let next = match merged.get(key) {
                    Some(existing) if existing.is_object() && value.is_object() => {
                        merge(existing, value)
                    }
                    _ => value.clone(),
                };
                merged.insert(key.clone(), next);
            }
            Value::Object(merged)
        }
        _ => overrides.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rover_contracts::ids::TurnId;
    use rover_contracts::wire::{FinishReason, TurnEventKind};

    fn event(turn: TurnId, seq: u64, event: TurnEventKind) -> Value {
        serde_json::to_value(TurnEvent {
            turn_id: turn,
            seq,
            subagent: None,
            event,
        })
        .unwrap()
    }

    fn turn(sent: Option<Value>, answers: Option<Value>, kinds: Vec<TurnEventKind>) -> ChatTurn {
        let id = TurnId::new();
        ChatTurn {
            turn: id,
            sent,
            answers,
            trace_id: Some("trace".to_owned()),
            events: kinds
                .into_iter()
                .enumerate()
                .map(|(seq, kind)| event(id, seq as u64, kind))
                .collect(),
        }
    }

    fn user(text: &str) -> Value {
        json!({ "id": format!("u-{text}"), "role": "user", "parts": [{ "type": "text", "text": text }] })
    }

    fn start(message: &str) -> TurnEventKind {
        TurnEventKind::Start {
            message_id: message.to_owned(),
            trace_id: None,
        }
    }

    /// A turn that paused on creating Sciences, asking `approval`.
    fn paused_on(approval: uuid::Uuid) -> ChatTurn {
        turn(
            Some(user("Create Sciences")),
            None,
            vec![
                start("msg-1"),
                TurnEventKind::StartStep,
                TurnEventKind::ToolInputStart {
                    tool_call_id: "c1".into(),
                    tool_name: "create_department".into(),
                    label: "Creating…".into(),
                },
                TurnEventKind::ToolInputAvailable {
                    tool_call_id: "c1".into(),
                    tool_name: "create_department".into(),
                    input: json!({ "name": "Sciences" }),
                },
                TurnEventKind::ToolApprovalRequest {
                    approval_id: approval.to_string(),
                    tool_call_id: "c1".into(),
                },
                TurnEventKind::FinishStep,
                TurnEventKind::Finish {
                    reason: FinishReason::ToolCalls,
                    usage: None,
                    model: None,
                },
            ],
        )
    }

    #[test]
    fn an_approval_that_ran_out_of_time_reads_as_declined_saying_so() {
        let approval = uuid::Uuid::from_u128(7);
        let messages = messages_of(vec![paused_on(approval)], &[(approval, 86_400)]);
        let tool = &messages[1]["parts"][1];
        assert_eq!(tool["state"], "output-denied", "{tool:#}");
        assert_eq!(tool["approval"]["id"], approval.to_string());
        assert_eq!(tool["approval"]["approved"], false);
        let reason = tool["approval"]["reason"].as_str().unwrap();
        assert!(
            reason.contains("within 24 hours, so nothing was run"),
            "{reason}"
        );
        // Only that approval: another waits on.
        let other = uuid::Uuid::from_u128(8);
        let waiting = messages_of(vec![paused_on(approval)], &[(other, 60)]);
        assert_eq!(waiting[1]["parts"][1]["state"], "approval-requested");
    }

    fn messages_of(turns: Vec<ChatTurn>, timed_out: &[(uuid::Uuid, i64)]) -> Vec<Value> {
        messages(turns, timed_out).messages
    }

    #[test]
    fn an_approved_write_continues_the_message_it_paused() {
        let approval = uuid::Uuid::from_u128(9);
        let paused = paused_on(approval);
        let continued = turn(
            None,
            Some(
                json!({ "approvals": [{ "approvalId": approval, "approved": true, "reason": null }] }),
            ),
            vec![
                start("msg-1"),
                TurnEventKind::StartStep,
                TurnEventKind::ToolOutputAvailable {
                    tool_call_id: "c1".into(),
                    output: json!({ "data": { "name": "Sciences" } }),
                },
                TurnEventKind::TextStart { id: "t".into() },
                TurnEventKind::TextDelta {
                    id: "t".into(),
                    delta: "Done".into(),
                },
                TurnEventKind::TextEnd { id: "t".into() },
                TurnEventKind::FinishStep,
                TurnEventKind::Finish {
                    reason: FinishReason::Stop,
                    usage: None,
                    model: Some("rover-scripted".into()),
                },
            ],
        );
        let continued_turn = continued.turn;
        let messages = messages(vec![paused, continued], &[]).messages;
        assert_eq!(messages.len(), 2, "{messages:#?}");
        let reply = &messages[1];
        assert_eq!(reply["id"], "msg-1");
        assert_eq!(reply["metadata"]["turnId"], json!(continued_turn));
        // The model that answered, from the continued turn's `finish`.
        assert_eq!(reply["metadata"]["model"], "rover-scripted");
        let tool = &reply["parts"][1];
        assert_eq!(
            tool,
            &json!({
                "type": "tool-create_department", "toolCallId": "c1", "state": "output-available",
                "input": { "name": "Sciences" }, "output": { "data": { "name": "Sciences" } },
                "approval": { "id": approval.to_string(), "approved": true },
            })
        );
        assert_eq!(reply["parts"][2], json!({ "type": "step-start" }));
        assert_eq!(
            reply["parts"][3],
            json!({ "type": "text", "text": "Done", "state": "done" })
        );
    }

    #[test]
    fn a_stopped_reply_keeps_its_text_streaming_and_the_next_turn_is_a_new_message() {
        let stopped = turn(
            Some(user("Describe")),
            None,
            vec![
                start("msg-a"),
                TurnEventKind::StartStep,
                TurnEventKind::TextStart { id: "t".into() },
                TurnEventKind::TextDelta {
                    id: "t".into(),
                    delta: "I help".into(),
                },
                TurnEventKind::Finish {
                    reason: FinishReason::Abort,
                    usage: None,
                    model: Some("qwen2.5-coder-1.5b-instruct".into()),
                },
            ],
        );
        let next = turn(Some(user("Date?")), None, vec![start("msg-b")]);
        let messages = messages(vec![stopped, next], &[]).messages;
        assert_eq!(messages.len(), 4);
        assert_eq!(
            messages[1]["parts"][1],
            json!({ "type": "text", "text": "I help", "state": "streaming" })
        );
        assert_eq!(messages[1]["metadata"]["stopped"], true);
        assert_eq!(
            messages[1]["metadata"]["model"],
            "qwen2.5-coder-1.5b-instruct"
        );
        assert_eq!(messages[3]["id"], "msg-b");
        assert_eq!(messages[3]["parts"], json!([]));
    }

    #[test]
    fn metadata_merges_objects_and_replaces_the_rest() {
        assert_eq!(
            merge(
                &json!({ "a": { "x": 1, "y": 2 }, "b": [1], "c": 1 }),
                &json!({ "a": { "y": 3 }, "b": [2], "d": 4 })
            ),
            json!({ "a": { "x": 1, "y": 3 }, "b": [2], "c": 1, "d": 4 })
        );
    }
}
