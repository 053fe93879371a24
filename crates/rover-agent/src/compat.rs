//! What real OpenAI-compatible servers stream, made into the OpenAI chunk the agent reads.
//!
//! Each chunk is read as plain JSON first (so one odd field cannot fail the whole stream), then
//! repaired, then typed. Seen or documented in the wild and handled here:
//!
//! - a tool-call piece without `index` (servers that send each call whole, in one chunk): a piece
//!   with a new id or a name starts the next call, one without continues the last;
//! - several calls all sent as `index: 0` with different ids: each id is its own call;
//! - a tool-call piece without `id`: left as is (the agent names it by step and index);
//! - `function.arguments` as a JSON object instead of text: serialised to text;
//! - `finish_reason` variants (`tool`, `tool_call`, `function_call`, `eos`, `end_turn`,
//!   `stop_sequence`, `max_tokens`, `""`, other unknown words): mapped to OpenAI's, or dropped;
//! - chunks without `id`, `created`, `model`, `object`, or a choice without `index`;
//! - an `{"error": …}` event in the middle of the stream: an error, not a silent end.

use std::collections::HashMap;

use async_openai::types::chat::CreateChatCompletionStreamResponse;
use serde_json::{Value, json};

/// Per-stream state: which call each piece belongs to.
#[derive(Debug, Default)]
pub(crate) struct ChunkNormalizer {
    /// The server's index → ours.
    by_index: HashMap<u64, u64>,
    /// A call's id → our index.
    by_id: HashMap<String, u64>,
    next: u64,
    last: Option<u64>,
}

/// Why a streamed chunk cannot be read as a chat completion chunk.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadChunk {
    /// Not a JSON object at all.
    #[error("a chunk that is not an object: {0}")]
    NotAnObject(String),
    /// The server sent an error object in the stream.
    #[error("the server sent an error: {0}")]
    ServerError(String),
    /// An object, but not one the client's types can hold, even repaired.
    #[error("an unreadable chunk: {0}")]
    Unreadable(#[source] serde_json::Error),
}

impl ChunkNormalizer {
    /// Repairs and types one chunk; `Err` says why it cannot be one.
    pub(crate) fn normalize(
        &mut self,
        mut chunk: Value,
    ) -> Result<CreateChatCompletionStreamResponse, BadChunk> {
        let Some(object) = chunk.as_object_mut() else {
            return Err(BadChunk::NotAnObject(brief(&chunk)));
        };
        if let Some(error) = object.get("error") {
            let message = error["message"]
                .as_str()
                .map_or_else(|| brief(error), str::to_owned);
            return Err(BadChunk::ServerError(message));
        }
        for (key, default) in [
            ("id", json!("")),
            ("created", json!(0)),
            ("model", json!("")),
            ("object", json!("chat.completion.chunk")),
            ("choices", json!([])),
        ] {
            let entry = object.entry(key).or_insert(Value::Null);
            if entry.is_null() {
                *entry = default;
            }
        }
        if object
            .get("created")
            .and_then(Value::as_u64)
            .is_none_or(|c| c > u64::from(u32::MAX))
        {
            object.insert("created".to_owned(), json!(0));
        }
        if let Some(choices) = object.get_mut("choices").and_then(Value::as_array_mut) {
            for (position, choice) in choices.iter_mut().enumerate() {
                self.choice(choice, position);
            }
        }
        serde_json::from_value(chunk).map_err(BadChunk::Unreadable)
    }

    fn choice(&mut self, choice: &mut Value, position: usize) {
        let Some(choice) = choice.as_object_mut() else {
            return;
        };
        if !choice.get("index").is_some_and(Value::is_u64) {
            choice.insert("index".to_owned(), json!(position));
        }
        let reason = choice.get("finish_reason").cloned().unwrap_or(Value::Null);
        choice.insert("finish_reason".to_owned(), finish_reason(&reason));
        let delta = choice.entry("delta").or_insert_with(|| json!({}));
        if delta.is_null() {
            *delta = json!({});
        }
        if let Some(calls) = delta.get_mut("tool_calls") {
            if calls.is_null() {
                delta.as_object_mut().map(|d| d.remove("tool_calls"));
            } else if let Some(calls) = calls.as_array_mut() {
                for piece in calls {
                    self.piece(piece);
                }
            }
        }
    }

