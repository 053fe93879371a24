//! Every RPC tool in the catalogue, happy path, through the real queue, with its envelope checked.

use rover_contracts::tools::REGISTRY;
use rover_contracts::wire::ToolOutcome;
use serde_json::json;

use crate::helpers::{data, scope_context, spawn_toolserver};

const WHOLE_SCHOOL: &str = "across the whole school";
const NAALYA: &str = "across your campus, Naalya";

#[tokio::test]
async fn supervisor_tools_answer_with_data_and_scope() {
    let server = spawn_toolserver().await;
    let admin = "admin@hill.school";

    let reply = server.call(admin, "list.departments", json!({})).await;
    assert_eq!(reply.outcome, ToolOutcome::Ok);
    assert_eq!(scope_context(&reply), WHOLE_SCHOOL);
    let names: Vec<&str> = data(&reply)
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"Languages")
            && names.contains(&"Kololo Arts")
            && !names.contains(&"Sciences"),
        "{names:?}"
    );

    let reply = server
        .call(admin, "create.department", json!({ "name": "Sciences" }))
        .await;
    assert_eq!(data(&reply)["name"], "Sciences");
    assert!(
        data(&reply).get("campus").is_none(),
        "a school-wide department has no campus"
    );

    let languages = server.db.ids.department("Languages");
    let reply = server
        .call(
            admin,
            "rename.department",
            json!({ "department": languages, "newName": "Modern Languages" }),
        )
        .await;
    assert_eq!(data(&reply)["department"]["name"], "Modern Languages");
    assert_eq!(data(&reply)["previousName"], "Languages");

    let reply = server.call(admin, "list.classes", json!({})).await;
    assert_eq!(data(&reply)["total"], 4);
    assert_eq!(data(&reply)["truncated"], false);
    let classes: Vec<&str> = data(&reply)["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(classes.len(), 4, "{classes:?}");
    assert!(classes.contains(&"S1 Blue") && classes.contains(&"S2 Red"));

    // Two Nakatos in the demo data: Nakato Mary (S2 Green) and Nakato Sarah (S1 Blue).
    let reply = server
        .call(admin, "find.students", json!({ "query": "Nakato" }))
        .await;
    let found = data(&reply).as_array().unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(found[0]["name"], "Nakato Mary");
    assert_eq!(found[0]["class"]["name"], "S2 Green");
    assert_eq!(found[1]["name"], "Nakato Sarah");
    assert_eq!(found[1]["class"]["name"], "S1 Blue");
    // A class by id narrows the search to it.
    let reply = server
        .call(
            admin,
            "find.students",
            json!({ "query": "Nakato", "class": server.db.ids.class("S1 Blue") }),
        )
        .await;
    let found = data(&reply).as_array().unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["name"], "Nakato Sarah");

    let reply = server
        .call(admin, "get.enrollment_summary", json!({}))
        .await;
    let summary = data(&reply);
    let by_campus: i64 = summary["byCampus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["students"].as_i64().unwrap())
        .sum();
    assert_eq!(summary["total"].as_i64().unwrap(), by_campus);
    assert_eq!(summary["byCampus"].as_array().unwrap().len(), 2);

    let reply = server
        .call(admin, "list.staff", json!({ "query": "okello" }))
        .await;
    let staff = data(&reply)["staff"].as_array().unwrap();
    assert_eq!(staff.len(), 1);
    assert_eq!(data(&reply)["total"], 1);
    assert_eq!(staff[0]["email"], "okello@hill.school");
}

