//! Scoring one turn against its case: pure functions over what was observed, so every rule is
//! unit-tested and the harness can fail.
//!
//! - **tool**: every expected tool was called (by Rover or a subagent) and no forbidden one was;
//! - **args**: every argument check holds for some call of its tool;
//! - **writes**: the audit rows written during the turn are exactly the expected writes (an extra
//!   row is an *unintended write*, a missing one a *missing write*); a write paused for approval
//!   (`tool-approval-request`) is not run, so it counts as neither;
//! - **answer**: what the staff member reads is prose: no raw tool call and no text that pretends
//!   to be a tool's result (`<tool_call>`/`<tool_response>` tags, JSON objects or records);
//! - **done**: the stream reached `finish` without an `error` chunk.

use serde::Serialize;
use serde_json::Value;

use crate::cases::{ArgCheck, Case};

/// One tool call seen in the stream.
#[derive(Debug, Clone, Serialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub input: Value,
    /// `rover` or a subagent's name (from `data-tool-label`).
    pub agent: String,
    /// The call was held for approval (`tool-approval-request`) and never approved here.
    pub approval_requested: bool,
}

/// One audit row written during the turn.
#[derive(Debug, Clone, Serialize)]
pub struct Write {
    pub event: String,
    /// The campus's name, when the row is campus-scoped.
    pub campus: Option<String>,
}

/// Everything the harness saw of one turn.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Observed {
    pub calls: Vec<ToolCall>,
    pub writes: Vec<Write>,
    /// Rover's text and its subagents' (`data-subagent`), in order.
    pub text: String,
    /// `finish`'s `finishReason`, when it came.
    pub finish: Option<String>,
    /// `error` chunks: what the turn itself reported.
    pub errors: Vec<String>,
    /// What kept the harness from observing the turn (a refused request, a broken stream, no
    /// `finish` in time, an unreadable audit log): the run is not a measurement then.
    pub harness_errors: Vec<String>,
    /// From the request to the first text or tool call the model produced.
    pub first_output_millis: Option<u64>,
    /// Prompt tokens of the turn's model calls, as the model server reported them.
    pub input_tokens: Option<u64>,
    /// Generated tokens of the turn's model calls.
    pub output_tokens: Option<u64>,
    pub millis: u64,
}

/// The scores of one case.
#[derive(Debug, Clone, Serialize)]
pub struct Score {
    pub tool: bool,
    pub args: bool,
    pub writes: bool,
    pub answer: bool,
    pub done: bool,
    /// Why each failed check failed.
    pub notes: Vec<String>,
}

impl Score {
    pub fn passed(&self) -> bool {
        self.tool && self.args && self.writes && self.answer && self.done
    }
}

/// Resolves `@kind:name` values to demo ids; anything else stays as it is.
pub trait Resolve {
    fn resolve(&self, value: &Value) -> Result<Value, ResolveError>;
}

/// Why a `@kind:name` reference names no id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// Not of the form `@kind:name`.
    #[error("{0:?} is not @kind:name")]
    Malformed(String),
    /// A kind the demo data does not have.
    #[error("unknown kind {kind:?} in @{reference}")]
    UnknownKind { kind: String, reference: String },
    /// The demo data has no such row.
    #[error("the demo data has no {kind} named {name:?}")]
    Unknown { kind: String, name: String },
}

/// Why a turn's text does not read as an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerProblem {
    /// A tool-call or tool-result tag.
    #[error("the answer shows a {0} tag")]
    Tag(&'static str),
    /// A JSON record (its start shown).
    #[error("the answer shows JSON, a raw call or a made-up result: {0}")]
    Json(String),
}

/// Why an argument check failed (each message starts with `tool.path`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArgProblem {
    /// The check has neither or both of `equals` and `contains`.
    #[error("{tool}.{path}: a malformed check")]
    Malformed { tool: String, path: String },
    /// The expected value names nothing.
    #[error("{tool}.{path}: {error}")]
    Unresolved {
        tool: String,
        path: String,
        error: ResolveError,
    },
    /// The tool was never called.
    #[error("{tool}.{path}: {tool} was not called")]
    NotCalled { tool: String, path: String },
    /// Called, but with other values at the path.
    #[error("{tool}.{path} should {verb} {want}, was {seen}")]
    Mismatch {
        tool: String,
        path: String,
        verb: &'static str,
        want: Value,
        seen: Value,
    },
}

