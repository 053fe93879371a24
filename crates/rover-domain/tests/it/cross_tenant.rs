//! Another school's ids are indistinguishable from ids that do not exist, and nothing changes.

use rover_contracts::named::Named;
use rover_contracts::tools::{
    AssignSubjectTeacherArgs, FindStudentsArgs, GetClassRosterArgs, ListTeachingAssignmentsArgs,
    NoArgs, RecordAttendanceArgs, RenameDepartmentArgs,
};
use rover_domain::testing::TestDb;
use rover_domain::{
    DomainError, assign_subject_teacher, class_roster, find_students, list_departments,
    list_teaching_assignments, record_attendance, rename_department,
};

use crate::helpers::{as_user, hill, school_scope, tenant};

#[tokio::test]
async fn lakesides_admin_naming_hill_ids_gets_not_found_and_nothing_changes() {
    let db = TestDb::new().await;
    let lakeside = school_scope(db.ids.lakeside);
    let (mut tx, me) = as_user(&db, "admin@lakeside.college").await;

    let rename = RenameDepartmentArgs {
        department: Named::id(db.ids.department("Languages")),
        new_name: "Taken Over".into(),
    };
    let error = rename_department(&mut tx, &me, &lakeside, &rename)
        .await
        .unwrap_err();
    assert!(matches!(error, DomainError::NotFound(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "No department with that id was found here."
    );

    let assign = AssignSubjectTeacherArgs {
        teacher: Named::id(db.ids.user("okello@hill.school")),
        class: Named::id(db.ids.class("S1 Blue")),
        subject: Named::id(db.ids.subject("Physics")),
    };
    let error = assign_subject_teacher(&mut tx, &me, &lakeside, &assign)
        .await
        .unwrap_err();
    assert!(matches!(error, DomainError::NotFound(_)), "{error:?}");

    let attendance = RecordAttendanceArgs {
        class: Some(Named::id(db.ids.class("S1 Blue"))),
        date: None,
        absent: vec![Named::id(db.ids.student("Nakato Sarah"))],
        present: Vec::new(),
    };
    let error = record_attendance(&mut tx, &me, &lakeside, &attendance)
        .await
        .unwrap_err();
    assert!(matches!(error, DomainError::NotFound(_)), "{error:?}");
    let roster = GetClassRosterArgs {
        class: Some(Named::id(db.ids.class("S1 Blue"))),
    };
    let error = class_roster(&mut tx, &me, &lakeside, &roster)
        .await
        .unwrap_err();
    assert!(matches!(error, DomainError::NotFound(_)), "{error:?}");

    let search = FindStudentsArgs {
        query: "Nakato".into(),
        class: None,
    };
    assert!(
        find_students(&mut tx, &me, &lakeside, &search)
            .await
            .unwrap()
            .is_empty()
    );
    let by_class = ListTeachingAssignmentsArgs {
        class: Some(Named::id(db.ids.class("S1 Blue"))),
        teacher: None,
    };
    assert!(
        list_teaching_assignments(&mut tx, &me, &lakeside, &by_class)
            .await
            .unwrap()
            .is_empty()
    );
    let lakeside_departments: Vec<_> = list_departments(&mut tx, &me, &lakeside, &NoArgs {})
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(lakeside_departments, ["Sciences"]);
    tx.commit().await.unwrap();

    // Hill is as it was.
    let (mut tx, admin) = as_user(&db, "admin@hill.school").await;
    let hill_departments: Vec<_> = list_departments(&mut tx, &admin, &hill(&db), &NoArgs {})
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(
        hill_departments,
        ["Humanities", "Kololo Arts", "Languages", "Mathematics"]
    );
    let (teaching, attendance): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM teaching_assignments), (SELECT count(*) FROM attendance)",
    )
    .fetch_one(tx.connection())
    .await
    .unwrap();
    // Hill's three demo teaching assignments (Amina teaches S1 Blue and S2 Green Mathematics).
    assert_eq!((teaching, attendance), (3, 0));
}

#[tokio::test]
async fn a_scope_naming_another_school_is_refused() {
    let db = TestDb::new().await;
    let mut tx = tenant(&db, db.ids.hill).await;
    let me = db.ids.actor("admin@hill.school");
    let error = list_departments(&mut tx, &me, &school_scope(db.ids.lakeside), &NoArgs {})
        .await
        .unwrap_err();
    assert!(matches!(error, DomainError::Denied(_)), "{error:?}");
}
