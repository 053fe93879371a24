//! Scoring one turn against its expectations: pure functions over what was observed, so every
//! rule is unit-tested and the harness can fail. A turn is one staff message of a case's chat
//! (its `text`, or a followup's) with the continuations the case's `answers` drove.
//!
//! - **tool**: every expected tool was called (by Rover, a subagent or the worker) and no
//!   forbidden one was;
//! - **args**: every argument check holds for some call of its tool;
//! - **writes**: the audit rows written during the turn are exactly the expected writes (an extra
//!   row is an *unintended write*, a missing one a *missing write*); a write paused for approval
//!   (`tool-approval-request`) is not run, so it counts as neither;
//! - **answer**: what the staff member reads is prose: no raw tool call and no text that pretends
//!   to be a tool's result (`<tool_call>`/`<tool_response>` tags, JSON objects or records);
//! - **claims**: what the staff member reads says nothing was created, recorded, assigned, … when
//!   the turn wrote no audit row (a *false claim*, `crate::claims`);
//! - **done**: the stream reached `finish` without an `error` chunk, and every answer the case
//!   gives could be given (a `{ choice = … }` some offered choice contains).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cases::{AfterCheck, ArgCheck, Expect, WriteExpect};
use crate::names::{Resolve, ResolveError, Want};

/// One tool call seen in the stream.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub input: Value,
    /// `rover` or a subagent's name (from `data-tool-label`).
    pub agent: String,
    /// The call was held for approval (`tool-approval-request`) and never approved here.
    pub approval_requested: bool,
    /// The worker made it, not a model: its `ask_user` when a tool could not tell which row the
    /// staff member meant (`tool-input-available` with no `tool-input-start`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_worker: bool,
    /// Its result came (`tool-output-available`, `-error` or `-denied`), or, for `ask_user`, the
    /// harness answered it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub settled: bool,
    /// Its `tool-output-error` text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ToolCall {
    /// The worker refused it before anything ran because the agent was never offered that tool
    /// (its error is the worker's "There is no tool named …"): an attempt, not a call.
    pub fn never_offered(&self) -> bool {
        self.error
            .as_deref()
            .is_some_and(|e| e.starts_with("There is no tool named "))
    }
}

/// One audit row written during the turn.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Write {
    pub event: String,
    /// The campus's name, when the row is campus-scoped.
    pub campus: Option<String>,
    /// The id of the call that wrote it, as the stream names the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// What the tool server resolved the call's names to: `{"class": {"said", "id"}, …}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub named: Option<Value>,
    /// The state the write left, as its audit row's `after` holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
}

impl Write {
    /// Every (words said, id) pair the tool server resolved for this write.
    pub fn resolved(&self) -> Vec<(String, String)> {
        fn walk(value: &Value, out: &mut Vec<(String, String)>) {
            match value {
                Value::Object(map) => {
                    if let (Some(said), Some(id)) = (
                        map.get("said").and_then(Value::as_str),
                        map.get("id").and_then(Value::as_str),
                    ) {
                        out.push((said.to_owned(), id.to_owned()));
                    }
                    map.values().for_each(|v| walk(v, out));
                }
                Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        if let Some(named) = &self.named {
            walk(named, &mut out);
        }
        out
    }
}

/// A question the turn asked (`ask_user`), and what the harness answered.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Asked {
    pub question: String,
    pub choices: Vec<String>,
    /// `None`: left unanswered (the case has no answer left, or none it could give).
    pub answer: Option<String>,
    /// Asked by the worker itself, not by a model.
    pub by_worker: bool,
}

/// Everything the harness saw of one turn (a staff message and the continuations its answers
/// drove).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Observed {
    pub calls: Vec<ToolCall>,
    pub writes: Vec<Write>,
    /// Rover's text and its subagents' (`data-subagent`), in order.
    pub text: String,
    /// The last stream's `finish` `finishReason`, when it came.
    pub finish: Option<String>,
    /// `error` chunks: what the turn itself reported.
    pub errors: Vec<String>,
    /// What kept the harness from observing the turn (a refused request, a broken stream, no
    /// `finish` in time, an unreadable audit log): the run is not a measurement then.
    pub harness_errors: Vec<String>,
    /// What the case's script could not do: an answer no offered choice fits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub script_errors: Vec<String>,
    /// The questions asked, in order, with the answers given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asked: Vec<Asked>,
    /// From the request to the first text or tool call the model produced.
    pub first_output_millis: Option<u64>,
    /// Prompt tokens of the turn's model calls, as the model server reported them.
    pub input_tokens: Option<u64>,
    /// Generated tokens of the turn's model calls.
    pub output_tokens: Option<u64>,
    /// The model requests the turn made, Rover's and its subagents' (a `start-step` each; the
    /// worker's own `ask_user` step is not one).
    pub model_calls: u32,
    pub millis: u64,
}

