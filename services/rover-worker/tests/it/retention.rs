//! The chat retention sweep: a school that keeps chats for N days loses those idle for longer
//! (everything they own), never one with a reply still open, never another school's; sweeps
//! running at once on several replicas delete each chat once; old tombstones are forgotten.

use rover_contracts::ids::{SchoolId, ThreadId, TurnId, UserId};
use rover_domain::testing::TestDb;
use serde_json::json;
use sqlx::PgPool;

/// A chat of `user` in `school`, with one turn and a message, idle for `idle_days`.
async fn chat(
    db: &TestDb,
    owner: &PgPool,
    school: SchoolId,
    user: UserId,
    idle_days: i32,
) -> ThreadId {
    let thread = ThreadId::new();
    let turn = TurnId::new();
    let mut tx = rover_domain::begin_tenant(&db.pool, school).await.unwrap();
    rover_turnstore::threads::ensure_thread(&mut tx, thread, user)
        .await
        .unwrap();
    let chat_id = format!("chat-{}", thread.as_uuid().simple());
    rover_turnstore::chats::record_turn(
        &mut tx,
        thread,
        turn,
        &rover_turnstore::chats::Opening {
            chat_id: &chat_id,
            campus: None,
            title: Some("Old news".to_owned()),
            sent: Some(json!({ "id": "u1", "role": "user", "parts": [] })),
            answers: None,
            trace_id: None,
        },
    )
    .await
    .unwrap();
    rover_turnstore::conversation_log::append(
        &mut tx,
        thread,
        turn,
        &[json!({ "role": "user", "content": "Pupil records" })],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    sqlx::query(
        "UPDATE threads SET last_activity_at = now() - make_interval(days => $2) WHERE id = $1",
    )
    .bind(thread.as_uuid())
    .bind(idle_days)
    .execute(owner)
    .await
    .unwrap();
    thread
}

async fn exists(owner: &PgPool, thread: ThreadId) -> bool {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM threads WHERE id = $1)")
        .bind(thread.as_uuid())
        .fetch_one(owner)
        .await
        .unwrap()
}

#[tokio::test]
async fn expired_chats_go_open_ones_and_other_schools_stay_and_replicas_do_not_collide() {
    let db = TestDb::new().await;
    let owner = PgPool::connect(db.owner_url()).await.unwrap();
    let (hill, lakeside) = (db.ids.hill, db.ids.lakeside);
    let admin = db.ids.user("admin@hill.school");
    let lake = db.ids.user("admin@lakeside.college");

    // No retention row anywhere: nothing goes, however old.
    let ancient = chat(&db, &owner, hill, admin, 4000).await;
    assert_eq!(
        rover_worker::retention::sweep(&db.pool)
            .await
            .unwrap()
            .chats,
        0
    );
    assert!(exists(&owner, ancient).await);

    sqlx::query("INSERT INTO chat_retention (school_id, keep_days) VALUES ($1, 30)")
        .bind(hill.as_uuid())
        .execute(&owner)
        .await
        .unwrap();
    let mut expired = vec![ancient];
    for _ in 0..6 {
        expired.push(chat(&db, &owner, hill, admin, 31).await);
    }
    let recent = chat(&db, &owner, hill, admin, 29).await;
    let running = chat(&db, &owner, hill, admin, 90).await;
    sqlx::query(
        "INSERT INTO open_turns (school_id, turn_id, thread_id, user_id, expires_at) \
         VALUES ($1, gen_random_uuid(), $2, $3, now() + interval '10 minutes')",
    )
    .bind(hill.as_uuid())
    .bind(running.as_uuid())
    .bind(admin.as_uuid())
    .execute(&owner)
    .await
    .unwrap();
    let other_school = chat(&db, &owner, lakeside, lake, 400).await;

    // Three replicas sweep at once: each expired chat is deleted exactly once between them.
    let (a, b, c) = tokio::join!(
        rover_worker::retention::sweep(&db.pool),
        rover_worker::retention::sweep(&db.pool),
        rover_worker::retention::sweep(&db.pool),
    );
    let total = a.unwrap().chats + b.unwrap().chats + c.unwrap().chats;
    assert_eq!(total, expired.len() as u64);
    for thread in &expired {
        assert!(
            !exists(&owner, *thread).await,
            "{thread} outlived its school's retention"
        );
    }
    for thread in [recent, running, other_school] {
        assert!(exists(&owner, thread).await, "{thread} was swept");
    }
    // Everything the expired chats owned went with them; each left a tombstone.
    let ids: Vec<uuid::Uuid> = expired.iter().map(ThreadId::as_uuid).collect();
    for table in ["conversation_log", "chat_turns"] {
        let left: i64 = sqlx::query_scalar(&format!(
            "SELECT count(*) FROM {table} WHERE thread_id = ANY($1)"
        ))
        .bind(&ids)
        .fetch_one(&owner)
        .await
        .unwrap();
        assert_eq!(left, 0, "{table}");
    }
    let tombstones: i64 =
        sqlx::query_scalar("SELECT count(*) FROM deleted_threads WHERE thread_id = ANY($1)")
            .bind(&ids)
            .fetch_one(&owner)
            .await
            .unwrap();
    assert_eq!(tombstones, expired.len() as i64);

    // A day later, the tombstones are forgotten.
    sqlx::query("UPDATE deleted_threads SET deleted_at = now() - interval '25 hours'")
        .execute(&owner)
        .await
        .unwrap();
    let swept = rover_worker::retention::sweep(&db.pool).await.unwrap();
    assert_eq!((swept.chats, swept.tombstones), (0, expired.len() as i64));
}

