//! The harness itself, against the scripted model: the CI subset of the shipped cases passes, and
//! deliberately wrong expectations (a wrong tool, wrong arguments, a write the case does not
//! allow, a write it requires that never happens, a followup's, an answer no question offers, a
//! reply claiming a write that never happened) are scored as failures; followups and answers are
//! driven through the real gateway, and an `@class:` check accepts the id and the name. Needs the
//! workspace binaries (`cargo build --workspace --bins`), RabbitMQ and Postgres, like every stack
//! test. `ROVER_EVAL_TEST_RULES=FILE` runs the shipped cases on another rules file of the scripted
//! model.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story: its setup, the act and every assertion in one place"
)]

use std::path::PathBuf;
use std::time::Duration;

use rover_eval::cases::{self, Case};
use rover_eval::report::Report;
use rover_eval::stack::ModelChoice;
use rover_eval::{Options, run};

async fn eval(cases: Vec<Case>) -> Report {
    eval_with(cases, None).await
}

/// The cases against the scripted model, writing its calls as text in `style` when given.
async fn eval_with(cases: Vec<Case>, style: Option<&str>) -> Report {
    let rules = std::env::var_os("ROVER_EVAL_TEST_RULES").map(PathBuf::from);
    eval_on(cases, rules, style).await
}

