//! The harness itself, against the scripted model: the CI subset of the shipped cases passes, and
//! deliberately wrong expectations (a wrong tool, wrong arguments, a write the case does not
//! allow, a write it requires that never happens) are scored as failures. Needs the workspace
//! binaries (`cargo build --workspace --bins`), RabbitMQ and Postgres, like every stack test.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story: its setup, the act and every assertion in one place"
)]

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
    run(Options {
        model: ModelChoice::Scripted {
            rules: None,
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
    assert!(ci.len() >= 6);
    let report = eval(ci).await;
    let table = report.table();
    assert_eq!(report.totals.passed, report.totals.cases, "{table}");
    let by_id = |id: &str| report.results.iter().find(|r| r.case.id == id).unwrap();
    // What the scores rest on was really observed: the write in the audit log, the subagent's
    // call in the stream, the question that ended the turn.
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
    assert_eq!(
        by_id("ask-help").observed.finish.as_deref(),
        Some("tool-calls")
    );
    let n = report.totals.cases;
    assert!(table.contains(&format!("**{n}/{n} passed**")), "{table}");
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
    assert_eq!(report.totals.passed, 0, "{table}");
    assert!(table.contains("**0/6 passed**"), "{table}");
}
