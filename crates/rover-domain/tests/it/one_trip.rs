//! A read in one round trip (`rover_domain::call::read_in_one_trip`): the opening query and the
//! read's query in one read-only implicit transaction. It answers with the school's own rows —
//! exactly what the two-step path answers —, cannot write, leaves neither a school nor a
//! transaction on the connection, and answers only while the policy version it was authorised
//! on is still the live one (otherwise the caller takes the two-step path, which reads the live
//! rows).

use rover_contracts::context::CallScope;
use rover_contracts::ids::SchoolId;
use rover_contracts::tools::NoArgs;
use rover_domain::call::{CallReads, OneTripRead, begin_call, read_in_one_trip};
use rover_domain::pool::CallPool;
use rover_domain::testing::TestDb;
use rover_settings::{DatabaseSettings, Secret};
use sqlx::{Connection as _, Row as _};

use crate::call_pool::handed_on_clean;
use crate::helpers::{campus_scope, school_scope, tenant};

fn pool_of_one(db: &TestDb) -> CallPool {
    rover_domain::call_pool(&DatabaseSettings {
        url: Secret::new(db.app_url().to_owned()),
        max_connections: 1,
        acquire_timeout_ms: 2_000,
    })
    .expect("the URL parses")
}

/// The school's live policy version, as the two-step opening reads it.
async fn version(pool: &CallPool, school: SchoolId) -> i64 {
    let start = begin_call(
        pool,
        school,
        CallReads {
            policy: true,
            ..CallReads::default()
        },
    )
    .await
    .expect("the call opens");
    start.policy_version.expect("a version")
}

/// What the two-step path answers for `list_departments` and `list_classes` in `scope`.
async fn two_step(db: &TestDb, scope: &CallScope) -> (serde_json::Value, serde_json::Value) {
    let actor = db.ids.actor("admin@hill.school");
    let mut tx = tenant(db, scope.school_id).await;
    let departments = rover_domain::list_departments(&mut tx, &actor, scope, &NoArgs::default())
        .await
        .unwrap();
    let classes = rover_domain::list_classes(&mut tx, &actor, scope, &NoArgs::default())
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    (
        serde_json::to_value(departments).unwrap(),
        serde_json::to_value(classes).unwrap(),
    )
}

/// What the one-trip path answers for both, on `pool`.
async fn one_trip(
    pool: &CallPool,
    scope: &CallScope,
    version: i64,
) -> (serde_json::Value, serde_json::Value) {
    let args = NoArgs::default();
    let departments = read_in_one_trip(
        pool,
        scope.school_id,
        version,
        rover_domain::list_departments_in_one_trip(scope, &args),
    )
    .await
    .expect("the read runs")
    .expect("the version is the live one");
    let classes = read_in_one_trip(
        pool,
        scope.school_id,
        version,
        rover_domain::list_classes_in_one_trip(scope, &args),
    )
    .await
    .expect("the read runs")
    .expect("the version is the live one");
    (
        serde_json::to_value(departments).unwrap(),
        serde_json::to_value(classes).unwrap(),
    )
}

