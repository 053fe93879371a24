//! Approval is decided by `execute()`, whatever sent the call: a write whose school's policy says
//! `always` runs only with an approval bound to its very call — an approved row given to the turn
//! running it, for this call id, input, staff member and chat; or an approval the gateway signed
//! into the call's identity (MCP) — and is refused otherwise with `approval_required`, nothing
//! written. A caller that skips the worker's gate (MCP, a future door, anything that can publish)
//! cannot write around the policy.

use chrono::Utc;
use rover_contracts::identity::{ApprovedCall, TurnGrant};
use rover_contracts::ids::{ThreadId, ToolCallId, TurnId, UserId};
use rover_contracts::wire::{ToolCall, ToolOutcome};
use serde_json::{Value, json};

use crate::helpers::{Caller, TestServer, data, spawn_toolserver};

const ADMIN: &str = "admin@hill.school";
const COLLEAGUE: &str = "kololo.admin@hill.school";

/// The admin's school asks for approval of every write.
async fn require_approval(server: &TestServer) {
    let school = server.db.ids.school_of(ADMIN);
    sqlx::query("UPDATE tool_approval_policy SET mode = 'always' WHERE school_id = $1")
        .bind(school.as_uuid())
        .execute(&server.owner)
        .await
        .expect("set the policy");
}

/// A write call of `caller` in `turn` on `thread`, with the model's call id `model_id`.
fn write_call(
    server: &TestServer,
    caller: &Caller,
    (turn, thread): (TurnId, ThreadId),
    model_id: &str,
    args: Value,
) -> ToolCall {
    let grant = TurnGrant {
        turn_id: turn,
        thread_id: thread,
        identity: caller.identity.clone(),
        scope: caller.scope.clone(),
    };
    ToolCall {
        call_id: ToolCallId::for_turn(turn, model_id),
        event: "create.department".to_owned(),
        identity: server
            .keys
            .signer()
            .mint(grant, Utc::now(), chrono::Duration::minutes(5))
            .expect("mint"),
        args,
    }
}

/// A chat of `user` with an approved row for `model_id` and `input`, given to `consumer`.
async fn approve(
    server: &TestServer,
    user: UserId,
    (consumer, thread): (TurnId, ThreadId),
    model_id: &str,
    input: &Value,
) {
    let school = server.db.ids.school_of(ADMIN).as_uuid();
    sqlx::query(
        "INSERT INTO threads (id, school_id, user_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
    )
    .bind(thread.as_uuid())
    .bind(school)
    .bind(user.as_uuid())
    .execute(&server.owner)
    .await
    .expect("a chat");
    let root = TurnId::new();
    sqlx::query(
        "INSERT INTO approvals (school_id, approval_id, thread_id, root_turn_id, turn_id, chain, \
                                call_id, tool, input, user_id, state, consumer_turn_id, decided_at) \
         VALUES ($1, gen_random_uuid(), $2, $3, $3, ARRAY[$3], $4, 'create_department', $5, $6, \
                 'approved', $7, now())",
    )
    .bind(school)
    .bind(thread.as_uuid())
    .bind(root.as_uuid())
    .bind(model_id)
    .bind(input)
    .bind(user.as_uuid())
    .bind(consumer.as_uuid())
    .execute(&server.owner)
    .await
    .expect("an approved row");
}

#[tokio::test]
async fn a_gated_write_without_an_approval_is_refused_and_writes_nothing() {
    let server = spawn_toolserver().await;
    require_approval(&server).await;
    let before = server.state().await;

    let reply = server
        .call(ADMIN, "create.department", json!({ "name": "Unapproved" }))
        .await;
    assert_eq!(reply.outcome, ToolOutcome::ApprovalRequired, "{reply:?}");
    let error = reply.result.to_model_string();
    assert!(error.contains("approval"), "{error}");
    assert_eq!(
        server.state().await,
        before,
        "nothing written, no audit row"
    );

    // Reads are never gated.
    let reply = server.call(ADMIN, "list.departments", json!({})).await;
    assert_eq!(reply.outcome, ToolOutcome::Ok);

    // A tool's own `never` row beats the school's `*`.
    let school = server.db.ids.school_of(ADMIN);
    sqlx::query(
        "INSERT INTO tool_approval_policy (school_id, tool, mode) \
         VALUES ($1, 'create_department', 'never')",
    )
    .bind(school.as_uuid())
    .execute(&server.owner)
    .await
    .unwrap();
    let reply = server
        .call(ADMIN, "create.department", json!({ "name": "Ungated" }))
        .await;
    assert_eq!(reply.outcome, ToolOutcome::Ok, "{reply:?}");
}