    /// Gives a tool-call piece the index of the call it belongs to.
    fn piece(&mut self, piece: &mut Value) {
        let Some(piece) = piece.as_object_mut() else {
            return;
        };
        let id = piece
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map(str::to_owned);
        let named = piece["function"]["name"]
            .as_str()
            .is_some_and(|n| !n.is_empty());
        let raw = piece.get("index").and_then(Value::as_u64);
        let index = match (&id, raw) {
            (Some(id), _) if self.by_id.contains_key(id) => self.by_id[id],
            (Some(id), raw) => {
                let index = self.start(raw);
                self.by_id.insert(id.clone(), index);
                index
            }
            (None, Some(raw)) => match self.by_index.get(&raw) {
                Some(&index) => index,
                None => self.start(Some(raw)),
            },
            (None, None) if named || self.last.is_none() => self.start(None),
            (None, None) => self.last.unwrap_or_default(),
        };
        self.last = Some(index);
        piece.insert("index".to_owned(), json!(index));
        if let Some(function) = piece.get_mut("function").and_then(Value::as_object_mut) {
            match function.get("arguments") {
                Some(Value::String(_)) | None => {}
                Some(Value::Null) => {
                    function.remove("arguments");
                }
                Some(other) => {
                    let text = other.to_string();
                    function.insert("arguments".to_owned(), Value::String(text));
                }
            }
        }
        if piece.get("type").is_some_and(|t| t != "function") {
            piece.remove("type");
        }
    }

    fn start(&mut self, raw: Option<u64>) -> u64 {
        let index = self.next;
        self.next += 1;
        if let Some(raw) = raw {
            self.by_index.insert(raw, index);
        }
        index
    }
}

/// OpenAI's finish reasons, from what servers say.
fn finish_reason(reason: &Value) -> Value {
    let Some(text) = reason.as_str() else {
        return Value::Null;
    };
    let mapped = match text.to_ascii_lowercase().as_str() {
        "stop" | "eos" | "eos_token" | "end_turn" | "stop_sequence" | "end" => "stop",
        "length" | "max_tokens" | "model_length" => "length",
        "tool_calls" | "tool_call" | "tool" | "tools" | "tool_use" | "function_call" => {
            "tool_calls"
        }
        "content_filter" => "content_filter",
        // "" and anything unknown: no reason (the calls and text decide what follows).
        _ => return Value::Null,
    };
    Value::String(mapped.to_owned())
}

