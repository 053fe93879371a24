//! Database round trips per tool call, counted on the wire: a proxy between the pipeline's pool
//! and Postgres counts each time the client starts sending after the server has answered (a
//! pipelined batch or a multi-statement query is one). Adding a round trip anywhere — a statement,
//! a `BEGIN`, a ping — fails these tests.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rover_contracts::wire::ToolOutcome;
use rover_settings::{DatabaseSettings, Secret};
use rover_toolserver::Pipeline;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use crate::helpers::spawn_toolserver;

/// A TCP proxy to Postgres that counts client → server round trips.
struct CountingProxy {
    addr: SocketAddr,
    round_trips: Arc<AtomicU64>,
}

impl CountingProxy {
    async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let round_trips = Arc::new(AtomicU64::new(0));
        let counter = round_trips.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let server = TcpStream::connect(upstream).await.unwrap();
                // Whether the server spoke last: the next client bytes start a round trip.
                let server_spoke = Arc::new(AtomicBool::new(true));
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                let (spoke, counter) = (server_spoke.clone(), counter.clone());
                tokio::spawn(async move {
                    let mut buffer = vec![0; 64 * 1024];
                    while let Ok(n @ 1..) = client_read.read(&mut buffer).await {
                        if spoke.swap(false, Ordering::SeqCst) {
                            counter.fetch_add(1, Ordering::SeqCst);
                        }
                        if server_write.write_all(&buffer[..n]).await.is_err() {
                            break;
                        }
                    }
                });
                tokio::spawn(async move {
                    let mut buffer = vec![0; 64 * 1024];
                    while let Ok(n @ 1..) = server_read.read(&mut buffer).await {
                        // Forward first: the client cannot answer bytes it has not received.
                        if client_write.write_all(&buffer[..n]).await.is_err() {
                            break;
                        }
                        server_spoke.store(true, Ordering::SeqCst);
                    }
                });
            }
        });
        Self { addr, round_trips }
    }

    fn count(&self) -> u64 {
        self.round_trips.load(Ordering::SeqCst)
    }
}

/// Round trips of `calls` runs of one tool call, per call, in steady state: one pooled
/// connection, warmed up (connected, statements prepared), and each call's background work
/// (the read's `ROLLBACK`) finished before counting stops. Taking a connection from the pool and
/// giving it back cost none (`rover_domain::pool::CallPool`).
async fn round_trips_per_call(event: &str, args: impl Fn(u32) -> serde_json::Value) -> u64 {
    let server = spawn_toolserver().await;
    let caller = server.caller("admin@hill.school").await;
    // postgres://user:password@host:port/database → the same through the proxy.
    let url = server.db.app_url();
    let at = url.rfind('@').unwrap();
    let slash = at + url[at..].find('/').unwrap();
    let upstream = tokio::net::lookup_host(&url[at + 1..slash])
        .await
        .unwrap()
        .next()
        .unwrap();
    let proxy = CountingProxy::start(upstream).await;
    let proxied = format!("{}@{}{}", &url[..at], proxy.addr, &url[slash..]);
    let pool = rover_domain::call_pool(&DatabaseSettings {
        url: Secret::new(proxied),
        max_connections: 1,
        ..DatabaseSettings::default()
    })
    .unwrap();
    let pipeline = Pipeline::new(server.keys.verifier(), pool.clone());
    let run = |i: u32| {
        let call = server.tool_call(&caller, event, args(i));
        let pipeline = &pipeline;
        async move {
            let reply = pipeline.execute(call, None).await;
            assert_eq!(reply.outcome, ToolOutcome::Ok, "{reply:?}");
        }
    };
    for i in 0..3 {
        run(1000 + i).await;
    }
    // Holding the only connection means every earlier call's work on it is over.
    let held = pool.acquire().await.unwrap();
    let before = proxy.count();
    drop(held);
    let calls = 10;
    for i in 0..calls {
        run(i).await;
    }
    let held = pool.acquire().await.unwrap();
    let total = proxy.count() - before;
    drop(held);
    assert_eq!(total % u64::from(calls), 0, "every call alike: {total}");
    total / u64::from(calls)
}

/// A read with a one-trip form, its school's policy rows known: ONE round trip — the opening
/// query (the tenant, the school, the policy version) and the query in one read-only implicit
/// transaction, which ends with it: nothing to roll back. (Before: 8 — ping, `BEGIN`, tenant,
/// school, policy, query, `COMMIT`, sqlx's release check; then 4, with the release check; then
/// 2 and a `ROLLBACK` after the reply.)
#[tokio::test]
async fn a_one_trip_read_takes_one_round_trip() {
    for (event, args) in [
        ("list.departments", json!({})),
        ("list.classes", json!({})),
        ("list.staff", json!({})),
        ("list.staff", json!({ "query": "hill" })),
        ("find.students", json!({ "query": "a" })),
    ] {
        let per_call = round_trips_per_call(event, |_| args.clone()).await;
        assert_eq!(
            per_call, 1,
            "{event} {args}: the opening and the query together"
        );
    }
}

/// A read without that form (`get_enrollment_summary`: two queries): the opening query (`BEGIN`,
/// the tenant, the school, the policy version), then each of its queries before its reply, then
/// its `ROLLBACK` as the connection goes back, after the reply.
#[tokio::test]
async fn a_two_step_read_takes_a_round_trip_per_query_and_its_opening() {
    let per_call = round_trips_per_call("get.enrollment_summary", |_| json!({})).await;
    assert_eq!(
        per_call,
        1 + 2 + 1,
        "3 before the reply, its ROLLBACK after"
    );
}

/// A write: three — the opening query (with the call id's lock and stored reply), the write, the
/// audit and inbox rows with `COMMIT` in one query — and nothing as the connection goes back.
/// (Before: 12, then 5, then 4 with sqlx's release check.)
#[tokio::test]
async fn a_write_takes_three_round_trips() {
    let per_call = round_trips_per_call(
        "create.department",
        |i| json!({ "name": format!("Department {i}") }),
    )
    .await;
    assert_eq!(
        per_call, 3,
        "the opening, the write, the audit and inbox rows with COMMIT"
    );
}
