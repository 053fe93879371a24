//! The supervisor's reads in school mode: classes, students, enrolment, staff.

use rover_contracts::context::UserType;
use rover_contracts::named::Named;
use rover_contracts::tools::{
    FindStudentsArgs, GetClassMarks, GetClassMarksArgs, ListClasses, ListStaff, ListStaffArgs,
    MAX_LIST_ROWS, NoArgs, Tool,
};
use rover_domain::testing::TestDb;
use rover_domain::{
    calendar, class_marks, enrollment_summary, find_students, list_classes, list_staff,
};

use crate::helpers::{as_user, hill, today};

#[tokio::test]
async fn list_classes_shows_campus_class_teacher_and_size() {
    let db = TestDb::new().await;
    let (mut tx, me) = as_user(&db, "admin@hill.school").await;
    let classes = list_classes(&mut tx, &me, &hill(&db), &NoArgs {})
        .await
        .unwrap();
    assert_eq!((classes.total, classes.truncated), (4, false));
    let summary: Vec<_> = classes
        .classes
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
            ("Naalya", "S2 Green", None, 4),
        ]
    );
}

#[tokio::test]
async fn find_students_finds_nakato_by_any_word_order_but_not_by_wildcards() {
    let db = TestDb::new().await;
    let (mut tx, me) = as_user(&db, "bursar@hill.school").await;
    let find = |query: &str, class| FindStudentsArgs {
        query: query.into(),
        class,
    };
    // "Nakato" alone also finds Nakato Mary (S2 Green) in the demo data.
    let both: Vec<_> = find_students(&mut tx, &me, &hill(&db), &find("Nakato", None))
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.student.name, s.class.name, s.admission_number))
        .collect();
    assert_eq!(
        both,
        [
            (
                "Nakato Mary".to_owned(),
                "S2 Green".to_owned(),
                "KHS/0016".to_owned()
            ),
            (
                "Nakato Sarah".to_owned(),
                "S1 Blue".to_owned(),
                "KHS/0001".to_owned()
            ),
        ]
    );
    for query in ["Nakato Sarah", "sarah NAKATO", "KHS/0001"] {
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
        &find("a", Some(Named::id(db.ids.class("S2 Red")))),
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
    assert_eq!(summary.total, 16);
    let by_campus: Vec<_> = summary
        .by_campus
        .iter()
        .map(|c| (c.name.as_str(), c.students))
        .collect();
    assert_eq!(by_campus, [("Kololo", 7), ("Naalya", 9)]);
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
            ("S2 Green", 4)
        ]
    );
}

#[tokio::test]
async fn list_staff_shows_roles_campus_and_filters_by_name_or_email() {
    let db = TestDb::new().await;
    let (mut tx, me) = as_user(&db, "admin@hill.school").await;
    let list = list_staff(&mut tx, &me, &hill(&db), &ListStaffArgs::default())
        .await
        .unwrap();
    assert_eq!((list.total, list.truncated), (6, false));
    let staff = list.staff;
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
    let okello = list_staff(&mut tx, &me, &hill(&db), &query)
        .await
        .unwrap()
        .staff;
    assert_eq!(okello.len(), 1);
    assert_eq!(okello[0].email, "okello@hill.school");
}

#[tokio::test]
async fn listings_return_at_most_max_rows_and_say_how_many_there_are() {
    let db = TestDb::new().await;
    let (mut tx, admin) = as_user(&db, "admin@hill.school").await;
    let hill_id = db.ids.hill.as_uuid();
    let max = MAX_LIST_ROWS as usize;
    // The model is told the limit in each tool's description.
    for contract in [
        ListStaff::CONTRACT,
        ListClasses::CONTRACT,
        GetClassMarks::CONTRACT,
    ] {
        assert!(
            contract
                .description
                .contains(&format!("At most {MAX_LIST_ROWS}")),
            "{}",
            contract.name
        );
    }
    // 205 more staff (211 in all), 200 more classes (204), and 205 marks in one class's subject.
    sqlx::query(
        "INSERT INTO users (school_id, name, email, user_type) \
         SELECT $1, 'Staff ' || lpad(n::text, 3, '0'), 'staff' || n || '@hill.school', 'support' \
         FROM generate_series(1, 205) n",
    )
    .bind(hill_id)
    .execute(tx.connection())
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO classes (school_id, campus_id, name) \
         SELECT $1, $2, 'Class ' || lpad(n::text, 3, '0') FROM generate_series(1, 200) n",
    )
    .bind(hill_id)
    .bind(db.ids.campus("Naalya").as_uuid())
    .execute(tx.connection())
    .await
    .unwrap();
    let term = calendar(&mut tx)
        .await
        .unwrap()
        .term_on(today(&db).await)
        .unwrap()
        .id;
    sqlx::query(
        "INSERT INTO marks (school_id, student_id, subject_id, term_id, assessment, score, recorded_by) \
         SELECT $1, s.id, $2, $3, 'Quiz ' || lpad(n::text, 2, '0'), 50, $4 \
         FROM students s, generate_series(1, 41) n WHERE s.class_id = $5",
    )
    .bind(hill_id)
    .bind(db.ids.subject("Mathematics").as_uuid())
    .bind(term.as_uuid())
    .bind(db.ids.user("amina@hill.school").as_uuid())
    .bind(db.ids.class("S1 Blue").as_uuid())
    .execute(tx.connection())
    .await
    .unwrap();

    let staff = list_staff(&mut tx, &admin, &hill(&db), &ListStaffArgs::default())
        .await
        .unwrap();
    assert_eq!(
        (staff.staff.len(), staff.total, staff.truncated),
        (max, 211, true)
    );
    // A narrower query lists everyone it matches (Staff 020, 120 and 200–205).
    let narrow = ListStaffArgs {
        query: Some("Staff 20".into()),
    };
    let narrow = list_staff(&mut tx, &admin, &hill(&db), &narrow)
        .await
        .unwrap();
    assert_eq!(
        (narrow.staff.len(), narrow.total, narrow.truncated),
        (8, 8, false)
    );

    let classes = list_classes(&mut tx, &admin, &hill(&db), &NoArgs {})
        .await
        .unwrap();
    assert_eq!(
        (classes.classes.len(), classes.total, classes.truncated),
        (max, 204, true)
    );

    let amina = db.ids.actor("amina@hill.school");
    let read = GetClassMarksArgs {
        class: Named::id(db.ids.class("S1 Blue")),
        subject: Named::id(db.ids.subject("Mathematics")),
        term: None,
    };
    let marks = class_marks(&mut tx, &amina, &hill(&db), &read)
        .await
        .unwrap();
    assert_eq!(
        (marks.marks.len(), marks.total, marks.truncated),
        (max, 205, true)
    );
}
