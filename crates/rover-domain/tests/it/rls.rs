//! Row-level security and roles: the database itself keeps schools apart, whatever the SQL says.

use rover_domain::actor::{user_school, user_school_by_email};
use rover_domain::provision::{Provision, drop_provisioned, provision};
use rover_domain::testing::{DEFAULT_ADMIN_URL, TestDb};
use rover_domain::{begin_tenant, seed_demo};
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

use crate::helpers::tenant;

#[tokio::test]
async fn the_app_role_is_not_the_owner_not_superuser_and_cannot_bypass_rls() {
    let db = TestDb::new().await;
    let (superuser, bypass, create_role, create_db): (bool, bool, bool, bool) = sqlx::query_as(
        "SELECT rolsuper, rolbypassrls, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(!superuser && !bypass && !create_role && !create_db);

    let (owned, tables, member_of_owner): (i64, i64, bool) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE tableowner = current_user), count(*), \
                pg_has_role(current_user, $1, 'MEMBER') \
         FROM pg_tables WHERE schemaname = 'public'",
    )
    .bind(&db.provision().owner_role)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(owned, 0, "the app role owns a table");
    assert!(tables >= 21, "only {tables} tables");
    assert!(!member_of_owner);

    // It cannot change the schema either.
    let mut tx = tenant(&db, db.ids.hill).await;
    let ddl = sqlx::query("ALTER TABLE departments DISABLE ROW LEVEL SECURITY")
        .execute(tx.connection())
        .await;
    assert!(ddl.is_err());
}

#[tokio::test]
async fn every_table_with_a_school_id_has_row_level_security_enabled_and_forced() {
    let db = TestDb::new().await;
    // As the owner, so no table is hidden for lack of privileges.
    let mut owner = PgConnection::connect(db.owner_url()).await.unwrap();
    let rows: Vec<(String, bool, bool, i64)> = sqlx::query_as(
        "SELECT c.relname::text, c.relrowsecurity, c.relforcerowsecurity, \
                (SELECT count(*) FROM pg_policies p WHERE p.schemaname = 'public' AND p.tablename = c.relname) \
         FROM information_schema.columns col \
         JOIN pg_class c ON c.relname = col.table_name AND c.relnamespace = 'public'::regnamespace \
         WHERE col.table_schema = 'public' AND col.column_name = 'school_id' \
         UNION ALL \
         SELECT c.relname::text, c.relrowsecurity, c.relforcerowsecurity, \
                (SELECT count(*) FROM pg_policies p WHERE p.schemaname = 'public' AND p.tablename = c.relname) \
         FROM pg_class c WHERE c.oid = 'public.schools'::regclass",
    )
    .fetch_all(&mut owner)
    .await
    .unwrap();
    assert_eq!(rows.len(), 33, "tenant tables: {rows:?}");
    let unprotected: Vec<_> = rows
        .iter()
        .filter(|(_, enabled, forced, policies)| !(*enabled && *forced && *policies == 1))
        .collect();
    assert!(unprotected.is_empty(), "unprotected: {unprotected:?}");
}

#[tokio::test]
async fn a_query_without_a_where_sees_only_the_current_school() {
    let db = TestDb::new().await;
    for (school, departments, students) in [(db.ids.hill, 4, 16), (db.ids.lakeside, 1, 3)] {
        let mut tx = tenant(&db, school).await;
        let schools: Vec<Uuid> = sqlx::query_scalar("SELECT school_id FROM departments")
            .fetch_all(tx.connection())
            .await
            .unwrap();
        assert_eq!(schools.len(), departments);
        assert!(schools.iter().all(|s| *s == school.as_uuid()));
        let seen: i64 = sqlx::query_scalar("SELECT count(*) FROM students")
            .fetch_one(tx.connection())
            .await
            .unwrap();
        assert_eq!(seen, students);
        let names: Vec<String> = sqlx::query_scalar("SELECT name FROM schools")
            .fetch_all(tx.connection())
            .await
            .unwrap();
        assert_eq!(names.len(), 1);
    }
}

#[tokio::test]
async fn with_no_school_set_nothing_is_visible_and_nothing_fails() {
    let db = TestDb::new().await;
    let mut tx = db.pool.begin().await.unwrap();
    for table in ["schools", "departments", "users", "students", "audit_log"] {
        let n: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        assert_eq!(n, 0, "{table} is visible without a school");
    }
    // Set and then emptied (what a pooled connection may carry): still nothing.
    sqlx::query("SELECT set_config('app.school_id', '', true)")
        .execute(&mut *tx)
        .await
        .unwrap();
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM departments")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(n, 0);
    // And a tenant setting does not outlive its transaction.
    tx.rollback().await.unwrap();
    drop(tenant(&db, db.ids.hill).await);
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM departments")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(n, 0);
}

#[tokio::test]
async fn writing_a_row_of_another_school_fails() {
    let db = TestDb::new().await;
    let mut tx = tenant(&db, db.ids.hill).await;
    let update = sqlx::query("UPDATE departments SET name = 'Hijacked' WHERE school_id = $1")
        .bind(db.ids.lakeside.as_uuid())
        .execute(tx.connection())
        .await
        .unwrap();
    assert_eq!(update.rows_affected(), 0);
    let insert = sqlx::query("INSERT INTO departments (school_id, name) VALUES ($1, 'Smuggled')")
        .bind(db.ids.lakeside.as_uuid())
        .execute(tx.connection())
        .await
        .unwrap_err();
    let code = insert
        .as_database_error()
        .and_then(sqlx::error::DatabaseError::code);
    assert_eq!(code.as_deref(), Some("42501"), "{insert}");
    drop(tx);

    let mut lakeside = tenant(&db, db.ids.lakeside).await;
    let names: Vec<String> = sqlx::query_scalar("SELECT name FROM departments")
        .fetch_all(lakeside.connection())
        .await
        .unwrap();
    assert_eq!(names, ["Sciences"]);
}

