//! Compaction: what of a long thread the model is sent. A school keeps one thread for months, so
//! the history sent with a turn is held under a token budget that counts the system prompt, the
//! tool definitions and the new message too:
//!
//! - a large tool result from an earlier turn is replaced by a short stub naming its call id (the
//!   full result stays in `conversation_log`);
//! - when the rest still does not fit, the oldest turns are folded, by the model, into one stored
//!   summary of the thread, sent first as Rover's own notes between `<conversation_summary>`
//!   tags (data, never part of the system prompt);
//! - cuts fall only where a staff member's message begins, so a tool call is never separated
//!   from its result (nor an `ask_user` from its answer).
//!
//! Everything here but [`summarise`] is a pure function of its inputs, so the same thread and
//! settings always give the same window. Tokens are estimated, not counted: about four bytes of
//! the JSON the model receives per token, plus a few per message — the usual rule of thumb for
//! English with BPE tokenisers, and deterministic, which a model's own tokeniser is not across
//! servers. Set the budget with that margin in mind.

use futures::StreamExt as _;
use rover_contracts::wire::TokenUsage;
use serde_json::{Value, json};

use crate::budget::TurnBudget;
use crate::error::TurnError;
use crate::model::{ModelClient, ModelError};
use crate::store::TurnStore;

/// Estimated bytes of JSON per token.
const BYTES_PER_TOKEN: usize = 4;
/// Estimated tokens of framing per message (role, separators).
const TOKENS_PER_MESSAGE: usize = 4;
/// How a stored summary is introduced, inside its tags.
pub const SUMMARY_HEADING: &str = "## Earlier in this thread (a summary; the details are stored)";

/// The limits compaction keeps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The most a model request may carry, in estimated tokens: system prompt, tool
    /// definitions, summary, history, the new message — and the turn's own steps, which get a
    /// quarter of it.
    pub max_tokens: usize,
    /// An earlier tool result larger than this is sent as a stub.
    pub tool_result_max_tokens: usize,
}

impl Budget {
    /// What the history and the summary may take when nothing else is counted: three quarters
    /// of the budget; the last quarter is the turn's own room (its tool calls and results).
    fn for_history(&self, fixed: usize) -> usize {
        (self.max_tokens * 3 / 4).saturating_sub(fixed)
    }

    /// The most a summary may take.
    fn for_summary(&self) -> usize {
        self.max_tokens / 8
    }
}

pub use crate::store::Summary;

/// What to send, or what to summarise first.
#[derive(Debug, Clone, PartialEq)]
pub enum Window {
    /// The history fits: send these messages (a leading message between `<conversation_summary>`
    /// tags is the summary, `summary_message`).
    Fits(Vec<Value>),
    /// The history does not fit: summarise `history[from..to]` (after the stored summary, if
    /// any) into a new summary covering `to` messages, then fit again.
    Summarise {
        /// The first message not yet summarised.
        from: usize,
        /// The first message to keep as it is.
        to: usize,
    },
    /// Even with the whole history summarised, the prompt, tools and the new message alone
    /// take more than the budget allows.
    TooLarge {
        /// The estimated tokens of the prompt, tools and message.
        fixed: usize,
    },
}

/// The estimated tokens of a message, a tool definition or any JSON, as sent (escapes count).
pub fn estimate(value: &Value) -> usize {
    serialized_len(value).div_ceil(BYTES_PER_TOKEN) + TOKENS_PER_MESSAGE
}

