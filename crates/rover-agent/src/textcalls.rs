//! Tool calls a model wrote as text. Many local models (and some hosted ones) put a call in the
//! message's `content` instead of `tool_calls`: a fenced ```json block, bare JSON, `<tool_call>`
//! tags, or a list of calls. With `model.text_tool_calls = auto` a step recovers them — but only
//! a message that is *wholly* calls: every block is a call object, and nothing else is said.
//! Anything else stays text. Which tools exist and whether the arguments fit is not decided here:
//! a recovered call goes through the same check as a native one (`Agent::check_call`), so an
//! unknown tool or invalid arguments go back to the model as a tool error.
//!
//! While a step streams, [`Holdback`] keeps back text that may be a call (it starts like one), so
//! the Hub never sees a raw call as answer text; text that starts like prose streams at once.
//!
//! The thread keeps a recovered call as a native one (`tool_calls`, then `tool` results), so
//! history, journal, the Hub and the next request are the same whoever made the call. (Sent back
//! as the fenced text it wrote, Qwen2.5-Coder-1.5B went on calling where it should answer: 13 of
//! 22 eval cases against 15 this way.)

use serde_json::{Map, Value};

/// A call found in a message's text: the tool's name and its arguments (an object).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TextCall {
    pub(crate) name: String,
    pub(crate) arguments: Value,
}

/// The calls `text` consists of, or `None` when it is anything but calls.
pub(crate) fn parse(text: &str) -> Option<Vec<TextCall>> {
    let mut rest = text.trim();
    let mut calls = Vec::new();
    while !rest.is_empty() {
        let (block, after) = next_block(rest)?;
        calls.extend(calls_in(block)?);
        rest = after.trim_start();
    }
    (!calls.is_empty()).then_some(calls)
}

/// The text of the first block of `text` (which starts with it) and what follows it.
fn next_block(text: &str) -> Option<(&str, &str)> {
    if let Some(fenced) = text.strip_prefix("```") {
        // The info string: nothing, or one word (json, tool_call, …), then the line ends.
        let (info, body) = fenced.split_once('\n')?;
        if info.trim().contains(char::is_whitespace) {
            return None;
        }
        return Some(match body.find("```") {
            Some(end) => (&body[..end], &body[end + 3..]),
            // A fence the model never closed (it stopped at its token limit): the rest.
            None => (body, ""),
        });
    }
    for (open, close) in [
        ("<tool_call>", "</tool_call>"),
        ("<|tool_call|>", "<|/tool_call|>"),
    ] {
        if let Some(tagged) = text.strip_prefix(open) {
            return Some(match tagged.find(close) {
                Some(end) => (&tagged[..end], &tagged[end + close.len()..]),
                None => (tagged, ""),
            });
        }
    }
    if text.starts_with(['{', '[']) {
        let (_, rest) = next_json(text)?;
        return Some((&text[..text.len() - rest.len()], rest));
    }
    None
}

/// The JSON value `text` starts with, and what follows it. A call in doubled braces,
/// `{{"name": …, "arguments": {…}}}`, counts as the value inside: some chat templates show the
/// call format that way (Qwen2.5-Coder's GGUF does), and models copy it, closing one brace too
/// many or too few.
fn next_json(text: &str) -> Option<(Value, &str)> {
    let doubled = text.starts_with("{{");
    let inner = if doubled { &text[1..] } else { text };
    let mut values = serde_json::Deserializer::from_str(inner).into_iter::<Value>();
    let value = values.next()?.ok()?;
    let mut rest = &inner[values.byte_offset()..];
    if doubled {
        // However many braces close it (models miscount them both ways).
        rest = rest.trim_start_matches(|c: char| c == '}' || c.is_whitespace());
    }
    Some((value, rest))
}

/// The calls in one block: one or more JSON values (objects or lists of objects), each a call.
fn calls_in(block: &str) -> Option<Vec<TextCall>> {
    let mut calls = Vec::new();
    let mut rest = block.trim();
    while !rest.is_empty() {
        let (value, after) = next_json(rest)?;
        match value {
            Value::Array(items) if !items.is_empty() => {
                for item in items {
                    calls.push(call_of(item)?);
                }
            }
            object @ Value::Object(_) => calls.push(call_of(object)?),
            _ => return None,
        }
        rest = after.trim_start();
    }
    (!calls.is_empty()).then_some(calls)
}

