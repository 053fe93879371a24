//! Operations: health and readiness probes, an unknown event answered clearly while the consumer
//! keeps serving, and graceful shutdown that stops consuming.

use rover_contracts::wire::ToolOutcome;
use rover_testkit::{http_get, within};
use serde_json::json;

use crate::helpers::{error, spawn_toolserver};

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