/// How many bytes `value` is as compact JSON, counted as it is written, with no text kept (every
/// model call estimates its whole conversation and tool definitions this way).
fn serialized_len(value: &Value) -> usize {
    struct Counted(usize);
    impl std::io::Write for Counted {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counted = Counted(0);
    // Writing a `Value` fails only when its writer does, and this one never does.
    let _ = serde_json::to_writer(&mut counted, value);
    counted.0
}

/// The estimated tokens of what every request of a turn carries besides the history: the
/// system prompt, the tool definitions and the new message.
pub fn fixed_cost(system_prompt: &str, tools: &[&Value], input: &Value) -> usize {
    estimate(&json!({ "role": "system", "content": system_prompt }))
        + tools.iter().map(|tool| estimate(tool)).sum::<usize>()
        + estimate(input)
}

/// The window of `history` to send with a turn whose fixed part costs `fixed` tokens.
pub fn fit(history: &[Value], summary: Option<&Summary>, fixed: usize, budget: Budget) -> Window {
    // Room for at least a summary (and its heading) beside the fixed part.
    if fixed + budget.for_summary() + 64 > budget.for_history(0) {
        return Window::TooLarge { fixed };
    }
    let covers = summary.map_or(0, |s| s.covers.min(history.len()));
    let kept: Vec<Value> = history[covers..]
        .iter()
        .map(|message| stub(message, budget))
        .collect();
    let summary_cost = summary.map_or(0, |s| estimate(&summary_message(&s.text)));
    let kept_cost: usize = kept.iter().map(estimate).sum();
    if summary_cost + kept_cost <= budget.for_history(fixed) {
        let mut messages = Vec::with_capacity(kept.len() + 1);
        if let Some(summary) = summary.filter(|s| s.covers > 0) {
            messages.push(summary_message(&summary.text));
        }
        messages.extend(kept);
        return Window::Fits(messages);
    }
    // Keep the newest turns that fit in half of what the history may take, so the next few
    // turns fit without summarising again; cut only where a staff member's message begins.
    let room = budget.for_history(fixed + budget.for_summary()) / 2;
    let mut cost = 0;
    let mut to = history.len();
    for index in (covers..history.len()).rev() {
        cost += estimate(&kept[index - covers]);
        if cost > room {
            break;
        }
        if is_turn_start(&history[index]) {
            to = index;
        }
    }
    if to <= covers {
        // Nothing new fits beside the summary: fold everything into it.
        to = history.len();
    }
    Window::Summarise { from: covers, to }
}

/// Whether a history message begins a turn: a staff member's message. (An `ask_user` answer is
/// a `tool` message and stays with the question before it.)
fn is_turn_start(message: &Value) -> bool {
    message["role"] == "user"
}

/// The opening tag of a summary as the model reads it (the prompt's rules name it).
pub const SUMMARY_TAG: &str = "conversation_summary";

/// The message a summary travels in: Rover's own notes (`assistant`), between tags, never in the
/// system prompt — the summary holds what tools returned (names colleagues chose among it), so it
/// is data with no more authority than a tool's result. `<` and `>` in it are shown as `‹` and
/// `›`, so nothing in it can close the tag.
pub fn summary_message(text: &str) -> Value {
    let text = text.replace('<', "‹").replace('>', "›");
    json!({
        "role": "assistant",
        "content": format!("<{SUMMARY_TAG}>\n{SUMMARY_HEADING}\n{text}\n</{SUMMARY_TAG}>"),
    })
}

/// A tool result over the limit becomes a stub naming its call id; anything else is unchanged.
fn stub(message: &Value, budget: Budget) -> Value {
    if message["role"] != "tool" || estimate(&message["content"]) <= budget.tool_result_max_tokens {
        return message.clone();
    }
    let id = message["tool_call_id"].as_str().unwrap_or_default();
    let size = message["content"].as_str().map_or(0, str::len);
    let note = json!({
        "stub": format!(
            "This earlier tool result ({size} characters) is left out to keep the conversation \
             short; it is stored with the thread under call id {id}. Call the tool again if you \
             need its details."
        ),
        "toolCallId": id,
    });
    json!({ "role": "tool", "tool_call_id": id, "content": note.to_string() })
}

/// Folds `messages` (a run of whole turns) into `previous`, asking the model in pieces small
/// enough for the budget; the result is cut to the summary's share of the budget. Each
/// summarising call is paid from the turn's `spend` like any other model call.
pub async fn summarise(
    model: &ModelClient,
    spend: (&TurnBudget, &dyn TurnStore),
    previous: Option<&str>,
    messages: &[Value],
    budget: Budget,
) -> Result<String, TurnError> {
    let limit = budget.for_summary();
    // Each request: the instructions, the summary so far (≤ limit) and a piece of transcript.
    let piece_room = budget.max_tokens.saturating_sub(2 * limit + 256).max(256);
    let mut summary = previous.unwrap_or_default().to_owned();
    let mut piece = String::new();
    let lines = messages.iter().map(|m| transcript_line(m, budget));
    for line in lines.chain(std::iter::once(String::new())) {
        let full = !piece.is_empty()
            && (line.is_empty()
                || (piece.len() + line.len()).div_ceil(BYTES_PER_TOKEN) > piece_room);
        if full {
            summary = fold(model, spend, &summary, &piece, limit).await?;
            piece.clear();
        }
        // A single line larger than a piece is cut to fit it.
        let room = piece_room * BYTES_PER_TOKEN;
        piece.push_str(truncate(&line, room));
    }
    Ok(summary)
}

/// One summarising request: the summary so far and a piece of the transcript, into a summary.
async fn fold(
    model: &ModelClient,
    (spend, ledger): (&TurnBudget, &dyn TurnStore),
    summary: &str,
    piece: &str,
    limit: usize,
) -> Result<String, TurnError> {
    let words = limit * BYTES_PER_TOKEN / 6;
    let last_request = piece
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("Staff: "))
        .unwrap_or_default();
    let request = format!(
        "[rover:compact] Summarise this conversation between a school staff member and Rover, \
         their assistant, for Rover's own later use, in at most {words} words. Keep names, ids, \
         numbers, decisions, what was changed and what is still open.\n\n\
         Summary so far:\n{}\n\nConversation:\n{piece}\nThe last request: \"{}\"",
        if summary.is_empty() {
            "(none)"
        } else {
            summary
        },
        truncate(last_request, 200),
    );
    let messages = [
        json!({ "role": "system", "content": "You summarise conversations faithfully and briefly." }),
        json!({ "role": "user", "content": request }),
    ];
    let prompt: usize = messages.iter().map(estimate).sum();
    let prompt = u64::try_from(prompt).unwrap_or(u64::MAX);
    let reservation = spend.before_model_call(ledger, prompt).await?;
    let mut text = String::new();
    let mut reported = None;
    let streamed = async {
        let mut stream = model.stream(&messages, &[]).await?;
        while let Some(chunk) = stream.chunks.next().await {
            let chunk = chunk?;
            if let Some(usage) = &chunk.usage {
                reported = Some(TokenUsage {
                    input_tokens: usage.prompt_tokens.into(),
                    output_tokens: usage.completion_tokens.into(),
                });
            }
            for choice in chunk.choices {
                if let Some(delta) = choice.delta.content {
                    text.push_str(&delta);
                }
            }
        }
        Ok::<_, ModelError>(())
    }
    .await;
    let used = reported.unwrap_or(TokenUsage {
        input_tokens: prompt,
        output_tokens: u64::try_from(text.len().div_ceil(BYTES_PER_TOKEN)).unwrap_or(u64::MAX),
    });
    spend.after_model_call(ledger, reservation, used).await;
    streamed.map_err(TurnError::Summarising)?;
    let text = text.trim();
    if text.is_empty() {
        return Err(TurnError::Summarising(ModelError::Malformed(
            "the summary came back empty".to_owned(),
        )));
    }
    // Quotes and newlines grow when sent as JSON; half the share in bytes stays inside it.
    Ok(truncate(text, limit * BYTES_PER_TOKEN / 2).to_owned())
}

