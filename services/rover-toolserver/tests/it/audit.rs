//! Audit and idempotency: exactly one audit row per successful write, none for anything else; a
//! repeated call id — in sequence or concurrently — runs once and gets the same reply.

use rover_contracts::wire::ToolOutcome;
use serde_json::json;

use crate::helpers::spawn_toolserver;

#[tokio::test]
async fn one_audit_row_per_successful_write_and_none_otherwise() {
    let server = spawn_toolserver().await;
    let admin = "admin@hill.school";
    // Reads, denials, validation errors and failed writes: no audit row.
    assert_eq!(
        server
            .call(admin, "list.departments", json!({}))
            .await
            .outcome,
        ToolOutcome::Ok
    );
    assert_eq!(
        server
            .call(
                "bursar@hill.school",
                "create.department",
                json!({ "name": "X" })
            )
            .await
            .outcome,
        ToolOutcome::Denied
    );
    assert_eq!(
        server
            .call(admin, "create.department", json!({ "name": "" }))
            .await
            .outcome,
        ToolOutcome::Invalid
    );
    assert_eq!(
        server
            .call(admin, "create.department", json!({ "name": "Languages" }))
            .await
            .outcome,
        ToolOutcome::Conflict
    );
    assert_eq!(server.count("audit_log").await, 0);
    assert_eq!(server.count("tool_call_inbox").await, 0);

    // A successful write: one audit row, naming who, where, what, which call and which trace.
    let caller = server.caller(admin).await;
    let call = server.tool_call(&caller, "create.department", json!({ "name": "Sciences" }));
    let reply = server.send(&call).await;
    assert_eq!(reply.outcome, ToolOutcome::Ok);
    let rows: Vec<(String, String, String, Option<String>, serde_json::Value)> =
        sqlx::query_as("SELECT actor_email, event, call_id, subject_id, after FROM audit_log")
            .fetch_all(&server.owner)
            .await
            .unwrap();
    assert_eq!(rows.len(), 1);
    let (actor, event, call_id, subject_id, after) = &rows[0];
    assert_eq!(
        (actor.as_str(), event.as_str(), call_id.as_str()),
        (admin, "create.department", call.call_id.as_str())
    );
    assert_eq!(
        subject_id.as_deref(),
        crate::helpers::data(&reply)["id"].as_str()
    );
    assert_eq!(after["name"], "Sciences");
    assert_eq!(server.count("tool_call_inbox").await, 1);
}

#[tokio::test]
async fn a_repeated_call_id_returns_the_stored_reply_without_running_again() {
    let server = spawn_toolserver().await;
    let caller = server.caller("admin@hill.school").await;
    let call = server.tool_call(&caller, "create.department", json!({ "name": "Sciences" }));
    let first = server.send(&call).await;
    // The same call, re-sent (a retry after a lost reply): same reply, nothing new written.
    let second = server.send(&call).await;
    assert_eq!(first, second);
    assert_eq!(first.outcome, ToolOutcome::Ok, "{first:?}");
    assert_eq!(server.count("audit_log").await, 1);
    let sciences: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM departments WHERE name = 'Sciences' AND school_id = $1",
    )
    .bind(server.db.ids.hill.as_uuid())
    .fetch_one(&server.owner)
    .await
    .unwrap();
    assert_eq!(sciences, 1);
}

#[tokio::test]
async fn concurrent_deliveries_of_one_call_id_write_once_and_reply_alike() {
    let server = spawn_toolserver().await;
    let caller = server.caller("amina@hill.school").await;
    let ids = &server.db.ids;
    let call = server.tool_call(
        &caller,
        "record.attendance",
        json!({ "class": ids.class("S1 Blue"), "absent": [ids.student("Nakato Sarah")] }),
    );
    // Two RPC clients, so both deliveries are in flight at once under the same call id.
    let other = server.broker.rpc_client(rover_messaging::RpcOptions {
        attempt_timeout: std::time::Duration::from_secs(10),
        attempts: 1,
    });
    let body = rover_contracts::wire::encode(&call);
    let exchange = server.topology.tools_exchange();
    let (a, b) = futures::join!(
        server
            .rpc
            .call(&exchange, &call.event, call.call_id.as_str(), body.clone()),
        other.call(&exchange, &call.event, call.call_id.as_str(), body),
    );
    let a: rover_contracts::wire::ToolReply = rover_contracts::wire::decode(&a.unwrap()).unwrap();
    let b: rover_contracts::wire::ToolReply = rover_contracts::wire::decode(&b.unwrap()).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.outcome, ToolOutcome::Ok, "{a:?}");
    assert_eq!(server.count("audit_log").await, 1);
    assert_eq!(server.count("tool_call_inbox").await, 1);
}
