//! `rover-eval --from-feedback`: the turns staff rated (`POST /api/chats/{id}/messages/{m}/feedback`)
//! as eval cases. A reply rated up becomes a regression case — the same utterance by the same
//! user must call the tools it called and make the writes it made; one rated down becomes a case
//! in the `needs-review` subset with the staff member's comment and the trace id, its expectations
//! left for a person to write (what it should have done is not in the data).
//!
//! Reads with an owner URL (every school's rows, past row-level security): run it where the
//! operator may read chats, never from a service.

use std::fmt::Write as _;

use anyhow::Context as _;
use serde_json::Value;

/// One rated reply, as the database holds it.
#[derive(Debug, sqlx::FromRow)]
struct Rated {
    message_id: String,
    rating: String,
    comment: Option<String>,
    trace_id: Option<String>,
    email: String,
    /// The staff message that started the reply (`chat_turns.sent`).
    sent: Option<Value>,
    /// The tools the reply's turns called, in order, repeats removed.
    tools: Vec<String>,
    /// The audit events its turns wrote.
    writes: Vec<String>,
}

/// Every rated reply, oldest rating first.
const RATED: &str = "\
WITH reply AS (
    SELECT f.school_id, f.thread_id, f.message_id, f.rating, f.comment, f.trace_id, f.created_at,
           u.email,
           array_agg(c.turn_id ORDER BY c.position) AS turns
    FROM chat_feedback f
    JOIN users u ON u.school_id = f.school_id AND u.id = f.user_id
    JOIN chat_turns c ON c.school_id = f.school_id AND c.thread_id = f.thread_id
    JOIN turn_events s ON s.school_id = c.school_id AND s.turn_id = c.turn_id AND s.seq = 0
        AND s.payload->'event'->>'messageId' = f.message_id
    GROUP BY f.school_id, f.thread_id, f.message_id, f.rating, f.comment, f.trace_id,
             f.created_at, u.email
)
SELECT r.message_id, r.rating, r.comment, r.trace_id, r.email,
    (SELECT c.sent FROM chat_turns c WHERE c.school_id = r.school_id AND c.thread_id = r.thread_id
        AND c.sent IS NOT NULL AND c.position <= (SELECT min(position) FROM chat_turns x
            WHERE x.school_id = r.school_id AND x.turn_id = ANY(r.turns))
        ORDER BY c.position DESC LIMIT 1) AS sent,
    coalesce((SELECT array_agg(tool ORDER BY first_seen) FROM (
        SELECT e.payload->'event'->>'toolName' AS tool,
               min(array_position(r.turns, e.turn_id)::bigint * 1000000 + e.seq) AS first_seen
        FROM turn_events e WHERE e.school_id = r.school_id AND e.turn_id = ANY(r.turns)
          AND e.payload->'event'->>'type' = 'tool-input-available'
        GROUP BY 1) t), '{}') AS tools,
    coalesce((SELECT array_agg(a.event ORDER BY a.id) FROM audit_log a
        WHERE a.school_id = r.school_id
          -- A tool call's id is `<turn>/<model call id>`.
          AND split_part(a.call_id, '/', 1) = ANY(r.turns::text[])), '{}') AS writes
FROM reply r
ORDER BY r.created_at, r.message_id";

/// The text a staff message carried.
fn text_of(sent: Option<&Value>) -> String {
    sent.and_then(|s| s["parts"].as_array())
        .map(|parts| {
            parts
                .iter()
                .filter(|p| p["type"] == "text")
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// A TOML string literal.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

fn list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| quoted(i)).collect();
    format!("[{}]", quoted.join(", "))
}

/// The cases file (`utterances.toml`'s format) for every rated reply in the database at `url`.
pub async fn cases_from_feedback(url: &str) -> anyhow::Result<String> {
    let pool = sqlx::PgPool::connect(url)
        .await
        .context("Failed to connect to the database named by --from-feedback")?;
    let rated: Vec<Rated> = sqlx::query_as(RATED)
        .fetch_all(&pool)
        .await
        .context("Failed to read the rated replies")?;
    pool.close().await;
    let mut out = String::from(
        "# Cases from staff feedback (rover-eval --from-feedback): a reply rated up is a regression\n\
         # case (the same tools and writes again); one rated down is in the `needs-review` subset,\n\
         # its expectations for a person to write.\n",
    );
    for reply in rated
        .iter()
        .filter(|r| !text_of(r.sent.as_ref()).trim().is_empty())
    {
        let text = text_of(reply.sent.as_ref());
        let up = reply.rating == "up";
        let kind = if !reply.writes.is_empty() {
            "write"
        } else if reply.tools.iter().any(|t| t == "task") {
            "delegation"
        } else if reply.tools.iter().any(|t| t == "ask_user") {
            "ask_user"
        } else {
            "read"
        };
        let _ = writeln!(out, "\n# rated {} {}", reply.rating, reply.message_id);
        if let Some(trace) = &reply.trace_id {
            let _ = writeln!(out, "# trace {trace}");
        }
        if let Some(comment) = &reply.comment {
            for line in comment.lines() {
                let _ = writeln!(out, "# said: {line}");
            }
        }
        let _ = writeln!(out, "[[case]]");
        let _ = writeln!(
            out,
            "id = {}",
            quoted(&format!("feedback-{}", reply.message_id))
        );
        let _ = writeln!(out, "user = {}", quoted(&reply.email));
        let _ = writeln!(out, "text = {}", quoted(&text));
        let _ = writeln!(out, "kind = {}", quoted(kind));
        if up {
            let _ = writeln!(out, "subsets = [\"feedback\"]");
            let _ = writeln!(out, "tools = {}", list(&reply.tools));
            let writes: Vec<String> = reply
                .writes
                .iter()
                .map(|event| format!("{{ event = {} }}", quoted(event)))
                .collect();
            let _ = writeln!(out, "writes = [{}]", writes.join(", "));
        } else {
            let _ = writeln!(out, "subsets = [\"feedback\", \"needs-review\"]");
            let _ = writeln!(out, "# it called: {}", list(&reply.tools));
        }
    }
    if out.contains("[[case]]") {
        crate::cases::parse(&out).context("The cases made from feedback do not parse")?;
    }
    Ok(out)
}
