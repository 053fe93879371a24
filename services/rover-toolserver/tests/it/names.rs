//! Names as staff say them, resolved by the tool server in the caller's school and campus: a name
//! that fits one row is used (and the audit row keeps the words beside the ids); one that fits
//! two, or none, does nothing and asks which; and nothing is ever suggested from outside what the
//! caller may see — another campus, another school, or a class the caller does not own.

use rover_contracts::wire::{ToolOutcome, ToolReply};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::{TestServer, data, error, spawn_toolserver};

const AMINA: &str = "amina@hill.school";
const DOS: &str = "dos@hill.school";
const ADMIN: &str = "admin@hill.school";
const OKELLO: &str = "okello@hill.school";
const KOLOLO_ADMIN: &str = "kololo.admin@hill.school";
const LAKESIDE_ADMIN: &str = "admin@lakeside.college";

/// The whole envelope as text, the question and its choices included: what a leak check reads.
fn text(reply: &ToolReply) -> String {
    serde_json::to_string(&reply.result).unwrap()
}

/// The choices of the question a failed call asks, or a panic.
fn choices(reply: &ToolReply) -> Vec<String> {
    reply
        .result
        .ask()
        .unwrap_or_else(|| panic!("expected a question, got {:?}", reply.result))
        .choices
        .clone()
}

/// A student as the resolver offers them: "Name (Class, admission number)".
async fn choice(server: &TestServer, student: &str) -> String {
    let (class, admission): (String, String) = sqlx::query_as(
        "SELECT k.name, s.admission_number FROM students s JOIN classes k ON k.id = s.class_id \
         WHERE s.id = $1",
    )
    .bind(server.db.ids.student(student).as_uuid())
    .fetch_one(&server.owner)
    .await
    .unwrap();
    format!("{student} ({class}, {admission})")
}

/// Today in Kampala Hill School's time zone.
async fn hill_today(server: &TestServer) -> chrono::NaiveDate {
    sqlx::query_scalar("SELECT (now() AT TIME ZONE time_zone)::date FROM schools WHERE id = $1")
        .bind(server.db.ids.hill.as_uuid())
        .fetch_one(&server.owner)
        .await
        .unwrap()
}

async fn absentees(server: &TestServer) -> Vec<Uuid> {
    sqlx::query_scalar("SELECT student_id FROM attendance WHERE NOT present ORDER BY student_id")
        .fetch_all(&server.owner)
        .await
        .unwrap()
}

/// The `named` column of the only audit row of `event`.
async fn audited_names(server: &TestServer, event: &str) -> Value {
    let rows: Vec<Option<Value>> =
        sqlx::query_scalar("SELECT named FROM audit_log WHERE event = $1")
            .bind(event)
            .fetch_all(&server.owner)
            .await
            .unwrap();
    assert_eq!(rows.len(), 1, "{event}: {rows:?}");
    rows.into_iter()
        .next()
        .unwrap()
        .expect("the words are kept")
}

