//! One turn of a case's chat as a Hub would send it: `POST /api/chat` as the case's user, the SSE
//! stream read to its end; when the turn ends waiting on a question (`ask_user`) and the case has
//! an answer left, the answer is posted as that call's result (as `useChat` does) and the
//! continuation read too; then the audit rows the turn wrote, read from Postgres.

use std::time::{Duration, Instant};

use futures::StreamExt as _;
use rover_domain::seed::DemoIds;
use serde_json::{Value, json};

use crate::cases::Answer;
use crate::score::{Asked, Observed, ToolCall, Write};
use crate::stack::Stack;

/// The campuses of the demo data, by name (the audit log stores ids).
const CAMPUSES: [&str; 3] = ["Naalya", "Kololo", "Main"];

/// How often a refused POST (409: the chat's previous reply is still being put away) is tried
/// again, and how long apart.
const BUSY_RETRIES: u32 = 20;
const BUSY_WAIT: Duration = Duration::from_millis(250);

/// One case's chat: a new chat id, and the speaker's token (or why there is none).
#[derive(Debug)]
pub struct Chat {
    pub id: String,
    token: Result<String, String>,
    /// Messages posted so far (their ids).
    posted: u32,
}

impl Chat {
    pub fn new(stack: &Stack, user: &str) -> Chat {
        Chat {
            id: uuid::Uuid::new_v4().to_string(),
            token: token(&stack.db.ids, user).map_err(|e| e.to_string()),
            posted: 0,
        }
    }
}

/// Runs one turn of `chat`: sends `text`, then each of `answers` to the questions that end its
/// streams. Never fails: what the turn reported is in `errors`, what kept the harness from
/// observing it in `harness_errors`, an answer it could not give in `script_errors`.
pub async fn run(
    stack: &Stack,
    http: &reqwest::Client,
    chat: &mut Chat,
    text: &str,
    answers: &[Answer],
    timeout: Duration,
) -> Observed {
    let started = Instant::now();
    let mut observed = Observed::default();
    let before = match last_audit_id(stack).await {
        Ok(id) => id,
        Err(e) => {
            observed
                .harness_errors
                .push(format!("reading the audit log: {e}"));
            return observed;
        }
    };
    chat.posted += 1;
    let mut message = json!({
        "id": format!("u{}", chat.posted),
        "role": "user",
        "parts": [{ "type": "text", "text": text }],
    });
    let mut answers = answers.iter().enumerate();
    loop {
        observed.finish = None;
        let posted = post(stack, http, chat, &message, started, &mut observed);
        if tokio::time::timeout(timeout, posted).await.is_err() {
            observed
                .harness_errors
                .push(format!("no `finish` within {} s", timeout.as_secs()));
            break;
        }
        if !observed.harness_errors.is_empty() {
            break;
        }
        match answer(&mut observed, &mut answers, chat) {
            Some(next) => message = next,
            None => break,
        }
    }
    match writes_since(stack, before).await {
        Ok(writes) => observed.writes = writes,
        Err(e) => observed
            .harness_errors
            .push(format!("reading the audit log: {e}")),
    }
    observed.millis = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    observed
}