/// The scores of one turn, or of a whole case (every turn's).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Score {
    pub tool: bool,
    pub args: bool,
    pub writes: bool,
    pub answer: bool,
    pub claims: bool,
    pub done: bool,
    /// Why each failed check failed.
    pub notes: Vec<String>,
}

impl Score {
    pub fn passed(&self) -> bool {
        self.tool && self.args && self.writes && self.answer && self.claims && self.done
    }

    /// A case's score: each score passes when it passes in every turn; a followup's notes say
    /// which (`followup 1: …`).
    pub fn of_turns<'a>(turns: impl IntoIterator<Item = &'a Score>) -> Score {
        let mut all = Score {
            tool: true,
            args: true,
            writes: true,
            answer: true,
            claims: true,
            done: true,
            notes: Vec::new(),
        };
        for (i, turn) in turns.into_iter().enumerate() {
            all.tool &= turn.tool;
            all.args &= turn.args;
            all.writes &= turn.writes;
            all.answer &= turn.answer;
            all.claims &= turn.claims;
            all.done &= turn.done;
            all.notes.extend(turn.notes.iter().map(|note| {
                if i == 0 {
                    note.clone()
                } else {
                    format!("followup {i}: {note}")
                }
            }));
        }
        all
    }
}

impl Want {
    /// How a failure shows it.
    fn shown(&self) -> Value {
        match self {
            Want::Value(v) => v.clone(),
            Want::Row(row) => Value::String(format!("{} (id {})", row.reference, row.id)),
        }
    }

    /// Whether `actual` (a value at the checked path of `call`'s arguments) equals this; a row
    /// also when the tool server resolved those very words to it for this call (`resolved`,
    /// from the audit row the call wrote).
    fn equals(&self, actual: &Value, call: &Value, resolved: &[(String, String)]) -> bool {
        match self {
            Want::Value(want) => value_equals(actual, want),
            Want::Row(row) => {
                let id = row.id.to_string();
                row.accepts(actual, call)
                    || actual.as_str().is_some_and(|said| {
                        resolved.iter().any(|(s, i)| {
                            s.trim().eq_ignore_ascii_case(said.trim())
                                && i.eq_ignore_ascii_case(&id)
                        })
                    })
            }
        }
    }