/// The cases against the scripted model with `rules` (its own when `None`).
async fn eval_on(cases: Vec<Case>, rules: Option<PathBuf>, style: Option<&str>) -> Report {
    run(Options {
        model: ModelChoice::Scripted {
            rules,
            tool_calls: style.map(str::to_owned),
        },
        cases,
        subset: None,
        turn_timeout: Duration::from_secs(60),
        model_timeout_ms: 30_000,
        log_dir: None,
        on_result: None,
    })
    .await
    .expect("the eval runs")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_ci_subset_passes_against_the_scripted_model() {
    let all = cases::load(&cases::default_file()).unwrap();
    let ci = cases::select(all, Some("ci"), &[]);
    assert!(ci.len() >= 8);
    let report = eval(ci).await;
    let table = report.table();
    assert_eq!(report.totals.passed, report.totals.cases, "{table}");
    let by_id = |id: &str| report.results.iter().find(|r| r.case.id == id).unwrap();
    // What the scores rest on was really observed: the write in the audit log, the subagent's
    // call in the stream, the question that ended the turn and the answer that continued it, the
    // followup's own call and write.
    assert_eq!(by_id("create-department").observed.writes.len(), 1);
    let attendance = &by_id("attendance").observed;
    assert!(
        attendance
            .calls
            .iter()
            .any(|c| c.name == "record_attendance" && c.agent == "class_teacher"),
        "{attendance:?}"
    );
    assert_eq!(attendance.writes[0].event, "record.attendance");
    assert!(attendance.model_calls >= 3, "{attendance:?}");

    // "Nakato" fits two of Amina's students: the worker asked, the harness answered with the
    // offered choice, and the continuation recorded the one mark.
    let asked = &by_id("marks-ambiguous-name").observed;
    assert_eq!(asked.asked.len(), 1, "{asked:?}");
    let question = &asked.asked[0];
    assert!(question.by_worker, "{question:?}");
    assert!(question.choices.len() >= 2, "{question:?}");
    assert!(
        question
            .answer
            .as_deref()
            .is_some_and(|a| a.starts_with("Nakato Sarah")),
        "{question:?}"
    );
    assert!(
        asked
            .calls
            .iter()
            .any(|c| c.name == "ask_user" && c.by_worker)
    );
    assert_eq!(
        asked
            .calls
            .iter()
            .filter(|c| c.name == "record_marks")
            .count(),
        2,
        "the call that asked, and the call again with the answer: {asked:?}"
    );
    assert_eq!(asked.writes.len(), 1, "{asked:?}");
    assert_eq!(asked.writes[0].event, "record.marks");
    assert_eq!(asked.finish.as_deref(), Some("stop"));

    // The followup is its own turn in the same chat.
    let chat = by_id("followup-attendance-correction");
    assert_eq!(chat.followups.len(), 1);
    let followup = &chat.followups[0].observed;
    assert_eq!(followup.writes.len(), 1, "{followup:?}");
    assert_eq!(chat.observed.writes.len(), 1, "{:?}", chat.observed);
    let absent = followup
        .calls
        .iter()
        .find(|c| c.name == "record_attendance")
        .map(|c| c.input["absent"].clone())
        .expect("the followup's record_attendance");
    // The correction names Mugisha alone; the day it leaves has both absent.
    assert_eq!(absent, serde_json::json!(["Mugisha"]));
    let left = followup.writes[0].after.as_ref().expect("the day's state");
    assert_eq!(
        left["absentStudentIds"].as_array().map(Vec::len),
        Some(2),
        "{left}"
    );
    assert_eq!(report.totals.turns, report.totals.cases + 1);
    assert_eq!(report.totals.false_claims, 0);
    assert!(report.totals.p90_model_calls >= report.totals.p50_model_calls);
    assert!(report.totals.p50_model_calls >= 1);

    let n = report.totals.cases;
    assert!(table.contains(&format!("**{n}/{n} passed**")), "{table}");
    assert!(table.contains("ask_user(worker)"), "{table}");
    assert!(table.contains(" ⏵ "), "{table}");
}

/// A model that writes every call as text (each style local models use) does the same work: the
/// worker recovers the calls, runs them, and the Hub never reads a raw call as answer text (the
/// `answer` score), so every shipped case passes as it does with native calls.
#[tokio::test(flavor = "multi_thread")]
async fn every_case_passes_when_the_model_writes_its_calls_as_text() {
    let all = cases::load(&cases::default_file()).unwrap();
    let n = all.len();
    for (style, cases) in [
        ("fenced", all.clone()),
        ("bare", cases::select(all.clone(), Some("ci"), &[])),
        ("tagged", cases::select(all.clone(), Some("ci"), &[])),
        ("list", cases::select(all, Some("ci"), &[])),
    ] {
        let report = eval_with(cases, Some(style)).await;
        let table = report.table();
        assert_eq!(
            report.totals.passed, report.totals.cases,
            "{style}:\n{table}"
        );
        assert_eq!(
            report.totals.answer, report.totals.cases,
            "{style}:\n{table}"
        );
        if style == "fenced" {
            assert_eq!(report.totals.cases, n);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_expectations_are_scored_as_failures() {
    let cases = cases::parse(
        r#"
[[case]]
id = "wrong-tool"
user = "admin@hill.school"
text = "List the departments"
kind = "read"
tools = ["list_classes"]

[[case]]
id = "forbidden-tool"
user = "admin@hill.school"
text = "Show the departments"
kind = "read"
forbid = ["list_departments"]

[[case]]
id = "wrong-args"
user = "admin@hill.school"
text = "Create a department called Sciences"
kind = "write"
tools = ["create_department"]
args = [{ tool = "create_department", path = "name", equals = "Physics" }]
writes = [{ event = "create.department" }]

[[case]]
id = "unintended-write"
user = "admin@lakeside.college"
text = "Create a department called Drama"
kind = "read"
tools = ["create_department"]

[[case]]
id = "wrong-campus"
user = "kololo.admin@hill.school"
text = "Create a department called Kololo Music"
kind = "campus"
tools = ["create_department"]
writes = [{ event = "create.department", campus = "Naalya" }]

[[case]]
id = "missing-write"
user = "bursar@hill.school"
text = "Create a department called Finance"
kind = "denial"
writes = [{ event = "create.department" }]

[[case]]
id = "answer-not-offered"
user = "amina@hill.school"
text = "Give Nakatto 80 for the maths test in S1 Blue"
kind = "ask_user"
tools = ["ask_user"]
answers = [{ choice = "Nakato Mary" }]

[[case]]
id = "unanswered"
user = "amina@hill.school"
text = "Give Nakatto 80 for the maths test in S1 Blue"
kind = "ask_user"
tools = ["ask_user"]
writes = [{ event = "record.marks" }]

[[case]]
id = "wrong-followup"
user = "amina@hill.school"
text = "Take the register for S1 Blue: Achieng is absent"
kind = "followup"
writes = [{ event = "record.attendance" }]

[[case.followups]]
text = "Actually Mugisha was away too"
tools = ["record_attendance"]
"#,
    )
    .unwrap();
    let report = eval(cases).await;
    let table = report.table();
    let failed = |id: &str| {
        let r = report.results.iter().find(|r| r.case.id == id).unwrap();
        assert!(!r.passed, "{id} passed:\n{table}");
        r.score.clone()
    };
    let s = failed("wrong-tool");
    assert!(!s.tool && s.args && s.writes && s.done, "{s:?}");
    let s = failed("forbidden-tool");
    assert!(!s.tool && s.writes, "{s:?}");
    let s = failed("wrong-args");
    assert!(s.tool && !s.args && s.writes, "{s:?}");
    let s = failed("unintended-write");
    assert!(s.tool && !s.writes, "{s:?}");
    assert!(
        s.notes
            .iter()
            .any(|n| n == "unintended write: create.department")
    );
    let s = failed("wrong-campus");
    assert!(!s.writes, "{s:?}");
    assert!(
        s.notes.iter().any(|n| n.contains("(campus Kololo)")),
        "{s:?}"
    );
    let s = failed("missing-write");
    assert!(s.tool && !s.writes, "{s:?}");

    // An answer no offered choice contains: the case fails, saying what was offered; nothing is
    // answered, so nothing is written.
    let s = failed("answer-not-offered");
    assert!(s.tool && s.writes && !s.done, "{s:?}");
    assert!(
        s.notes.iter().any(|n| n.starts_with(
            "answer 1 { choice = \"Nakato Mary\" }: no choice offered contains it (offered: Nakato Sarah"
        )),
        "{s:?}"
    );
    let by_id = |id: &str| report.results.iter().find(|r| r.case.id == id).unwrap();
    let asked = &by_id("answer-not-offered").observed.asked;
    assert!(asked.len() == 1 && asked[0].answer.is_none(), "{asked:?}");
    // No answer left: the turn stays waiting on its question, and the mark is not written.
    let s = failed("unanswered");
    assert!(s.tool && !s.writes && s.done, "{s:?}");
    assert_eq!(
        by_id("unanswered").observed.finish.as_deref(),
        Some("tool-calls")
    );

    // The followup's own expectations: its write was not allowed.
    let s = failed("wrong-followup");
    assert!(s.tool && !s.writes && s.args && s.done, "{s:?}");
    assert_eq!(
        s.notes,
        ["followup 1: unintended write: record.attendance (campus Naalya)"],
        "{s:?}"
    );
    assert!(by_id("wrong-followup").followups[0].observed.writes.len() == 1);
    let problems = report.gate(0.0).unwrap_err().problems;
    assert!(
        problems.iter().any(|p| p
            == "wrong-followup: followup 1: unintended write: record.attendance (campus Naalya)"),
        "{problems:?}"
    );

    assert_eq!(report.totals.passed, 0, "{table}");
    assert!(table.contains("**0/9 passed**"), "{table}");
}

/// The scripted model's script for the checks of names and claims, on its own rules file: a
/// class teacher's register naming the class by id, by name, or naming another class; and a reply
/// that says it saved something when nothing was.
const NAMING_RULES: &str = r#"
[[rule]]
name = "register-by-id"
when = '^register by id: (.+?) absent$'
offered = ["record_attendance"]
[[rule.steps]]
call = [{ tool = "record_attendance", args = { class = "{{context.teachingMap.classTeacherOf.0.id}}", absent = ["{{match.1}}"] } }]
[[rule.steps]]
say = "Attendance for {{result.0.data.class.name}} is recorded."

[[rule]]
name = "register-by-name"
when = '^register by name: (.+?) absent from (.+)$'
offered = ["record_attendance"]
[[rule.steps]]
call = [{ tool = "record_attendance", args = { class = "{{context.teachingMap.classTeacherOf.0.name}}", absent = ["{{match.1}}"] } }]
[[rule.steps]]
say = "Attendance for {{result.0.data.class.name}} is recorded."

[[rule]]
name = "register-in"
when = '^register in (.+?): (.+?) absent$'
offered = ["record_attendance"]
[[rule.steps]]
call = [{ tool = "record_attendance", args = { class = "{{match.1}}", absent = ["{{match.2}}"] } }]
[[rule.steps]]
say = "Attendance for {{result.0.data.class.name}} is recorded."

[[rule]]
name = "register-rover"
when = '^register '
requires_tools = ["task"]
on_error = "I could not record it: {{error}}"
[[rule.steps]]
call = [{ tool = "task", args = { subagent = "class_teacher", description = "{{trigger}}" } }]
[[rule.steps]]
say = "{{result.0.data}}"

[[rule]]
name = "claims-without-doing"
when = '^save my changes$'
steps = [{ say = "Done: I have saved your changes to the department." }]
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_class_check_takes_the_id_or_the_name_and_a_false_claim_fails() {
    let rules = std::env::temp_dir().join(format!(
        "rover-eval-naming-rules-{}.toml",
        uuid::Uuid::new_v4()
    ));
    std::fs::write(&rules, NAMING_RULES).unwrap();
    let register = |id: &str, text: &str, writes: &str| {
        format!(
            r#"
[[case]]
id = "{id}"
user = "amina@hill.school"
text = "{text}"
kind = "delegation"
tools = ["record_attendance"]
args = [
  {{ tool = "record_attendance", path = "class", equals = "@class:S1 Blue" }},
  {{ tool = "record_attendance", path = "absent", contains = "@student:Nakato Sarah" }},
]
writes = [{writes}]
"#
        )
    };
    let attendance = r#"{ event = "record.attendance" }"#;
    let text = [
        register("by-id", "Register by id: Nakato absent", attendance),
        // The staff member names the class (a class nobody said would be dropped from the write).
        register(
            "by-name",
            "Register by name: Nakato absent from S1 Blue",
            attendance,
        ),
        register("other-class", "Register in S2 Green: Nakato absent", ""),
        r#"
[[case]]
id = "false-claim"
user = "admin@hill.school"
text = "Save my changes"
kind = "write"
"#
        .to_owned(),
    ]
    .concat();
    let cases = cases::parse(&text).unwrap();
    let report = eval_on(cases, Some(rules.clone()), None).await;
    let _ = std::fs::remove_file(&rules);
    let table = report.table();
    let by_id = |id: &str| report.results.iter().find(|r| r.case.id == id).unwrap();

    // The class given by its id, and by its name: the same check passes.
    for id in ["by-id", "by-name"] {
        let r = by_id(id);
        assert!(r.passed, "{id}:\n{table}");
        let class = r
            .observed
            .calls
            .iter()
            .find(|c| c.name == "record_attendance")
            .map(|c| c.input["class"].clone())
            .unwrap();
        let is_uuid = class
            .as_str()
            .is_some_and(|c| uuid::Uuid::parse_str(c).is_ok());
        assert_eq!(is_uuid, id == "by-id", "{class}");
    }
    // Another class's name is not S1 Blue (and Amina is not its class teacher: nothing written).
    let other = by_id("other-class");
    assert!(!other.score.args && other.score.writes, "{:?}", other.score);
    assert!(
        other
            .score
            .notes
            .iter()
            .any(|n| n.starts_with("record_attendance.class should equal \"@class:S1 Blue")),
        "{:?}",
        other.score
    );

    // "I have saved your changes", and nothing was written: only the claims score fails.
    let claim = by_id("false-claim");
    let s = &claim.score;
    assert!(
        !claim.passed && !s.claims && s.tool && s.args && s.writes && s.answer && s.done,
        "{s:?}"
    );
    assert!(
        s.notes
            .iter()
            .any(|n| n.starts_with("false claim, nothing was written")),
        "{s:?}"
    );
    assert_eq!(report.totals.false_claims, 1, "{table}");
    assert!(
        table.contains(
            "| false-claim | write | admin@hill.school | – | ok | ok | ok | ok | FAIL | ok |"
        ),
        "{table}"
    );
}
