//! The store helpers the services use: audit, inbox, live policy, and what the gateway reads to
//! mint a runtime context.

use std::time::Duration;

use rover_contracts::context::{Capabilities, UserType};
use rover_contracts::ids::ToolCallId;
use rover_contracts::permission::{Action, Permission, Subject};
use rover_contracts::tools::CreateDepartmentArgs;
use rover_domain::actor::{capabilities, load_user, load_user_by_email, teaching_map};
use rover_domain::audit::{self, AuditEntry};
use rover_domain::policy::{self, PolicyRow};
use rover_domain::testing::TestDb;
use rover_domain::{DomainError, calendar, create_department, inbox};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::{as_user, campus_scope, tenant, today};

#[derive(Debug, sqlx::FromRow)]
struct AuditRow {
    actor_user_id: Uuid,
    campus_id: Option<Uuid>,
    actor_email: String,
    event: String,
    subject_id: String,
    call_id: Option<String>,
    before: Option<Value>,
    after: Value,
}

#[tokio::test]
async fn a_write_and_its_audit_row_commit_together_once_per_call() {
    let db = TestDb::new().await;
    let (mut tx, admin) = as_user(&db, "admin@hill.school").await;
    let scope = campus_scope(&db, "Kololo");
    let args = CreateDepartmentArgs {
        name: "Kololo Music".into(),
    };
    let written = create_department(&mut tx, &admin, &scope, &args)
        .await
        .unwrap();
    let call = ToolCallId::parse("turn-1/call_1").unwrap();
    let entry = AuditEntry {
        actor: &admin,
        scope: &scope,
        event: "create.department",
        call_id: Some(&call),
        trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736"),
        change: &written.change,
    };
    audit::record(&mut tx, &entry).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = tenant(&db, db.ids.hill).await;
    let rows: Vec<AuditRow> = sqlx::query_as(
        "SELECT actor_user_id, campus_id, actor_email, event, subject_id, call_id, before, after \
         FROM audit_log",
    )
    .fetch_all(tx.connection())
    .await
    .unwrap();
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row.actor_user_id, admin.user_id.as_uuid());
    assert_eq!(row.campus_id, Some(db.ids.campus("Kololo").as_uuid()));
    assert_eq!(row.actor_email, "admin@hill.school");
    assert_eq!(row.event, "create.department");
    assert_eq!(row.subject_id, written.output.id.to_string());
    assert_eq!(row.call_id.as_deref(), Some("turn-1/call_1"));
    assert_eq!(row.before, None);
    assert_eq!(row.after["name"], "Kololo Music");

    // A second audit row for the same call is refused by the schema.
    let error = audit::record(&mut tx, &entry).await.unwrap_err();
    assert!(matches!(error, DomainError::Database(_)), "{error:?}");
    drop(tx);

    // The app role may not rewrite history.
    let mut tx = tenant(&db, db.ids.hill).await;
    let tamper = sqlx::query("UPDATE audit_log SET actor_email = 'someone@else'")
        .execute(tx.connection())
        .await;
    assert!(tamper.is_err());
}

#[tokio::test]
async fn the_inbox_returns_a_stored_reply_and_serialises_duplicate_deliveries() {
    let db = TestDb::new().await;
    let call = ToolCallId::parse("turn-7/call_3").unwrap();
    let reply =
        json!({ "data": { "name": "Sciences" }, "scopeContext": "across the whole school" });

    let mut first = tenant(&db, db.ids.hill).await;
    assert_eq!(inbox::find(&mut first, &call).await.unwrap(), None);
    inbox::store(&mut first, &call, "create.department", &reply)
        .await
        .unwrap();

    // A duplicate delivery arrives while the first is still running: it must wait, then see the reply.
    let pool = db.pool.clone();
    let school = db.ids.hill;
    let duplicate_call = call.clone();
    let duplicate = tokio::spawn(async move {
        let mut second = rover_domain::begin_tenant(&pool, school).await.unwrap();
        inbox::find(&mut second, &duplicate_call).await.unwrap()
    });
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let waiting: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity \
                 WHERE datname = current_database() AND wait_event = 'advisory')",
            )
            .fetch_one(&db.pool)
            .await
            .unwrap();
            if waiting {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the duplicate delivery never waited for the first");
    assert!(!duplicate.is_finished());
    first.commit().await.unwrap();
    assert_eq!(duplicate.await.unwrap(), Some(reply.clone()));

    // Another school's inbox does not have it.
    let mut lakeside = tenant(&db, db.ids.lakeside).await;
    assert_eq!(inbox::find(&mut lakeside, &call).await.unwrap(), None);
}