    /// Whether `actual` contains this: an array element, a substring, or a name of the row.
    fn contained_in(&self, actual: &Value, call: &Value, resolved: &[(String, String)]) -> bool {
        match (actual, self) {
            (Value::Array(items), _) => items.iter().any(|i| self.equals(i, call, resolved)),
            (Value::String(a), Want::Value(Value::String(w))) => {
                a.to_lowercase().contains(&w.trim().to_lowercase())
            }
            _ => self.equals(actual, call, resolved),
        }
    }
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

/// Scores one turn, `observed`, against what `expect` asks of it; `resolve` turns `@kind:name`
/// into rows.
pub fn score(expect: &Expect<'_>, observed: &Observed, resolve: &dyn Resolve) -> Score {
    let mut notes = Vec::new();
    let called = |name: &str| observed.calls.iter().any(|c| c.name == name);
    let missing: Vec<&str> = expect
        .tools
        .iter()
        .map(String::as_str)
        .filter(|t| !called(t))
        .collect();
    // A forbidden tool the caller was never offered, refused by the worker before anything ran,
    // is an attempt the staff member never sees acted on: it does not fail the case.
    let made = |name: &str| {
        observed
            .calls
            .iter()
            .any(|c| c.name == name && !c.never_offered())
    };
    let forbidden: Vec<&str> = expect
        .forbid
        .iter()
        .map(String::as_str)
        .filter(|t| made(t))
        .collect();
    if !missing.is_empty() {
        notes.push(format!("not called: {}", missing.join(", ")));
    }
    if !forbidden.is_empty() {
        notes.push(format!("forbidden but called: {}", forbidden.join(", ")));
    }
    let tool = missing.is_empty() && forbidden.is_empty();

    let mut args = true;
    for check in expect.args {
        if let Err(why) = check_args(check, &observed.calls, &observed.writes, resolve) {
            args = false;
            notes.push(why.to_string());
        }
    }

    let writes = check_writes(expect.writes, &observed.writes, resolve, &mut notes);

    let answer = match check_answer(&observed.text) {
        Ok(()) => true,
        Err(why) => {
            notes.push(why.to_string());
            false
        }
    };

    let claims = match (
        crate::claims::claim(&observed.text),
        observed.writes.is_empty(),
    ) {
        (Some(sentence), true) => {
            notes.push(format!("false claim, nothing was written: {sentence:?}"));
            false
        }
        _ => true,
    };

    let done = observed.finish.is_some()
        && observed.errors.is_empty()
        && observed.harness_errors.is_empty()
        && observed.script_errors.is_empty();
    if observed.finish.is_none() {
        notes.push("no `finish`".to_owned());
    }
    for error in &observed.errors {
        notes.push(format!("error: {error}"));
    }
    for error in &observed.harness_errors {
        notes.push(format!("harness error: {error}"));
    }
    notes.extend(observed.script_errors.iter().cloned());
    Score {
        tool,
        args,
        writes,
        answer,
        claims,
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

fn check_writes(
    expected: &[WriteExpect],
    written: &[Write],
    resolve: &dyn Resolve,
    notes: &mut Vec<String>,
) -> bool {
    let mut expected: Vec<&WriteExpect> = expected.iter().collect();
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
                if let Some(check) = &expected[i].after
                    && let Err(why) = check_after(check, write, resolve)
                {
                    ok = false;
                    notes.push(why);
                }
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

/// Whether the state `write` left holds every value `check` names.
fn check_after(check: &AfterCheck, write: &Write, resolve: &dyn Resolve) -> Result<(), String> {
    let wanted = match &check.contains {
        Value::Array(items) => items.iter().map(|v| resolve.resolve(v)).collect(),
        one => resolve.resolve(one).map(|w| vec![w]),
    };
    let wanted: Vec<Want> =
        wanted.map_err(|e| format!("{} after.{}: {e}", write.event, check.path))?;
    let after = write.after.clone().unwrap_or(Value::Null);
    let values = at_path(&after, &check.path);
    let resolved = write.resolved();
    let missing: Vec<Value> = wanted
        .iter()
        .filter(|want| {
            !values
                .iter()
                .any(|v| want.contained_in(v, &Value::Null, &resolved))
        })
        .map(Want::shown)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} after.{} should contain {}, was {}",
        write.event,
        check.path,
        Value::Array(missing),
        Value::Array(values)
    ))
}

fn check_args(
    check: &ArgCheck,
    calls: &[ToolCall],
    writes: &[Write],
    resolve: &dyn Resolve,
) -> Result<(), Box<ArgProblem>> {
    let (tool, path) = (check.tool.clone(), check.path.clone());
    let (want, contains) = match (&check.equals, &check.contains) {
        (Some(v), None) => (v, false),
        (None, Some(v)) => (v, true),
        _ => return Err(Box::new(ArgProblem::Malformed { tool, path })),
    };
    // `contains = [a, b]`: one call's values hold every one of them.
    let wants: Result<Vec<Want>, ResolveError> = match want {
        Value::Array(items) if contains => items.iter().map(|v| resolve.resolve(v)).collect(),
        _ => resolve.resolve(want).map(|w| vec![w]),
    };
    let wants = match wants {
        Ok(wants) => wants,
        Err(error) => return Err(Box::new(ArgProblem::Unresolved { tool, path, error })),
    };
    let mut seen = Vec::new();
    for call in calls.iter().filter(|c| c.name == check.tool) {
        let values = at_path(&call.input, &check.path);
        if check.optional && values.iter().all(Value::is_null) {
            return Ok(());
        }
        let resolved: Vec<(String, String)> = writes
            .iter()
            .filter(|w| w.call.as_deref() == Some(call.id.as_str()))
            .flat_map(Write::resolved)
            .collect();
        let holds = |want: &Want| {
            values.iter().any(|v| {
                if contains {
                    want.contained_in(v, &call.input, &resolved)
                } else {
                    want.equals(v, &call.input, &resolved)
                }
            })
        };
        if wants.iter().all(holds) {
            return Ok(());
        }
        seen.extend(values);
    }
    let verb = if contains { "contain" } else { "equal" };
    if !calls.iter().any(|c| c.name == check.tool) {
        return Err(Box::new(ArgProblem::NotCalled { tool, path }));
    }
    let want = match wants.as_slice() {
        [one] if !want.is_array() => one.shown(),
        many => Value::Array(many.iter().map(Want::shown).collect()),
    };
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

#[cfg(test)]
mod tests {
    use rover_domain::seed::DemoIds;
    use serde_json::json;
    use uuid::Uuid;

    use super::*;
    use crate::cases::{Case, parse};
    use crate::names::{Directory, Names};

    /// S1 Blue (id `c1`), S2 Green, and Nakato twice: in S1 Blue and in S2 Green.
    struct Fixture {
        directory: Directory,
        ids: DemoIds,
        school: Uuid,
        blue: Uuid,
        sarah: Uuid,
        mugisha: Uuid,
    }

    fn fixture() -> Fixture {
        let school = Uuid::new_v4();
        let (blue, green, sarah) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let mugisha = Uuid::new_v4();
        let student = |id, name: &str, class, detail: &str| {
            (
                "student".to_owned(),
                school,
                id,
                name.to_owned(),
                detail.to_owned(),
                None,
                Some(class),
            )
        };
        let directory = Directory::from_rows(vec![
            (
                "class".into(),
                school,
                blue,
                "S1 Blue".into(),
                "Naalya".into(),
                None,
                None,
            ),
            (
                "class".into(),
                school,
                green,
                "S2 Green".into(),
                "Naalya".into(),
                None,
                None,
            ),
            student(sarah, "Nakato Sarah", blue, "S1 Blue, KHS001"),
            student(mugisha, "Mugisha Brian", blue, "S1 Blue, KHS002"),
            student(Uuid::new_v4(), "Nakato Mary", green, "S2 Green, KHS016"),
        ]);
        Fixture {
            directory,
            ids: DemoIds::new(2026),
            school,
            blue,
            sarah,
            mugisha,
        }
    }

    impl Fixture {
        fn names(&self) -> Names<'_> {
            Names {
                directory: &self.directory,
                ids: &self.ids,
                school: Some(self.school),
            }
        }

        fn score(&self, case: &Case, observed: &Observed) -> Score {
            score(&case.turns()[0], observed, &self.names())
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
            by_worker: false,
            settled: true,
            error: None,
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
            ..Write::default()
        }
    }

    #[test]
    fn the_right_tool_args_and_write_pass() {
        let f = fixture();
        let c = case(
            "tools = [\"record_attendance\"]\nargs = [{ tool = \"record_attendance\", path = \"class\", equals = \"@class:S1 Blue\" }]\nwrites = [{ event = \"record.attendance\" }]\n",
        );
        let o = finished(
            vec![call("record_attendance", json!({ "class": "S1 Blue" }))],
            vec![write("record.attendance", None)],
        );
        let s = f.score(&c, &o);
        assert!(s.passed(), "{s:?}");
    }

    #[test]
    fn a_row_check_accepts_the_id_or_a_name_that_resolves_to_it() {
        let f = fixture();
        let c = case(
            "args = [{ tool = \"record_attendance\", path = \"class\", equals = \"@class:S1 Blue\" }, { tool = \"record_attendance\", path = \"absent\", contains = \"@student:Nakato Sarah\" }]\n",
        );
        let by = |input: Value| {
            f.score(
                &c,
                &finished(vec![call("record_attendance", input)], vec![]),
            )
        };
        for input in [
            json!({ "class": f.blue.to_string(), "absent": [f.sarah.to_string()] }),
            json!({ "class": "S1 Blue", "absent": ["Nakato"] }),
            json!({ "class": "s1 blue", "absent": ["Mugisha", "nakato sarah"] }),
            json!({ "class": "Blue", "absent": ["Nakato Sarah (S1 Blue, KHS001)"] }),
        ] {
            let s = by(input.clone());
            assert!(s.args, "{input}: {:?}", s.notes);
        }
        for input in [
            json!({ "class": "S2 Green", "absent": ["Nakato"] }),
            json!({ "class": "S1 Blue", "absent": ["Mugisha"] }),
            json!({ "class": "Green", "absent": [f.sarah.to_string()] }),
        ] {
            let s = by(input.clone());
            assert!(!s.args, "{input}: {:?}", s.notes);
        }
        // A failure names the row the check wanted.
        let s = by(json!({ "class": "S1 Blue", "absent": [] }));
        assert!(
            s.notes.iter().any(|n| n.contains("@student:Nakato Sarah")),
            "{s:?}"
        );
        let alone = case(
            "args = [{ tool = \"record_marks\", path = \"marks.*.student\", contains = \"@student:Nakato Sarah\" }]\n",
        );
        let marks = |student: &str| {
            f.score(
                &alone,
                &finished(
                    vec![call(
                        "record_marks",
                        json!({ "marks": [{ "student": student, "score": 75 }] }),
                    )],
                    vec![],
                ),
            )
        };
        assert!(!marks("Nakato").args);
        assert!(marks("Nakato Sarah (S1 Blue, KHS001)").args);
        // …unless the tool server resolved those very words to her for that call (the teacher
        // teaches the subject in one class only): its audit row says so.
        let mut wrote = write("record.marks", None);
        wrote.call = Some("call-record_marks".to_owned());
        wrote.named = Some(
            json!({ "marks": [{ "student": { "said": "Nakato", "id": f.sarah.to_string() } }] }),
        );
        let resolved = f.score(
            &alone,
            &finished(
                vec![call(
                    "record_marks",
                    json!({ "marks": [{ "student": "Nakato", "score": 75 }] }),
                )],
                vec![wrote.clone()],
            ),
        );
        assert!(resolved.args, "{:?}", resolved.notes);
        // Another call's row does not count.
        wrote.call = Some("another".to_owned());
        let other = f.score(
            &alone,
            &finished(
                vec![call(
                    "record_marks",
                    json!({ "marks": [{ "student": "Nakato", "score": 75 }] }),
                )],
                vec![wrote],
            ),
        );
        assert!(!other.args);
    }

    #[test]
    fn contains_with_a_list_needs_every_element_in_one_call() {
        let f = fixture();
        let c = case(
            "args = [{ tool = \"record_attendance\", path = \"absent\", contains = [\"@student:Nakato Sarah\", \"@student:Mugisha Brian\"] }]\n",
        );
        let s = f.score(
            &c,
            &finished(
                vec![
                    call(
                        "record_attendance",
                        json!({ "class": "S1 Blue", "absent": ["Nakato"] }),
                    ),
                    call(
                        "record_attendance",
                        json!({ "class": "S1 Blue", "absent": ["Mugisha"] }),
                    ),
                ],
                vec![],
            ),
        );
        assert!(!s.args, "two calls, one name each");
        assert!(s.notes[0].contains("should contain ["), "{:?}", s.notes);
        let s = f.score(
            &c,
            &finished(
                vec![call(
                    "record_attendance",
                    json!({ "class": "S1 Blue", "absent": ["Mugisha", "Nakato"] }),
                )],
                vec![],
            ),
        );
        assert!(s.args, "{:?}", s.notes);
    }

    #[test]
    fn an_after_check_reads_the_state_the_write_left_whatever_the_call_said() {
        let f = fixture();
        let c = case(
            "writes = [{ event = \"record.attendance\", after = { path = \"absentStudentIds\", contains = [\"@student:Nakato Sarah\", \"@student:Mugisha Brian\"] } }]\n",
        );
        let left = |absent: Vec<Uuid>| Write {
            after: Some(json!({ "date": "2026-12-06", "absentStudentIds": absent })),
            ..write("record.attendance", None)
        };
        let mugisha_only = call("record_attendance", json!({ "absent": ["Mugisha"] }));
        let s = f.score(
            &c,
            &finished(
                vec![mugisha_only.clone()],
                vec![left(vec![f.mugisha, f.sarah])],
            ),
        );
        assert!(s.passed(), "{s:?}");
        let s = f.score(
            &c,
            &finished(vec![mugisha_only], vec![left(vec![f.mugisha])]),
        );
        assert!(!s.writes && !s.passed());
        assert!(
            s.notes[0].starts_with(
                "record.attendance after.absentStudentIds should contain [\"@student:Nakato Sarah"
            ),
            "{:?}",
            s.notes
        );
    }

    #[test]
    fn a_wrong_or_forbidden_tool_fails_the_tool_score() {
        let f = fixture();
        let c = case("tools = [\"list_departments\"]\nforbid = [\"create_department\"]\n");
        let s = f.score(&c, &finished(vec![call("list_classes", json!({}))], vec![]));
        assert!(!s.tool && !s.passed());
        assert!(s.notes[0].contains("not called: list_departments"));
        let s = f.score(
            &c,
            &finished(
                vec![
                    call("list_departments", json!({})),
                    call("create_department", json!({})),
                ],
                vec![],
            ),
        );
        assert!(!s.tool);
        assert!(s.notes[0].contains("forbidden but called: create_department"));
        // Refused by the worker as never offered: an attempt, not a call.
        let mut refused = call("create_department", json!({ "name": "Finance" }));
        refused.error =
            Some("There is no tool named create_department for you; nothing was run.".to_owned());
        let s = f.score(
            &c,
            &finished(vec![call("list_departments", json!({})), refused], vec![]),
        );
        assert!(s.tool, "{:?}", s.notes);
    }

    #[test]
    fn an_optional_check_passes_a_call_that_leaves_the_path_out() {
        let f = fixture();
        let c = case(
            "args = [{ tool = \"record_attendance\", path = \"class\", equals = \"@class:S1 Blue\", optional = true }]\n",
        );
        let by = |input: Value| {
            f.score(
                &c,
                &finished(vec![call("record_attendance", input)], vec![]),
            )
        };
        assert!(by(json!({ "absent": [] })).args);
        assert!(by(json!({ "class": "S1 Blue" })).args);
        assert!(!by(json!({ "class": "S2 Green" })).args);
        assert!(!f.score(&c, &finished(vec![], vec![])).args, "never called");
    }

    #[test]
    fn wrong_arguments_fail_the_args_score() {
        let f = fixture();
        let c = case(
            "args = [{ tool = \"create_department\", path = \"name\", equals = \"Sciences\" }, { tool = \"record_attendance\", path = \"absent\", contains = \"s-9\" }]\n",
        );
        let o = finished(
            vec![
                call("create_department", json!({ "name": "Science" })),
                call("record_attendance", json!({ "absent": ["s-1"] })),
            ],
            vec![],
        );
        let s = f.score(&c, &o);
        assert!(!s.args);
        assert_eq!(s.notes.len(), 2, "{:?}", s.notes);
        // A later, corrected call passes.
        let mut o = o;
        o.calls
            .push(call("create_department", json!({ "name": " sciences " })));
        o.calls
            .push(call("record_attendance", json!({ "absent": ["s-9"] })));
        assert!(f.score(&c, &o).args);
        // A check naming no row fails, saying why.
        let c = case(
            "args = [{ tool = \"record_attendance\", path = \"class\", equals = \"@class:S9 Purple\" }]\n",
        );
        let s = f.score(&c, &o);
        assert!(
            !s.args && s.notes[0].contains("no class named \"S9 Purple\""),
            "{s:?}"
        );
    }

    #[test]
    fn an_unintended_or_missing_write_fails_the_writes_score() {
        let f = fixture();
        let c = case("writes = [{ event = \"create.department\", campus = \"Kololo\" }]\n");
        let s = f.score(&c, &finished(vec![], vec![]));
        assert!(!s.writes);
        assert!(s.notes[0].starts_with("missing write"));
        let s = f.score(
            &c,
            &finished(vec![], vec![write("create.department", Some("Naalya"))]),
        );
        assert!(!s.writes, "the wrong campus is not the expected write");
        let none = case("");
        let s = f.score(
            &none,
            &finished(vec![], vec![write("rename.department", None)]),
        );
        assert!(!s.writes);
        assert_eq!(s.notes, vec!["unintended write: rename.department"]);
    }

    #[test]
    fn a_turn_without_finish_or_with_an_error_or_an_answer_it_could_not_give_is_not_done() {
        let f = fixture();
        let c = case("");
        let mut o = Observed::default();
        assert!(!f.score(&c, &o).done);
        o.finish = Some("stop".into());
        assert!(f.score(&c, &o).done);
        o.errors.push("model unavailable".into());
        assert!(!f.score(&c, &o).done);
        o.errors.clear();
        o.script_errors
            .push("answer 1 ({ choice = \"Nakato Sarah\" }): no choice offered contains it".into());
        let s = f.score(&c, &o);
        assert!(!s.done && !s.passed());
        assert!(s.notes[0].starts_with("answer 1"), "{s:?}");
    }

    #[test]
    fn an_answer_that_shows_a_call_or_pretends_to_be_a_result_fails() {
        let f = fixture();
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
        let s = f.score(&c, &o);
        assert!(!s.answer && !s.passed(), "{s:?}");
    }

    #[test]
    fn a_claim_without_an_audit_row_fails_the_claims_score() {
        let f = fixture();
        let c = case("");
        let mut o = finished(vec![], vec![]);
        o.text = "I have successfully assigned Okello to teach Physics in S1 Blue.".to_owned();
        let s = f.score(&c, &o);
        assert!(!s.claims && !s.passed(), "{s:?}");
        assert!(s.notes[0].starts_with("false claim"), "{s:?}");
        // The same words after a write are true.
        let wrote = case("writes = [{ event = \"assign.subject_teacher\" }]\n");
        o.writes.push(write("assign.subject_teacher", None));
        assert!(f.score(&wrote, &o).passed());
        // A refusal claims nothing.
        let mut refused = finished(vec![], vec![]);
        refused.text = "You are not the class teacher, so I can't record attendance.".to_owned();
        assert!(f.score(&c, &refused).claims);
    }

    #[test]
    fn a_case_fails_when_any_of_its_turns_fails() {
        let ok = Score::of_turns([]);
        assert!(ok.passed());
        let f = fixture();
        let c = case("");
        let good = f.score(&c, &finished(vec![], vec![]));
        let mut bad_observed = finished(vec![], vec![write("record.attendance", None)]);
        bad_observed.text = "Done.".to_owned();
        let bad = f.score(&c, &bad_observed);
        let all = Score::of_turns([&good, &bad]);
        assert!(!all.passed() && !all.writes && all.tool);
        assert_eq!(
            all.notes,
            ["followup 1: unintended write: record.attendance"]
        );
    }

    #[test]
    fn paths_reach_into_arrays() {
        let v = json!({ "marks": [{ "student": "a" }, { "student": "b" }] });
        assert_eq!(at_path(&v, "marks.*.student"), vec![json!("a"), json!("b")]);
        assert_eq!(at_path(&v, "marks.1.student"), vec![json!("b")]);
        assert!(at_path(&v, "nothing.here").is_empty());
    }
}