#[tokio::test]
async fn it_answers_what_the_two_step_path_answers_each_school_its_own_and_leaves_nothing_behind() {
    let db = TestDb::new().await;
    let pool = pool_of_one(&db);
    let scopes = [
        school_scope(db.ids.hill),
        campus_scope(&db, "Kololo"),
        school_scope(db.ids.lakeside),
    ];
    let mut seen = Vec::new();
    for scope in &scopes {
        let live = version(&pool, scope.school_id).await;
        let answer = one_trip(&pool, scope, live).await;
        assert_eq!(answer, two_step(&db, scope).await, "{scope:?}");
        assert!(
            answer.0.as_array().is_some_and(|a| !a.is_empty()),
            "{scope:?}: departments listed"
        );
        handed_on_clean(&pool, "a one-trip read").await;
        seen.push(answer);
    }
    // One connection served both schools in turn; neither saw the other's rows.
    assert_ne!(
        seen[0].0, seen[2].0,
        "Hill's departments are not Lakeside's"
    );
    let ids = |answer: &serde_json::Value| -> Vec<String> {
        answer
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (hill, lakeside) = (ids(&seen[0].0), ids(&seen[2].0));
    assert!(hill.iter().all(|id| !lakeside.contains(id)));
}

#[tokio::test]
async fn it_cannot_write_and_runs_the_query_only_on_the_live_version() {
    let db = TestDb::new().await;
    let pool = pool_of_one(&db);
    let hill = db.ids.hill;
    let live = version(&pool, hill).await;
    // A function that writes, callable by the application role (as a read's function is).
    let mut owner = sqlx::PgConnection::connect(db.owner_url()).await.unwrap();
    sqlx::raw_sql(&format!(
        "CREATE FUNCTION test_write_department() RETURNS SETOF uuid LANGUAGE sql VOLATILE AS $$ \
           INSERT INTO departments (school_id, name) \
           VALUES (current_setting('app.school_id')::uuid, 'Written by a read') RETURNING id $$; \
         GRANT EXECUTE ON FUNCTION test_write_department() TO \"{}\"",
        db.provision().app_role
    ))
    .execute(&mut owner)
    .await
    .unwrap();
    let write = || OneTripRead::statement_for_tests("SELECT * FROM test_write_department()");

    // On a version that moved, the read's query does not run at all.
    assert!(
        read_in_one_trip(&pool, hill, live - 1, write())
            .await
            .expect("the query does not run")
            .is_none()
    );
    // On the live one it runs, read-only: the insert is refused.
    let error = read_in_one_trip(&pool, hill, live, write())
        .await
        .expect_err("a read-only transaction refuses the insert");
    let code = match &error {
        rover_domain::DomainError::Database(sqlx::Error::Database(db)) => db.code(),
        _ => None,
    };
    // 25006: read_only_sql_transaction.
    assert_eq!(code.as_deref(), Some("25006"), "{error:?}");
    let mut tx = tenant(&db, hill).await;
    let written: i64 =
        sqlx::query_scalar("SELECT count(*) FROM departments WHERE name = 'Written by a read'")
            .fetch_one(tx.connection())
            .await
            .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(written, 0);
    handed_on_clean(&pool, "a refused one-trip read").await;
}

#[tokio::test]
async fn a_query_without_rows_answers_none_of_them() {
    let db = TestDb::new().await;
    let pool = pool_of_one(&db);
    let hill = db.ids.hill;
    let live = version(&pool, hill).await;
    let nothing = OneTripRead::statement_for_tests("SELECT 1 AS one WHERE false");
    let rows = read_in_one_trip(&pool, hill, live, nothing)
        .await
        .unwrap()
        .expect("the version is the live one");
    assert!(rows.is_empty(), "{} rows", rows.len());
    // And a query with rows answers each of them, once.
    let two = OneTripRead::statement_for_tests("SELECT n FROM generate_series(1, 2) AS n");
    let rows = read_in_one_trip(&pool, hill, live, two)
        .await
        .unwrap()
        .expect("the version is the live one");
    let numbers: Vec<i32> = rows.iter().map(|row| row.get("n")).collect();
    assert_eq!(numbers, [1, 2]);
}

#[tokio::test]
async fn a_moved_version_or_a_school_that_does_not_exist_gets_no_answer() {
    let db = TestDb::new().await;
    let pool = pool_of_one(&db);
    let hill = school_scope(db.ids.hill);
    let live = version(&pool, hill.school_id).await;
    let read = || rover_domain::list_departments_in_one_trip(&hill, &NoArgs::default());
    assert!(
        read_in_one_trip(&pool, hill.school_id, live, read())
            .await
            .unwrap()
            .is_some()
    );

    // A grant revoked after the caller read the rows: the version it was authorised on is no
    // longer the live one, and the read does not answer (the caller reads the live rows).
    let mut tx = tenant(&db, hill.school_id).await;
    sqlx::query("DELETE FROM authz_policies WHERE action = 'read' AND subject = 'Department'")
        .execute(tx.connection())
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        read_in_one_trip(&pool, hill.school_id, live, read())
            .await
            .unwrap(),
        None,
        "authorised on a version that moved"
    );

    let nowhere = SchoolId::from_uuid(uuid::Uuid::new_v4());
    let elsewhere = school_scope(nowhere);
    assert_eq!(
        read_in_one_trip(
            &pool,
            nowhere,
            0,
            rover_domain::list_departments_in_one_trip(&elsewhere, &NoArgs::default()),
        )
        .await
        .unwrap(),
        None,
        "no such school"
    );
    handed_on_clean(&pool, "after the refusals").await;
}