#[tokio::test]
async fn class_teacher_tools_work_for_the_class_teacher() {
    let server = spawn_toolserver().await;
    let amina = "amina@hill.school";
    let s1_blue = server.db.ids.class("S1 Blue");
    let nakato = server.db.ids.student("Nakato Sarah");

    let reply = server
        .call(amina, "get.class_roster", json!({ "class": s1_blue }))
        .await;
    assert_eq!(scope_context(&reply), NAALYA);
    let roster: Vec<&str> = data(&reply)["students"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(
        roster.contains(&"Nakato Sarah") && roster.contains(&"Mugisha Brian"),
        "{roster:?}"
    );

    let reply = server
        .call(
            amina,
            "record.attendance",
            json!({ "class": s1_blue, "absent": [nakato] }),
        )
        .await;
    assert_eq!(reply.outcome, ToolOutcome::Ok);
    let recorded = data(&reply);
    assert_eq!(recorded["absent"][0]["name"], "Nakato Sarah");
    assert_eq!(
        recorded["present"].as_u64().unwrap() as usize,
        roster.len() - 1
    );
    assert_eq!(server.count("attendance").await as usize, roster.len());
}

#[tokio::test]
async fn subject_teacher_tools_work_for_the_subject_teacher() {
    let server = spawn_toolserver().await;
    let amina = "amina@hill.school";
    let ids = &server.db.ids;
    let (s1_blue, maths) = (ids.class("S1 Blue"), ids.subject("Mathematics"));

    let reply = server.call(amina, "list.my_classes", json!({})).await;
    let classes = data(&reply).as_array().unwrap();
    // S1 Blue (her own class) and S2 Green, both Mathematics, in the demo data.
    assert_eq!(classes.len(), 2);
    assert_eq!(classes[1]["class"]["name"], "S2 Green");
    assert_eq!(classes[1]["isClassTeacher"], false);
    assert_eq!(classes[0]["class"]["name"], "S1 Blue");
    assert_eq!(classes[0]["subjects"][0]["name"], "Mathematics");
    assert_eq!(classes[0]["isClassTeacher"], true);
    let students: Vec<&str> = classes[0]["students"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(
        students.contains(&"Nakato Sarah") && students.contains(&"Mugisha Brian"),
        "{students:?}"
    );
    let students: Vec<&str> = classes[0]["students"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(
        students.contains(&"Nakato Sarah") && students.contains(&"Mugisha Brian"),
        "{students:?}"
    );

    let marks = json!([
        { "student": ids.student("Nakato Sarah"), "score": 78 },
        { "student": ids.student("Mugisha Brian"), "score": 64 },
    ]);
    let reply = server
        .call(amina, "record.marks", json!({ "class": s1_blue, "subject": maths, "assessment": "Mid-term test", "marks": marks }))
        .await;
    assert_eq!(data(&reply)["recorded"], 2);
    assert_eq!(data(&reply)["subject"]["name"], "Mathematics");

    let reply = server
        .call(
            amina,
            "get.class_marks",
            json!({ "class": s1_blue, "subject": maths }),
        )
        .await;
    let scores: Vec<f64> = data(&reply)["marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["score"].as_f64().unwrap())
        .collect();
    assert_eq!(scores.len(), 2);
    assert!(
        scores.contains(&78.0) && scores.contains(&64.0),
        "{scores:?}"
    );
}

#[tokio::test]
async fn director_of_studies_tools_work_for_the_director() {
    let server = spawn_toolserver().await;
    let dos = "dos@hill.school";
    let ids = &server.db.ids;

    let reply = server
        .call(dos, "list.teaching_assignments", json!({}))
        .await;
    assert_eq!(scope_context(&reply), WHOLE_SCHOOL);
    let rows = data(&reply).as_array().unwrap();
    assert!(
        rows.iter().any(
            |r| r["teacher"]["name"].as_str().unwrap().contains("Okello")
                && r["subject"]["name"] == "Physics"
        ),
        "{rows:?}"
    );

    let args = json!({ "teacher": ids.user("okello@hill.school"), "class": ids.class("S1 Blue"), "subject": ids.subject("Physics") });
    let reply = server.call(dos, "assign.subject_teacher", args).await;
    assert_eq!(data(&reply)["class"]["name"], "S1 Blue");
    assert_eq!(data(&reply)["subject"]["name"], "Physics");
    // The listing filters by a class's or a teacher's id.
    let reply = server
        .call(
            dos,
            "list.teaching_assignments",
            json!({ "class": ids.class("S1 Blue"), "teacher": ids.user("okello@hill.school") }),
        )
        .await;
    let rows = data(&reply).as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["subject"]["name"], "Physics");

    // Results need marks: amina records two, then the director summarises them.
    let marks = json!([{ "student": ids.student("Nakato Sarah"), "score": 80 }, { "student": ids.student("Mugisha Brian"), "score": 60 }]);
    let args = json!({ "class": ids.class("S1 Blue"), "subject": ids.subject("Mathematics"), "assessment": "Quiz", "marks": marks });
    assert_eq!(
        server
            .call("amina@hill.school", "record.marks", args)
            .await
            .outcome,
        ToolOutcome::Ok
    );
    let reply = server.call(dos, "get.results_summary", json!({})).await;
    let rows = data(&reply)["rows"].as_array().unwrap();
    let maths = rows
        .iter()
        .find(|r| r["subject"]["name"] == "Mathematics" && r["class"]["name"] == "S1 Blue")
        .expect("a Mathematics row");
    assert_eq!(maths["average"].as_f64().unwrap(), 70.0);
    assert_eq!(maths["marks"], 2);
    // By ids: the class, the subject and the term.
    let term = data(&reply)["term"].as_str().unwrap().to_owned();
    let args = json!({ "class": ids.class("S1 Blue"), "subject": ids.subject("Mathematics"), "term": ids.term(ids.hill, &term) });
    let reply = server.call(dos, "get.results_summary", args).await;
    assert_eq!(data(&reply)["term"], term.as_str());
    assert_eq!(data(&reply)["rows"], json!([maths]));
}

#[test]
fn every_rpc_tool_is_covered_by_a_happy_path_above() {
    // Keeps this file honest as the catalogue grows: a new RPC tool must be added above.
    let source = include_str!("tools.rs");
    for contract in REGISTRY {
        if let Some(event) = contract.event() {
            assert!(
                source.contains(&format!("\"{event}\"")),
                "no happy path for {event}"
            );
        }
    }
}
