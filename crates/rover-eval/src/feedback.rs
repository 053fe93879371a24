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

/// A TOML string: the toml crate's own rendering, escaped as TOML needs whatever it holds.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

fn list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| quoted(i)).collect();
    format!("[{}]", quoted.join(", "))
}

/// `text` as TOML comment lines (`# …`), one per line of it (`\n`, `\r\n` or a lone `\r`): a
/// comment may hold no control character but tab, so any other (NUL, escape, DEL, …) is written
/// as its Rust escape (`\u{1b}`). Whatever staff typed, the file stays TOML.
fn comment(out: &mut String, prefix: &str, text: &str) {
    for line in text.replace("\r\n", "\n").split(['\n', '\r']) {
        let line: String = line
            .chars()
            .map(|c| {
                if c.is_control() && c != '\t' {
                    c.escape_unicode().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect();
        let _ = writeln!(out, "# {prefix}{line}");
    }
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
    let out = render(&rated);
    if out.contains("[[case]]") {
        crate::cases::parse(&out).context("The cases made from feedback do not parse")?;
    }
    Ok(out)
}

/// The cases file for `rated`. Everything that came from staff, a client or a model (comments,
/// message text, ids, tool names) is written as a TOML string or an escaped comment, and only
/// registered tools are expected, so the file always parses ([`crate::cases::parse`]).
fn render(rated: &[Rated]) -> String {
    let known: std::collections::HashSet<&str> = rover_contracts::tools::REGISTRY
        .iter()
        .map(|c| c.name)
        .collect();
    let mut ids = std::collections::HashSet::new();
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
        // Message ids are unique in a chat, not across chats: a repeat gets a suffix.
        let base = format!("feedback-{}", reply.message_id);
        let id = (1..)
            .map(|n| {
                if n == 1 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                }
            })
            .find(|id| ids.insert(id.clone()))
            .unwrap_or(base);
        out.push('\n');
        comment(
            &mut out,
            "rated ",
            &format!("{} {}", reply.rating, reply.message_id),
        );
        if let Some(trace) = &reply.trace_id {
            comment(&mut out, "trace ", trace);
        }
        if let Some(said) = &reply.comment {
            comment(&mut out, "said: ", said);
        }
        let _ = writeln!(out, "[[case]]");
        let _ = writeln!(out, "id = {}", quoted(&id));
        let _ = writeln!(out, "user = {}", quoted(&reply.email));
        let _ = writeln!(out, "text = {}", quoted(&text));
        let _ = writeln!(out, "kind = {}", quoted(kind));
        if up {
            let (tools, unknown): (Vec<String>, Vec<String>) = reply
                .tools
                .iter()
                .cloned()
                .partition(|t| known.contains(t.as_str()));
            if !unknown.is_empty() {
                comment(&mut out, "it also called unknown tools: ", &list(&unknown));
            }
            let _ = writeln!(out, "subsets = [\"feedback\"]");
            let _ = writeln!(out, "tools = {}", list(&tools));
            let writes: Vec<String> = reply
                .writes
                .iter()
                .map(|event| format!("{{ event = {} }}", quoted(event)))
                .collect();
            let _ = writeln!(out, "writes = [{}]", writes.join(", "));
        } else {
            let _ = writeln!(out, "subsets = [\"feedback\", \"needs-review\"]");
            comment(&mut out, "it called: ", &list(&reply.tools));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    /// Text that broke, or could break, a hand-written TOML file: line breaks of every kind (a
    /// bare carriage return made `--from-feedback` fail for every school), control characters,
    /// quotes of every TOML string kind, backslashes, comment and table syntax, invisible
    /// characters — and anything at all.
    fn nasty() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            "[\\x00-\\x1f\\x7f\"'\\\\#\\[\\] =a-z\u{2028}\u{85}]{0,24}",
            Just("It was wrong\rNext line".to_owned()),
            Just("\r".to_owned()),
            Just("a\r\nb\n\rc".to_owned()),
            Just("nul\0here".to_owned()),
            Just("\u{1b}[31mred\u{7f}".to_owned()),
            Just("\"\"\" ''' \\ \\u0000".to_owned()),
            Just("\n[[case]]\nid = \"injected\"\n".to_owned()),
            Just("\u{2028}\u{feff}\u{202e}".to_owned()),
        ]
    }

    fn reply(rating: &str, message: &str, comment: &str, text: &str, more: &Strings) -> Rated {
        Rated {
            message_id: message.to_owned(),
            rating: rating.to_owned(),
            comment: Some(comment.to_owned()),
            trace_id: Some(more.trace.clone()),
            email: more.email.clone(),
            sent: Some(json!({ "role": "user", "parts": [{ "type": "text", "text": text }] })),
            tools: vec!["create_department".to_owned(), more.tool.clone()],
            writes: vec![more.event.clone()],
        }
    }

    /// The rest of a rated reply's strings.
    struct Strings {
        trace: String,
        email: String,
        tool: String,
        event: String,
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Whatever a comment, a message, an id, a trace, an email, a tool name or an audit
        /// event holds, the file parses as cases, and each case says exactly what was rated.
        #[test]
        fn the_cases_are_valid_toml_whatever_a_reply_holds(
            comment in nasty(),
            message in nasty(),
            text in nasty(),
            trace in nasty(),
            email in nasty(),
            tool in nasty(),
            event in nasty(),
        ) {
            let more = Strings { trace, email, tool, event };
            // The same message id twice (two chats), one rated up, one down.
            let rated = [
                reply("up", &message, &comment, &text, &more),
                reply("down", &message, &comment, &text, &more),
            ];
            let out = render(&rated);
            if text.trim().is_empty() {
                // No message to send again: no case, and still a TOML file.
                let table: toml::Table = toml::from_str(&out)
                    .unwrap_or_else(|error| panic!("{error:#}\n{out}"));
                prop_assert!(table.is_empty(), "{}", out);
                return Ok(());
            }
            let cases = crate::cases::parse(&out)
                .unwrap_or_else(|error| panic!("{error:#}\n{out}"));
            prop_assert_eq!(cases.len(), 2, "{}", out);
            prop_assert_eq!(&cases[0].id, &format!("feedback-{message}"));
            prop_assert_eq!(&cases[1].id, &format!("feedback-{message}-2"));
            for case in &cases {
                prop_assert_eq!(&case.text, &text);
                prop_assert_eq!(&case.user, &more.email);
            }
            prop_assert_eq!(cases[0].writes.len(), 1);
            prop_assert_eq!(&cases[0].writes[0].event, &more.event);
            prop_assert!(cases[0].tools.iter().all(|t| rover_contracts::tools::REGISTRY.iter().any(|c| c.name == t)));
            prop_assert!(cases[1].subsets.contains(&"needs-review".to_owned()));
        }
    }

    #[test]
    fn a_comment_keeps_its_lines_and_shows_its_control_characters() {
        let more = Strings {
            trace: "4bf9".to_owned(),
            email: "admin@hill.school".to_owned(),
            tool: "list_departments".to_owned(),
            event: "create.department".to_owned(),
        };
        let out = render(&[reply(
            "down",
            "m1",
            "It missed\rthe Kololo ones\r\nand \u{1b}[2J this",
            "List the departments",
            &more,
        )]);
        assert!(
            out.contains("# said: It missed\n# said: the Kololo ones\n"),
            "{out}"
        );
        assert!(out.contains("# said: and \\u{1b}[2J this\n"), "{out}");
        assert!(out.contains("# trace 4bf9\n"), "{out}");
        crate::cases::parse(&out).unwrap();
    }
}