/// Runs `read` in one trip at the live `version` and checks it answers what the two-step path
/// answered (`two_step`); returns its answer.
async fn answered_alike<T: serde::Serialize + std::fmt::Debug + 'static>(
    pool: &CallPool,
    scope: &CallScope,
    version: i64,
    read: OneTripRead<T>,
    two_step: &T,
) -> T {
    let one_trip = read_in_one_trip(pool, scope.school_id, version, read)
        .await
        .expect("the read runs")
        .expect("the version is the live one");
    assert_eq!(
        serde_json::to_value(&one_trip).unwrap(),
        serde_json::to_value(two_step).unwrap(),
        "{scope:?}: {two_step:?}"
    );
    one_trip
}

/// The searches (`list_staff`, `find_students`, migration `0044`) answer in one trip exactly what
/// the two-step path answers — with and without search text, with a class, in school and campus
/// scope and in each school — and a search text that is not acceptable is refused before the
/// read is made, with the two-step path's own words.
#[tokio::test]
async fn the_searches_answer_what_the_two_step_path_answers() {
    use rover_contracts::named::Named;
    use rover_contracts::tools::{FindStudentsArgs, ListStaffArgs};

    let db = TestDb::new().await;
    let pool = pool_of_one(&db);
    let actor = db.ids.actor("admin@hill.school");
    let staff_args = |query: Option<&str>| ListStaffArgs {
        query: query.map(str::to_owned),
    };
    let student_args = |query: &str, class: Option<&str>| FindStudentsArgs {
        query: query.to_owned(),
        class: class.map(|name| Named::id(db.ids.class(name))),
    };
    let mut found = 0;
    for scope in [
        school_scope(db.ids.hill),
        campus_scope(&db, "Kololo"),
        school_scope(db.ids.lakeside),
    ] {
        let live = version(&pool, scope.school_id).await;
        for args in [
            staff_args(None),
            staff_args(Some("a")),
            staff_args(Some("no such")),
        ] {
            let mut tx = tenant(&db, scope.school_id).await;
            let two_step = rover_domain::list_staff(&mut tx, &actor, &scope, &args)
                .await
                .unwrap();
            tx.rollback().await.unwrap();
            let read = rover_domain::list_staff_in_one_trip(&scope, &args).unwrap();
            let one_trip = answered_alike(&pool, &scope, live, read, &two_step).await;
            found += one_trip.staff.len();
        }
        for args in [
            student_args("a", None),
            student_args("a", Some("S1 Blue")),
            student_args("no such", None),
        ] {
            let mut tx = tenant(&db, scope.school_id).await;
            let two_step = rover_domain::find_students(&mut tx, &actor, &scope, &args)
                .await
                .unwrap();
            tx.rollback().await.unwrap();
            let read = rover_domain::find_students_in_one_trip(&scope, &args)
                .unwrap()
                .expect("no class, or a class by id, reads in one trip");
            let one_trip = answered_alike(&pool, &scope, live, read, &two_step).await;
            found += one_trip.len();
        }
        handed_on_clean(&pool, "a one-trip search").await;
    }
    assert!(found > 0, "some searches found someone");

    let scope = school_scope(db.ids.hill);
    // A class by name is resolved first: that takes the two-step path.
    let by_name = FindStudentsArgs {
        query: "a".to_owned(),
        class: Some(Named::name("S1 Blue")),
    };
    assert!(
        rover_domain::find_students_in_one_trip(&scope, &by_name)
            .unwrap()
            .is_none()
    );
    let blank = student_args("   ", None);
    let refused = rover_domain::find_students_in_one_trip(&scope, &blank)
        .expect_err("a blank search text is refused");
    let mut tx = tenant(&db, scope.school_id).await;
    let two_step = rover_domain::find_students(&mut tx, &actor, &scope, &blank)
        .await
        .expect_err("refused on the two-step path too");
    tx.rollback().await.unwrap();
    assert_eq!(refused.to_string(), two_step.to_string());
}