/// Keys that name the tool, and keys that carry its arguments, as models write them.
const NAME_KEYS: [&str; 4] = ["name", "tool", "tool_name", "function"];
const ARGUMENT_KEYS: [&str; 4] = ["arguments", "parameters", "args", "input"];
/// Keys a call object may carry besides those (OpenAI's own `tool_calls` entries have them).
const OTHER_KEYS: [&str; 2] = ["type", "id"];

/// A call object: `{"name": …, "arguments": {…}}`, its key variants, or OpenAI's own shape
/// `{"type": "function", "function": {"name": …, "arguments": "…"}}`. Any other key means the
/// object is data, not a call.
fn call_of(value: Value) -> Option<TextCall> {
    let Value::Object(mut object) = value else {
        return None;
    };
    if let Some(Value::Object(function)) = object.get("function") {
        let function = function.clone();
        object.remove("function");
        if object.keys().any(|k| !OTHER_KEYS.contains(&k.as_str())) {
            return None;
        }
        return call_of(Value::Object(function));
    }
    if object.keys().any(|k| {
        ![&NAME_KEYS[..], &ARGUMENT_KEYS[..], &OTHER_KEYS[..]]
            .concat()
            .contains(&k.as_str())
    }) {
        return None;
    }
    let name = one_of(&mut object, &NAME_KEYS)?;
    let name = name.as_str().filter(|n| is_tool_name(n))?.to_owned();
    let arguments = match one_of(&mut object, &ARGUMENT_KEYS) {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(object @ Value::Object(_)) => object,
        // Arguments as a JSON text, as OpenAI's wire format carries them.
        Some(Value::String(text)) if text.trim().is_empty() => Value::Object(Map::new()),
        Some(Value::String(text)) => match serde_json::from_str(&text).ok()? {
            object @ Value::Object(_) => object,
            _ => return None,
        },
        Some(_) => return None,
    };
    Some(TextCall { name, arguments })
}

/// The value under exactly one of `keys` (two of them at once is not a call).
fn one_of(object: &mut Map<String, Value>, keys: &[&str]) -> Option<Value> {
    let mut found = keys.iter().filter_map(|k| object.remove(*k));
    let first = found.next();
    if found.next().is_some() {
        return None;
    }
    first
}

/// Whether `name` could be a function's name (what OpenAI allows: `[A-Za-z0-9_-]{1,64}`, and
/// dots, which some servers use), or a permission a small model took for one
/// (`create:Department`): read as a call, it gets the unknown-tool answer instead of reaching the
/// staff member as JSON.
fn is_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
}

/// The tool a message that starts like a call but is not one names, when it names one: a call
/// the model began and never finished (it ran to its token limit repeating an argument, or lost
/// count of its braces). Shown, it would be raw JSON; it is a call that failed instead.
pub(crate) fn cut_off_call(text: &str) -> Option<String> {
    let start = text.trim_start();
    if !OPENERS.iter().any(|o| start.starts_with(o)) {
        return None;
    }
    let (_, after) = start.split_once('"')?;
    let (key, after) = after.split_once('"')?;
    if !NAME_KEYS.contains(&key) {
        return None;
    }
    let (_, after) = after.trim_start().strip_prefix(':')?.split_once('"')?;
    let (name, _) = after.split_once('"')?;
    is_tool_name(name).then(|| name.to_owned())
}

