//! The OpenAI Chat Completions wire format: reading the request, and writing the
//! `chat.completion` object or the `chat.completion.chunk` stream exactly as OpenAI sends them.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::CallStyle;
use crate::engine::{Conversation, Reply, ToolCall};

/// The parts of a request the test double reads; everything else is accepted and ignored.
#[derive(Debug, Deserialize)]
pub(crate) struct ChatRequest {
    #[serde(default)]
    pub(crate) model: Option<String>,
    pub(crate) messages: Vec<Message>,
    #[serde(default)]
    tools: Option<Vec<ToolSpec>>,
    #[serde(default)]
    pub(crate) stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Message {
    pub(crate) role: String,
    #[serde(default)]
    content: Value,
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
    #[serde(default)]
    tool_call_id: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ToolSpec {
    #[serde(default)]
    function: Option<FunctionSpec>,
}

#[derive(Debug, Deserialize)]
struct FunctionSpec {
    name: String,
}

#[derive(Debug, Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

const CONTEXT_OPEN: &str = "<runtime_context>";
const CONTEXT_CLOSE: &str = "</runtime_context>";

impl ChatRequest {
    /// The names of the tools offered (`tools[].function.name`).
    pub(crate) fn offered(&self) -> Vec<String> {
        self.tools
            .iter()
            .flatten()
            .filter_map(|t| t.function.as_ref().map(|f| f.name.clone()))
            .collect()
    }

    /// Whether the last chunk should carry usage (`stream_options.include_usage`).
    pub(crate) fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }

    /// Why the conversation's tool messages are malformed, as OpenAI would refuse them: every
    /// assistant message with `tool_calls` must be followed, before anything else, by one `tool`
    /// message per call id, and a `tool` message must answer a call of that assistant message.
    pub(crate) fn tool_call_problem(&self) -> Option<String> {
        let mut pending: Vec<String> = Vec::new();
        let unanswered = |pending: &[String]| {
            format!(
                "An assistant message with 'tool_calls' must be followed by tool messages \
                 responding to each 'tool_call_id'. The following tool_call_ids did not have \
                 response messages: {}",
                pending.join(", ")
            )
        };
        let mut awaiting = false;
        for message in &self.messages {
            if message.role == "tool" {
                let id = message.tool_call_id.as_deref().unwrap_or_default();
                match pending.iter().position(|p| p == id) {
                    Some(at) if awaiting => {
                        pending.remove(at);
                    }
                    _ => {
                        return Some(
                            "Invalid parameter: messages with role 'tool' must be a response to \
                             a preceding message with 'tool_calls'."
                                .to_owned(),
                        );
                    }
                }
                continue;
            }
            if !pending.is_empty() {
                return Some(unanswered(&pending));
            }
            let calls = message.tool_calls.as_deref().unwrap_or_default();
            awaiting = message.role == "assistant" && !calls.is_empty();
            pending = calls
                .iter()
                .filter_map(|call| call["id"].as_str().map(str::to_owned))
                .collect();
        }
        (!pending.is_empty()).then(|| unanswered(&pending))
    }

    /// The conversation the engine decides on (a tool's result is read from inside Rover's
    /// `<tool_result>` tags).
    pub(crate) fn conversation(&self) -> Conversation {
        // A system message after the first is the worker's word to the model mid-reply (its
        // nudge after an answer that did nothing): it triggers like a staff message.
        let trigger_at = self
            .messages
            .iter()
            .enumerate()
            .rposition(|(i, m)| m.role == "user" || (m.role == "system" && i > 0));
        let trigger = trigger_at
            .map(|i| content_text(&self.messages[i].content))
            .unwrap_or_default();
        let after = trigger_at.map_or(0, |i| i + 1);
        let results = self.messages[after..]
            .iter()
            .filter(|m| m.role == "tool")
            .map(|m| {
                let text = content_text(&m.content);
                let json = tool_result_json(&text);
                serde_json::from_str(json).unwrap_or(Value::String(text))
            })
            .collect();
        Conversation {
            trigger,
            results,
            context: self.runtime_context(),
            offered: self.offered(),
            message_count: self.messages.len(),
        }
    }

    /// The JSON between `<runtime_context>` and `</runtime_context>` in a system message.
    fn runtime_context(&self) -> Value {
        self.messages
            .iter()
            .filter(|m| m.role == "system" || m.role == "developer")
            .find_map(|m| {
                let text = content_text(&m.content);
                let start = text.find(CONTEXT_OPEN)? + CONTEXT_OPEN.len();
                let end = start + text[start..].find(CONTEXT_CLOSE)?;
                match serde_json::from_str(text[start..end].trim()) {
                    Ok(value) => Some(value),
                    Err(error) => {
                        tracing::warn!(%error, "the runtime context block is not JSON; treating it as missing");
                        None
                    }
                }
            })
            .unwrap_or(Value::Null)
    }

    /// Approximate prompt tokens: characters of every message's text, over four.
    pub(crate) fn prompt_tokens(&self) -> u64 {
        let chars: usize = self
            .messages
            .iter()
            .map(|m| content_text(&m.content).chars().count())
            .sum();
        tokens(chars)
    }
}

/// A message's text: a string, or the `text` of its content parts joined.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(4)
}

