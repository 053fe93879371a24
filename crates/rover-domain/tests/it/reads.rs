//! The supervisor's reads in school mode: classes, students, enrolment, staff.

use rover_contracts::context::UserType;
use rover_contracts::tools::{FindStudentsArgs, ListStaffArgs, NoArgs};
use rover_domain::testing::TestDb;
use rover_domain::{enrollment_summary, find_students, list_classes, list_staff};

use crate::helpers::{as_user, hill};

#[tokio::test]
async fn list_classes_shows_campus_class_teacher_and_size() {
    let db = TestDb::new().await;
    let (mut tx, me) = as_user(&db, "admin@hill.school").await;
    let classes = list_classes(&mut tx, &me, &hill(&db), &NoArgs {})
        .await
        .unwrap();
    let summary: Vec<_> = classes
        .iter()
        .map(|c| {
            (
                c.campus.name.as_str(),
                c.class.name.as_str(),
                c.class_teacher.as_ref().map(|t| t.id),
                c.student_count,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("Kololo", "S1 Gold", None, 4),
            ("Kololo", "S2 Red", None, 3),
            (
                "Naalya",
                "S1 Blue",
                Some(db.ids.user("amina@hill.school")),
                5
            ),
            ("Naalya", "S2 Green", None, 3),
        ]
    );
}

#[tokio::test]
async fn find_students_finds_nakato_by_any_word_order_but_not_by_wildcards() {
    let db = TestDb::new().await;
    let (mut tx, me) = as_user(&db, "bursar@hill.school").await;
    let find = |query: &str, class| FindStudentsArgs {
        query: query.into(),
        class_id: class,
    };
    for query in ["Nakato", "sarah NAKATO", "KHS/0001"] {
        let found = find_students(&mut tx, &me, &hill(&db), &find(query, None))
            .await
            .unwrap();
        assert_eq!(found.len(), 1, "{query}");
        let nakato = &found[0];
        assert_eq!(nakato.student.id, db.ids.student("Nakato Sarah"));
        assert_eq!(nakato.student.name, "Nakato Sarah");
        assert_eq!(nakato.class.name, "S1 Blue");
        assert_eq!(nakato.campus.name, "Naalya");
        assert_eq!(nakato.admission_number, "KHS/0001");
    }
    for query in ["%", "_", "Nakato Brian"] {
        let found = find_students(&mut tx, &me, &hill(&db), &find(query, None))
            .await
            .unwrap();
        assert!(found.is_empty(), "{query} matched {found:?}");
    }
    let in_s2_red = find_students(
        &mut tx,
        &me,
        &hill(&db),
        &find("a", Some(db.ids.class("S2 Red"))),
    )
    .await
    .unwrap();
    assert_eq!(in_s2_red.len(), 3);
    assert!(in_s2_red.iter().all(|s| s.class.name == "S2 Red"));
}

#[tokio::test]
async fn enrollment_summary_counts_per_campus_and_class() {
    let db = TestDb::new().await;
    let (mut tx, me) = as_user(&db, "admin@hill.school").await;
    let summary = enrollment_summary(&mut tx, &me, &hill(&db), &NoArgs {})
        .await
        .unwrap();
    assert_eq!(summary.total, 15);
    let by_campus: Vec<_> = summary
        .by_campus
        .iter()
        .map(|c| (c.name.as_str(), c.students))
        .collect();
    assert_eq!(by_campus, [("Kololo", 7), ("Naalya", 8)]);
    let by_class: Vec<_> = summary
        .by_class
        .iter()
        .map(|c| (c.name.as_str(), c.students))
        .collect();
    assert_eq!(
        by_class,
        [
            ("S1 Gold", 4),
            ("S2 Red", 3),
            ("S1 Blue", 5),
            ("S2 Green", 3)
        ]
    );
}

#[tokio::test]
async fn list_staff_shows_roles_campus_and_filters_by_name_or_email() {
    let db = TestDb::new().await;
    let (mut tx, me) = as_user(&db, "admin@hill.school").await;
    let staff = list_staff(&mut tx, &me, &hill(&db), &ListStaffArgs::default())
        .await
        .unwrap();
    assert_eq!(staff.len(), 6);
    let amina = staff
        .iter()
        .find(|s| s.email == "amina@hill.school")
        .unwrap();
    assert_eq!(amina.staff.id, db.ids.user("amina@hill.school"));
    assert_eq!(amina.roles, ["teacher"]);
    assert_eq!(amina.user_type, UserType::Teacher);
    assert_eq!(amina.campus, Some(db.ids.campus_ref("Naalya")));
    let bursar = staff.iter().find(|s| s.roles == ["bursar"]).unwrap();
    assert!(bursar.campus.is_none());

    let query = ListStaffArgs {
        query: Some("OKELLO".into()),
    };
    let okello = list_staff(&mut tx, &me, &hill(&db), &query).await.unwrap();
    assert_eq!(okello.len(), 1);
    assert_eq!(okello[0].email, "okello@hill.school");
}
