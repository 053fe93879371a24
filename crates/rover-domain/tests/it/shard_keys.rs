//! Tables that shard by school: the catalog check passes on the migrated schema and names, with
//! its rule and fix, every table a migration could add that breaks one; and migrations 0050–0051
//! re-key a database seeded before them without losing or changing a row, every foreign key
//! holding.

use std::collections::BTreeMap;

use rover_domain::shard_keys::{Rule, Violation, reference_tables, violations};
use rover_domain::testing::{DEFAULT_ADMIN_URL, TestDb};
use rover_domain::{MIGRATOR, seed_demo};
use sqlx::migrate::Migrate;
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

/// The first migration of the re-keying (0050); the database is seeded just before it.
const FIRST_SHARDING_MIGRATION: i64 = 50;
/// The last (0051): later migrations change what they change, and are not this test's.
const LAST_SHARDING_MIGRATION: i64 = 51;

/// The twelve tables whose primary key was `id` alone, and `threads`, which had none.
const REKEYED: [&str; 13] = [
    "academic_years",
    "artifacts",
    "audit_log",
    "campuses",
    "classes",
    "departments",
    "profiles",
    "students",
    "subjects",
    "teaching_assignments",
    "terms",
    "threads",
    "users",
];

fn listed(found: &[Violation]) -> String {
    found.iter().map(|v| format!("  {v}\n")).collect::<String>()
}

#[tokio::test]
async fn the_schema_can_be_distributed_by_school() {
    let db = TestDb::new().await;
    let mut owner = PgConnection::connect(db.owner_url()).await.unwrap();
    let found = violations(&mut owner).await.unwrap();
    assert!(
        found.is_empty(),
        "tables that could not be distributed by school_id:\n{}",
        listed(&found)
    );
    let reference: Vec<String> = reference_tables(&mut owner)
        .await
        .unwrap()
        .into_iter()
        .map(|(table, _)| table)
        .collect();
    assert_eq!(
        reference,
        ["reference_tables", "schools", "user_directory"],
        "docs/design/sharding.md lists the reference tables; keep it true"
    );
    for table in REKEYED {
        let key: String = sqlx::query_scalar(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint \
             WHERE conrelid = $1::regclass AND contype = 'p'",
        )
        .bind(table)
        .fetch_one(&mut owner)
        .await
        .unwrap();
        assert_eq!(key, "PRIMARY KEY (school_id, id)", "{table}");
    }
}

#[tokio::test]
async fn a_planted_bad_table_is_named_with_its_rule_and_how_to_fix_it() {
    let db = TestDb::new().await;
    let mut owner = PgConnection::connect(db.owner_url()).await.unwrap();
    sqlx::raw_sql(
        "CREATE TABLE bad_no_school (id uuid PRIMARY KEY, name text); \
         CREATE TABLE bad_no_key (school_id uuid NOT NULL REFERENCES schools (id), note text); \
         CREATE TABLE bad_keys ( \
             id uuid NOT NULL, \
             school_id uuid NOT NULL REFERENCES schools (id), \
             other_school uuid NOT NULL, \
             student_id uuid NOT NULL, \
             code text NOT NULL, \
             PRIMARY KEY (id, school_id), \
             UNIQUE (code, school_id), \
             CONSTRAINT bad_keys_student_fkey FOREIGN KEY (other_school, student_id) \
                 REFERENCES students (school_id, id)); \
         CREATE UNIQUE INDEX bad_keys_code_ci ON bad_keys (lower(code)); \
         CREATE TABLE bad_nullable_school (school_id uuid, id uuid, PRIMARY KEY (id)); \
         CREATE TABLE bad_lookup ( \
             code text PRIMARY KEY, \
             class_school uuid NOT NULL, \
             class_id uuid NOT NULL, \
             CONSTRAINT bad_lookup_class_fkey FOREIGN KEY (class_school, class_id) \
                 REFERENCES classes (school_id, id)); \
         INSERT INTO reference_tables VALUES ('bad_lookup', 'planted by a test');",
    )
    .execute(&mut owner)
    .await
    .unwrap();

    let found = violations(&mut owner).await.unwrap();
    let text = listed(&found);
    let expected: [(Rule, &str, &str); 9] = [
        (
            Rule::SchoolColumn,
            "bad_no_school",
            "the table (no school_id column)",
        ),
        (
            Rule::SchoolColumn,
            "bad_nullable_school",
            "its school_id column (uuid, nullable)",
        ),
        (Rule::PrimaryKey, "bad_no_key", "the table (no primary key)"),
        (
            Rule::UniqueLeadsWithSchool,
            "bad_no_school",
            "primary key bad_no_school_pkey PRIMARY KEY (id)",
        ),
        (
            Rule::UniqueLeadsWithSchool,
            "bad_keys",
            "primary key bad_keys_pkey PRIMARY KEY (id, school_id)",
        ),
        (
            Rule::UniqueLeadsWithSchool,
            "bad_keys",
            "unique constraint bad_keys_code_school_id_key UNIQUE (code, school_id)",
        ),
        (
            Rule::UniqueLeadsWithSchool,
            "bad_keys",
            "unique index CREATE UNIQUE INDEX bad_keys_code_ci ON public.bad_keys USING btree (lower(code))",
        ),
        (
            Rule::ForeignKeyWithinSchool,
            "bad_keys",
            "foreign key bad_keys_student_fkey FOREIGN KEY (other_school, student_id) REFERENCES students(school_id, id)",
        ),
        (
            Rule::ReferenceIntoTenant,
            "bad_lookup",
            "foreign key bad_lookup_class_fkey FOREIGN KEY (class_school, class_id) REFERENCES classes(school_id, id)",
        ),
    ];
    for (rule, table, what) in expected {
        assert!(
            found
                .iter()
                .any(|v| v.rule == rule && v.table == table && v.what == what),
            "rule {} not reported for {table}: {what}\nreported:\n{text}",
            rule.number()
        );
    }
    // Nothing else: the planted tables are the only ones breaking a rule (the nullable one's
    // primary key on `id` breaks rule 3 as well).
    assert_eq!(found.len(), expected.len() + 1, "reported:\n{text}");
    // What a developer reads: the table, what breaks which rule, and how to fix it.
    let message = found
        .iter()
        .find(|v| v.table == "bad_keys" && v.rule == Rule::ForeignKeyWithinSchool)
        .unwrap()
        .to_string();
    assert!(
        message.starts_with("table bad_keys: foreign key bad_keys_student_fkey")
            && message.contains("breaks rule 4 (every foreign key between tenant tables matches school_id to school_id)")
            && message.contains("fix: reference the parent's (school_id, id)"),
        "{message}"
    );
}