/// The calls in a note of what was done, as earlier turns are shown to the model
/// (`messages::earlier_as_text`): a model shown such notes writes one of its own for the call it
/// means to make — `(What I did: rename_department {"department":"Drama Club",…} → done)` —
/// and then claims it done. The note is that call (or those calls), and the rest of the message
/// is not said: the calls run, and the model answers from their results. `None` unless the
/// message starts with a note holding at least one call.
pub(crate) fn note(text: &str) -> Option<Vec<TextCall>> {
    let start = text.trim_start();
    let mut rest = start
        .strip_prefix(crate::messages::NOTE)
        .or_else(|| start.strip_prefix(&crate::messages::NOTE[1..]))?;
    let mut calls = Vec::new();
    loop {
        rest = rest.trim_start();
        let name_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let name = &rest[..name_end];
        if !is_tool_name(name) {
            break;
        }
        let (arguments, after) = next_json(rest[name_end..].trim_start())?;
        if !arguments.is_object() {
            return None;
        }
        calls.push(TextCall {
            name: name.to_owned(),
            arguments,
        });
        // Past its outcome: the next call follows a ';', anything else ends the note.
        let end = after.find([';', ')', '\n']).unwrap_or(after.len());
        if !after[end..].starts_with(';') {
            break;
        }
        rest = &after[end + 1..];
    }
    (!calls.is_empty()).then_some(calls)
}

/// The id of the cut-off call of step `step` (`cut_off_call`). '#' marks it: a native id never
/// carries one (`step.rs` replaces it).
pub(crate) fn cut_off_id(step: &str) -> String {
    format!("{step}-cut#0")
}

/// Whether a call's id is a cut-off call's ([`cut_off_id`]).
pub(crate) fn is_cut_off_id(id: &str) -> bool {
    id.ends_with("-cut#0")
}

/// The id of the `index`th call recovered from the text of step `step`.
pub(crate) fn recovered_id(step: &str, index: u32) -> String {
    format!("{step}-text{index}")
}

/// How a message may start if it is a call.
const OPENERS: [&str; 7] = [
    "```",
    "{",
    "[",
    "<tool_call>",
    "<|tool_call|>",
    crate::messages::NOTE,
    "What I did:",
];

/// Keeps back streamed text that may be a call, until the stream ends; text that cannot be one
/// passes at once. Disabled, everything passes.
#[derive(Debug)]
pub(crate) struct Holdback {
    state: State,
    held: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Only whitespace, or the start of an opener, so far.
    Undecided,
    /// Prose: everything passes.
    Passing,
    /// It starts like a call: everything is kept back.
    Holding,
}

impl Default for Holdback {
    /// Keeps back nothing.
    fn default() -> Self {
        Self::new(false)
    }
}

impl Holdback {
    /// A holdback that keeps back text only when `enabled`.
    pub(crate) fn new(enabled: bool) -> Self {
        Self {
            state: if enabled {
                State::Undecided
            } else {
                State::Passing
            },
            held: String::new(),
        }
    }

    /// Takes one text delta; returns what may be shown now.
    pub(crate) fn push(&mut self, delta: &str) -> Option<String> {
        if self.state == State::Passing {
            return Some(delta.to_owned());
        }
        self.held.push_str(delta);
        if self.state == State::Holding {
            return None;
        }
        let start = self.held.trim_start();
        if start.is_empty() || OPENERS.iter().any(|o| o.starts_with(start)) {
            return None;
        }
        if OPENERS.iter().any(|o| start.starts_with(o)) {
            self.state = State::Holding;
            return None;
        }
        self.state = State::Passing;
        Some(std::mem::take(&mut self.held))
    }

