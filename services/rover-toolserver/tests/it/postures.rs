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
            json!({ "department": ids.department("Kololo Arts"), "newName": "Kololo Creative Arts" }),
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
            json!({ "teacher": ids.user(OKELLO), "class": ids.class("S2 Red"), "subject": ids.subject("Mathematics") }),
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
    let args = json!({ "class": ids.class("S1 Blue"), "absent": [ids.student("Nakato Sarah")] });
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
        "class": ids.class("S1 Blue"),
        "subject": ids.subject("Physics"),
        "assessment": "Mid-term test",
        "marks": [{ "student": ids.student("Nakato Sarah"), "score": 90 }],
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

/// Takes `read` on `subject` away from every role `user` (of Kampala Hill School) holds, as an
/// administrator would; returns those roles.
async fn revoke_read(server: &TestServer, user: &str, subject: &str) -> Vec<String> {
    let roles: Vec<String> =
        sqlx::query_scalar("SELECT role FROM role_assignments WHERE user_id = $1")
            .bind(server.db.ids.user(user).as_uuid())
            .fetch_all(&server.owner)
            .await
            .unwrap();
    sqlx::query(
        "DELETE FROM authz_policies WHERE school_id = $1 AND role = ANY($2) \
         AND action = 'read' AND subject = $3",
    )
    .bind(server.db.ids.hill.as_uuid())
    .bind(&roles)
    .bind(subject)
    .execute(&server.owner)
    .await
    .unwrap();
    roles
}

/// The tool server keeps a school's policy rows between calls, by the school's policy version:
/// a grant revoked — or a role taken away — is refused on the very next call, and granted again
/// it is allowed on the next one; no call ever decides on rows older than the live ones.
#[tokio::test]
async fn a_revoked_permission_is_refused_on_the_very_next_call_and_a_new_grant_allowed() {
    let server = spawn_toolserver().await;
    let hill = server.db.ids.hill.as_uuid();
    let owner = &server.owner;
    let list = |user: &'static str| server.call(user, "list.departments", json!({}));
    assert_eq!(list(DOS).await.outcome, ToolOutcome::Ok);
    assert_eq!(
        list(DOS).await.outcome,
        ToolOutcome::Ok,
        "from the kept rows"
    );
    let roles = revoke_read(&server, DOS, "Department").await;
    let revoked = list(DOS).await;
    assert_eq!(revoked.outcome, ToolOutcome::Denied);
    assert_eq!(error(&revoked), "Permission denied: read:Department");
    // Another user of the school, whose role still grants it, is still allowed.
    assert_eq!(list(ADMIN).await.outcome, ToolOutcome::Ok);
    sqlx::query(
        "INSERT INTO authz_policies (school_id, role, action, subject) \
         VALUES ($1, $2, 'read', 'Department')",
    )
    .bind(hill)
    .bind(&roles[0])
    .execute(owner)
    .await
    .unwrap();
    assert_eq!(list(DOS).await.outcome, ToolOutcome::Ok);
    // Taking the role away is seen on the next call too.
    sqlx::query("DELETE FROM role_assignments WHERE user_id = $1")
        .bind(server.db.ids.user(DOS).as_uuid())
        .execute(owner)
        .await
        .unwrap();
    assert_eq!(list(DOS).await.outcome, ToolOutcome::Denied);
}

/// A caller without the permission learns that, not what its arguments lacked — on the one-trip
/// path too, where the read is made (its search text checked) before the query is sent: the
/// permission is decided first, on the school's kept policy rows.
#[tokio::test]
async fn a_caller_without_the_permission_is_denied_before_its_arguments_are_judged() {
    let server = spawn_toolserver().await;
    revoke_read(&server, DOS, "Student").await;
    // The school's rows at their new version are kept by this call, so the next takes the
    // one-trip path.
    let warm = server.call(DOS, "list.departments", json!({})).await;
    assert_eq!(warm.outcome, ToolOutcome::Ok, "{warm:?}");
    let blank = server
        .call(DOS, "find.students", json!({ "query": "   " }))
        .await;
    assert_eq!(blank.outcome, ToolOutcome::Denied, "{blank:?}");
    assert_eq!(error(&blank), "Permission denied: read:Student");
    // Allowed, the same text is refused as the argument it is.
    let allowed = server
        .call(ADMIN, "find.students", json!({ "query": "   " }))
        .await;
    assert_eq!(allowed.outcome, ToolOutcome::Invalid, "{allowed:?}");
}