#[tokio::test]
async fn policy_load_reads_the_current_schools_live_rows() {
    let db = TestDb::new().await;
    let mut tx = tenant(&db, db.ids.hill).await;
    let (policies, assignments) = policy::load(&mut tx).await.unwrap();
    let has = |role: &str, action, subject| {
        policies.contains(&PolicyRow {
            role: role.to_owned(),
            permission: Permission::new(action, subject),
        })
    };
    assert_eq!(
        policies.iter().filter(|p| p.role == "school_admin").count(),
        Action::ALL.len() * Subject::ALL.len()
    );
    assert!(has("campus_admin", Action::Create, Subject::Department));
    assert!(!has("campus_admin", Action::Delete, Subject::Department));
    assert!(has(
        "director_of_studies",
        Action::Create,
        Subject::TeachingAssignment
    ));
    assert!(has("teacher", Action::Read, Subject::Class));
    assert!(!has("teacher", Action::Create, Subject::Department));
    assert!(has("bursar", Action::Read, Subject::Student));
    assert!(!has("bursar", Action::Read, Subject::Mark));
    assert_eq!(assignments.len(), 6);
    assert!(
        assignments
            .iter()
            .any(|a| a.user_id == db.ids.user("amina@hill.school") && a.role == "teacher")
    );

    // Live: a row added now is read on the next load.
    sqlx::query(
        "INSERT INTO authz_policies (school_id, role, action, subject) VALUES ($1, 'bursar', 'read', 'Mark')",
    )
    .bind(db.ids.hill.as_uuid())
    .execute(tx.connection())
    .await
    .unwrap();
    let (policies, _) = policy::load(&mut tx).await.unwrap();
    assert!(policies.contains(&PolicyRow {
        role: "bursar".into(),
        permission: Permission::new(Action::Read, Subject::Mark),
    }));
    drop(tx);

    let mut tx = tenant(&db, db.ids.lakeside).await;
    let (policies, assignments) = policy::load(&mut tx).await.unwrap();
    assert!(!policies.is_empty());
    assert_eq!(assignments.len(), 1);
    assert_eq!(
        assignments[0].user_id,
        db.ids.user("admin@lakeside.college")
    );
}

#[tokio::test]
async fn user_details_capabilities_and_teaching_maps_come_from_live_rows() {
    let db = TestDb::new().await;
    let mut tx = tenant(&db, db.ids.hill).await;

    let kololo_admin = load_user(&mut tx, db.ids.user("kololo.admin@hill.school"))
        .await
        .unwrap();
    assert_eq!(kololo_admin.email, "kololo.admin@hill.school");
    assert_eq!(kololo_admin.user_type, UserType::Administrator);
    assert_eq!(kololo_admin.school.name, "Kampala Hill School");
    assert_eq!(kololo_admin.campus, Some(db.ids.campus_ref("Kololo")));
    assert_eq!(
        kololo_admin.profile_id,
        db.ids.profile("kololo.admin@hill.school")
    );
    let by_email = load_user_by_email(&mut tx, "Kololo.Admin@hill.school")
        .await
        .unwrap();
    assert_eq!(by_email, kololo_admin);
    let admin = load_user(&mut tx, db.ids.user("admin@hill.school"))
        .await
        .unwrap();
    assert!(admin.campus.is_none());
    // Another school's user is not found from here.
    let error = load_user(&mut tx, db.ids.user("admin@lakeside.college"))
        .await
        .unwrap_err();
    assert!(matches!(error, DomainError::NotFound(_)));

    let caps = |class_teacher, subject_teacher, director_of_studies| Capabilities {
        class_teacher,
        subject_teacher,
        director_of_studies,
    };
    for (email, expected) in [
        ("amina@hill.school", caps(true, true, false)),
        ("okello@hill.school", caps(false, true, false)),
        ("dos@hill.school", caps(false, false, true)),
        ("bursar@hill.school", caps(false, false, false)),
        ("admin@hill.school", caps(false, false, false)),
    ] {
        assert_eq!(
            capabilities(&mut tx, db.ids.user(email)).await.unwrap(),
            expected,
            "{email}"
        );
    }

    let amina = teaching_map(&mut tx, db.ids.user("amina@hill.school"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(amina.class_teacher_of.len(), 1);
    assert_eq!(amina.class_teacher_of[0].name, "S1 Blue");
    // Mathematics to S1 Blue and (in the demo data) to S2 Green.
    assert_eq!(amina.teaches.len(), 2);
    assert_eq!(amina.teaches[0].class.name, "S1 Blue");
    assert_eq!(amina.teaches[0].subjects[0].name, "Mathematics");
    assert_eq!(amina.teaches[1].class.name, "S2 Green");
    assert_eq!(amina.teaches[1].subjects[0].name, "Mathematics");
    let okello = teaching_map(&mut tx, db.ids.user("okello@hill.school"))
        .await
        .unwrap()
        .unwrap();
    assert!(okello.class_teacher_of.is_empty());
    assert_eq!(okello.teaches[0].class.name, "S2 Red");
    for email in ["bursar@hill.school", "dos@hill.school", "admin@hill.school"] {
        assert_eq!(
            teaching_map(&mut tx, db.ids.user(email)).await.unwrap(),
            None,
            "{email}"
        );
    }
}

#[tokio::test]
async fn the_calendar_has_three_contiguous_terms_covering_the_year_and_today_is_in_one() {
    let db = TestDb::new().await;
    let today = today(&db).await;
    let mut tx = tenant(&db, db.ids.hill).await;
    let calendar = calendar(&mut tx).await.unwrap();
    assert_eq!(calendar.time_zone, "Africa/Kampala");
    assert_eq!(calendar.academic_year, db.ids.year);
    assert_eq!(calendar.academic_year_id, db.ids.academic_year(db.ids.hill));
    let names: Vec<_> = calendar.terms.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["Term 1", "Term 2", "Term 3"]);
    let year: i32 = db.ids.year.parse().unwrap();
    assert_eq!(
        calendar.terms[0].starts_on,
        chrono::NaiveDate::from_ymd_opt(year, 1, 1).unwrap()
    );
    assert_eq!(
        calendar.terms[2].ends_on,
        chrono::NaiveDate::from_ymd_opt(year, 12, 31).unwrap()
    );
    for pair in calendar.terms.windows(2) {
        assert_eq!(pair[0].ends_on.succ_opt(), Some(pair[1].starts_on));
    }
    assert!(calendar.term_on(today).is_some());
}