/// A database of its own, created empty by the superuser and dropped at the end.
pub(crate) struct ScratchDb {
    admin_url: String,
    name: String,
    pub(crate) url: String,
}

impl ScratchDb {
    /// Every migration before `version`, as sqlx applies them, then the demo schools: a connection
    /// to the database, and how many migrations were applied.
    pub(crate) async fn seeded_before(&self, version: i64) -> (PgConnection, usize) {
        let mut conn = PgConnection::connect(&self.url).await.unwrap();
        conn.ensure_migrations_table().await.unwrap();
        let mut applied = 0;
        for migration in MIGRATOR.iter().filter(|m| m.version < version) {
            conn.apply(migration).await.unwrap();
            applied += 1;
        }
        let seeding = PgPoolOptions::new()
            .max_connections(1)
            .connect(&self.url)
            .await
            .unwrap();
        seed_demo(&seeding).await.unwrap();
        seeding.close().await;
        (conn, applied)
    }

    pub(crate) async fn new() -> Self {
        let admin_url =
            std::env::var("ROVER_TEST_ADMIN_URL").unwrap_or_else(|_| DEFAULT_ADMIN_URL.to_owned());
        let name = format!("rover_test_{}", Uuid::new_v4().simple());
        let mut admin = PgConnection::connect(&admin_url).await.unwrap();
        sqlx::raw_sql(&format!("CREATE DATABASE \"{name}\""))
            .execute(&mut admin)
            .await
            .unwrap();
        let mut url = url::Url::parse(&admin_url).unwrap();
        url.set_path(&name);
        ScratchDb {
            admin_url,
            name,
            url: url.into(),
        }
    }
}

impl Drop for ScratchDb {
    fn drop(&mut self) {
        let (admin_url, name) = (self.admin_url.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async {
                    let mut admin = PgConnection::connect(&admin_url).await?;
                    sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                        .execute(&mut admin)
                        .await
                        .map(|_| ())
                })
        })
        .join();
    }
}

/// Every table's row count and a digest of all its rows' text, by table.
async fn contents(conn: &mut PgConnection) -> BTreeMap<String, (i64, String)> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT relname::text FROM pg_class WHERE relnamespace = 'public'::regnamespace \
         AND relkind = 'r' AND relname <> '_sqlx_migrations' ORDER BY 1",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    let mut out = BTreeMap::new();
    for table in tables {
        let row: (i64, Option<String>) = sqlx::query_as(&format!(
            "SELECT count(*), md5(string_agg(t::text, E'\\n' ORDER BY t::text)) FROM {table} t"
        ))
        .fetch_one(&mut *conn)
        .await
        .unwrap();
        out.insert(table, (row.0, row.1.unwrap_or_default()));
    }
    out
}

