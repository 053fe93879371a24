//! The relationship posture: class teachers own their class's roster and attendance; subject
//! teachers own the marks of what they teach.

use chrono::Days;
use rover_contracts::named::Named;
use rover_contracts::tools::{
    GetClassMarksArgs, GetClassRosterArgs, MarkEntry, NoArgs, RecordAttendanceArgs, RecordMarksArgs,
};
use rover_domain::testing::TestDb;
use rover_domain::{
    DomainError, calendar, class_marks, class_roster, list_my_classes, record_attendance,
    record_marks,
};

use crate::helpers::{as_user, hill, today};

fn absent(db: &TestDb, class: &str, names: &[&str]) -> RecordAttendanceArgs {
    RecordAttendanceArgs {
        class: Some(Named::id(db.ids.class(class))),
        date: None,
        absent: names.iter().map(|n| Named::id(db.ids.student(n))).collect(),
        present: Vec::new(),
    }
}

fn absentees(
    written: &rover_domain::Written<rover_contracts::tools::AttendanceRecorded>,
) -> Vec<&str> {
    written
        .output
        .absent
        .iter()
        .map(|s| s.name.as_str())
        .collect()
}

fn marks(db: &TestDb, subject: &str, scores: &[(&str, f64)]) -> RecordMarksArgs {
    RecordMarksArgs {
        class: Some(Named::id(db.ids.class("S1 Blue"))),
        subject: Some(Named::id(db.ids.subject(subject))),
        assessment: "Mid-term test".into(),
        term: None,
        marks: scores
            .iter()
            .map(|(name, score)| MarkEntry {
                student: Named::id(db.ids.student(name)),
                score: *score,
            })
            .collect(),
    }
}

#[tokio::test]
async fn amina_sees_her_roster_and_records_attendance_with_nakato_absent() {
    let db = TestDb::new().await;
    let (mut tx, amina) = as_user(&db, "amina@hill.school").await;
    let roster = GetClassRosterArgs {
        class: Some(Named::id(db.ids.class("S1 Blue"))),
    };
    let roster = class_roster(&mut tx, &amina, &hill(&db), &roster)
        .await
        .unwrap();
    assert_eq!(roster.class.name, "S1 Blue");
    assert_eq!(roster.students.len(), 5);

    let written = record_attendance(
        &mut tx,
        &amina,
        &hill(&db),
        &absent(&db, "S1 Blue", &["Nakato Sarah"]),
    )
    .await
    .unwrap();
    let today = today(&db).await;
    assert_eq!(written.output.date, today);
    assert_eq!(written.output.present, 4);
    let absentees: Vec<_> = written
        .output
        .absent
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(absentees, ["Nakato Sarah"]);
    assert_eq!(written.change.before, None);
    assert_eq!(
        written.change.subject_id,
        db.ids.class("S1 Blue").to_string()
    );

    let rows: Vec<(uuid::Uuid, bool)> =
        sqlx::query_as("SELECT student_id, present FROM attendance WHERE on_date = $1")
            .bind(today)
            .fetch_all(tx.connection())
            .await
            .unwrap();
    assert_eq!(rows.len(), 5);
    assert!(
        rows.iter()
            .all(|(id, present)| *present != (*id == db.ids.student("Nakato Sarah").as_uuid()))
    );

    // Recording the day again naming no one marks everyone present, and the change says what it was.
    let again = record_attendance(&mut tx, &amina, &hill(&db), &absent(&db, "S1 Blue", &[]))
        .await
        .unwrap();
    assert_eq!(again.output.present, 5);
    let before = again.change.before.unwrap();
    assert_eq!(
        before["absentStudentIds"][0],
        db.ids.student("Nakato Sarah").to_string()
    );
    let absent_now: i64 = sqlx::query_scalar("SELECT count(*) FROM attendance WHERE NOT present")
        .fetch_one(tx.connection())
        .await
        .unwrap();
    assert_eq!(absent_now, 0);
}