fn brief(value: &Value) -> String {
    value.to_string().chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use async_openai::types::chat::FinishReason;
    use serde_json::json;

    use super::*;

    /// (index, id, name, arguments) of one piece.
    type Piece = (u32, Option<String>, Option<String>, Option<String>);

    /// Every piece, in order.
    fn pieces(chunks: Vec<Value>) -> Vec<Piece> {
        let mut n = ChunkNormalizer::default();
        chunks
            .into_iter()
            .map(|c| n.normalize(c).expect("a chunk"))
            .flat_map(|c| c.choices)
            .flat_map(|c| c.delta.tool_calls.unwrap_or_default())
            .map(|p| {
                let f = p.function.unwrap_or_default();
                (p.index, p.id, f.name, f.arguments)
            })
            .collect()
    }

    fn chunk(delta: Value, finish: Value) -> Value {
        json!({ "choices": [{ "delta": delta, "finish_reason": finish }] })
    }

    #[test]
    fn openai_streams_are_unchanged() {
        let got = pieces(vec![
            json!({ "id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                    "choices": [{ "index": 0, "delta": { "tool_calls": [
                        { "index": 0, "id": "a", "type": "function", "function": { "name": "x", "arguments": "" } },
                        { "index": 1, "id": "b", "type": "function", "function": { "name": "y", "arguments": "" } } ] } }] }),
            chunk(
                json!({ "tool_calls": [{ "index": 0, "function": { "arguments": "{\"q\":" } }] }),
                Value::Null,
            ),
            chunk(
                json!({ "tool_calls": [{ "index": 1, "function": { "arguments": "{}" } }] }),
                Value::Null,
            ),
            chunk(
                json!({ "tool_calls": [{ "index": 0, "function": { "arguments": "1}" } }] }),
                json!("tool_calls"),
            ),
        ]);
        let indexes: Vec<u32> = got.iter().map(|p| p.0).collect();
        assert_eq!(indexes, vec![0, 1, 0, 1, 0]);
        assert_eq!(got[0].1.as_deref(), Some("a"));
    }

    #[test]
    fn calls_without_index_each_sent_whole_become_separate_calls() {
        let got = pieces(vec![
            chunk(
                json!({ "tool_calls": [{ "id": "a", "function": { "name": "x", "arguments": "{}" } }] }),
                Value::Null,
            ),
            chunk(
                json!({ "tool_calls": [{ "function": { "name": "y", "arguments": "{\"k\":1}" } }] }),
                Value::Null,
            ),
            chunk(
                json!({ "tool_calls": [{ "function": { "arguments": " " } }] }),
                json!("tool_calls"),
            ),
        ]);
        let indexes: Vec<u32> = got.iter().map(|p| p.0).collect();
        assert_eq!(indexes, vec![0, 1, 1], "{got:?}");
        assert_eq!(got[1].1, None, "a missing id stays missing");
    }

    #[test]
    fn several_calls_all_at_index_zero_with_their_own_ids_stay_apart() {
        let got = pieces(vec![
            chunk(
                json!({ "tool_calls": [{ "index": 0, "id": "a", "function": { "name": "x", "arguments": "{}" } }] }),
                Value::Null,
            ),
            chunk(
                json!({ "tool_calls": [{ "index": 0, "id": "b", "function": { "name": "y" } }] }),
                Value::Null,
            ),
            chunk(
                json!({ "tool_calls": [{ "index": 0, "function": { "arguments": "{}" } }] }),
                Value::Null,
            ),
        ]);
        let indexes: Vec<u32> = got.iter().map(|p| p.0).collect();
        assert_eq!(indexes, vec![0, 1, 1]);
    }

    #[test]
    fn arguments_sent_as_an_object_become_text() {
        let got = pieces(vec![chunk(
            json!({ "tool_calls": [{ "index": 0, "id": "a", "type": "function", "function": { "name": "x", "arguments": { "name": "Sciences" } } }] }),
            json!("tool_calls"),
        )]);
        assert_eq!(got[0].3.as_deref(), Some("{\"name\":\"Sciences\"}"));
    }

    #[test]
    fn finish_reason_variants_map_to_openai_ones() {
        let mut n = ChunkNormalizer::default();
        let mut reason =
            |r: Value| n.normalize(chunk(json!({}), r)).unwrap().choices[0].finish_reason;
        assert_eq!(reason(json!("tool_calls")), Some(FinishReason::ToolCalls));
        assert_eq!(reason(json!("tool")), Some(FinishReason::ToolCalls));
        assert_eq!(
            reason(json!("function_call")),
            Some(FinishReason::ToolCalls)
        );
        assert_eq!(reason(json!("eos")), Some(FinishReason::Stop));
        assert_eq!(reason(json!("end_turn")), Some(FinishReason::Stop));
        assert_eq!(reason(json!("max_tokens")), Some(FinishReason::Length));
        assert_eq!(reason(json!("")), None);
        assert_eq!(reason(json!("something_new")), None);
        assert_eq!(reason(Value::Null), None);
    }

    #[test]
    fn bare_chunks_are_completed_and_errors_are_errors() {
        let mut n = ChunkNormalizer::default();
        let c = n
            .normalize(json!({ "choices": [{ "delta": { "content": "hi", "tool_calls": null } }] }))
            .unwrap();
        assert_eq!(c.choices[0].delta.content.as_deref(), Some("hi"));
        let usage = n
            .normalize(json!({ "choices": [], "usage": { "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5 }, "timings": {} }))
            .unwrap();
        assert_eq!(usage.usage.unwrap().prompt_tokens, 3);
        let error = n
            .normalize(json!({ "error": { "message": "context full", "code": 500 } }))
            .unwrap_err();
        assert!(error.to_string().contains("context full"), "{error}");
        assert!(n.normalize(json!("[not an object]")).is_err());
    }
}
