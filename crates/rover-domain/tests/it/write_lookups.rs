//! A write's opening query looks its call id up by the inbox's key: it reads one stored reply at
//! most, however many the school has. (Its text arguments once reached `rover_open_call` with the
//! `"C"` collation of `convert_from`, which the key's default-collation index cannot serve, so
//! every write read the school's whole inbox — a cost that grew with each write ever made.)
//! Counted from Postgres's own statistics for the inbox's key.

use rover_contracts::ids::{ThreadId, ToolCallId, TurnId, UserId};
use rover_domain::call::{ApprovalRead, CallReads, begin_call};
use rover_domain::testing::TestDb;
use serde_json::json;

/// Index entries read through the inbox's primary key so far (flushed statistics).
async fn inbox_entries_read(owner: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = 'tool_call_inbox_pkey'",
    )
    .fetch_one(owner)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_writes_opening_reads_one_stored_reply_not_the_schools_inbox() {
    let db = TestDb::new().await;
    let owner = sqlx::PgPool::connect(db.owner_url()).await.unwrap();
    // A school that has made a thousand writes.
    sqlx::query(
        "INSERT INTO tool_call_inbox (school_id, call_id, event, reply) \
         SELECT $1, 'earlier/call_' || n, 'create.department', '{}' \
         FROM generate_series(1, 1000) AS n",
    )
    .bind(db.ids.hill.as_uuid())
    .execute(&owner)
    .await
    .unwrap();
    let pool = rover_domain::call_pool(&rover_settings::DatabaseSettings {
        url: rover_settings::Secret::new(db.app_url().to_owned()),
        max_connections: 1,
        acquire_timeout_ms: 2_000,
    })
    .unwrap();
    let before = inbox_entries_read(&owner).await;

    let turn = TurnId::new();
    let call = ToolCallId::for_turn(turn, "call_1");
    let input = json!({ "name": "Music" });
    let reads = CallReads {
        policy: true,
        policy_cached: None,
        inbox: Some(&call),
        approval: Some(ApprovalRead {
            tool: "create_department",
            call_id: "call_1",
            turn,
            thread: ThreadId::new(),
            user: UserId::new(),
            input: &input,
        }),
    };
    // Several calls, as a connection's plan for the lookup settles after the first few.
    for _ in 0..8 {
        let mut start = begin_call(&pool, db.ids.hill, reads).await.expect("opens");
        assert!(start.stored.is_none(), "this call id never ran");
        // This backend's statistics reach the shared ones as its transaction ends.
        sqlx::query("SELECT pg_stat_force_next_flush()")
            .execute(start.tx.connection())
            .await
            .unwrap();
        start.tx.rollback().await.unwrap();
    }
    let read = inbox_entries_read(&owner).await - before;
    assert!(
        read <= 8,
        "eight lookups of an unknown call id read {read} inbox entries (the school has 1,000)"
    );
}