/// A day already recorded is corrected, not replaced: "Mugisha was away too" is `absent:
/// ["Mugisha"]`, and Nakato stays absent.
#[tokio::test]
async fn a_day_recorded_again_is_corrected_by_naming_only_the_change() {
    let db = TestDb::new().await;
    let (mut tx, amina) = as_user(&db, "amina@hill.school").await;
    let first = absent(&db, "S1 Blue", &["Nakato Sarah"]);
    record_attendance(&mut tx, &amina, &hill(&db), &first)
        .await
        .unwrap();

    let too = RecordAttendanceArgs {
        class: Some(Named::name("S1 Blue")),
        absent: vec![Named::name("Mugisha")],
        ..absent(&db, "S1 Blue", &[])
    };
    let too = record_attendance(&mut tx, &amina, &hill(&db), &too)
        .await
        .unwrap();
    assert_eq!(absentees(&too), ["Mugisha Brian", "Nakato Sarah"]);
    assert_eq!(too.output.present, 3);
    assert_eq!(
        too.change.before.unwrap()["absentStudentIds"],
        serde_json::json!([db.ids.student("Nakato Sarah").to_string()])
    );
    assert_eq!(
        too.change.after["absentStudentIds"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // Nakato came after all: she alone is taken off the day's absentees.
    let came = RecordAttendanceArgs {
        present: vec![Named::name("Nakato")],
        ..absent(&db, "S1 Blue", &[])
    };
    let came = record_attendance(&mut tx, &amina, &hill(&db), &came)
        .await
        .unwrap();
    assert_eq!(absentees(&came), ["Mugisha Brian"]);

    // Named both ways: refused, and the day is as it was.
    let both = RecordAttendanceArgs {
        present: vec![Named::name("Achieng")],
        ..absent(&db, "S1 Blue", &["Achieng Grace"])
    };
    let error = record_attendance(&mut tx, &amina, &hill(&db), &both)
        .await
        .unwrap_err();
    assert!(matches!(error, DomainError::Invalid(_)), "{error:?}");
    let away: Vec<uuid::Uuid> =
        sqlx::query_scalar("SELECT student_id FROM attendance WHERE NOT present")
            .fetch_all(tx.connection())
            .await
            .unwrap();
    assert_eq!(away, [db.ids.student("Mugisha Brian").as_uuid()]);

    // Naming no one marks the whole class present, as on a first recording.
    let everyone = record_attendance(&mut tx, &amina, &hill(&db), &absent(&db, "S1 Blue", &[]))
        .await
        .unwrap();
    assert!(absentees(&everyone).is_empty());
    assert_eq!(everyone.output.present, 5);
}

#[tokio::test]
async fn okello_cannot_take_the_roster_or_attendance_of_s1_blue() {
    let db = TestDb::new().await;
    let (mut tx, okello) = as_user(&db, "okello@hill.school").await;
    let error = record_attendance(
        &mut tx,
        &okello,
        &hill(&db),
        &absent(&db, "S1 Blue", &["Nakato Sarah"]),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, DomainError::Denied(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "Permission denied: you are not the class teacher of S1 Blue."
    );
    let roster = GetClassRosterArgs {
        class: Some(Named::id(db.ids.class("S1 Blue"))),
    };
    let error = class_roster(&mut tx, &okello, &hill(&db), &roster)
        .await
        .unwrap_err();
    assert!(matches!(error, DomainError::Denied(_)), "{error:?}");
    // Not even the school admin is a class teacher.
    let admin = db.ids.actor("admin@hill.school");
    let error = class_roster(&mut tx, &admin, &hill(&db), &roster)
        .await
        .unwrap_err();
    assert!(matches!(error, DomainError::Denied(_)), "{error:?}");
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM attendance")
        .fetch_one(tx.connection())
        .await
        .unwrap();
    assert_eq!(rows, 0);
}

#[tokio::test]
async fn attendance_refuses_students_of_other_classes_and_future_days() {
    let db = TestDb::new().await;
    let (mut tx, amina) = as_user(&db, "amina@hill.school").await;
    for stranger in [
        absent(&db, "S1 Blue", &["Kizza Ivan"]),
        RecordAttendanceArgs {
            absent: vec![Named::id(db.ids.student("Ochieng Paul"))],
            ..absent(&db, "S1 Blue", &[])
        },
    ] {
        let error = record_attendance(&mut tx, &amina, &hill(&db), &stranger)
            .await
            .unwrap_err();
        assert!(matches!(error, DomainError::Invalid(_)), "{error:?}");
        assert!(error.to_string().ends_with("is not in S1 Blue."));
    }
    let tomorrow = today(&db).await.checked_add_days(Days::new(1)).unwrap();
    let future = RecordAttendanceArgs {
        date: Some(tomorrow),
        ..absent(&db, "S1 Blue", &[])
    };
    let error = record_attendance(&mut tx, &amina, &hill(&db), &future)
        .await
        .unwrap_err();
    assert!(matches!(error, DomainError::Invalid(_)), "{error:?}");
}

#[tokio::test]
async fn amina_records_and_reads_mathematics_marks_for_s1_blue() {
    let db = TestDb::new().await;
    let (mut tx, amina) = as_user(&db, "amina@hill.school").await;
    let today = today(&db).await;
    let calendar = calendar(&mut tx).await.unwrap();
    let current_term = calendar.term_on(today).unwrap().name.clone();

    let args = marks(
        &db,
        "Mathematics",
        &[("Nakato Sarah", 78.5), ("Mugisha Brian", 64.0)],
    );
    let written = record_marks(&mut tx, &amina, &hill(&db), &args)
        .await
        .unwrap();
    assert_eq!(written.output.recorded, 2);
    assert_eq!(written.output.term, current_term);
    assert_eq!(written.output.subject.name, "Mathematics");
    assert_eq!(written.output.assessment, "Mid-term test");
    assert_eq!(written.change.before, None);

    // A later score for the same assessment replaces the earlier one.
    let again = record_marks(
        &mut tx,
        &amina,
        &hill(&db),
        &marks(&db, "Mathematics", &[("Nakato Sarah", 81.0)]),
    )
    .await
    .unwrap();
    let nakato = db.ids.student("Nakato Sarah").to_string();
    assert_eq!(again.change.before.unwrap()["scores"][&nakato], 78.5);
    assert_eq!(again.change.after["scores"][&nakato], 81.0);

    let read = GetClassMarksArgs {
        class: Named::id(db.ids.class("S1 Blue")),
        subject: Named::id(db.ids.subject("Mathematics")),
        term: None,
    };
    let marks = class_marks(&mut tx, &amina, &hill(&db), &read)
        .await
        .unwrap();
    assert_eq!(marks.term, current_term);
    let rows: Vec<_> = marks
        .marks
        .iter()
        .map(|m| (m.student.name.as_str(), m.score))
        .collect();
    assert_eq!(rows, [("Mugisha Brian", 64.0), ("Nakato Sarah", 81.0)]);
}

#[tokio::test]
async fn amina_cannot_record_or_read_physics_marks() {
    let db = TestDb::new().await;
    let (mut tx, amina) = as_user(&db, "amina@hill.school").await;
    let error = record_marks(
        &mut tx,
        &amina,
        &hill(&db),
        &marks(&db, "Physics", &[("Nakato Sarah", 50.0)]),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, DomainError::Denied(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "Permission denied: you do not teach Physics to S1 Blue this academic year."
    );
    let read = GetClassMarksArgs {
        class: Named::id(db.ids.class("S1 Blue")),
        subject: Named::id(db.ids.subject("Physics")),
        term: None,
    };
    let error = class_marks(&mut tx, &amina, &hill(&db), &read)
        .await
        .unwrap_err();
    assert!(matches!(error, DomainError::Denied(_)), "{error:?}");
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM marks")
        .fetch_one(tx.connection())
        .await
        .unwrap();
    assert_eq!(rows, 0);
}

#[tokio::test]
async fn marks_must_be_scores_of_students_in_the_class_once_each() {
    let db = TestDb::new().await;
    let (mut tx, amina) = as_user(&db, "amina@hill.school").await;
    for bad in [
        marks(&db, "Mathematics", &[("Nakato Sarah", 101.0)]),
        marks(&db, "Mathematics", &[("Nakato Sarah", -1.0)]),
        marks(&db, "Mathematics", &[("Nakato Sarah", f64::NAN)]),
        marks(&db, "Mathematics", &[("Kizza Ivan", 50.0)]),
        marks(
            &db,
            "Mathematics",
            &[("Nakato Sarah", 50.0), ("Nakato Sarah", 60.0)],
        ),
        marks(&db, "Mathematics", &[]),
        RecordMarksArgs {
            assessment: " ".into(),
            ..marks(&db, "Mathematics", &[("Nakato Sarah", 50.0)])
        },
    ] {
        let error = record_marks(&mut tx, &amina, &hill(&db), &bad)
            .await
            .unwrap_err();
        assert!(
            matches!(error, DomainError::Invalid(_)),
            "{bad:?}: {error:?}"
        );
    }
}

#[tokio::test]
async fn list_my_classes_lists_only_the_actors_own() {
    let db = TestDb::new().await;
    let (mut tx, amina) = as_user(&db, "amina@hill.school").await;
    let mine = list_my_classes(&mut tx, &amina, &hill(&db), &NoArgs {})
        .await
        .unwrap();
    // Amina teaches Mathematics to S1 Blue (her own class) and, in the demo data, to S2 Green.
    assert_eq!(mine.len(), 2);
    assert_eq!(mine[0].class.name, "S1 Blue");
    assert!(mine[0].is_class_teacher);
    let subjects: Vec<_> = mine[0].subjects.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(subjects, ["Mathematics"]);
    assert_eq!(mine[1].class.name, "S2 Green");
    assert!(!mine[1].is_class_teacher);
    let subjects: Vec<_> = mine[1].subjects.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(subjects, ["Mathematics"]);

    let okello = db.ids.actor("okello@hill.school");
    let his = list_my_classes(&mut tx, &okello, &hill(&db), &NoArgs {})
        .await
        .unwrap();
    assert_eq!(his.len(), 1);
    assert_eq!(his[0].class.name, "S2 Red");
    assert!(!his[0].is_class_teacher);

    let bursar = db.ids.actor("bursar@hill.school");
    assert!(
        list_my_classes(&mut tx, &bursar, &hill(&db), &NoArgs {})
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_teacher_of_one_subject_may_leave_the_subject_out_and_a_name_picks_the_class() {
    let db = TestDb::new().await;
    let (mut tx, amina) = as_user(&db, "amina@hill.school").await;
    // Amina teaches only Mathematics (to S1 Blue and S2 Green): no subject, no class, and a
    // student said with the class that tells them apart.
    let args = RecordMarksArgs {
        class: None,
        subject: None,
        assessment: "Maths quiz".into(),
        term: None,
        marks: vec![MarkEntry {
            student: Named::name("Nakato (S1 Blue)"),
            score: 75.0,
        }],
    };
    let written = record_marks(&mut tx, &amina, &hill(&db), &args)
        .await
        .unwrap();
    assert_eq!(written.output.subject.name, "Mathematics");
    assert_eq!(written.output.class.name, "S1 Blue");
    assert_eq!(
        written.change.named.as_ref().unwrap()["subject"]["said"],
        ""
    );
    // Okello teaches only Physics, to S2 Red: "Nakato" is no student of his.
    let (mut tx, okello) = as_user(&db, "okello@hill.school").await;
    let error = record_marks(&mut tx, &okello, &hill(&db), &args)
        .await
        .unwrap_err();
    assert!(matches!(error, DomainError::Unresolved(_)), "{error}");
    assert!(!error.to_string().contains("Sarah"), "{error}");
}