/// Scores `observed` against `case`; `resolve` turns `@kind:name` into ids.
pub fn score(case: &Case, observed: &Observed, resolve: &dyn Resolve) -> Score {
    let mut notes = Vec::new();
    let called = |name: &str| observed.calls.iter().any(|c| c.name == name);
    let missing: Vec<&str> = case
        .tools
        .iter()
        .map(String::as_str)
        .filter(|t| !called(t))
        .collect();
    let forbidden: Vec<&str> = case
        .forbid
        .iter()
        .map(String::as_str)
        .filter(|t| called(t))
        .collect();
    if !missing.is_empty() {
        notes.push(format!("not called: {}", missing.join(", ")));
    }
    if !forbidden.is_empty() {
        notes.push(format!("forbidden but called: {}", forbidden.join(", ")));
    }
    let tool = missing.is_empty() && forbidden.is_empty();

    let mut args = true;
    for check in &case.args {
        if let Err(why) = check_args(check, &observed.calls, resolve) {
            args = false;
            notes.push(why.to_string());
        }
    }

    let writes = check_writes(case, &observed.writes, &mut notes);

    let answer = match check_answer(&observed.text) {
        Ok(()) => true,
        Err(why) => {
            notes.push(why.to_string());
            false
        }
    };

    let done = observed.finish.is_some()
        && observed.errors.is_empty()
        && observed.harness_errors.is_empty();
    if observed.finish.is_none() {
        notes.push("no `finish`".to_owned());
    }
    for error in &observed.errors {
        notes.push(format!("error: {error}"));
    }
    for error in &observed.harness_errors {
        notes.push(format!("harness error: {error}"));
    }
    Score {
        tool,
        args,
        writes,
        answer,
        done,
        notes,
    }
}

/// Tags small models use for calls and results; none belongs in an answer.
const CALL_TAGS: [&str; 4] = [
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
];

/// Whether `text` reads as an answer: no call or result tags, and no JSON object (bare or
/// fenced) — a call the Hub would show raw, or a tool result the model made up (its ids and
/// rows would be taken as fact).
pub fn check_answer(text: &str) -> Result<(), AnswerProblem> {
    if let Some(tag) = CALL_TAGS.iter().find(|t| text.contains(**t)) {
        return Err(AnswerProblem::Tag(tag));
    }
    for (at, _) in text.match_indices(['{', '[']) {
        let mut values = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
        let is_record = |v: &Value| v.as_object().is_some_and(|o| !o.is_empty());
        match values.next() {
            Some(Ok(value))
                if is_record(&value)
                    || value.as_array().is_some_and(|a| a.iter().any(is_record)) =>
            {
                let shown: String = value.to_string().chars().take(80).collect();
                return Err(AnswerProblem::Json(shown));
            }
            _ => {}
        }
    }
    Ok(())
}

fn check_writes(case: &Case, written: &[Write], notes: &mut Vec<String>) -> bool {
    let mut expected: Vec<&crate::cases::WriteExpect> = case.writes.iter().collect();
    let mut ok = true;
    for write in written {
        let found = expected.iter().position(|e| {
            e.event == write.event
                && e.campus
                    .as_deref()
                    .is_none_or(|c| write.campus.as_deref() == Some(c))
        });
        match found {
            Some(i) => {
                expected.remove(i);
            }
            None => {
                ok = false;
                notes.push(format!(
                    "unintended write: {}{}",
                    write.event,
                    write
                        .campus
                        .as_deref()
                        .map(|c| format!(" (campus {c})"))
                        .unwrap_or_default()
                ));
            }
        }
    }
    for e in expected {
        ok = false;
        notes.push(format!(
            "missing write: {}{}",
            e.event,
            e.campus
                .as_deref()
                .map(|c| format!(" (campus {c})"))
                .unwrap_or_default()
        ));
    }
    ok
}

