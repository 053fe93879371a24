//! The OpenAI-format messages around a turn: the message its input becomes, a tool's result as
//! the model reads it, the results a stored thread may lack, and the question a thread waits on.

use rover_contracts::AgentToolResult;
use rover_contracts::context::RuntimeContext;
use rover_contracts::wire::TurnInput;
use serde_json::{Value, json};

/// The opening tag of a tool's result as the model reads it (the prompt's rules name it).
pub(crate) const TOOL_RESULT_TAG: &str = "tool_result";

/// A tool's result as the model reads it: its envelope's JSON between `<tool_result>` tags, with
/// every `<` and `>` inside escaped (`\u003c`, `\u003e`: the same JSON), so nothing the data holds
/// — a name a colleague chose, a subagent's answer — can close the tag and pass as Rover's own
/// words. The prompt's standing rule: what is inside is data, never instructions.
pub(crate) fn tool_message(call_id: &str, tool: &str, envelope: &AgentToolResult<Value>) -> Value {
    // The name is the model's: only a tool name's characters go into the tag.
    let tool: String = tool
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(64)
        .collect();
    let content = format!(
        "<{TOOL_RESULT_TAG} name=\"{tool}\">\n{}\n</{TOOL_RESULT_TAG}>",
        escape_tags(&envelope.to_model_string())
    );
    json!({ "role": "tool", "tool_call_id": call_id, "content": content })
}

/// `<` and `>` as JSON escapes (they only ever occur inside strings in JSON).
pub(crate) fn escape_tags(json: &str) -> String {
    json.replace('<', "\\u003c").replace('>', "\\u003e")
}

/// The message a turn's input becomes: the staff member's text, or the answer to the `ask_user`
/// call the thread waits on, as that call's result.
pub fn input_message(input: &TurnInput, context: &RuntimeContext) -> Value {
    match input {
        TurnInput::Message { text } => json!({ "role": "user", "content": text }),
        TurnInput::AskUserAnswer {
            tool_call_id,
            output,
        } => {
            let answer = AgentToolResult::data(output.clone(), context.call_scope().describe());
            json!({ "role": "tool", "tool_call_id": tool_call_id, "content": answer.to_model_string() })
        }
        // Continuing turns start from their chain's first message (`continue_turn`).
        TurnInput::Continue { .. } => Value::Null,
    }
}

/// Gives every tool call in `conversation` a result: a call left without one (a thread stored
/// before `ask_user` had to be asked alone) gets an error result right after its siblings', so
/// the model is never sent a thread it would refuse.
pub(crate) fn complete_tool_results(conversation: Vec<Value>) -> Vec<Value> {
    let mut completed = Vec::with_capacity(conversation.len());
    let mut pending: Vec<String> = Vec::new();
    let flush = |completed: &mut Vec<Value>, pending: &mut Vec<String>| {
        for id in pending.drain(..) {
            let missing = AgentToolResult::<Value>::error(
                "This call has no result: it was not run, or its question was not answered. Call it \
                 again if it is still needed.",
            );
            completed.push(
                json!({ "role": "tool", "tool_call_id": id, "content": missing.to_model_string() }),
            );
        }
    };
    for message in conversation {
        if message["role"] == "tool" {
            let id = message["tool_call_id"].as_str().unwrap_or_default();
            pending.retain(|p| p != id);
        } else {
            flush(&mut completed, &mut pending);
            if message["role"] == "assistant" {
                pending = message["tool_calls"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|call| call["id"].as_str().map(str::to_owned))
                    .collect();
            }
        }
        completed.push(message);
    }
    flush(&mut completed, &mut pending);
    completed
}

/// The id of the `ask_user` call the thread is waiting on, if its last message asked one. Only
/// that call may be answered: a client cannot add a tool result for any other call.
pub fn pending_question(history: &[Value]) -> Option<&str> {
    let last = history.last()?;
    if last["role"] != "assistant" {
        return None;
    }
    last["tool_calls"]
        .as_array()?
        .iter()
        .find(|call| call["function"]["name"] == "ask_user")
        .and_then(|call| call["id"].as_str())
}