#[tokio::test]
async fn attendance_by_names_marks_those_students_absent_and_audits_the_words() {
    let server = spawn_toolserver().await;
    let ids = &server.db.ids;
    let (nakato, mugisha) = (ids.student("Nakato Sarah"), ids.student("Mugisha Brian"));
    let reply = server
        .call(
            AMINA,
            "record.attendance",
            json!({ "class": "S1 Blue", "absent": ["Nakato", "mugisha"] }),
        )
        .await;
    assert_eq!(reply.outcome, ToolOutcome::Ok, "{reply:?}");
    let recorded = data(&reply);
    assert_eq!(recorded["class"]["name"], "S1 Blue");
    assert_eq!(recorded["present"], 3);
    let mut absent: Vec<&str> = recorded["absent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    absent.sort_unstable();
    assert_eq!(absent, ["Mugisha Brian", "Nakato Sarah"]);

    assert_eq!(server.count("attendance").await, 5);
    let mut expected = vec![nakato.as_uuid(), mugisha.as_uuid()];
    expected.sort_unstable();
    assert_eq!(absentees(&server).await, expected);

    let named = audited_names(&server, "record.attendance").await;
    assert_eq!(
        named["class"],
        json!({ "said": "S1 Blue", "id": ids.class("S1 Blue") })
    );
    assert_eq!(
        named["absent"],
        json!([
            { "said": "Nakato", "id": nakato },
            { "said": "mugisha", "id": mugisha },
        ])
    );
}

#[tokio::test]
async fn names_match_whatever_their_case_spacing_or_short_form() {
    let server = spawn_toolserver().await;
    let ids = &server.db.ids;

    // A class, whatever its case and spacing.
    for said in ["s1 blue", "  S1   BLUE "] {
        let reply = server
            .call(AMINA, "get.class_roster", json!({ "class": said }))
            .await;
        assert_eq!(reply.outcome, ToolOutcome::Ok, "{said:?}: {reply:?}");
        assert_eq!(data(&reply)["class"]["id"], json!(ids.class("S1 Blue")));
    }
    let reply = server
        .call(AMINA, "record.attendance", json!({ "class": "s1 blue" }))
        .await;
    assert_eq!(reply.outcome, ToolOutcome::Ok, "{reply:?}");
    assert_eq!(data(&reply)["class"]["name"], "S1 Blue");
    assert_eq!(data(&reply)["present"], 5);

    // "Maths" is Mathematics.
    let reply = server
        .call(
            AMINA,
            "record.marks",
            json!({ "class": "S1 Blue", "subject": "Maths", "assessment": "Quiz 1",
                    "marks": [{ "student": "Mugisha", "score": 64 }] }),
        )
        .await;
    assert_eq!(reply.outcome, ToolOutcome::Ok, "{reply:?}");
    assert_eq!(data(&reply)["subject"]["name"], "Mathematics");
    let written: Vec<(Uuid, Uuid)> = sqlx::query_as("SELECT student_id, subject_id FROM marks")
        .fetch_all(&server.owner)
        .await
        .unwrap();
    assert_eq!(
        written,
        [(
            ids.student("Mugisha Brian").as_uuid(),
            ids.subject("Mathematics").as_uuid()
        )]
    );
    let named = audited_names(&server, "record.marks").await;
    assert_eq!(
        named["subject"],
        json!({ "said": "Maths", "id": ids.subject("Mathematics") })
    );

    // "Okello" is James Okello.
    let reply = server
        .call(
            DOS,
            "assign.subject_teacher",
            json!({ "teacher": "Okello", "class": "S1 Blue", "subject": "Physics" }),
        )
        .await;
    assert_eq!(reply.outcome, ToolOutcome::Ok, "{reply:?}");
    assert_eq!(data(&reply)["teacher"]["name"], "James Okello");
    assert_eq!(data(&reply)["class"]["name"], "S1 Blue");
    let assigned: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM teaching_assignments WHERE teacher_id = $1 AND class_id = $2 \
         AND subject_id = $3",
    )
    .bind(ids.user(OKELLO).as_uuid())
    .bind(ids.class("S1 Blue").as_uuid())
    .bind(ids.subject("Physics").as_uuid())
    .fetch_one(&server.owner)
    .await
    .unwrap();
    assert_eq!(assigned, 1);
    let named = audited_names(&server, "assign.subject_teacher").await;
    assert_eq!(
        named["teacher"],
        json!({ "said": "Okello", "id": ids.user(OKELLO) })
    );
}