/// The fixed parts of one response: what every object and chunk repeats.
#[derive(Debug, Clone)]
pub(crate) struct Meta {
    pub(crate) id: String,
    pub(crate) created: u64,
    pub(crate) model: String,
    pub(crate) prompt_tokens: u64,
}

impl Meta {
    fn usage(&self, reply: &Reply) -> Value {
        let completion = match reply {
            Reply::Say(text) | Reply::Fail(_, text) => tokens(text.chars().count()),
            Reply::Calls(calls) => tokens(
                calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.chars().count())
                    .sum(),
            ),
        }
        .max(1);
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": self.prompt_tokens + completion,
        })
    }

    fn chunk(&self, delta: Value, finish_reason: Option<&str>, usage: Option<Value>) -> Value {
        let mut chunk = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": null,
            "choices": [{
                "index": 0,
                "delta": delta,
                "logprobs": null,
                "finish_reason": finish_reason,
            }],
        });
        if let Some(usage) = usage {
            chunk["usage"] = usage;
        }
        chunk
    }

    /// The non-streaming `chat.completion` object.
    pub(crate) fn completion(&self, reply: &Reply) -> Value {
        let (message, finish_reason) = match reply {
            Reply::Say(text) | Reply::Fail(_, text) => (
                json!({"role": "assistant", "content": text, "refusal": null, "annotations": []}),
                "stop",
            ),
            Reply::Calls(calls) => (
                json!({
                    "role": "assistant",
                    "content": null,
                    "refusal": null,
                    "annotations": [],
                    "tool_calls": calls.iter().map(tool_call_json).collect::<Vec<_>>(),
                }),
                "tool_calls",
            ),
        };
        json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": null,
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": null,
                "finish_reason": finish_reason,
            }],
            "usage": self.usage(reply),
        })
    }

    /// The `chat.completion.chunk` objects of a streamed reply, in order, without `[DONE]`.
    ///
    /// For a deliberate mid-stream failure this is only the first few chunks; the caller then
    /// drops the connection.
    pub(crate) fn chunks(&self, reply: &Reply, include_usage: bool) -> Vec<Value> {
        // With include_usage, OpenAI sends `"usage": null` on every chunk but the last.
        let null_usage = || include_usage.then_some(Value::Null);
        let mut chunks = vec![self.chunk(
            json!({"role": "assistant", "content": "", "refusal": null}),
            None,
            null_usage(),
        )];
        let finish_reason = match reply {
            Reply::Say(text) => {
                chunks.extend(
                    text_pieces(text)
                        .into_iter()
                        .map(|p| self.chunk(json!({"content": p}), None, null_usage())),
                );
                "stop"
            }
            Reply::Fail(_, text) => {
                let mut pieces = text_pieces(text);
                pieces.truncate(3);
                chunks.extend(
                    pieces
                        .into_iter()
                        .map(|p| self.chunk(json!({"content": p}), None, null_usage())),
                );
                return chunks;
            }
            Reply::Calls(calls) => {
                for (index, call) in calls.iter().enumerate() {
                    chunks.push(self.chunk(
                        json!({"tool_calls": [{
                            "index": index,
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }]}),
                        None,
                        null_usage(),
                    ));
                    chunks.extend(argument_pieces(&call.arguments).into_iter().map(|piece| {
                        self.chunk(
                            json!({"tool_calls": [{
                                "index": index,
                                "function": {"arguments": piece},
                            }]}),
                            None,
                            null_usage(),
                        )
                    }));
                }
                "tool_calls"
            }
        };
        chunks.push(self.chunk(json!({}), Some(finish_reason), null_usage()));
        if include_usage {
            chunks.push(json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "system_fingerprint": null,
                "choices": [],
                "usage": self.usage(reply),
            }));
        }
        chunks
    }
}

