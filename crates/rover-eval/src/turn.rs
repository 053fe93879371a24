//! One case as a Hub would send it: `POST /api/chat` in a new chat as the case's user, the SSE
//! stream read to its end, then the audit rows the turn wrote, read from Postgres.

use std::time::{Duration, Instant};

use futures::StreamExt as _;
use rover_domain::seed::DemoIds;
use serde_json::{Value, json};

use crate::cases::Case;
use crate::score::{Observed, ToolCall, Write};
use crate::stack::Stack;

/// The campuses of the demo data, by name (the audit log stores ids).
const CAMPUSES: [&str; 3] = ["Naalya", "Kololo", "Main"];

/// Runs `case` on `stack`; never fails: what the turn reported is in `errors`, what kept the
/// harness from observing it in `harness_errors`.
pub async fn run(
    stack: &Stack,
    http: &reqwest::Client,
    case: &Case,
    timeout: Duration,
) -> Observed {
    let started = Instant::now();
    let before = match last_audit_id(stack).await {
        Ok(id) => id,
        Err(e) => {
            return Observed {
                harness_errors: vec![format!("reading the audit log: {e}")],
                ..Observed::default()
            };
        }
    };
    let mut observed = match tokio::time::timeout(timeout, stream(stack, http, case, started)).await
    {
        Ok(observed) => observed,
        Err(_) => Observed {
            harness_errors: vec![format!("no `finish` within {} s", timeout.as_secs())],
            ..Observed::default()
        },
    };
    match writes_since(stack, before).await {
        Ok(writes) => observed.writes = writes,
        Err(e) => observed
            .harness_errors
            .push(format!("reading the audit log: {e}")),
    }
    observed.millis = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    observed
}

async fn stream(stack: &Stack, http: &reqwest::Client, case: &Case, started: Instant) -> Observed {
    let mut observed = Observed::default();
    let token = match token(&stack.db.ids, &case.user) {
        Ok(t) => t,
        Err(e) => {
            observed.harness_errors.push(e.to_string());
            return observed;
        }
    };
    let body = json!({
        "id": uuid::Uuid::new_v4().to_string(),
        "trigger": "submit-message",
        "messages": [{ "id": "u1", "role": "user", "parts": [{ "type": "text", "text": case.text }] }],
    });
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
            return observed;
        }
    };
    if !response.status().is_success() {
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        observed
            .harness_errors
            .push(format!("POST /api/chat: {status} {text}"));
        return observed;
    }
    let mut reader = ChunkReader::default();
    let mut bytes = response.bytes_stream();
    while let Some(next) = bytes.next().await {
        match next {
            Ok(b) => {
                reader.feed(&b, &mut observed);
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
    observed
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
        "tool-input-start" | "tool-input-available" => {
            let name = chunk["toolName"].as_str().unwrap_or_default().to_owned();
            let index = find(observed, id).unwrap_or_else(|| {
                observed.calls.push(ToolCall {
                    id: id.to_owned(),
                    name: name.clone(),
                    input: Value::Null,
                    agent: "rover".to_owned(),
                    approval_requested: false,
                });
                observed.calls.len() - 1
            });
            if chunk["type"] == "tool-input-available" {
                observed.calls[index].input = chunk["input"].clone();
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

/// The turn's token usage, from message metadata (the last report wins: it is the turn's total).
fn usage(metadata: &Value, observed: &mut Observed) {
    let usage = &metadata["usage"];
    if let Some(input) = usage["inputTokens"].as_u64() {
        observed.input_tokens = Some(input);
    }
    if let Some(output) = usage["outputTokens"].as_u64() {
        observed.output_tokens = Some(output);
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
    let rows: Vec<(String, Option<uuid::Uuid>)> =
        sqlx::query_as("SELECT event, campus_id FROM audit_log WHERE id > $1 ORDER BY id")
            .bind(after)
            .fetch_all(&stack.owner)
            .await?;
    let ids = &stack.db.ids;
    Ok(rows
        .into_iter()
        .map(|(event, campus)| Write {
            event,
            campus: campus.map(|id| {
                CAMPUSES
                    .iter()
                    .find(|name| ids.campus(name).to_string() == id.to_string())
                    .map_or_else(|| id.to_string(), |name| (*name).to_owned())
            }),
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
            json!({ "type": "tool-input-available", "toolCallId": "b", "toolName": "record_attendance", "input": { "classId": "c" } }),
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
        assert_eq!(o.calls[1].input["classId"], "c");
        assert!(o.calls[1].approval_requested && !o.calls[0].approval_requested);
        assert_eq!(o.text, "Done.");
        assert_eq!(o.finish.as_deref(), Some("stop"));
        assert!(o.errors.is_empty());
    }
}