#[tokio::test]
async fn a_name_that_fits_two_students_asks_which_and_writes_nothing() {
    let server = spawn_toolserver().await;
    let ids = &server.db.ids;
    let marks = |class: Option<&str>, student: &str, assessment: &str| {
        let mut args = json!({ "subject": "Mathematics", "assessment": assessment,
                               "marks": [{ "student": student, "score": 70 }] });
        if let Some(class) = class {
            args["class"] = json!(class);
        }
        args
    };
    let before = server.state().await;

    // Amina teaches Mathematics to S1 Blue (Nakato Sarah) and S2 Green (Nakato Mary).
    let reply = server
        .call(
            AMINA,
            "record.marks",
            marks(None, "Nakato", "Mid-term test"),
        )
        .await;
    assert_eq!(reply.outcome, ToolOutcome::Ambiguous, "{reply:?}");
    assert_eq!(reply.outcome.as_str(), "ambiguous");
    let (mary, sarah) = (
        choice(&server, "Nakato Mary").await,
        choice(&server, "Nakato Sarah").await,
    );
    assert_eq!(sarah, "Nakato Sarah (S1 Blue, KHS/0001)");
    assert_eq!(choices(&reply), [mary.clone(), sarah.clone()]);
    let question = &reply.result.ask().unwrap().question;
    assert!(question.contains("\"Nakato\""), "{question}");
    assert!(
        error(&reply).contains("Nothing was changed"),
        "{}",
        error(&reply)
    );
    assert_eq!(server.state().await, before, "nothing is written");
    assert_eq!(server.count("marks").await, 0);
    assert_eq!(server.count("audit_log").await, 0);

    // Naming the class settles it.
    let reply = server
        .call(
            AMINA,
            "record.marks",
            marks(Some("S1 Blue"), "Nakato", "Mid-term test"),
        )
        .await;
    assert_eq!(reply.outcome, ToolOutcome::Ok, "{reply:?}");
    assert_eq!(data(&reply)["class"]["name"], "S1 Blue");
    let written: Vec<Uuid> =
        sqlx::query_scalar("SELECT student_id FROM marks WHERE assessment = 'Mid-term test'")
            .fetch_all(&server.owner)
            .await
            .unwrap();
    assert_eq!(written, [ids.student("Nakato Sarah").as_uuid()]);

    // So does a choice said back verbatim, with no class: each picks its own student and class.
    for (said, student, class) in [
        (&mary, "Nakato Mary", "S2 Green"),
        (&sarah, "Nakato Sarah", "S1 Blue"),
    ] {
        let reply = server
            .call(AMINA, "record.marks", marks(None, said, "Quiz 2"))
            .await;
        assert_eq!(reply.outcome, ToolOutcome::Ok, "{said}: {reply:?}");
        assert_eq!(data(&reply)["class"]["name"], class, "{said}");
        let written: Vec<Uuid> = sqlx::query_scalar(
            "SELECT student_id FROM marks WHERE assessment = 'Quiz 2' AND student_id = $1",
        )
        .bind(ids.student(student).as_uuid())
        .fetch_all(&server.owner)
        .await
        .unwrap();
        assert_eq!(written.len(), 1, "{said}");
    }
    assert_eq!(server.count("marks").await, 3);
}

#[tokio::test]
async fn a_verb_taken_for_a_name_finds_nobody_and_asks_about_the_near_one() {
    let server = spawn_toolserver().await;
    let before = server.state().await;
    // "Mark Mugisha absent in S1 Blue": "Mark" is the verb, not a name.
    let reply = server
        .call(
            AMINA,
            "record.attendance",
            json!({ "class": "S1 Blue", "absent": ["Mark Mugisha"] }),
        )
        .await;
    assert_eq!(reply.outcome, ToolOutcome::NotFound, "{reply:?}");
    assert_eq!(choices(&reply), [choice(&server, "Mugisha Brian").await]);
    assert_eq!(server.state().await, before, "nothing is written");
}

#[tokio::test]
async fn a_misspelt_name_is_suggested_never_taken_and_a_far_one_asks_nothing() {
    let server = spawn_toolserver().await;
    let before = server.state().await;
    let reply = server
        .call(
            AMINA,
            "record.attendance",
            json!({ "class": "S1 Blue", "absent": ["Nakatto"] }),
        )
        .await;
    assert_eq!(reply.outcome, ToolOutcome::NotFound, "{reply:?}");
    let nakato = choice(&server, "Nakato Sarah").await;
    assert_eq!(choices(&reply), std::slice::from_ref(&nakato));
    assert!(error(&reply).contains(&nakato), "{}", error(&reply));

    // Wasswa Henry is in S2 Red: nothing near in S1 Blue, so nothing to ask.
    let reply = server
        .call(
            AMINA,
            "record.attendance",
            json!({ "class": "S1 Blue", "absent": ["Wasswa"] }),
        )
        .await;
    assert_eq!(reply.outcome, ToolOutcome::NotFound, "{reply:?}");
    assert!(reply.result.ask().is_none(), "{:?}", reply.result);
    assert_eq!(
        error(&reply),
        "No student called \"Wasswa\" was found in S1 Blue. Nothing was changed."
    );
    assert_eq!(server.state().await, before, "nothing is written");
}

