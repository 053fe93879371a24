//! The tool server's pool (`rover_domain::pool::CallPool`): it gives connections back with no round
//! trip, so what sqlx's release check caught must hold otherwise — a connection goes back only
//! with its transaction over, one whose state is unknown is closed, one the server ended is
//! replaced (with every idle one that died with it) — and its bound and its wait still hold.

use std::time::Duration;

use rover_domain::call::{CallReads, begin_call};
use rover_domain::pool::CallPool;
use rover_domain::testing::TestDb;
use rover_settings::{DatabaseSettings, Secret};

fn pool(db: &TestDb, max_connections: u32) -> CallPool {
    rover_domain::call_pool(&DatabaseSettings {
        url: Secret::new(db.app_url().to_owned()),
        max_connections,
        acquire_timeout_ms: 2_000,
    })
    .expect("the URL parses")
}

async fn backend(pool: &CallPool) -> i32 {
    let mut conn = pool.acquire().await.expect("a connection");
    sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *conn)
        .await
        .expect("the backend answers")
}

/// The pool's next connection (its only one, with a pool of one), checked to carry nothing of an
/// earlier call: no school set and no transaction open. Returns its backend.
pub(crate) async fn handed_on_clean(pool: &CallPool, what: &str) -> i32 {
    let mut conn = pool.acquire().await.expect("the connection, back");
    let school: Option<String> =
        sqlx::query_scalar("SELECT nullif(current_setting('app.school_id', true), '')")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    assert_eq!(school, None, "{what}: its school outlived it");
    // Outside a transaction, each statement is its own: two get two transaction ids.
    let mut xids = Vec::new();
    for _ in 0..2 {
        let xid: String = sqlx::query_scalar("SELECT pg_current_xact_id()::text")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        xids.push(xid);
    }
    assert_ne!(xids[0], xids[1], "{what}: handed on inside a transaction");
    sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *conn)
        .await
        .unwrap()
}

fn read() -> CallReads<'static> {
    CallReads {
        policy: true,
        ..CallReads::default()
    }
}

#[tokio::test]
async fn a_connection_goes_back_and_is_used_again_with_its_transaction_over() {
    let db = TestDb::new().await;
    let pool = pool(&db, 1);
    let first = backend(&pool).await;
    assert_eq!(backend(&pool).await, first, "the same connection, kept");

    // A read's transaction dropped unfinished (as the tool server drops a read's): rolled back
    // before the connection is handed on — the next holder sees no school set and no transaction.
    let start = begin_call(&pool, db.ids.hill, read()).await.expect("opens");
    drop(start.tx);
    let pid = handed_on_clean(&pool, "a dropped read's transaction").await;
    assert_eq!(pid, first, "still the one connection");
}

#[tokio::test]
async fn a_connection_marked_unknown_is_closed_not_handed_on() {
    let db = TestDb::new().await;
    let pool = pool(&db, 1);
    let first = backend(&pool).await;
    let mut conn = pool.acquire().await.unwrap();
    conn.close_on_drop();
    drop(conn);
    assert_ne!(backend(&pool).await, first, "a new connection");
}

#[tokio::test]
async fn connections_the_server_ended_are_replaced_and_the_call_runs() {
    let db = TestDb::new().await;
    let pool = pool(&db, 2);
    // Two idle connections, both ended by the server (as a restart would).
    let (a, b) = (pool.acquire().await.unwrap(), pool.acquire().await.unwrap());
    let mut pids = Vec::new();
    for mut conn in [a, b] {
        let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        pids.push(pid);
    }
    for pid in &pids {
        let ended: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1, 5000)")
            .bind(pid)
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert!(ended, "backend {pid} ended");
    }
    // The call meets a dead connection, drops the other dead one too, and runs on a new one.
    let mut start = begin_call(&pool, db.ids.hill, read())
        .await
        .expect("the call opens on a live connection");
    assert!(start.school_exists);
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(start.tx.connection())
        .await
        .unwrap();
    assert!(!pids.contains(&pid), "a new backend, not {pids:?}");
    start.tx.rollback().await.unwrap();
}

#[tokio::test]
async fn the_pool_holds_no_more_than_its_connections_and_waits_a_bounded_time() {
    let db = TestDb::new().await;
    let pool = rover_domain::call_pool(&DatabaseSettings {
        url: Secret::new(db.app_url().to_owned()),
        max_connections: 1,
        acquire_timeout_ms: 100,
    })
    .unwrap();
    let held = pool.acquire().await.unwrap();
    let waited = tokio::time::Instant::now();
    let error = pool.acquire().await.expect_err("no second connection");
    assert!(matches!(error, sqlx::Error::PoolTimedOut), "{error:?}");
    assert!(waited.elapsed() >= Duration::from_millis(100));
    drop(held);
    pool.acquire().await.expect("free again");
}

#[tokio::test]
async fn a_call_dropped_while_it_waits_leaves_no_transaction_behind() {
    let db = TestDb::new().await;
    let pool = pool(&db, 1);
    let pid = backend(&pool).await;
    // The opening reads the school's policy version: with that table locked by another session,
    // the server holds the opening until the lock goes, so the call is certainly mid-wait when
    // it is dropped (an answer fast enough to land within one poll cannot happen).
    let mut holder = db.pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE policy_versions IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *holder)
        .await
        .unwrap();
    {
        let open = begin_call(&pool, db.ids.hill, read());
        tokio::pin!(open);
        // One poll sends the opening (`BEGIN`, the school) and waits for its answer...
        assert!(
            tokio::time::timeout(Duration::ZERO, &mut open)
                .await
                .is_err()
        );
        // ...which the server has begun (its backend waits on the lock inside the opening).
        let mut waited = 0;
        loop {
            let (query, wait): (String, Option<String>) = sqlx::query_as(
                "SELECT query, wait_event_type FROM pg_stat_activity WHERE pid = $1",
            )
            .bind(pid)
            .fetch_one(&db.pool)
            .await
            .unwrap();
            if query.starts_with("BEGIN; SELECT * FROM rover_open_call(")
                && wait.as_deref() == Some("Lock")
            {
                break;
            }
            waited += 1;
            assert!(
                waited < 500,
                "the opening never reached the server: {query} ({wait:?})"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The call is dropped (cancelled, timed out) before the answer is read.
    }
    // The server finishes the opening, leaving its transaction open on that connection; the
    // connection must not reach the next call that way.
    holder.rollback().await.unwrap();
    handed_on_clean(&pool, "a cancelled call's transaction").await;
}