/// When the turn ended waiting on a question: the message that answers it with the case's next
/// answer, as `useChat` sends it (the assistant message whose `ask_user` part has its output).
/// `None` ends the turn: no question, no answer left, or none that fits the offered choices (in
/// `script_errors`). Every question is noted in `asked`.
fn answer<'a>(
    observed: &mut Observed,
    answers: &mut impl Iterator<Item = (usize, &'a Answer)>,
    chat: &mut Chat,
) -> Option<Value> {
    let index = pending_question(observed)?;
    let call = observed.calls[index].clone();
    let choices: Vec<String> = call.input["choices"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let mut asked = Asked {
        question: call.input["question"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        choices,
        answer: None,
        by_worker: call.by_worker,
    };
    let given = answers
        .next()
        .map(|(n, answer)| (n, answer.to(&asked.choices)));
    let output = match given {
        None => None,
        Some((_, Ok(output))) => Some(output),
        Some((n, Err(why))) => {
            observed
                .script_errors
                .push(format!("answer {} {why}", n + 1));
            None
        }
    };
    asked.answer.clone_from(&output);
    observed.asked.push(asked);
    let output = output?;
    observed.calls[index].settled = true;
    chat.posted += 1;
    Some(json!({
        "id": format!("a{}", chat.posted),
        "role": "assistant",
        "parts": [{
            "type": "tool-ask_user", "toolCallId": call.id, "state": "output-available",
            "input": call.input, "output": output,
        }],
    }))
}

/// The `ask_user` call the turn ended waiting on, if it did.
pub fn pending_question(observed: &Observed) -> Option<usize> {
    if observed.finish.as_deref() != Some("tool-calls") {
        return None;
    }
    observed
        .calls
        .iter()
        .rposition(|c| c.name == "ask_user" && !c.settled)
}

/// Posts one message of the chat and folds its stream into `observed`.
async fn post(
    stack: &Stack,
    http: &reqwest::Client,
    chat: &Chat,
    message: &Value,
    started: Instant,
    observed: &mut Observed,
) {
    let token = match &chat.token {
        Ok(t) => t,
        Err(e) => {
            observed.harness_errors.push(e.clone());
            return;
        }
    };
    let body = json!({
        "id": chat.id,
        "trigger": "submit-message",
        "messages": [message],
    });
    let mut tries = 0;
    let response = loop {
        let response = match http
            .post(format!("http://{}/api/chat", stack.gateway))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
        {
            Ok(r) => r,
            Err(e) => {
                observed.harness_errors.push(format!("POST /api/chat: {e}"));
                return;
            }
        };
        if response.status() == reqwest::StatusCode::CONFLICT && tries < BUSY_RETRIES {
            tries += 1;
            tokio::time::sleep(BUSY_WAIT).await;
            continue;
        }
        break response;
    };
    if !response.status().is_success() {
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        observed
            .harness_errors
            .push(format!("POST /api/chat: {status} {text}"));
        return;
    }
    let mut reader = ChunkReader::default();
    let mut bytes = response.bytes_stream();
    while let Some(next) = bytes.next().await {
        match next {
            Ok(b) => {
                reader.feed(&b, observed);
                if observed.first_output_millis.is_none()
                    && (!observed.text.is_empty() || !observed.calls.is_empty())
                {
                    observed.first_output_millis =
                        Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
                }
            }
            Err(e) => {
                observed
                    .harness_errors
                    .push(format!("reading the stream: {e}"));
                break;
            }
        }
    }
}

/// Splits the SSE body into `data:` lines and folds each chunk into what was observed.
#[derive(Debug, Default)]
pub struct ChunkReader {
    buffer: Vec<u8>,
}

impl ChunkReader {
    pub fn feed(&mut self, bytes: &[u8], observed: &mut Observed) {
        self.buffer.extend_from_slice(bytes);
        while let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.buffer.drain(..=end).collect();
            let Some(data) = line.strip_prefix(b"data: ") else {
                continue;
            };
            if data.starts_with(b"[DONE]") {
                continue;
            }
            match serde_json::from_slice::<Value>(data) {
                Ok(chunk) => fold(&chunk, observed),
                Err(e) => observed
                    .harness_errors
                    .push(format!("a chunk that is not JSON: {e}")),
            }
        }
    }
}

/// Folds one UI-message-stream chunk into `observed`.
pub fn fold(chunk: &Value, observed: &mut Observed) {
    let id = chunk["toolCallId"].as_str().unwrap_or_default();
    let find = |observed: &mut Observed, id: &str| observed.calls.iter().position(|c| c.id == id);
    match chunk["type"].as_str().unwrap_or_default() {
        // One model request each (Rover's or a subagent's); the worker's own question below is
        // a step too, but no request.
        "start-step" => observed.model_calls += 1,
        "tool-input-start" | "tool-input-available" => {
            let name = chunk["toolName"].as_str().unwrap_or_default().to_owned();
            let index = find(observed, id).unwrap_or_else(|| {
                // A model's call opens with `tool-input-start`; one that arrives whole was made
                // by the worker: its `ask_user` when a tool could not tell what was meant.
                let by_worker = chunk["type"] == "tool-input-available";
                if by_worker && name == "ask_user" {
                    observed.model_calls = observed.model_calls.saturating_sub(1);
                }
                observed.calls.push(ToolCall {
                    id: id.to_owned(),
                    name: name.clone(),
                    input: Value::Null,
                    agent: "rover".to_owned(),
                    approval_requested: false,
                    by_worker,
                    settled: false,
                    error: None,
                });
                observed.calls.len() - 1
            });
            if chunk["type"] == "tool-input-available" {
                observed.calls[index].input = chunk["input"].clone();
            }
        }
        "tool-output-available" | "tool-output-denied" => {
            if let Some(i) = find(observed, id) {
                observed.calls[i].settled = true;
            }
        }
        "tool-output-error" => {
            if let Some(i) = find(observed, id) {
                observed.calls[i].settled = true;
                observed.calls[i].error = chunk["errorText"].as_str().map(str::to_owned);
            }
        }
        "data-tool-label" => {
            let data = &chunk["data"];
            let id = data["toolCallId"].as_str().unwrap_or_default();
            if let (Some(i), Some(agent)) = (find(observed, id), data["agent"].as_str()) {
                observed.calls[i].agent = agent.to_owned();
            }
        }
        // Approvals (issue 12): the model chose this call with these arguments; the harness
        // never approves, so nothing runs.
        "tool-approval-request" => {
            if let Some(i) = find(observed, id) {
                observed.calls[i].approval_requested = true;
            }
        }
        "text-delta" => observed
            .text
            .push_str(chunk["delta"].as_str().unwrap_or_default()),
        "data-subagent" => {
            let data = &chunk["data"];
            observed.text.push_str(&format!(
                "[{}] {}\n",
                data["agent"].as_str().unwrap_or("subagent"),
                data["text"].as_str().unwrap_or_default()
            ));
        }
        "error" => observed.errors.push(
            chunk["errorText"]
                .as_str()
                .unwrap_or("an error chunk")
                .to_owned(),
        ),
        "finish" => {
            observed.finish = Some(chunk["finishReason"].as_str().unwrap_or("").to_owned());
            usage(&chunk["messageMetadata"], observed);
        }
        "message-metadata" => usage(&chunk["messageMetadata"], observed),
        _ => {}
    }
}

/// A stream's token usage, from message metadata (reported once, at its end: `finish`, or a
/// stopped reply's `message-metadata`), added to the turn's (a turn whose questions were
/// answered is several streams).
fn usage(metadata: &Value, observed: &mut Observed) {
    let usage = &metadata["usage"];
    if let Some(input) = usage["inputTokens"].as_u64() {
        observed.input_tokens = Some(observed.input_tokens.unwrap_or(0) + input);
    }
    if let Some(output) = usage["outputTokens"].as_u64() {
        observed.output_tokens = Some(observed.output_tokens.unwrap_or(0) + output);
    }
}

/// Why a case's speaker got no token.
#[derive(Debug, thiserror::Error)]
enum TokenError {
    #[error("{0} is not a demo user")]
    NotDemoUser(String),
    #[error("minting a token for {email}: {error}")]
    Mint { email: String, error: anyhow::Error },
}

fn token(ids: &DemoIds, email: &str) -> Result<String, TokenError> {
    let user = std::panic::catch_unwind(|| ids.user(email))
        .map_err(|_| TokenError::NotDemoUser(email.to_owned()))?;
    let settings = rover_gateway::AuthSettings::development();
    rover_gateway::dev_token(&settings, user, email, chrono::Utc::now()).map_err(|error| {
        TokenError::Mint {
            email: email.to_owned(),
            error,
        }
    })
}

async fn last_audit_id(stack: &Stack) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar::<_, Option<i64>>("SELECT max(id) FROM audit_log")
        .fetch_one(&stack.owner)
        .await
        .map(|id| id.unwrap_or(0))
}