    /// The text kept back (when the stream has ended, or was cut).
    pub(crate) fn take(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn calls(text: &str) -> Vec<(String, Value)> {
        parse(text)
            .unwrap_or_else(|| panic!("{text:?} is calls"))
            .into_iter()
            .map(|c| (c.name, c.arguments))
            .collect()
    }

    fn sciences() -> Vec<(String, Value)> {
        vec![(
            "create_department".to_owned(),
            json!({ "name": "Sciences" }),
        )]
    }

    #[test]
    fn a_fenced_json_call_is_a_call() {
        let text = "```json\n{\"name\": \"create_department\", \"arguments\": {\"name\": \"Sciences\"}}\n```";
        assert_eq!(calls(text), sciences());
        // No info string, surrounding whitespace, a fence never closed.
        let bare_fence = "\n```\n{\"name\": \"create_department\", \"arguments\": {\"name\": \"Sciences\"}}\n```\n";
        assert_eq!(calls(bare_fence), sciences());
        let unclosed =
            "```json\n{\"name\": \"create_department\", \"arguments\": {\"name\": \"Sciences\"}}";
        assert_eq!(calls(unclosed), sciences());
    }

    #[test]
    fn bare_json_and_its_key_variants_are_calls() {
        assert_eq!(
            calls(r#"{"name": "create_department", "arguments": {"name": "Sciences"}}"#),
            sciences()
        );
        assert_eq!(
            calls(r#"{"tool": "create_department", "parameters": {"name": "Sciences"}}"#),
            sciences()
        );
        // OpenAI's own shape, arguments as JSON text.
        assert_eq!(
            calls(
                r#"{"type": "function", "function": {"name": "create_department", "arguments": "{\"name\":\"Sciences\"}"}}"#
            ),
            sciences()
        );
        // No arguments at all.
        assert_eq!(
            calls(r#"{"name": "list_departments"}"#),
            vec![("list_departments".to_owned(), json!({}))]
        );
    }

    #[test]
    fn a_permission_written_as_a_call_is_a_call() {
        // Qwen2.5-Coder-1.5B, told the bursar lacks create:Department, wrote this as its answer.
        assert_eq!(
            calls(r#"{{"name": "create:Department", "arguments": {"name": "Finance"}}}}"#),
            [("create:Department".to_owned(), json!({ "name": "Finance" }))]
        );
    }

    #[test]
    fn a_call_in_doubled_braces_is_a_call() {
        // As Qwen2.5-Coder writes them after its template's `{{"name": <function-name>, …}}`.
        for text in [
            r#"{{"name": "create_department", "arguments": {"name": "Sciences"}}}"#,
            r#"{{"name": "create_department", "arguments": {"name": "Sciences"}}}}"#,
            r#"{{"name": "create_department", "arguments": {"name": "Sciences"}}"#,
        ] {
            assert_eq!(calls(text), sciences(), "{text}");
        }
        let fenced = "```json\n{{\"name\": \"create_department\", \"arguments\": {\"name\": \"Sciences\"}}}\n```";
        assert_eq!(calls(fenced), sciences());
        assert_eq!(parse(r#"{{"name": "create_department"}} and more"#), None);
    }

    #[test]
    fn tool_call_tags_are_calls() {
        let text = "<tool_call>\n{\"name\": \"create_department\", \"arguments\": {\"name\": \"Sciences\"}}\n</tool_call>";
        assert_eq!(calls(text), sciences());
        let unclosed =
            "<tool_call>{\"name\": \"create_department\", \"arguments\": {\"name\": \"Sciences\"}}";
        assert_eq!(calls(unclosed), sciences());
    }

    #[test]
    fn several_calls_in_a_list_in_blocks_or_one_per_line() {
        let want = vec![
            ("list_departments".to_owned(), json!({})),
            (
                "create_department".to_owned(),
                json!({ "name": "Sciences" }),
            ),
        ];
        let list = r#"[{"name": "list_departments", "arguments": {}}, {"name": "create_department", "arguments": {"name": "Sciences"}}]"#;
        assert_eq!(calls(list), want);
        let blocks = "<tool_call>\n{\"name\": \"list_departments\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"create_department\", \"arguments\": {\"name\": \"Sciences\"}}\n</tool_call>";
        assert_eq!(calls(blocks), want);
        let lines = "```json\n{\"name\": \"list_departments\", \"arguments\": {}}\n{\"name\": \"create_department\", \"arguments\": {\"name\": \"Sciences\"}}\n```";
        assert_eq!(calls(lines), want);
        let fences = "```json\n{\"name\": \"list_departments\"}\n```\n\n```json\n{\"name\": \"create_department\", \"arguments\": {\"name\": \"Sciences\"}}\n```";
        assert_eq!(calls(fences), want);
    }

    #[test]
    fn a_note_of_what_was_done_is_its_calls() {
        let text = "(What I did: rename_department {\"department\":\"Drama Club\",\"newName\":\"Performing Arts\"} → done; list_departments {} → done)\nThe Drama Club has been renamed.";
        let calls = note(text).unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "rename_department");
        assert_eq!(calls[0].arguments["newName"], "Performing Arts");
        assert_eq!(calls[1].name, "list_departments");
        assert_eq!(
            note("What I did: record_attendance {\"absent\":[\"Mugisha\"]} → done").unwrap()[0]
                .arguments["absent"][0],
            "Mugisha"
        );
        for text in [
            "I renamed it.",
            "(What I did: nothing)",
            "(What I did: rename_department → done)",
            "Before (What I did: list_departments {} → done)",
        ] {
            assert!(note(text).is_none(), "{text}");
        }
        let mut held = Holdback::new(true);
        assert_eq!(held.push("(What I did: "), None);
        assert_eq!(held.push("list_departments {}"), None);
        let mut prose = Holdback::new(true);
        assert_eq!(prose.push("What a"), Some("What a".to_owned()));
    }

    #[test]
    fn a_call_cut_off_before_it_ends_names_its_tool() {
        let cut = "{{\"name\": \"record_marks\", \"arguments\": {\"marks\": [{\"student\": \"Nak";
        assert!(parse(cut).is_none());
        assert_eq!(cut_off_call(cut).as_deref(), Some("record_marks"));
        assert_eq!(
            cut_off_call("```json\n{\"tool\": \"list_classes\", \"args\": {").as_deref(),
            Some("list_classes")
        );
        for text in [
            "I recorded the marks.",
            "{\"departments\": [\"Humanities\"",
            "{\"name\": \"not a tool name\", \"arguments\": {",
            "Here: {\"name\": \"record_marks\"",
        ] {
            assert_eq!(cut_off_call(text), None, "{text}");
        }
    }

    #[test]
    fn anything_but_calls_stays_text() {
        for text in [
            "",
            "   ",
            "Here are the departments: Sciences, Humanities.",
            // Prose around a call: not wholly a call.
            "I'll create it.\n```json\n{\"name\": \"create_department\", \"arguments\": {\"name\": \"Sciences\"}}\n```",
            "```json\n{\"name\": \"create_department\", \"arguments\": {\"name\": \"Sciences\"}}\n```\nDone!",
            // Data, not a call: other keys, a made-up result, a list of records.
            r#"{"data": [{"id": "1", "name": "Sciences"}], "scopeContext": "across the whole school"}"#,
            r#"{"name": "Sciences", "id": "5f1c", "campus": "Kololo"}"#,
            r#"[{"name": "Sciences", "headOfDepartment": "Okello"}]"#,
            r#"{"name": "create_department", "arguments": "not json"}"#,
            r#"{"name": "create department", "arguments": {}}"#,
            r#"{"name": "x", "tool": "y"}"#,
            "```python\nprint('hi')\n```",
            "``` json please\n{\"name\": \"x\"}\n```",
            "<tool_response>{\"data\": []}</tool_response>",
            "[]",
            "{}",
            "{\"name\": \"create_department\", \"arguments\": {\"name\": ",
        ] {
            assert_eq!(parse(text), None, "{text:?} is not calls");
        }
    }

    /// Streams `pieces` through a holdback; returns (shown while streaming, kept back).
    fn stream(enabled: bool, pieces: &[&str]) -> (String, String) {
        let mut holdback = Holdback::new(enabled);
        let shown: String = pieces.iter().filter_map(|p| holdback.push(p)).collect();
        (shown, holdback.take())
    }

    #[test]
    fn prose_streams_at_once_and_what_starts_like_a_call_is_kept_back() {
        assert_eq!(
            stream(true, &["  ", "Here", " are", " the departments."]),
            ("  Here are the departments.".to_owned(), String::new())
        );
        let call = ["``", "`json\n{\"name\"", ": \"list_departments\"}\n", "```"];
        assert_eq!(stream(true, &call), (String::new(), call.concat()));
        let tagged = ["<", "tool", "_call>", "{\"name\": \"x\"}"];
        assert_eq!(stream(true, &tagged), (String::new(), tagged.concat()));
        // A '<' that turns out to be prose passes once it cannot be an opener.
        assert_eq!(
            stream(true, &["<", "3 students"]),
            ("<3 students".to_owned(), String::new())
        );
        // Off: everything passes.
        assert_eq!(stream(false, &call), (call.concat(), String::new()));
    }
}