/// Every foreign key, by table and name, with its definition.
async fn foreign_keys(conn: &mut PgConnection) -> BTreeMap<(String, String), String> {
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT conrelid::regclass::text, conname::text, pg_get_constraintdef(oid) \
         FROM pg_constraint WHERE contype = 'f' AND connamespace = 'public'::regnamespace",
    )
    .fetch_all(conn)
    .await
    .unwrap();
    rows.into_iter().map(|(t, n, d)| ((t, n), d)).collect()
}

/// Rows in the turn store's tables (the demo seed fills only the school's), for every user.
const TURN_ROWS: &str = "
    INSERT INTO threads (id, school_id, user_id, title, chat_id)
    SELECT gen_random_uuid(), u.school_id, u.id, 'Chat of ' || u.name, 'chat-' || n
      FROM users u, generate_series(1, 2) n;
    INSERT INTO conversation_log (school_id, thread_id, turn_id, message)
    SELECT t.school_id, t.id, t.id, jsonb_build_object('role', 'user', 'content', 'hello ' || n)
      FROM threads t, generate_series(1, 3) n;
    INSERT INTO turn_events (school_id, thread_id, turn_id, seq, payload)
    SELECT t.school_id, t.id, t.id, n, jsonb_build_object('type', 'text', 'n', n)
      FROM threads t, generate_series(0, 2) n;
    INSERT INTO turn_steps (school_id, thread_id, turn_id, agent, step, part, record)
    SELECT t.school_id, t.id, t.id, '', 0, 'model', '{}' FROM threads t;
    INSERT INTO open_turns (school_id, turn_id, thread_id, user_id, expires_at)
    SELECT t.school_id, gen_random_uuid(), t.id, t.user_id, now() + interval '1 hour' FROM threads t;
    INSERT INTO chat_turns (school_id, thread_id, turn_id, sent)
    SELECT t.school_id, t.id, t.id, '{\"id\": \"m1\"}' FROM threads t;
    INSERT INTO chat_feedback (school_id, thread_id, message_id, turn_id, user_id, rating)
    SELECT t.school_id, t.id, 'm1', t.id, t.user_id, 'up' FROM threads t;
    INSERT INTO approvals (school_id, approval_id, thread_id, root_turn_id, turn_id, chain, call_id,
                           tool, input, user_id)
    SELECT t.school_id, gen_random_uuid(), t.id, t.id, t.id, ARRAY[t.id], 'call-1',
           'create_department', '{}', t.user_id FROM threads t;
    INSERT INTO artifacts (school_id, thread_id, filename, media_type, size_bytes, content, created_by)
    SELECT t.school_id, t.id, 'notes.txt', 'text/plain', 5, 'notes', t.user_id FROM threads t;
    INSERT INTO token_usage (school_id, turn_id, user_id, day, input_tokens)
    SELECT t.school_id, t.id, t.user_id, current_date, 100 FROM threads t;
    INSERT INTO audit_log (school_id, actor_user_id, actor_email, event, subject_id, call_id, after)
    SELECT u.school_id, u.id, u.email, 'create.department', gen_random_uuid()::text,
           'call-' || u.id, '{}' FROM users u;
    INSERT INTO tool_call_inbox (school_id, call_id, event, reply, actor_user_id)
    SELECT u.school_id, 'call-' || u.id, 'create.department', '{}', u.id FROM users u;
    INSERT INTO chat_retention (school_id, keep_days) SELECT id, 30 FROM schools;
    INSERT INTO marks (school_id, student_id, subject_id, term_id, assessment, score, recorded_by)
    SELECT s.school_id, s.id, sub.id, term.id, 'Test 1', 75, u.id
      FROM students s
      JOIN LATERAL (SELECT id FROM subjects WHERE school_id = s.school_id LIMIT 1) sub ON true
      JOIN LATERAL (SELECT id FROM terms WHERE school_id = s.school_id LIMIT 1) term ON true
      JOIN LATERAL (SELECT id FROM users WHERE school_id = s.school_id LIMIT 1) u ON true;
    INSERT INTO attendance (school_id, student_id, on_date, present, recorded_by)
    SELECT s.school_id, s.id, current_date, true, u.id
      FROM students s
      JOIN LATERAL (SELECT id FROM users WHERE school_id = s.school_id LIMIT 1) u ON true;
    DELETE FROM threads WHERE chat_id = 'chat-2' AND user_id = (SELECT id FROM users ORDER BY email LIMIT 1);