#[tokio::test]
async fn attendance_for_a_day_outside_the_current_term_is_refused() {
    let server = spawn_toolserver().await;
    let before = server.state().await;
    let reply = server
        .call(
            AMINA,
            "record.attendance",
            json!({ "class": "S1 Blue", "absent": ["Nakato"], "date": "2023-04-15" }),
        )
        .await;
    assert_eq!(reply.outcome, ToolOutcome::Invalid, "{reply:?}");
    assert!(error(&reply).contains("2023-04-15"), "{}", error(&reply));
    assert_eq!(server.state().await, before, "nothing is written");

    // Without the date: today.
    let reply = server
        .call(
            AMINA,
            "record.attendance",
            json!({ "class": "S1 Blue", "absent": ["Nakato"] }),
        )
        .await;
    assert_eq!(reply.outcome, ToolOutcome::Ok, "{reply:?}");
    let today = hill_today(&server).await;
    assert_eq!(data(&reply)["date"], json!(today));
    let days: Vec<chrono::NaiveDate> =
        sqlx::query_scalar("SELECT DISTINCT on_date FROM attendance")
            .fetch_all(&server.owner)
            .await
            .unwrap();
    assert_eq!(days, [today]);
    assert_eq!(
        absentees(&server).await,
        [server.db.ids.student("Nakato Sarah").as_uuid()]
    );
}

#[tokio::test]
async fn a_campus_admin_naming_another_campus_class_learns_nothing_of_it() {
    let server = spawn_toolserver().await;
    let reply = server
        .call(
            KOLOLO_ADMIN,
            "find.students",
            json!({ "query": "a", "class": "S1 Blue" }),
        )
        .await;
    assert_eq!(reply.outcome, ToolOutcome::NotFound, "{reply:?}");
    let text = text(&reply);
    for leak in [
        "Naalya", "S2 Green", "Nakato", "Mugisha", "Achieng", "Kizza",
    ] {
        assert!(!text.contains(leak), "leaked {leak}: {text}");
    }
    // Whatever it suggests is of Kololo.
    for choice in reply
        .result
        .ask()
        .map(|a| a.choices.clone())
        .unwrap_or_default()
    {
        assert!(choice.ends_with("(Kololo)"), "{choice}");
    }
}

#[tokio::test]
async fn another_schools_admin_naming_a_hill_class_or_teacher_learns_nothing_of_hill() {
    let server = spawn_toolserver().await;
    let before = server.state().await;
    for (event, args) in [
        ("find.students", json!({ "query": "a", "class": "S1 Blue" })),
        ("list.teaching_assignments", json!({ "teacher": "Okello" })),
        ("get.results_summary", json!({ "subject": "Physics" })),
    ] {
        let reply = server.call(LAKESIDE_ADMIN, event, args).await;
        assert_eq!(reply.outcome, ToolOutcome::NotFound, "{event}: {reply:?}");
        let text = text(&reply);
        for leak in [
            "Hill",
            "Naalya",
            "Kololo",
            "S1 Gold",
            "S2 Red",
            "S2 Green",
            "Nakato",
            "James",
            "Mathematics",
        ] {
            assert!(!text.contains(leak), "{event} leaked {leak}: {text}");
        }
    }
    assert_eq!(server.state().await, before);
}

#[tokio::test]
async fn a_class_the_caller_does_not_own_is_refused_before_any_student_is_looked_for() {
    let server = spawn_toolserver().await;
    let before = server.state().await;
    // "Nakat" fits Nakato Sarah, "Nakatto" is a misspelling of her name: looked for in S1 Blue,
    // they would be resolved or suggested. Neither is: the class is not the caller's.
    let args = json!({ "class": "S1 Blue", "absent": ["Nakat", "Nakatto"] });
    let students = [
        "Nakato", "Sarah", "Mugisha", "Achieng", "Ssekandi", "Namuli", "KHS/",
    ];

    // The school admin sees S1 Blue (school mode) but is not its class teacher.
    let reply = server.call(ADMIN, "record.attendance", args.clone()).await;
    assert_eq!(reply.outcome, ToolOutcome::Denied, "{reply:?}");
    assert_eq!(
        error(&reply),
        "Permission denied: you are not the class teacher of S1 Blue."
    );
    assert!(reply.result.ask().is_none(), "{:?}", reply.result);

    // Okello is not S1 Blue's class teacher either; in Kololo's campus mode the Naalya class is
    // not even his to see.
    let refused = server.call(OKELLO, "record.attendance", args).await;
    assert!(
        matches!(refused.outcome, ToolOutcome::Denied | ToolOutcome::NotFound),
        "{refused:?}"
    );
    for reply in [&reply, &refused] {
        let text = text(reply);
        for leak in students {
            assert!(!text.contains(leak), "leaked {leak}: {text}");
        }
    }
    assert_eq!(server.state().await, before, "nothing is written");
}