/// A message as one line of a plain transcript.
fn transcript_line(message: &Value, budget: Budget) -> String {
    let content = match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let mut line = match message["role"].as_str() {
        Some("user") => format!("Staff: {content}"),
        Some("assistant") => format!("Rover: {content}"),
        Some("tool") => {
            let result = stub(message, budget);
            let text = result["content"].as_str().unwrap_or_default();
            format!(
                "Tool result ({}): {}",
                message["tool_call_id"].as_str().unwrap_or_default(),
                truncate(text, 600)
            )
        }
        _ => content,
    };
    for call in message["tool_calls"].as_array().into_iter().flatten() {
        line.push_str(&format!(
            " [called {} with {}]",
            call["function"]["name"].as_str().unwrap_or("a tool"),
            truncate(
                call["function"]["arguments"].as_str().unwrap_or_default(),
                300
            )
        ));
    }
    line.push('\n');
    line
}

/// At most `bytes` of `text`, cut at a character boundary.
fn truncate(text: &str, bytes: usize) -> &str {
    if text.len() <= bytes {
        return text;
    }
    let cut = (0..=bytes)
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    &text[..cut]
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDGET: Budget = Budget {
        max_tokens: 2_000,
        tool_result_max_tokens: 100,
    };

    /// A turn: the staff member's message, a tool call, its result, the answer.
    fn turn(n: usize, result_bytes: usize) -> Vec<Value> {
        let id = format!("turn{n}-call");
        vec![
            json!({ "role": "user", "content": format!("Question number {n}") }),
            json!({ "role": "assistant", "content": null, "tool_calls": [{
                "id": id, "type": "function",
                "function": { "name": "list_departments", "arguments": "{}" } }] }),
            json!({ "role": "tool", "tool_call_id": id, "content": "x".repeat(result_bytes) }),
            json!({ "role": "assistant", "content": format!("Answer number {n}") }),
        ]
    }

    fn thread(turns: usize, result_bytes: usize) -> Vec<Value> {
        (0..turns).flat_map(|n| turn(n, result_bytes)).collect()
    }

    fn cost(messages: &[Value]) -> usize {
        messages.iter().map(estimate).sum()
    }

    #[test]
    fn a_short_thread_is_sent_whole() {
        let history = thread(3, 50);
        assert_eq!(fit(&history, None, 300, BUDGET), Window::Fits(history));
    }

    #[test]
    fn a_large_earlier_tool_result_becomes_a_stub_naming_its_call() {
        let history = thread(2, 5_000);
        let Window::Fits(sent) = fit(&history, None, 300, BUDGET) else {
            panic!("two stubbed turns fit");
        };
        let stubbed = &sent[2];
        assert_eq!(stubbed["tool_call_id"], "turn0-call");
        let content: Value = serde_json::from_str(stubbed["content"].as_str().unwrap()).unwrap();
        assert_eq!(content["toolCallId"], "turn0-call");
        assert!(
            content["stub"]
                .as_str()
                .unwrap()
                .contains("5000 characters")
        );
        assert!(estimate(stubbed) <= BUDGET.tool_result_max_tokens);
        assert_eq!(sent[1], history[1], "the call itself is kept");
    }

    #[test]
    fn a_long_thread_is_cut_only_where_a_staff_message_begins() {
        let history = thread(100, 50);
        let Window::Summarise { from, to } = fit(&history, None, 300, BUDGET) else {
            panic!("100 turns do not fit in 2,000 tokens");
        };
        assert_eq!(from, 0);
        assert!(to > 0 && to < history.len());
        assert_eq!(
            history[to]["role"], "user",
            "the kept part starts with a turn"
        );
        let summary = Summary {
            covers: to,
            text: "s".repeat(BUDGET.for_summary() * BYTES_PER_TOKEN / 2),
        };
        let Window::Fits(sent) = fit(&history, Some(&summary), 300, BUDGET) else {
            panic!("after the summary it fits");
        };
        // Data, not the system's word: Rover's own notes, between tags.
        assert_eq!(sent[0]["role"], "assistant");
        assert!(
            sent[0]["content"]
                .as_str()
                .unwrap()
                .starts_with(&format!("<{SUMMARY_TAG}>\n{SUMMARY_HEADING}"))
        );
        assert_eq!(&sent[1..], &history[to..]);
        assert!(300 + cost(&sent) <= BUDGET.max_tokens * 3 / 4);
    }

    #[test]
    fn an_ask_user_answer_stays_with_its_question() {
        // A turn that ended on ask_user, answered by a tool message in the next turn.
        let mut history = thread(60, 50);
        history.push(json!({ "role": "user", "content": "Do something vague" }));
        history.push(
            json!({ "role": "assistant", "content": null, "tool_calls": [{
            "id": "ask", "type": "function",
            "function": { "name": "ask_user", "arguments": "{\"question\":\"Which?\"}" } }] }),
        );
        history.push(
            json!({ "role": "tool", "tool_call_id": "ask", "content": "{\"data\":\"this one\"}" }),
        );
        history.push(json!({ "role": "assistant", "content": "Done." }));
        for fixed in [100, 300, 700] {
            match fit(&history, None, fixed, BUDGET) {
                Window::Summarise { to, .. } => {
                    assert!(to == history.len() || history[to]["role"] == "user");
                    // Every tool result kept has its call kept too.
                    let kept = &history[to..];
                    for result in kept.iter().filter(|m| m["role"] == "tool") {
                        let id = &result["tool_call_id"];
                        assert!(kept.iter().any(|m| {
                            m["tool_calls"]
                                .as_array()
                                .is_some_and(|calls| calls.iter().any(|c| &c["id"] == id))
                        }));
                    }
                }
                other => panic!("{fixed}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_window_is_deterministic() {
        let history = thread(80, 900);
        assert_eq!(
            fit(&history, None, 400, BUDGET),
            fit(&history, None, 400, BUDGET)
        );
    }

    #[test]
    fn a_prompt_that_alone_exceeds_the_budget_is_too_large() {
        assert_eq!(
            fit(&thread(1, 10), None, 1_500, BUDGET),
            Window::TooLarge { fixed: 1_500 }
        );
    }

    #[test]
    fn transcript_lines_name_calls_and_cut_results() {
        let history = turn(7, 5_000);
        let lines: String = history.iter().map(|m| transcript_line(m, BUDGET)).collect();
        assert!(lines.contains("Staff: Question number 7"));
        assert!(lines.contains("[called list_departments with {}]"));
        assert!(lines.contains("Tool result (turn7-call)"));
        assert!(lines.len() < 2_000);
    }

    #[test]
    fn a_values_estimate_counts_the_bytes_it_is_sent_as() {
        for value in [
            json!({"role": "user", "content": "What can you do?"}),
            json!({"role": "tool", "content": "quote \" backslash \\ newline \n tab \t nul \u{0} é ✓ 🦀"}),
            json!([1, -2.5, null, true, {"nested": ["a", {"b": []}]}]),
            json!(""),
        ] {
            let sent = value.to_string().len();
            assert_eq!(
                estimate(&value),
                sent.div_ceil(BYTES_PER_TOKEN) + TOKENS_PER_MESSAGE,
                "{value}"
            );
        }
    }
}
