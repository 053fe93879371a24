//! Campus mode: reads filtered to the campus (plus school-wide rows), writes pinned to it.

use rover_contracts::ids::SubjectId;
use rover_contracts::named::Named;
use rover_contracts::tools::{
    AssignSubjectTeacherArgs, CreateDepartmentArgs, FindStudentsArgs, ListStaffArgs,
    ListTeachingAssignmentsArgs, NoArgs, RenameDepartmentArgs,
};
use rover_domain::testing::TestDb;
use rover_domain::{
    DomainError, assign_subject_teacher, create_department, enrollment_summary, find_students,
    list_classes, list_departments, list_staff, list_teaching_assignments, rename_department,
};

use crate::helpers::{as_user, campus_scope, hill};

/// Creates "Naalya Music", a Naalya-only department, as the school admin in Naalya mode.
async fn naalya_music(db: &TestDb) -> rover_contracts::tools::Department {
    let (mut tx, admin) = as_user(db, "admin@hill.school").await;
    let args = CreateDepartmentArgs {
        name: "Naalya Music".into(),
    };
    let written = create_department(&mut tx, &admin, &campus_scope(db, "Naalya"), &args)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    written.output
}

#[tokio::test]
async fn the_kololo_admin_sees_only_kololo_and_school_wide_rows() {
    let db = TestDb::new().await;
    naalya_music(&db).await;
    let kololo = campus_scope(&db, "Kololo");
    let (mut tx, me) = as_user(&db, "kololo.admin@hill.school").await;

    let departments: Vec<_> = list_departments(&mut tx, &me, &kololo, &NoArgs {})
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(
        departments,
        ["Humanities", "Kololo Arts", "Languages", "Mathematics"]
    );

    let classes: Vec<_> = list_classes(&mut tx, &me, &kololo, &NoArgs {})
        .await
        .unwrap()
        .classes
        .into_iter()
        .map(|c| c.class.name)
        .collect();
    assert_eq!(classes, ["S1 Gold", "S2 Red"]);

    let search = FindStudentsArgs {
        query: "a".into(),
        class: None,
    };
    let students = find_students(&mut tx, &me, &kololo, &search).await.unwrap();
    assert!(!students.is_empty());
    assert!(students.iter().all(|s| s.campus.name == "Kololo"));
    let nakato = FindStudentsArgs {
        query: "Nakato".into(),
        class: None,
    };
    assert!(
        find_students(&mut tx, &me, &kololo, &nakato)
            .await
            .unwrap()
            .is_empty()
    );

    let enrolment = enrollment_summary(&mut tx, &me, &kololo, &NoArgs {})
        .await
        .unwrap();
    assert_eq!(enrolment.total, 7);
    assert_eq!(enrolment.by_campus.len(), 1);
    assert_eq!(enrolment.by_class.len(), 2);

    let staff: Vec<_> = list_staff(&mut tx, &me, &kololo, &ListStaffArgs::default())
        .await
        .unwrap()
        .staff
        .into_iter()
        .map(|s| s.email)
        .collect();
    assert!(staff.contains(&"okello@hill.school".to_owned()));
    assert!(staff.contains(&"admin@hill.school".to_owned()));
    assert!(!staff.contains(&"amina@hill.school".to_owned()));

    let teaching = list_teaching_assignments(
        &mut tx,
        &me,
        &kololo,
        &ListTeachingAssignmentsArgs::default(),
    )
    .await
    .unwrap();
    assert_eq!(teaching.len(), 1);
    assert_eq!(teaching[0].class.name, "S2 Red");
}

#[tokio::test]
async fn creating_in_campus_mode_pins_the_department_to_the_campus() {
    let db = TestDb::new().await;
    let kololo = campus_scope(&db, "Kololo");
    let (mut tx, me) = as_user(&db, "kololo.admin@hill.school").await;
    let args = CreateDepartmentArgs {
        name: "Kololo Music".into(),
    };
    let written = create_department(&mut tx, &me, &kololo, &args)
        .await
        .unwrap();
    assert_eq!(written.output.campus, Some(db.ids.campus_ref("Kololo")));
    // A campus department may share a school-wide department's name, not another one on its campus.
    let error = create_department(&mut tx, &me, &kololo, &args)
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "A department named \"Kololo Music\" already exists on the Kololo campus."
    );
    tx.commit().await.unwrap();

    // Naalya never sees it; the school-wide view shows where it lives.
    let (mut tx, admin) = as_user(&db, "admin@hill.school").await;
    let naalya: Vec<_> =
        list_departments(&mut tx, &admin, &campus_scope(&db, "Naalya"), &NoArgs {})
            .await
            .unwrap();
    assert!(naalya.iter().all(|d| d.name != "Kololo Music"));
    let all = list_departments(&mut tx, &admin, &hill(&db), &NoArgs {})
        .await
        .unwrap();
    assert!(all.contains(&written.output));
}