#[tokio::test]
async fn tenant_transactions_refuse_a_role_that_bypasses_rls() {
    let db = TestDb::new().await;
    let owner = PgPoolOptions::new()
        .max_connections(1)
        .connect(db.owner_url())
        .await
        .unwrap();
    let error = begin_tenant(&owner, db.ids.hill).await.unwrap_err();
    assert!(
        format!("{error:?}").contains("row-level security"),
        "{error:?}"
    );
    // A tool call's opening query refuses it too (its check runs inside `rover_open_call`).
    let reads = rover_domain::call::CallReads {
        policy: true,
        ..Default::default()
    };
    let error = rover_domain::call::begin_call(&owner, db.ids.hill, reads)
        .await
        .unwrap_err();
    assert!(
        format!("{error:?}").contains("row-level security"),
        "{error:?}"
    );
    // So does a read in one trip (inside `rover_open_read`), whatever version it names.
    let scope = crate::helpers::school_scope(db.ids.hill);
    for version in [0, i64::MAX] {
        let read = rover_domain::list_departments_in_one_trip(&scope, &Default::default());
        let error = rover_domain::call::read_in_one_trip(&owner, db.ids.hill, version, read)
            .await
            .unwrap_err();
        assert!(
            format!("{error:?}").contains("row-level security"),
            "{error:?}"
        );
    }
}

#[tokio::test]
async fn the_gateway_learns_a_users_school_before_any_tenant_is_set() {
    let db = TestDb::new().await;
    let amina = db.ids.user("amina@hill.school");
    assert_eq!(
        user_school(&db.pool, amina).await.unwrap(),
        Some(db.ids.hill)
    );
    assert_eq!(
        user_school_by_email(&db.pool, "Admin@Lakeside.College")
            .await
            .unwrap(),
        Some(db.ids.lakeside)
    );
    assert_eq!(
        user_school_by_email(&db.pool, "nobody@hill.school")
            .await
            .unwrap(),
        None
    );
    // The functions answer a school id and nothing more: the users table itself stays hidden.
    let visible: i64 = sqlx::query_scalar("SELECT count(*) FROM users")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(visible, 0);
}

#[tokio::test]
async fn provisioning_and_seeding_again_change_nothing() {
    let db = TestDb::new().await;
    let count_rows = || async {
        let mut owner = PgConnection::connect(db.owner_url()).await.unwrap();
        let n: i64 = sqlx::query_scalar(
            "SELECT (SELECT count(*) FROM users) + (SELECT count(*) FROM students) \
                  + (SELECT count(*) FROM authz_policies) + (SELECT count(*) FROM terms) \
                  + (SELECT count(*) FROM teaching_assignments) + (SELECT count(*) FROM _sqlx_migrations)",
        )
        .fetch_one(&mut owner)
        .await
        .unwrap();
        n
    };
    let before = count_rows().await;
    let admin = std::env::var("ROVER_TEST_ADMIN_URL").unwrap_or_else(|_| DEFAULT_ADMIN_URL.into());
    let urls = provision(&admin, db.provision()).await.unwrap();
    assert_eq!(urls.app_url, db.app_url());
    let owner = PgPoolOptions::new()
        .max_connections(1)
        .connect(db.owner_url())
        .await
        .unwrap();
    let ids = seed_demo(&owner).await.unwrap();
    assert_eq!(ids.class("S1 Blue"), db.ids.class("S1 Blue"));
    assert_eq!(count_rows().await, before);
    // The app role still works after the re-grant.
    let mut tx = tenant(&db, db.ids.hill).await;
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM classes")
        .fetch_one(tx.connection())
        .await
        .unwrap();
    assert_eq!(n, 4);
}

#[tokio::test]
async fn drop_provisioned_removes_the_database_and_both_roles() {
    let admin = std::env::var("ROVER_TEST_ADMIN_URL").unwrap_or_else(|_| DEFAULT_ADMIN_URL.into());
    let name = format!("rover_test_{}", Uuid::new_v4().simple());
    let p = Provision {
        database: name.clone(),
        owner_role: format!("{name}_owner"),
        owner_password: "owner-secret".into(),
        app_role: format!("{name}_app"),
        app_password: "app-secret".into(),
    };
    let urls = provision(&admin, &p).await.unwrap();
    let mut app = PgConnection::connect(&urls.app_url).await.unwrap();
    drop_provisioned(&admin, &p).await.unwrap();
    drop_provisioned(&admin, &p).await.unwrap(); // again: nothing left to drop is fine
    assert!(app.ping().await.is_err(), "the app connection survived");

    let mut conn = PgConnection::connect(&admin).await.unwrap();
    let (databases, roles): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM pg_database WHERE datname = $1), \
                (SELECT count(*) FROM pg_roles WHERE rolname IN ($2, $3))",
    )
    .bind(&p.database)
    .bind(&p.owner_role)
    .bind(&p.app_role)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!((databases, roles), (0, 0));
}
