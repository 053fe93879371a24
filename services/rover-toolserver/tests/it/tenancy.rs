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
            json!({ "department": ids.department("Languages"), "newName": "Stolen" }),
        ),
        (
            "find.students",
            json!({ "query": "Nakato", "class": ids.class("S1 Blue") }),
        ),
        (
            "list.teaching_assignments",
            json!({ "class": ids.class("S2 Red") }),
        ),
        (
            "assign.subject_teacher",
            json!({ "teacher": ids.user("okello@hill.school"), "class": ids.class("S1 Blue"), "subject": ids.subject("Physics") }),
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
    let classes = data(&reply)["classes"].as_array().unwrap();
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
            json!({ "department": server.db.ids.department("Languages"), "newName": "Mine" }),
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

/// Every RPC tool that takes an id, called by the Hill user who may use it, with Lakeside's ids
/// (and Lakeside's admin with Hill's): nothing found, nothing changed, nothing of the other school
/// named in the reply. The last assertion keeps the list complete as tools are added.
#[tokio::test]
async fn every_tool_that_takes_an_id_reaches_nothing_of_another_school() {
    use rover_contracts::tools::{REGISTRY, by_event};

    let server = spawn_toolserver().await;
    let ids = &server.db.ids;
    let (form1, biology, ochieng) = (
        ids.class("Form 1"),
        ids.subject("Biology"),
        ids.student("Ochieng Paul"),
    );
    let attempts = [
        (
            "admin@hill.school",
            "rename.department",
            json!({ "department": ids.department("Sciences"), "newName": "Taken" }),
        ),
        (
            "admin@hill.school",
            "find.students",
            json!({ "query": "Ochieng", "class": form1 }),
        ),
        (
            "amina@hill.school",
            "get.class_roster",
            json!({ "class": form1 }),
        ),
        (
            "amina@hill.school",
            "record.attendance",
            json!({ "class": form1, "absent": [ochieng] }),
        ),
        (
            "amina@hill.school",
            "record.attendance",
            json!({ "class": ids.class("S1 Blue"), "absent": [ochieng] }),
        ),
        (
            "amina@hill.school",
            "record.marks",
            json!({ "class": form1, "subject": biology, "assessment": "Test", "marks": [{ "student": ochieng, "score": 50 }] }),
        ),
        (
            "amina@hill.school",
            "record.marks",
            json!({ "class": ids.class("S1 Blue"), "subject": ids.subject("Mathematics"), "assessment": "Test", "marks": [{ "student": ochieng, "score": 50 }] }),
        ),
        (
            "amina@hill.school",
            "get.class_marks",
            json!({ "class": form1, "subject": biology }),
        ),
        (
            "dos@hill.school",
            "list.teaching_assignments",
            json!({ "class": form1 }),
        ),
        (
            "dos@hill.school",
            "assign.subject_teacher",
            json!({ "teacher": ids.user("admin@lakeside.college"), "class": ids.class("S1 Blue"), "subject": ids.subject("Physics") }),
        ),
        (
            "dos@hill.school",
            "assign.subject_teacher",
            json!({ "teacher": ids.user("okello@hill.school"), "class": form1, "subject": biology }),
        ),
        (
            "dos@hill.school",
            "get.results_summary",
            json!({ "class": form1, "subject": biology, "term": ids.term(ids.lakeside, "Term 1") }),
        ),
        (
            LAKESIDE_ADMIN,
            "get.class_roster",
            json!({ "class": ids.class("S1 Blue") }),
        ),
        (
            LAKESIDE_ADMIN,
            "get.class_marks",
            json!({ "class": ids.class("S1 Blue"), "subject": ids.subject("Mathematics") }),
        ),
    ];
    let before = server.state().await;
    for (user, event, args) in &attempts {
        let reply = server.call(user, event, args.clone()).await;
        match reply.outcome {
            ToolOutcome::NotFound | ToolOutcome::Denied | ToolOutcome::Invalid => {
                let text = error(&reply);
                for leak in ["Lakeside", "Ochieng", "Form 1", "Biology", "Nakato", "Hill"] {
                    assert!(!text.contains(leak), "{user} {event} leaked {leak}: {text}");
                }
            }
            // A read may answer: an empty list, or an object whose lists are all empty.
            ToolOutcome::Ok => {
                let data = data(&reply);
                let lists: Vec<&serde_json::Value> = match data.as_object() {
                    Some(object) => object.values().filter(|v| v.is_array()).collect(),
                    None => vec![data],
                };
                assert!(
                    !lists.is_empty()
                        && lists
                            .iter()
                            .all(|v| v.as_array().is_some_and(Vec::is_empty)),
                    "{user} {event} reached the other school: {:?}",
                    reply.result
                );
            }
            other => panic!("{user} {event}: unexpected {other:?} {:?}", reply.result),
        }
    }
    assert_eq!(server.state().await, before, "something changed");

    // Every RPC tool whose arguments hold an id (a `…Id` field, or a class, student, subject,
    // term, teacher or department named by name or id) is attempted above.
    for contract in REGISTRY {
        let Some(event) = contract.event() else {
            continue;
        };
        let schema = serde_json::to_value((contract.args_schema)()).unwrap();
        if takes_an_id(&schema) {
            assert!(
                attempts.iter().any(|(_, e, _)| *e == event),
                "{event} takes an id but is not attempted with another school's"
            );
        }
    }
    let named = by_event("record.attendance").unwrap();
    assert!(
        takes_an_id(&serde_json::to_value((named.args_schema)()).unwrap()),
        "the check sees named arguments"
    );
}

/// Whether a schema has a property that holds an id: `…Id`/`…Ids`, or a [`Named`] argument.
///
/// [`Named`]: rover_contracts::named::Named
fn takes_an_id(schema: &serde_json::Value) -> bool {
    const NAMED: [&str; 7] = [
        "class",
        "student",
        "subject",
        "term",
        "teacher",
        "department",
        "absent",
    ];
    match schema {
        serde_json::Value::Object(object) => {
            object.get("properties").is_some_and(|properties| {
                properties.as_object().is_some_and(|properties| {
                    properties.keys().any(|key| {
                        key.ends_with("Id") || key.ends_with("Ids") || NAMED.contains(&key.as_str())
                    })
                })
            }) || object.values().any(takes_an_id)
        }
        serde_json::Value::Array(items) => items.iter().any(takes_an_id),
        _ => false,
    }
}