";

#[tokio::test]
async fn the_rekeying_migrations_keep_every_row_and_every_foreign_key() {
    let scratch = ScratchDb::new().await;
    // The schema as it was before 0050, with the demo schools, and rows in every other table.
    let (mut conn, before_ours) = scratch.seeded_before(FIRST_SHARDING_MIGRATION).await;
    assert!(before_ours >= 26, "only {before_ours} migrations applied");
    sqlx::raw_sql(TURN_ROWS).execute(&mut conn).await.unwrap();
    let before = contents(&mut conn).await;
    let empty: Vec<_> = before.iter().filter(|(_, (n, _))| *n == 0).collect();
    assert!(empty.is_empty(), "tables the test left empty: {empty:?}");
    let keys_before = foreign_keys(&mut conn).await;

    // The re-keying, as `db setup` applies it.
    for migration in MIGRATOR
        .iter()
        .filter(|m| (FIRST_SHARDING_MIGRATION..=LAST_SHARDING_MIGRATION).contains(&m.version))
    {
        conn.apply(migration).await.unwrap();
    }

    let mut after = contents(&mut conn).await;
    let users = after["users"].0;
    let (directory, _) = after
        .remove("user_directory")
        .expect("the directory exists");
    let (reference, _) = after.remove("reference_tables").expect("the list exists");
    assert_eq!(after, before, "rows changed or lost");
    assert_eq!(directory, users, "one directory row per user");
    assert_eq!(reference, 3);
    let mut keys_after = foreign_keys(&mut conn).await;
    let directory_key = keys_after
        .remove(&(
            "user_directory".to_owned(),
            "user_directory_school_id_fkey".to_owned(),
        ))
        .expect("the directory's key to schools");
    assert_eq!(
        directory_key,
        "FOREIGN KEY (school_id) REFERENCES schools(id)"
    );
    assert_eq!(
        keys_after, keys_before,
        "every foreign key is made again as it was"
    );

    // Every foreign key is validated and holds, row by row; every primary key and unique index
    // holds (Postgres built them over the rows); the directory is exactly the users.
    let not_valid: Vec<String> = sqlx::query_scalar(
        "SELECT conname::text FROM pg_constraint \
         WHERE connamespace = 'public'::regnamespace AND NOT convalidated",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert!(not_valid.is_empty(), "not validated: {not_valid:?}");
    let checks: Vec<(String, String)> = sqlx::query_as(
        "SELECT k.conname::text, format( \
             'SELECT count(*) FROM %s c WHERE %s AND NOT EXISTS (SELECT 1 FROM %s p WHERE %s)', \
             k.conrelid::regclass, \
             (SELECT string_agg(format('c.%I IS NOT NULL', a.attname), ' AND ') \
                FROM unnest(k.conkey) n JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = n), \
             k.confrelid::regclass, \
             (SELECT string_agg(format('p.%I = c.%I', pa.attname, ca.attname), ' AND ') \
                FROM unnest(k.conkey, k.confkey) AS pair(mine, theirs) \
                JOIN pg_attribute ca ON ca.attrelid = k.conrelid AND ca.attnum = pair.mine \
                JOIN pg_attribute pa ON pa.attrelid = k.confrelid AND pa.attnum = pair.theirs)) \
         FROM pg_constraint k WHERE k.contype = 'f' AND k.connamespace = 'public'::regnamespace",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert!(checks.len() >= 40, "{} foreign keys", checks.len());
    for (name, sql) in checks {
        let orphans: i64 = sqlx::query_scalar(&sql).fetch_one(&mut conn).await.unwrap();
        assert_eq!(orphans, 0, "{name}: {sql}");
    }
    let mismatched: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT lower(email), school_id, id FROM users \
                               EXCEPT SELECT email, school_id, user_id FROM user_directory) d",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(mismatched, 0);
    assert!(violations(&mut conn).await.unwrap().is_empty());

    // The reads Postgres plans from the keys still plan (`rover_list_staff` grouped by `u.id`,
    // which stood for the whole row only while `id` was the key), and find the same rows.
    let (staff, classes, departments, students): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM rover_list_staff(NULL, '{}', 1000)), \
                (SELECT count(*) FROM rover_list_classes(NULL, 1000)), \
                (SELECT count(*) FROM rover_list_departments(NULL)), \
                (SELECT count(*) FROM rover_find_students('{%}', NULL, NULL, 1000))",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(
        (staff, classes, departments, students),
        (
            after["users"].0,
            after["classes"].0,
            after["departments"].0,
            after["students"].0
        )
    );
}
