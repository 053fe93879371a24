//! Both postures deny what the caller may not do, and a denial changes nothing: policy tools are
//! gated by live casbin policy, relationship tools by the domain's ownership checks.

use rover_contracts::tools::by_event;
use rover_contracts::wire::ToolOutcome;
use serde_json::{Value, json};

use crate::helpers::{TestServer, error, spawn_toolserver};

const ADMIN: &str = "admin@hill.school";
const KOLOLO_ADMIN: &str = "kololo.admin@hill.school";
const DOS: &str = "dos@hill.school";
const AMINA: &str = "amina@hill.school";
const OKELLO: &str = "okello@hill.school";
const BURSAR: &str = "bursar@hill.school";

/// For each policy tool: valid arguments, and the demo users whose roles lack its permission
/// (the role table in `docs/domain.md`).
fn policy_cases(server: &TestServer) -> Vec<(&'static str, Value, Vec<&'static str>)> {
    let ids = &server.db.ids;
    vec![
        ("list.departments", json!({}), vec![BURSAR]),
        (
            "create.department",
            json!({ "name": "Sciences" }),
            vec![DOS, AMINA, OKELLO, BURSAR],
        ),
        (
            "rename.department",
            json!({ "departmentId": ids.department("Kololo Arts"), "newName": "Kololo Creative Arts" }),
            vec![DOS, AMINA, OKELLO, BURSAR],
        ),
        ("list.classes", json!({}), vec![BURSAR]),
        (
            "find.students",
            json!({ "query": "Nakato" }),
            vec![AMINA, OKELLO],
        ),
        ("get.enrollment_summary", json!({}), vec![AMINA, OKELLO]),
        ("list.staff", json!({}), vec![AMINA, OKELLO, BURSAR]),
        (
            "list.teaching_assignments",
            json!({}),
            vec![AMINA, OKELLO, BURSAR],
        ),
        (
            "assign.subject_teacher",
            json!({ "teacherId": ids.user(OKELLO), "classId": ids.class("S2 Red"), "subjectId": ids.subject("Mathematics") }),
            vec![KOLOLO_ADMIN, AMINA, OKELLO, BURSAR],
        ),
        (
            "get.results_summary",
            json!({}),
            vec![AMINA, OKELLO, BURSAR],
        ),
    ]
}

#[tokio::test]
async fn policy_tools_deny_every_role_that_lacks_the_permission_and_change_nothing() {
    let server = spawn_toolserver().await;
    let before = server.state().await;
    for (event, args, denied) in policy_cases(&server) {
        let permission = by_event(event).unwrap().required_permission().unwrap();
        for user in denied {
            let reply = server.call(user, event, args.clone()).await;
            assert_eq!(reply.outcome, ToolOutcome::Denied, "{user} {event}");
            assert_eq!(
                error(&reply),
                format!("Permission denied: {permission}"),
                "{user} {event}"
            );
        }
    }
    assert_eq!(server.state().await, before, "a denial changed something");
}

#[tokio::test]
async fn policy_tools_allow_the_roles_that_hold_the_permission() {
    let server = spawn_toolserver().await;
    for (event, args, denied) in policy_cases(&server) {
        for user in [ADMIN, KOLOLO_ADMIN, DOS, AMINA, OKELLO, BURSAR]
            .into_iter()
            .filter(|u| !denied.contains(u))
        {
            let reply = server.call(user, event, args.clone()).await;
            assert_ne!(
                reply.outcome,
                ToolOutcome::Denied,
                "{user} {event}: {:?}",
                reply.result
            );
        }
    }
}

#[tokio::test]
async fn okello_cannot_record_attendance_for_a_class_he_does_not_own() {
    let server = spawn_toolserver().await;
    let before = server.state().await;
    let ids = &server.db.ids;
    let args = json!({ "classId": ids.class("S1 Blue"), "absentStudentIds": [ids.student("Nakato Sarah")] });
    let reply = server.call(OKELLO, "record.attendance", args).await;
    assert!(
        matches!(reply.outcome, ToolOutcome::Denied | ToolOutcome::NotFound),
        "{reply:?}"
    );
    assert!(
        error(&reply).starts_with("Permission denied") || error(&reply).starts_with("No class"),
        "{}",
        error(&reply)
    );
    assert_eq!(server.state().await, before);
}

#[tokio::test]
async fn amina_cannot_record_physics_marks() {
    let server = spawn_toolserver().await;
    let before = server.state().await;
    let ids = &server.db.ids;
    let args = json!({
        "classId": ids.class("S1 Blue"),
        "subjectId": ids.subject("Physics"),
        "assessment": "Mid-term test",
        "marks": [{ "studentId": ids.student("Nakato Sarah"), "score": 90 }],
    });
    let reply = server.call(AMINA, "record.marks", args).await;
    assert_eq!(reply.outcome, ToolOutcome::Denied, "{reply:?}");
    assert!(
        error(&reply).starts_with("Permission denied: "),
        "{}",
        error(&reply)
    );
    assert!(
        error(&reply).contains("Physics"),
        "the denial should name what is missing: {}",
        error(&reply)
    );
    assert_eq!(server.state().await, before);
}

#[tokio::test]
async fn a_role_change_applies_on_the_next_call() {
    let server = spawn_toolserver().await;
    let reply = server.call(BURSAR, "list.departments", json!({})).await;
    assert_eq!(reply.outcome, ToolOutcome::Denied);
    sqlx::query(
        "INSERT INTO role_assignments (school_id, user_id, role) VALUES ($1, $2, 'teacher')",
    )
    .bind(server.db.ids.hill.as_uuid())
    .bind(server.db.ids.user(BURSAR).as_uuid())
    .execute(&server.owner)
    .await
    .unwrap();
    let reply = server.call(BURSAR, "list.departments", json!({})).await;
    assert_eq!(reply.outcome, ToolOutcome::Ok, "{reply:?}");
}
