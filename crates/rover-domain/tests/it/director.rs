//! The director of studies: teaching assignments and results.

use rover_contracts::named::Named;
use rover_contracts::tools::{
    AssignSubjectTeacherArgs, GetResultsSummaryArgs, ListTeachingAssignmentsArgs, MarkEntry,
    RecordMarksArgs,
};
use rover_domain::testing::TestDb;
use rover_domain::{
    DomainError, assign_subject_teacher, list_teaching_assignments, record_marks, results_summary,
};

use crate::helpers::{as_user, hill};

fn physics_in_s1_blue(db: &TestDb, teacher: &str) -> AssignSubjectTeacherArgs {
    AssignSubjectTeacherArgs {
        teacher: Named::id(db.ids.user(teacher)),
        class: Named::id(db.ids.class("S1 Blue")),
        subject: Named::id(db.ids.subject("Physics")),
    }
}

#[tokio::test]
async fn the_dos_assigns_okello_to_physics_in_s1_blue_and_he_may_then_record_marks() {
    let db = TestDb::new().await;
    let (mut tx, dos) = as_user(&db, "dos@hill.school").await;
    let written = assign_subject_teacher(
        &mut tx,
        &dos,
        &hill(&db),
        &physics_in_s1_blue(&db, "okello@hill.school"),
    )
    .await
    .unwrap();
    let assignment = written.output;
    assert_eq!(assignment.teacher.name, "James Okello");
    assert_eq!(assignment.class.name, "S1 Blue");
    assert_eq!(assignment.subject.name, "Physics");
    assert_eq!(assignment.academic_year, db.ids.year);
    assert_eq!(written.change.before, None);

    // Assigning again changes nothing and says so.
    let again = assign_subject_teacher(
        &mut tx,
        &dos,
        &hill(&db),
        &physics_in_s1_blue(&db, "okello@hill.school"),
    )
    .await
    .unwrap();
    assert_eq!(again.output, assignment);
    assert_eq!(again.change.before.as_ref(), Some(&again.change.after));

    let s1_blue = ListTeachingAssignmentsArgs {
        class: Some(Named::id(db.ids.class("S1 Blue"))),
        teacher: None,
    };
    let listed: Vec<_> = list_teaching_assignments(&mut tx, &dos, &hill(&db), &s1_blue)
        .await
        .unwrap()
        .into_iter()
        .map(|a| (a.subject.name, a.teacher.name))
        .collect();
    assert_eq!(
        listed,
        [
            ("Mathematics".to_owned(), "Amina Nakimuli".to_owned()),
            ("Physics".to_owned(), "James Okello".to_owned()),
        ]
    );
    tx.commit().await.unwrap();

    // The relationship now holds: okello may record Physics marks for S1 Blue.
    let (mut tx, okello) = as_user(&db, "okello@hill.school").await;
    let args = RecordMarksArgs {
        class: Some(Named::id(db.ids.class("S1 Blue"))),
        subject: Some(Named::id(db.ids.subject("Physics"))),
        assessment: "Quiz 1".into(),
        term: None,
        marks: vec![MarkEntry {
            student: Named::id(db.ids.student("Mugisha Brian")),
            score: 70.0,
        }],
    };
    record_marks(&mut tx, &okello, &hill(&db), &args)
        .await
        .unwrap();
}

#[tokio::test]
async fn only_teachers_can_be_assigned_and_the_teacher_filter_works() {
    let db = TestDb::new().await;
    let (mut tx, dos) = as_user(&db, "dos@hill.school").await;
    let error = assign_subject_teacher(
        &mut tx,
        &dos,
        &hill(&db),
        &physics_in_s1_blue(&db, "bursar@hill.school"),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, DomainError::Invalid(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "David Kato is not a teacher, so cannot be assigned a subject."
    );

    let okello = ListTeachingAssignmentsArgs {
        class: None,
        teacher: Some(Named::id(db.ids.user("okello@hill.school"))),
    };
    let his = list_teaching_assignments(&mut tx, &dos, &hill(&db), &okello)
        .await
        .unwrap();
    assert_eq!(his.len(), 1);
    assert_eq!(his[0].class.name, "S2 Red");
}

#[tokio::test]
async fn results_summary_averages_a_terms_marks_per_class_and_subject() {
    let db = TestDb::new().await;
    let (mut tx, amina) = as_user(&db, "amina@hill.school").await;
    let args = RecordMarksArgs {
        class: Some(Named::id(db.ids.class("S1 Blue"))),
        subject: Some(Named::id(db.ids.subject("Mathematics"))),
        assessment: "Mid-term test".into(),
        term: None,
        marks: vec![
            MarkEntry {
                student: Named::id(db.ids.student("Nakato Sarah")),
                score: 80.0,
            },
            MarkEntry {
                student: Named::id(db.ids.student("Mugisha Brian")),
                score: 65.5,
            },
        ],
    };
    let recorded = record_marks(&mut tx, &amina, &hill(&db), &args)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let (mut tx, dos) = as_user(&db, "dos@hill.school").await;
    let summary = results_summary(&mut tx, &dos, &hill(&db), &GetResultsSummaryArgs::default())
        .await
        .unwrap();
    assert_eq!(summary.term, recorded.output.term);
    assert_eq!(summary.rows.len(), 1);
    let row = &summary.rows[0];
    assert_eq!(
        (row.class.name.as_str(), row.subject.name.as_str()),
        ("S1 Blue", "Mathematics")
    );
    assert_eq!(row.marks, 2);
    assert_eq!(row.average, 72.75);

    let physics = GetResultsSummaryArgs {
        subject: Some(Named::id(db.ids.subject("Physics"))),
        ..GetResultsSummaryArgs::default()
    };
    let none = results_summary(&mut tx, &dos, &hill(&db), &physics)
        .await
        .unwrap();
    assert!(none.rows.is_empty());
    // Another term of the year has no marks.
    let other_term = if summary.term == "Term 1" {
        "Term 2"
    } else {
        "Term 1"
    };
    let other = GetResultsSummaryArgs {
        term: Some(Named::id(db.ids.term(db.ids.hill, other_term))),
        ..GetResultsSummaryArgs::default()
    };
    let other = results_summary(&mut tx, &dos, &hill(&db), &other)
        .await
        .unwrap();
    assert_eq!(other.term, other_term);
    assert!(other.rows.is_empty());
}