/// A retention period is range-checked where it is set (1–36,500 days), and a school whose sweep
/// fails anyway (here: a period past the check, its constraint dropped by hand) is logged and
/// skipped — every other school is swept all the same. 10⁸ days made the sweep's date arithmetic
/// fail, and that stopped the sweep for every school after it.
#[tokio::test]
async fn a_retention_period_is_range_checked_and_one_schools_error_never_stops_the_others() {
    let db = TestDb::new().await;
    let owner = PgPool::connect(db.owner_url()).await.unwrap();
    let (hill, lakeside) = (db.ids.hill, db.ids.lakeside);
    let set = |school: SchoolId, days: i64| {
        sqlx::query(
            "INSERT INTO chat_retention (school_id, keep_days) VALUES ($1, $2::int) \
             ON CONFLICT (school_id) DO UPDATE SET keep_days = excluded.keep_days",
        )
        .bind(school.as_uuid())
        .bind(days)
        .execute(&owner)
    };
    for refused in [0, -1, 36_501, 100_000_000] {
        let error = set(hill, refused).await.expect_err("out of range");
        assert!(
            error.to_string().contains("chat_retention_keep_days_check"),
            "{refused}: {error}"
        );
    }
    set(hill, 36_500).await.expect("the longest period");
    set(hill, 1).await.expect("the shortest period");

    // A period that got past the check: that school's sweep fails, the other's goes on.
    sqlx::query("ALTER TABLE chat_retention DROP CONSTRAINT chat_retention_keep_days_check")
        .execute(&owner)
        .await
        .unwrap();
    set(hill, 100_000_000).await.unwrap();
    set(lakeside, 30).await.unwrap();
    let admin = db.ids.user("admin@hill.school");
    let lake = db.ids.user("admin@lakeside.college");
    let kept = chat(&db, &owner, hill, admin, 400).await;
    let expired = chat(&db, &owner, lakeside, lake, 31).await;
    let swept = rover_worker::retention::sweep(&db.pool)
        .await
        .expect("one school's error does not fail the sweep");
    assert_eq!((swept.chats, swept.failed_schools), (1, 1));
    assert!(
        !exists(&owner, expired).await,
        "the other school was not swept"
    );
    assert!(exists(&owner, kept).await);
}

/// The sweep marks every school's approvals past their time expired — only those, and as timed
/// out (`decided_at` at or after `expires_at`), so a late answer is told why.
#[tokio::test]
async fn the_sweep_expires_every_schools_approvals_past_their_time_and_no_others() {
    let db = TestDb::new().await;
    let owner = PgPool::connect(db.owner_url()).await.unwrap();
    let mut approvals = Vec::new();
    for (school, user, ttl) in [
        (db.ids.hill, db.ids.user("admin@hill.school"), 0.0),
        (db.ids.lakeside, db.ids.user("admin@lakeside.college"), 0.0),
        (db.ids.hill, db.ids.user("admin@hill.school"), 3600.0),
    ] {
        let thread = chat(&db, &owner, school, user, 0).await;
        let call = rover_turnstore::approvals::GatedCall {
            thread,
            chain: vec![TurnId::new()],
            user,
            call_id: "0-call".to_owned(),
            tool: "create_department".to_owned(),
            input: json!({ "name": "Sciences" }),
        };
        let mut tx = rover_domain::begin_tenant(&db.pool, school).await.unwrap();
        let rover_turnstore::approvals::ApprovalState::Pending { approval_id } =
            rover_turnstore::approvals::approval_for(
                &mut tx,
                &call,
                std::time::Duration::from_secs_f64(ttl),
            )
            .await
            .unwrap()
        else {
            panic!("a new approval is pending");
        };
        tx.commit().await.unwrap();
        approvals.push(approval_id);
    }
    let swept = rover_worker::retention::sweep(&db.pool).await.unwrap();
    assert_eq!(swept.approvals, 2);
    let states: Vec<(String, bool)> = sqlx::query_as(
        "SELECT state, coalesce(decided_at >= expires_at, false) FROM approvals \
         WHERE approval_id = ANY($1) ORDER BY array_position($1, approval_id)",
    )
    .bind(&approvals)
    .fetch_all(&owner)
    .await
    .unwrap();
    assert_eq!(
        states,
        [
            ("expired".to_owned(), true),
            ("expired".to_owned(), true),
            ("pending".to_owned(), false),
        ]
    );
    let again = rover_worker::retention::sweep(&db.pool).await.unwrap();
    assert_eq!(again.approvals, 0);
}
