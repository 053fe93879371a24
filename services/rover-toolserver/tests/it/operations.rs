//! Operations: health and readiness probes, an unknown event answered clearly while the consumer
//! keeps serving, graceful shutdown that stops consuming, and one consumer per RPC server, each
//! with its share of the prefetch.

use rover_contracts::wire::ToolOutcome;
use rover_testkit::{http_get, within};
use serde_json::json;

use crate::helpers::{TestServer, error, spawn_toolserver, spawn_toolserver_with};

#[tokio::test]
async fn health_and_readiness_answer() {
    let server = spawn_toolserver().await;
    assert_eq!(http_get(server.http, "/healthz").await.unwrap().0, 200);
    let (status, body) = http_get(server.http, "/readyz").await.unwrap();
    assert_eq!((status, body.as_str()), (200, "ready"));
}

#[tokio::test]
async fn an_unknown_event_gets_a_clear_error_and_the_consumer_keeps_serving() {
    let server = spawn_toolserver().await;
    let reply = server
        .call("admin@hill.school", "drop.database", json!({}))
        .await;
    assert_eq!(reply.outcome, ToolOutcome::Invalid);
    assert_eq!(error(&reply), "Unknown tool event `drop.database`.");

    // A frame that is not a tool call at all: answered too, since the call id is known.
    let raw = within(
        "raw reply",
        server.rpc.call(
            &server.topology.tools_exchange(),
            "list.departments",
            "garbage/1",
            b"not json".to_vec(),
        ),
    )
    .await
    .unwrap();
    let reply: rover_contracts::wire::ToolReply = rover_contracts::wire::decode(&raw).unwrap();
    assert_eq!(reply.outcome, ToolOutcome::Invalid);
    assert!(
        error(&reply).starts_with("The tool call could not be read"),
        "{}",
        error(&reply)
    );

    // And the next good call is served.
    let reply = server
        .call("admin@hill.school", "list.departments", json!({}))
        .await;
    assert_eq!(reply.outcome, ToolOutcome::Ok);
}

#[tokio::test]
async fn shutdown_stops_consuming_and_returns() {
    let mut server = spawn_toolserver().await;
    assert_eq!(
        server
            .call("admin@hill.school", "list.departments", json!({}))
            .await
            .outcome,
        ToolOutcome::Ok
    );
    let caller = server.caller("admin@hill.school").await;
    let call = server.tool_call(&caller, "list.departments", json!({}));
    let rpc = server.broker.rpc_client(rover_messaging::RpcOptions {
        attempt_timeout: std::time::Duration::from_millis(500),
        attempts: 1,
    });
    let exchange = server.topology.tools_exchange();
    server
        .shutdown()
        .await
        .expect("run returns Ok after shutdown");
    // Nobody consumes any more: a call now times out instead of being answered.
    let result = rpc
        .call(
            &exchange,
            &call.event,
            call.call_id.as_str(),
            rover_contracts::wire::encode(&call),
        )
        .await;
    assert!(
        matches!(
            result,
            Err(rover_messaging::RpcError::DeadlineExceeded { .. })
        ),
        "{result:?}"
    );
}

/// The prefetch of each consumer on the tools queue, smallest first.
fn tools_consumers(server: &TestServer) -> Vec<u64> {
    let queue = server.topology.tools_queue();
    let mut prefetches: Vec<u64> = server
        .vhost
        .list("list_consumers", &["queue_name", "prefetch_count"])
        .iter()
        .filter(|consumer| consumer["queue_name"] == queue.as_str())
        .map(|consumer| consumer["prefetch_count"].as_u64().expect("a prefetch"))
        .collect();
    prefetches.sort_unstable();
    prefetches
}

#[tokio::test]
async fn each_rpc_server_consumes_with_its_share_of_the_prefetch_and_every_one_stops_on_shutdown() {
    let mut server = spawn_toolserver_with(|settings| {
        settings.amqp.prefetch = 8;
        settings.database.max_connections = 8;
        settings.runtime.rpc_shards = 3;
    })
    .await;
    // The tool server as a whole still takes at most `amqp.prefetch` calls at once. (Each
    // `rabbitmqctl` run takes most of a second: the loop waits on the broker, not on a timer.)
    let consumers = within("three RPC servers consuming", async {
        loop {
            let consumers = tools_consumers(&server);
            if consumers.len() >= 3 {
                break consumers;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert_eq!(consumers, [2, 3, 3]);
    // Calls are answered, whichever RPC server takes them.
    let caller = server.caller("admin@hill.school").await;
    let calls = (0..9).map(|_| {
        let call = server.tool_call(&caller, "list.departments", json!({}));
        let server = &server;
        async move { server.send(&call).await }
    });
    for reply in futures::future::join_all(calls).await {
        assert_eq!(reply.outcome, ToolOutcome::Ok, "{reply:?}");
    }
    server
        .shutdown()
        .await
        .expect("run returns Ok after shutdown");
    assert_eq!(
        tools_consumers(&server),
        Vec::<u64>::new(),
        "none left consuming"
    );
}
