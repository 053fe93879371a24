//! Tenancy through the tool server: another school's ids reach nothing, and a campus-scoped user
//! sees and changes only their campus (and says so in `scopeContext`).

use rover_contracts::wire::ToolOutcome;
use serde_json::json;

use crate::helpers::{data, error, scope_context, spawn_toolserver};

const LAKESIDE_ADMIN: &str = "admin@lakeside.college";

#[tokio::test]
async fn another_schools_ids_are_not_found_and_nothing_changes_in_either_school() {
    let server = spawn_toolserver().await;
    let ids = &server.db.ids;
    let before = server.state().await;
    let attempts = [
        (
            "rename.department",
            json!({ "departmentId": ids.department("Languages"), "newName": "Stolen" }),
        ),
        (
            "find.students",
            json!({ "query": "Nakato", "classId": ids.class("S1 Blue") }),
        ),
        (
            "list.teaching_assignments",
            json!({ "classId": ids.class("S2 Red") }),
        ),
        (
            "assign.subject_teacher",
            json!({ "teacherId": ids.user("okello@hill.school"), "classId": ids.class("S1 Blue"), "subjectId": ids.subject("Physics") }),
        ),
    ];
    for (event, args) in attempts {
        let reply = server.call(LAKESIDE_ADMIN, event, args).await;
        match reply.outcome {
            ToolOutcome::NotFound => assert!(
                !error(&reply).contains("Hill"),
                "{event} leaked: {}",
                error(&reply)
            ),
            ToolOutcome::Ok => assert_eq!(
                data(&reply).as_array().map(Vec::len),
                Some(0),
                "{event} reached Hill's rows"
            ),
            other => panic!("{event}: unexpected {other:?} {:?}", reply.result),
        }
    }
    assert_eq!(server.state().await, before);

    // Lakeside's own data is still reachable, and shows nothing of Hill.
    let reply = server
        .call(LAKESIDE_ADMIN, "list.departments", json!({}))
        .await;
    let names: Vec<&str> = data(&reply)
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Sciences"]);
}

#[tokio::test]
async fn a_campus_admin_sees_only_their_campus_and_cannot_change_another() {
    let server = spawn_toolserver().await;
    let kololo_admin = "kololo.admin@hill.school";

    let reply = server.call(kololo_admin, "list.classes", json!({})).await;
    assert_eq!(scope_context(&reply), "across your campus, Kololo");
    let classes = data(&reply).as_array().unwrap();
    assert!(!classes.is_empty());
    assert!(
        classes.iter().all(|c| c["campus"]["name"] == "Kololo"),
        "{classes:?}"
    );

    let reply = server
        .call(kololo_admin, "find.students", json!({ "query": "Nakato" }))
        .await;
    assert_eq!(
        data(&reply).as_array().unwrap().len(),
        0,
        "Nakato studies in Naalya"
    );

    // A write is pinned to the campus...
    let reply = server
        .call(
            kololo_admin,
            "create.department",
            json!({ "name": "Sciences" }),
        )
        .await;
    assert_eq!(data(&reply)["campus"]["name"], "Kololo");
    assert_eq!(scope_context(&reply), "across your campus, Kololo");
    // ...and cannot reach a Naalya class or a school-wide department.
    let reply = server
        .call(
            kololo_admin,
            "rename.department",
            json!({ "departmentId": server.db.ids.department("Languages"), "newName": "Mine" }),
        )
        .await;
    assert_ne!(reply.outcome, ToolOutcome::Ok, "{reply:?}");
    let naalya_sciences: i64 =
        sqlx::query_scalar("SELECT count(*) FROM departments d JOIN campuses c ON c.id = d.campus_id WHERE c.name = 'Naalya'")
            .fetch_one(&server.owner)
            .await
            .unwrap();
    assert_eq!(naalya_sciences, 0);
}
