//! `rover-gateway demo`: one chat turn against a running gateway, narrated the way the Hub draws
//! it — the activity label of each tool call, then Rover's reply as it streams.

use anyhow::Context as _;
use futures::StreamExt as _;
use serde_json::{Value, json};

/// Posts `message` as the token's user and narrates the stream to `out`; returns the reply text.
pub async fn narrate(
    base_url: &str,
    token: &str,
    message: &str,
    out: &mut impl std::io::Write,
) -> anyhow::Result<String> {
    let body = json!({
        "id": format!("demo-{}", uuid::Uuid::new_v4().simple()),
        "trigger": "submit-message",
        "messages": [{ "id": "demo-1", "role": "user", "parts": [{ "type": "text", "text": message }] }],
    });
    let response = reqwest::Client::new()
        .post(format!("{}/api/chat", base_url.trim_end_matches('/')))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .context("Failed to reach the gateway")?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        anyhow::bail!("the gateway answered {status}: {text}");
    }
    let mut reply = String::new();
    let mut buffer = String::new();
    let mut stream = response.bytes_stream();
    while let Some(bytes) = stream.next().await {
        buffer.push_str(&String::from_utf8_lossy(
            &bytes.context("The stream broke")?,
        ));
        while let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            for data in frame.lines().filter_map(|l| l.strip_prefix("data: ")) {
                if data == "[DONE]" {
                    writeln!(out)?;
                    return Ok(reply);
                }
                let chunk: Value = serde_json::from_str(data).context("A chunk was not JSON")?;
                narrate_chunk(&chunk, &mut reply, out)?;
            }
        }
    }
    writeln!(out)?;
    Ok(reply)
}

fn narrate_chunk(
    chunk: &Value,
    reply: &mut String,
    out: &mut impl std::io::Write,
) -> anyhow::Result<()> {
    match chunk["type"].as_str().unwrap_or_default() {
        "data-tool-label" => {
            let agent = chunk["data"]["agent"].as_str().unwrap_or("rover");
            let by = if agent == "rover" {
                String::new()
            } else {
                format!(" ({})", agent.replace('_', " "))
            };
            writeln!(
                out,
                "  · {}{by}",
                chunk["data"]["label"].as_str().unwrap_or("Working…")
            )?;
        }
        "tool-output-error" => writeln!(
            out,
            "    (that step failed: {})",
            chunk["errorText"].as_str().unwrap_or("?")
        )?,
        "text-delta" => {
            let delta = chunk["delta"].as_str().unwrap_or_default();
            if reply.is_empty() {
                write!(out, "Rover: ")?;
            }
            reply.push_str(delta);
            write!(out, "{delta}")?;
            out.flush()?;
        }
        "error" => writeln!(
            out,
            "\n  (error: {})",
            chunk["errorText"].as_str().unwrap_or("?")
        )?,
        _ => {}
    }
    Ok(())
}