/// The calls written as text in `style`, as local models write them; `None` for `native`.
pub(crate) fn calls_as_text(calls: &[ToolCall], style: CallStyle) -> Option<String> {
    let object = |call: &ToolCall| {
        let arguments: Value = serde_json::from_str(&call.arguments).unwrap_or_else(|_| json!({}));
        json!({ "name": call.name, "arguments": arguments })
    };
    let each = |wrap: &dyn Fn(String) -> String| {
        calls
            .iter()
            .map(|call| wrap(object(call).to_string()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Some(match style {
        CallStyle::Native => return None,
        CallStyle::Fenced => each(&|json| format!("```json\n{json}\n```")),
        CallStyle::Bare => each(&|json| json),
        CallStyle::Tagged => each(&|json| format!("<tool_call>\n{json}\n</tool_call>")),
        CallStyle::List => Value::Array(calls.iter().map(object).collect()).to_string(),
    })
}

fn tool_call_json(call: &ToolCall) -> Value {
    json!({
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    })
}

/// Text split into words, each with the whitespace before it, as a model streams tokens.
fn text_pieces(text: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    for c in text.chars() {
        if !c.is_whitespace() {
            in_word = true;
        } else if in_word {
            pieces.push(std::mem::take(&mut current));
            in_word = false;
        }
        current.push(c);
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

/// Tool-call arguments split into short fragments that need not be valid JSON on their own.
fn argument_pieces(arguments: &str) -> Vec<String> {
    const FRAGMENT_CHARS: usize = 7;
    let chars: Vec<char> = arguments.chars().collect();
    chars
        .chunks(FRAGMENT_CHARS)
        .map(|c| c.iter().collect())
        .collect()
}

/// An OpenAI-style error body.
pub(crate) fn error_body(message: &str, kind: &str, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

/// The JSON inside Rover's `<tool_result name="…">` tags (the whole text without them).
fn tool_result_json(text: &str) -> &str {
    text.strip_prefix("<tool_result ")
        .and_then(|rest| rest.split_once('\n'))
        .and_then(|(_, body)| body.strip_suffix("\n</tool_result>"))
        .unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_splits_into_words_that_join_back() {
        let text = "Done — I created  the Sciences department.";
        let pieces = text_pieces(text);
        assert_eq!(pieces.first().map(String::as_str), Some("Done"));
        assert_eq!(pieces.get(1).map(String::as_str), Some(" —"));
        assert_eq!(pieces.concat(), text);
        assert_eq!(
            argument_pieces("{\"name\":\"Sciences\"}").concat(),
            "{\"name\":\"Sciences\"}"
        );
        assert!(argument_pieces("{\"name\":\"Sciences\"}").len() > 2);
    }

    #[test]
    fn calls_are_written_as_text_in_each_style() {
        let calls = [
            ToolCall {
                id: "a".to_owned(),
                name: "list_departments".to_owned(),
                arguments: "{}".to_owned(),
            },
            ToolCall {
                id: "b".to_owned(),
                name: "create_department".to_owned(),
                arguments: "{\"name\":\"Sciences\"}".to_owned(),
            },
        ];
        let one = r#"{"arguments":{},"name":"list_departments"}"#;
        let two = r#"{"arguments":{"name":"Sciences"},"name":"create_department"}"#;
        assert_eq!(calls_as_text(&calls, CallStyle::Native), None);
        assert_eq!(
            calls_as_text(&calls, CallStyle::Fenced).unwrap(),
            format!("```json\n{one}\n```\n```json\n{two}\n```")
        );
        assert_eq!(
            calls_as_text(&calls, CallStyle::Bare).unwrap(),
            format!("{one}\n{two}")
        );
        assert_eq!(
            calls_as_text(&calls, CallStyle::Tagged).unwrap(),
            format!("<tool_call>\n{one}\n</tool_call>\n<tool_call>\n{two}\n</tool_call>")
        );
        assert_eq!(
            calls_as_text(&calls, CallStyle::List).unwrap(),
            format!("[{one},{two}]")
        );
    }

    #[test]
    fn every_tool_call_needs_its_result_before_anything_else() {
        let request = |messages: Value| -> ChatRequest {
            serde_json::from_value(json!({ "messages": messages })).expect("parses")
        };
        let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "t", "arguments": "{}"}});
        let asked =
            json!({"role": "assistant", "content": null, "tool_calls": [call("a"), call("b")]});
        let result = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "{}"});
        let user = json!({"role": "user", "content": "hi"});

        let whole = request(json!([user, asked, result("b"), result("a"), user]));
        assert_eq!(whole.tool_call_problem(), None);
        for broken in [
            json!([user, asked, result("a"), user]),
            json!([user, asked, result("a")]),
            json!([user, result("a")]),
            json!([user, asked, result("a"), result("b"), result("a")]),
            json!([user, asked, result("c"), result("a"), result("b")]),
        ] {
            assert!(
                request(broken.clone()).tool_call_problem().is_some(),
                "{broken} is malformed"
            );
        }
    }

    #[test]
    fn the_trigger_results_and_context_come_from_the_right_messages() {
        let request: ChatRequest = serde_json::from_value(json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "You are Rover.\n<runtime_context>\n{\"capabilities\":{\"classTeacher\":true}}\n</runtime_context>"},
                {"role": "user", "content": "old question"},
                {"role": "tool", "tool_call_id": "a", "content": "{\"data\":0}"},
                {"role": "user", "content": [{"type": "text", "text": "new question"}]},
                {"role": "assistant", "content": null, "tool_calls": []},
                {"role": "tool", "tool_call_id": "b", "content": "{\"data\":1,\"scopeContext\":\"s\"}"},
                {"role": "tool", "tool_call_id": "c", "content": "plain text"}
            ],
            "tools": [{"type": "function", "function": {"name": "task", "parameters": {}}}]
        }))
        .expect("parses");
        let c = request.conversation();
        assert_eq!(c.trigger, "new question");
        assert_eq!(
            c.results,
            vec![json!({"data": 1, "scopeContext": "s"}), json!("plain text")]
        );
        assert_eq!(c.context, json!({"capabilities": {"classTeacher": true}}));
        assert_eq!(c.offered, vec!["task".to_owned()]);
    }
}