async fn writes_since(stack: &Stack, after: i64) -> Result<Vec<Write>, sqlx::Error> {
    type Row = (
        String,
        Option<uuid::Uuid>,
        Option<String>,
        Option<Value>,
        Option<Value>,
    );
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT event, campus_id, call_id, named, after FROM audit_log WHERE id > $1 ORDER BY id",
    )
    .bind(after)
    .fetch_all(&stack.owner)
    .await?;
    let ids = &stack.db.ids;
    Ok(rows
        .into_iter()
        .map(|(event, campus, call, named, after)| Write {
            event,
            campus: campus.map(|id| {
                CAMPUSES
                    .iter()
                    .find(|name| ids.campus(name).to_string() == id.to_string())
                    .map_or_else(|| id.to_string(), |name| (*name).to_owned())
            }),
            // `<turn>/<call id as the stream names it>`.
            call: call.and_then(|c| c.split_once('/').map(|(_, id)| id.to_owned())),
            named,
            after,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_becomes_calls_text_and_finish() {
        let mut o = Observed::default();
        let mut r = ChunkReader::default();
        let lines = [
            json!({ "type": "start" }),
            json!({ "type": "tool-input-start", "toolCallId": "a", "toolName": "task" }),
            json!({ "type": "data-tool-label", "data": { "toolCallId": "a", "agent": "rover" } }),
            json!({ "type": "tool-input-available", "toolCallId": "a", "toolName": "task", "input": { "subagent": "class_teacher" } }),
            json!({ "type": "tool-input-start", "toolCallId": "b", "toolName": "record_attendance" }),
            json!({ "type": "data-tool-label", "data": { "toolCallId": "b", "agent": "class_teacher" } }),
            json!({ "type": "tool-input-available", "toolCallId": "b", "toolName": "record_attendance", "input": { "class": "c" } }),
            json!({ "type": "tool-approval-request", "approvalId": "x", "toolCallId": "b" }),
            json!({ "type": "text-delta", "id": "t", "delta": "Done." }),
            json!({ "type": "finish", "finishReason": "stop" }),
        ];
        let body: String = lines
            .iter()
            .map(|l| format!("data: {l}\n\n"))
            .chain(["data: [DONE]\n\n".to_owned()])
            .collect();
        // Fed in awkward pieces, as the network delivers them.
        for piece in body.as_bytes().chunks(7) {
            r.feed(piece, &mut o);
        }
        assert_eq!(o.calls.len(), 2);
        assert_eq!(o.calls[1].agent, "class_teacher");
        assert_eq!(o.calls[1].input["class"], "c");
        assert!(o.calls[1].approval_requested && !o.calls[0].approval_requested);
        assert_eq!(o.text, "Done.");
        assert_eq!(o.finish.as_deref(), Some("stop"));
        assert!(o.errors.is_empty());
    }

    fn folded(chunks: &[Value]) -> Observed {
        let mut o = Observed::default();
        for chunk in chunks {
            fold(chunk, &mut o);
        }
        o
    }

    #[test]
    fn model_calls_are_counted_by_step_and_the_workers_question_is_none() {
        let o = folded(&[
            json!({ "type": "start" }),
            // Rover's step: a `task` call…
            json!({ "type": "start-step" }),
            json!({ "type": "tool-input-start", "toolCallId": "t", "toolName": "task" }),
            json!({ "type": "tool-input-available", "toolCallId": "t", "toolName": "task", "input": {} }),
            // …whose subagent makes a call that cannot tell which student was meant…
            json!({ "type": "start-step" }),
            json!({ "type": "tool-input-start", "toolCallId": "t/0", "toolName": "record_marks" }),
            json!({ "type": "tool-input-available", "toolCallId": "t/0", "toolName": "record_marks", "input": {} }),
            json!({ "type": "tool-output-error", "toolCallId": "t/0", "errorText": "Not done: \"Nakato\" fits more than one student" }),
            json!({ "type": "finish-step" }),
            json!({ "type": "tool-output-error", "toolCallId": "t", "errorText": "Not done" }),
            json!({ "type": "finish-step" }),
            // …so the worker asks, in a step of its own.
            json!({ "type": "start-step" }),
            json!({ "type": "tool-input-available", "toolCallId": "ask-2", "toolName": "ask_user",
                    "input": { "question": "Which student do you mean by \"Nakato\"?", "choices": ["Nakato Sarah (S1 Blue, KHS003)", "Nakato Mary (S2 Green, KHS016)"] } }),
            json!({ "type": "finish-step" }),
            json!({ "type": "finish", "finishReason": "tool-calls", "messageMetadata": { "usage": { "inputTokens": 10, "outputTokens": 2 } } }),
        ]);
        assert_eq!(o.model_calls, 2);
        assert_eq!(o.calls.len(), 3);
        assert!(o.calls[2].by_worker && !o.calls[0].by_worker && !o.calls[1].by_worker);
        assert!(o.calls[1].settled);
        assert_eq!(
            o.calls[1].error.as_deref(),
            Some("Not done: \"Nakato\" fits more than one student")
        );
        assert_eq!(pending_question(&o), Some(2));
        assert_eq!(o.input_tokens, Some(10));
    }

    #[test]
    fn only_an_unanswered_question_that_ended_the_stream_is_pending() {
        let question = json!({ "type": "tool-input-available", "toolCallId": "q", "toolName": "ask_user", "input": { "question": "Which?" } });
        let start =
            json!({ "type": "tool-input-start", "toolCallId": "q", "toolName": "ask_user" });
        let stopped = folded(&[
            start.clone(),
            question.clone(),
            json!({ "type": "finish", "finishReason": "stop" }),
        ]);
        assert_eq!(pending_question(&stopped), None);
        let mut waiting = folded(&[
            start,
            question,
            json!({ "type": "finish", "finishReason": "tool-calls" }),
        ]);
        assert_eq!(pending_question(&waiting), Some(0));
        assert!(!waiting.calls[0].by_worker);
        assert_eq!(waiting.model_calls, 0, "no start-step was seen");
        // Answered (by the harness, or its result streamed): nothing waits.
        waiting.calls[0].settled = true;
        assert_eq!(pending_question(&waiting), None);
        // Usage adds up over a turn's streams.
        let mut o = Observed::default();
        for _ in 0..2 {
            fold(
                &json!({ "type": "finish", "finishReason": "stop", "messageMetadata": { "usage": { "inputTokens": 100, "outputTokens": 7 } } }),
                &mut o,
            );
        }
        assert_eq!((o.input_tokens, o.output_tokens), (Some(200), Some(14)));
    }
}