#[tokio::test]
async fn an_approved_row_runs_only_its_own_call_turn_input_user_and_chat() {
    let server = spawn_toolserver().await;
    require_approval(&server).await;
    let admin = server.caller(ADMIN).await;
    let colleague = server.caller(COLLEAGUE).await;
    let input = json!({ "name": "Approved Sciences" });
    let (turn, thread) = (TurnId::new(), ThreadId::new());
    approve(
        &server,
        admin.identity.user_id,
        (turn, thread),
        "call_1",
        &input,
    )
    .await;
    let before = server.state().await;

    let attempts = [
        // Another turn of the same chat (an approval is consumed by the turn it was given to).
        write_call(
            &server,
            &admin,
            (TurnId::new(), thread),
            "call_1",
            input.clone(),
        ),
        // Another call id.
        write_call(&server, &admin, (turn, thread), "call_2", input.clone()),
        // Other details.
        write_call(
            &server,
            &admin,
            (turn, thread),
            "call_1",
            json!({ "name": "Something Else" }),
        ),
        // Another chat.
        write_call(
            &server,
            &admin,
            (turn, ThreadId::new()),
            "call_1",
            input.clone(),
        ),
        // A colleague replaying the admin's turn and call.
        write_call(&server, &colleague, (turn, thread), "call_1", input.clone()),
    ];
    for call in &attempts {
        let reply = server.send(call).await;
        assert_eq!(reply.outcome, ToolOutcome::ApprovalRequired, "{call:?}");
    }
    assert_eq!(server.state().await, before, "none of them wrote");

    let reply = server
        .send(&write_call(
            &server,
            &admin,
            (turn, thread),
            "call_1",
            input,
        ))
        .await;
    assert_eq!(reply.outcome, ToolOutcome::Ok, "{reply:?}");
    assert_eq!(data(&reply)["name"], "Approved Sciences");
}

#[tokio::test]
async fn a_signed_approval_runs_exactly_the_call_and_input_it_names() {
    let server = spawn_toolserver().await;
    require_approval(&server).await;
    let admin = server.caller(ADMIN).await;
    let turn = TurnId::new();
    let input = json!({ "name": "Signed Sciences" });
    let signed = |call_id: ToolCallId, approved_input: Value, args: Value| {
        let grant = TurnGrant {
            turn_id: turn,
            thread_id: ThreadId::new(),
            identity: admin.identity.clone(),
            scope: admin.scope.clone(),
        };
        let approved = ApprovedCall {
            call_id: call_id.clone(),
            input: approved_input,
        };
        ToolCall {
            call_id: ToolCallId::for_turn(turn, "mcp"),
            event: "create.department".to_owned(),
            identity: server
                .keys
                .signer()
                .mint_approved(grant, approved, Utc::now(), chrono::Duration::minutes(5))
                .expect("mint"),
            args,
        }
    };
    let mcp = ToolCallId::for_turn(turn, "mcp");
    let before = server.state().await;
    for call in [
        signed(mcp.clone(), json!({ "name": "Other" }), input.clone()),
        signed(
            ToolCallId::for_turn(turn, "other"),
            input.clone(),
            input.clone(),
        ),
    ] {
        let reply = server.send(&call).await;
        assert_eq!(reply.outcome, ToolOutcome::ApprovalRequired, "{call:?}");
    }
    assert_eq!(server.state().await, before);

    let reply = server.send(&signed(mcp, input.clone(), input)).await;
    assert_eq!(reply.outcome, ToolOutcome::Ok, "{reply:?}");
}

#[tokio::test]
async fn a_name_hiding_text_from_colleagues_is_refused_by_the_tool() {
    let server = spawn_toolserver().await;
    let before = server.state().await;
    for name in ["Sciences\u{202E}sdrawkcab", "Scien\u{200B}ces"] {
        let reply = server
            .call(ADMIN, "create.department", json!({ "name": name }))
            .await;
        assert_eq!(reply.outcome, ToolOutcome::Invalid, "{reply:?}");
        assert!(reply.result.to_model_string().contains("invisible"));
    }
    assert_eq!(server.state().await, before);
}

/// A staff member who edits a proposed write as they approve it binds the approval to their
/// input (`input`; the model's is kept in `edited_from`): `execute()` runs only that input, and
/// checks it against the tool's schema again, whatever the row says.
#[tokio::test]
async fn an_edited_approval_runs_only_the_edited_input_and_only_if_its_schema_holds() {
    let server = spawn_toolserver().await;
    require_approval(&server).await;
    let admin = server.caller(ADMIN).await;
    let (turn, thread) = (TurnId::new(), ThreadId::new());
    let proposed = json!({ "name": "Sciences" });
    let edited = json!({ "name": "Natural Sciences" });
    approve(
        &server,
        admin.identity.user_id,
        (turn, thread),
        "call_1",
        &edited,
    )
    .await;
    sqlx::query("UPDATE approvals SET edited_from = $1 WHERE call_id = 'call_1'")
        .bind(&proposed)
        .execute(&server.owner)
        .await
        .unwrap();
    // An edit the schema refuses (a smuggled school id), approved all the same by its row.
    let smuggled = json!({ "name": "Arts", "school_id": server.db.ids.school_of(ADMIN).as_uuid() });
    approve(
        &server,
        admin.identity.user_id,
        (turn, thread),
        "call_2",
        &smuggled,
    )
    .await;
    let before = server.state().await;

    let model = write_call(&server, &admin, (turn, thread), "call_1", proposed);
    let reply = server.send(&model).await;
    assert_eq!(reply.outcome, ToolOutcome::ApprovalRequired, "{reply:?}");
    let reply = server
        .send(&write_call(
            &server,
            &admin,
            (turn, thread),
            "call_2",
            smuggled,
        ))
        .await;
    assert_eq!(reply.outcome, ToolOutcome::Invalid, "{reply:?}");
    assert!(
        reply.result.to_model_string().contains("school_id"),
        "{reply:?}"
    );
    assert_eq!(server.state().await, before, "neither wrote");

    let reply = server
        .send(&write_call(
            &server,
            &admin,
            (turn, thread),
            "call_1",
            edited,
        ))
        .await;
    assert_eq!(reply.outcome, ToolOutcome::Ok, "{reply:?}");
    assert_eq!(data(&reply)["name"], "Natural Sciences");
}