#[tokio::test]
async fn the_kololo_admin_cannot_rename_a_naalya_or_school_wide_department() {
    let db = TestDb::new().await;
    let music = naalya_music(&db).await;
    let kololo = campus_scope(&db, "Kololo");
    let (mut tx, me) = as_user(&db, "kololo.admin@hill.school").await;

    let rename = |id| RenameDepartmentArgs {
        department: Named::id(id),
        new_name: "Renamed".into(),
    };
    let error = rename_department(&mut tx, &me, &kololo, &rename(music.id))
        .await
        .unwrap_err();
    assert!(matches!(error, DomainError::NotFound(_)), "{error:?}");
    let error = rename_department(
        &mut tx,
        &me,
        &kololo,
        &rename(db.ids.department("Languages")),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, DomainError::Denied(_)), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("Languages is a school-wide department")
    );
    // Its own campus's department it may rename.
    let arts = rename_department(
        &mut tx,
        &me,
        &kololo,
        &rename(db.ids.department("Kololo Arts")),
    )
    .await
    .unwrap();
    assert_eq!(arts.output.previous_name, "Kololo Arts");
    tx.commit().await.unwrap();

    let (mut tx, admin) = as_user(&db, "admin@hill.school").await;
    let names: Vec<_> = list_departments(&mut tx, &admin, &hill(&db), &NoArgs {})
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(
        names,
        [
            "Humanities",
            "Languages",
            "Mathematics",
            "Naalya Music",
            "Renamed"
        ]
    );
}

#[tokio::test]
async fn a_subject_of_another_campus_cannot_be_assigned_and_looks_like_none() {
    let db = TestDb::new().await;
    // Drama belongs to "Kololo Arts", a Kololo-only department.
    let (mut tx, dos) = as_user(&db, "dos@hill.school").await;
    let drama: uuid::Uuid = sqlx::query_scalar(
        "INSERT INTO subjects (school_id, department_id, name) VALUES ($1, $2, 'Drama') RETURNING id",
    )
    .bind(db.ids.hill.as_uuid())
    .bind(db.ids.department("Kololo Arts").as_uuid())
    .fetch_one(tx.connection())
    .await
    .unwrap();
    let drama = SubjectId::from_uuid(drama);
    let in_s1_blue = |subject_id| AssignSubjectTeacherArgs {
        teacher: Named::id(db.ids.user("amina@hill.school")),
        class: Named::id(db.ids.class("S1 Blue")),
        subject: Named::id(subject_id),
    };

    // In Naalya mode, Kololo's subject is refused exactly as an id that does not exist.
    let naalya = campus_scope(&db, "Naalya");
    let refused = assign_subject_teacher(&mut tx, &dos, &naalya, &in_s1_blue(drama))
        .await
        .unwrap_err();
    let unknown = assign_subject_teacher(&mut tx, &dos, &naalya, &in_s1_blue(SubjectId::new()))
        .await
        .unwrap_err();
    assert!(matches!(refused, DomainError::NotFound(_)), "{refused:?}");
    assert_eq!(refused.to_string(), unknown.to_string());
    // A school-wide department's subject is fine on any campus…
    assign_subject_teacher(
        &mut tx,
        &dos,
        &naalya,
        &in_s1_blue(db.ids.subject("Physics")),
    )
    .await
    .unwrap();
    // …and Kololo's own subject is fine in Kololo mode.
    let kololo = AssignSubjectTeacherArgs {
        teacher: Named::id(db.ids.user("okello@hill.school")),
        class: Named::id(db.ids.class("S1 Gold")),
        subject: Named::id(drama),
    };
    let assigned = assign_subject_teacher(&mut tx, &dos, &campus_scope(&db, "Kololo"), &kololo)
        .await
        .unwrap();
    assert_eq!(assigned.output.subject.name, "Drama");
}