fn check_args(
    check: &ArgCheck,
    calls: &[ToolCall],
    resolve: &dyn Resolve,
) -> Result<(), Box<ArgProblem>> {
    let (tool, path) = (check.tool.clone(), check.path.clone());
    let (want, contains) = match (&check.equals, &check.contains) {
        (Some(v), None) => (v, false),
        (None, Some(v)) => (v, true),
        _ => return Err(Box::new(ArgProblem::Malformed { tool, path })),
    };
    let want = match resolve.resolve(want) {
        Ok(want) => want,
        Err(error) => return Err(Box::new(ArgProblem::Unresolved { tool, path, error })),
    };
    let mut seen = Vec::new();
    for call in calls.iter().filter(|c| c.name == check.tool) {
        let values = at_path(&call.input, &check.path);
        if values.iter().any(|v| {
            if contains {
                value_contains(v, &want)
            } else {
                value_equals(v, &want)
            }
        }) {
            return Ok(());
        }
        seen.extend(values);
    }
    let verb = if contains { "contain" } else { "equal" };
    if seen.is_empty() && !calls.iter().any(|c| c.name == check.tool) {
        return Err(Box::new(ArgProblem::NotCalled { tool, path }));
    }
    Err(Box::new(ArgProblem::Mismatch {
        tool,
        path,
        verb,
        want,
        seen: Value::Array(seen),
    }))
}

/// The values at a dotted `path` (`marks.*.studentId`; `*` is every element of an array, a number
/// one element).
pub fn at_path(value: &Value, path: &str) -> Vec<Value> {
    let mut current = vec![value.clone()];
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        current = current
            .into_iter()
            .flat_map(|v| match (segment, v) {
                ("*", Value::Array(items)) => items,
                (s, Value::Array(items)) => s
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| items.get(i).cloned())
                    .into_iter()
                    .collect(),
                (s, Value::Object(mut map)) => map.remove(s).into_iter().collect(),
                _ => Vec::new(),
            })
            .collect();
    }
    current
}

fn value_equals(actual: &Value, want: &Value) -> bool {
    match (actual, want) {
        (Value::String(a), Value::String(w)) => a.trim().eq_ignore_ascii_case(w.trim()),
        (Value::Number(a), Value::Number(w)) => a.as_f64() == w.as_f64(),
        // Some models send numbers as text.
        (Value::String(a), Value::Number(w)) => a.trim().parse::<f64>().ok() == w.as_f64(),
        _ => actual == want,
    }
}

