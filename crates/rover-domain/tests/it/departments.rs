//! Departments in school mode: list, create, rename, and duplicate names.

use rover_contracts::named::Named;
use rover_contracts::tools::{CreateDepartmentArgs, NoArgs, RenameDepartmentArgs};
use rover_domain::testing::TestDb;
use rover_domain::{DomainError, create_department, list_departments, rename_department};

use crate::helpers::{as_user, hill, school_scope};

fn create(name: &str) -> CreateDepartmentArgs {
    CreateDepartmentArgs { name: name.into() }
}

#[tokio::test]
async fn the_admin_lists_every_hill_department() {
    let db = TestDb::new().await;
    let (mut tx, admin) = as_user(&db, "admin@hill.school").await;
    let departments = list_departments(&mut tx, &admin, &hill(&db), &NoArgs {})
        .await
        .unwrap();
    let names: Vec<_> = departments.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        ["Humanities", "Kololo Arts", "Languages", "Mathematics"]
    );
    let arts = &departments[1];
    assert_eq!(
        arts.campus.as_ref().map(|c| c.name.as_str()),
        Some("Kololo")
    );
    assert!(departments[0].campus.is_none());
}

#[tokio::test]
async fn the_admin_creates_sciences_school_wide() {
    let db = TestDb::new().await;
    let (mut tx, admin) = as_user(&db, "admin@hill.school").await;
    let written = create_department(&mut tx, &admin, &hill(&db), &create("  Sciences "))
        .await
        .unwrap();
    assert_eq!(written.output.name, "Sciences");
    assert!(written.output.campus.is_none());
    assert_eq!(written.change.subject_id, written.output.id.to_string());
    assert_eq!(written.change.before, None);
    assert_eq!(written.change.after["name"], "Sciences");
    tx.commit().await.unwrap();

    let (mut tx, admin) = as_user(&db, "admin@hill.school").await;
    let listed = list_departments(&mut tx, &admin, &hill(&db), &NoArgs {})
        .await
        .unwrap();
    assert!(listed.contains(&written.output));
}

#[tokio::test]
async fn the_admin_renames_languages_to_modern_languages() {
    let db = TestDb::new().await;
    let (mut tx, admin) = as_user(&db, "admin@hill.school").await;
    let languages = db.ids.department("Languages");
    let args = RenameDepartmentArgs {
        department: Named::id(languages),
        new_name: "Modern Languages".into(),
    };
    let written = rename_department(&mut tx, &admin, &hill(&db), &args)
        .await
        .unwrap();
    assert_eq!(written.output.previous_name, "Languages");
    assert_eq!(written.output.department.name, "Modern Languages");
    assert_eq!(written.output.department.id, languages);
    let before = written.change.before.as_ref().unwrap();
    assert_eq!(before["name"], "Languages");
    assert_eq!(written.change.after["name"], "Modern Languages");
    tx.commit().await.unwrap();

    let (mut tx, admin) = as_user(&db, "admin@hill.school").await;
    let listed = list_departments(&mut tx, &admin, &hill(&db), &NoArgs {})
        .await
        .unwrap();
    assert!(
        listed
            .iter()
            .any(|d| d.id == languages && d.name == "Modern Languages")
    );
}

#[tokio::test]
async fn a_duplicate_name_in_the_same_scope_is_a_conflict_and_leaves_the_transaction_usable() {
    let db = TestDb::new().await;
    let (mut tx, admin) = as_user(&db, "admin@hill.school").await;
    let error = create_department(&mut tx, &admin, &hill(&db), &create("languages"))
        .await
        .unwrap_err();
    assert!(matches!(error, DomainError::Conflict(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "A school-wide department named \"languages\" already exists."
    );
    let rename = RenameDepartmentArgs {
        department: Named::id(db.ids.department("Mathematics")),
        new_name: "HUMANITIES".into(),
    };
    let error = rename_department(&mut tx, &admin, &hill(&db), &rename)
        .await
        .unwrap_err();
    assert!(matches!(error, DomainError::Conflict(_)), "{error:?}");
    // Still usable: a conflict is an answer, not a broken transaction.
    let listed = list_departments(&mut tx, &admin, &hill(&db), &NoArgs {})
        .await
        .unwrap();
    assert_eq!(listed.len(), 4);
    // Renaming to a different case of its own name is not a conflict.
    let recase = RenameDepartmentArgs {
        department: Named::id(db.ids.department("Mathematics")),
        new_name: "MATHEMATICS".into(),
    };
    rename_department(&mut tx, &admin, &hill(&db), &recase)
        .await
        .unwrap();
}

#[tokio::test]
async fn the_same_name_in_another_school_is_fine() {
    let db = TestDb::new().await;
    // Lakeside already has Sciences; Hill may have one too.
    let (mut tx, admin) = as_user(&db, "admin@hill.school").await;
    create_department(&mut tx, &admin, &hill(&db), &create("Sciences"))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    // And Lakeside may have Languages.
    let (mut tx, lakeside_admin) = as_user(&db, "admin@lakeside.college").await;
    let scope = school_scope(db.ids.lakeside);
    create_department(&mut tx, &lakeside_admin, &scope, &create("Languages"))
        .await
        .unwrap();
    let names: Vec<_> = list_departments(&mut tx, &lakeside_admin, &scope, &NoArgs {})
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(names, ["Languages", "Sciences"]);
}

#[tokio::test]
async fn empty_or_overlong_names_are_invalid() {
    let db = TestDb::new().await;
    let (mut tx, admin) = as_user(&db, "admin@hill.school").await;
    for name in ["   ".to_owned(), "x".repeat(101)] {
        let error = create_department(&mut tx, &admin, &hill(&db), &create(&name))
            .await
            .unwrap_err();
        assert!(matches!(error, DomainError::Invalid(_)), "{error:?}");
    }
}