fn value_contains(actual: &Value, want: &Value) -> bool {
    match (actual, want) {
        (Value::Array(items), _) => items.iter().any(|i| value_equals(i, want)),
        (Value::String(a), Value::String(w)) => a.to_lowercase().contains(&w.trim().to_lowercase()),
        _ => value_equals(actual, want),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::cases::parse;

    struct Ids;
    impl Resolve for Ids {
        fn resolve(&self, value: &Value) -> Result<Value, ResolveError> {
            match value.as_str() {
                Some("@class:S1 Blue") => Ok(json!("c-1")),
                Some(s) if s.starts_with('@') => Err(ResolveError::Unknown {
                    kind: "class".to_owned(),
                    name: s.to_owned(),
                }),
                _ => Ok(value.clone()),
            }
        }
    }

    fn case(extra: &str) -> Case {
        parse(&format!(
            "[[case]]\nid = \"a\"\nuser = \"amina@hill.school\"\ntext = \"x\"\nkind = \"write\"\n{extra}"
        ))
        .unwrap()
        .remove(0)
    }

    fn call(name: &str, input: Value) -> ToolCall {
        ToolCall {
            id: format!("call-{name}"),
            name: name.to_owned(),
            input,
            agent: "rover".to_owned(),
            approval_requested: false,
        }
    }

    fn finished(calls: Vec<ToolCall>, writes: Vec<Write>) -> Observed {
        Observed {
            calls,
            writes,
            finish: Some("stop".to_owned()),
            ..Observed::default()
        }
    }

    fn write(event: &str, campus: Option<&str>) -> Write {
        Write {
            event: event.to_owned(),
            campus: campus.map(str::to_owned),
        }
    }

    #[test]
    fn the_right_tool_args_and_write_pass() {
        let c = case(
            "tools = [\"record_attendance\"]\nargs = [{ tool = \"record_attendance\", path = \"classId\", equals = \"@class:S1 Blue\" }]\nwrites = [{ event = \"record.attendance\" }]\n",
        );
        let o = finished(
            vec![call("record_attendance", json!({ "classId": "C-1" }))],
            vec![write("record.attendance", None)],
        );
        let s = score(&c, &o, &Ids);
        assert!(s.passed(), "{s:?}");
    }

    #[test]
    fn a_wrong_or_forbidden_tool_fails_the_tool_score() {
        let c = case("tools = [\"list_departments\"]\nforbid = [\"create_department\"]\n");
        let s = score(
            &c,
            &finished(vec![call("list_classes", json!({}))], vec![]),
            &Ids,
        );
        assert!(!s.tool && !s.passed());
        assert!(s.notes[0].contains("not called: list_departments"));
        let s = score(
            &c,
            &finished(
                vec![
                    call("list_departments", json!({})),
                    call("create_department", json!({})),
                ],
                vec![],
            ),
            &Ids,
        );
        assert!(!s.tool);
        assert!(s.notes[0].contains("forbidden but called: create_department"));
    }

    #[test]
    fn wrong_arguments_fail_the_args_score() {
        let c = case(
            "args = [{ tool = \"create_department\", path = \"name\", equals = \"Sciences\" }, { tool = \"record_attendance\", path = \"absentStudentIds\", contains = \"s-9\" }]\n",
        );
        let o = finished(
            vec![
                call("create_department", json!({ "name": "Science" })),
                call("record_attendance", json!({ "absentStudentIds": ["s-1"] })),
            ],
            vec![],
        );
        let s = score(&c, &o, &Ids);
        assert!(!s.args);
        assert_eq!(s.notes.len(), 2, "{:?}", s.notes);
        // A later, corrected call passes.
        let mut o = o;
        o.calls
            .push(call("create_department", json!({ "name": " sciences " })));
        o.calls.push(call(
            "record_attendance",
            json!({ "absentStudentIds": ["s-9"] }),
        ));
        assert!(score(&c, &o, &Ids).args);
    }

    #[test]
    fn an_unintended_or_missing_write_fails_the_writes_score() {
        let c = case("writes = [{ event = \"create.department\", campus = \"Kololo\" }]\n");
        let s = score(&c, &finished(vec![], vec![]), &Ids);
        assert!(!s.writes);
        assert!(s.notes[0].starts_with("missing write"));
        let s = score(
            &c,
            &finished(vec![], vec![write("create.department", Some("Naalya"))]),
            &Ids,
        );
        assert!(!s.writes, "the wrong campus is not the expected write");
        let none = case("");
        let s = score(
            &none,
            &finished(vec![], vec![write("rename.department", None)]),
            &Ids,
        );
        assert!(!s.writes);
        assert_eq!(s.notes, vec!["unintended write: rename.department"]);
    }

    #[test]
    fn a_turn_without_finish_or_with_an_error_is_not_done() {
        let c = case("");
        let mut o = Observed::default();
        assert!(!score(&c, &o, &Ids).done);
        o.finish = Some("stop".into());
        o.errors.push("model unavailable".into());
        assert!(!score(&c, &o, &Ids).done);
    }

    #[test]
    fn an_answer_that_shows_a_call_or_pretends_to_be_a_result_fails() {
        assert_eq!(
            check_answer("There are 3 departments: Sciences, Arts [new] and {old} Music."),
            Ok(())
        );
        for text in [
            "```json\n{\"name\": \"list_departments\", \"arguments\": {}}\n```",
            "Here they are: [{\"id\": \"1\", \"name\": \"Sciences\"}]",
            "<tool_response>\nSciences\n</tool_response>",
            "<tool_call>list_departments</tool_call>",
        ] {
            assert!(check_answer(text).is_err(), "{text}");
        }
        let c = case("");
        let mut o = finished(vec![], vec![]);
        o.text = "{\"data\": [], \"scopeContext\": \"across the whole school\"}".to_owned();
        let s = score(&c, &o, &Ids);
        assert!(!s.answer && !s.passed(), "{s:?}");
    }

    #[test]
    fn paths_reach_into_arrays() {
        let v = json!({ "marks": [{ "studentId": "a" }, { "studentId": "b" }] });
        assert_eq!(
            at_path(&v, "marks.*.studentId"),
            vec![json!("a"), json!("b")]
        );
        assert_eq!(at_path(&v, "marks.1.studentId"), vec![json!("b")]);
        assert!(at_path(&v, "nothing.here").is_empty());
    }
}
