//! The identity gate: a call without a turn identity the gateway signed — missing, unsigned,
//! expired, or signed by another key — is refused before anything runs; and arguments that smuggle
//! identity are schema errors.

use chrono::Utc;
use rover_contracts::identity::{SignedTurnIdentity, TurnGrant};
use rover_contracts::ids::{ThreadId, TurnId};
use rover_contracts::wire::ToolOutcome;
use rover_testkit::TurnKeys;
use serde_json::json;

use crate::helpers::{error, spawn_toolserver};

#[tokio::test]
async fn calls_without_a_valid_turn_identity_are_refused_and_write_nothing() {
    let server = spawn_toolserver().await;
    let caller = server.caller("admin@hill.school").await;
    let grant = || TurnGrant {
        turn_id: TurnId::new(),
        thread_id: ThreadId::new(),
        identity: caller.identity.clone(),
        scope: caller.scope.clone(),
    };
    let genuine_turn = TurnId::new();
    let genuine = server.mint_for_turn(&caller, genuine_turn);
    let payload = genuine.as_str().split('.').nth(1).unwrap().to_owned();
    let forged = [
        ("missing", SignedTurnIdentity::from_token("")),
        (
            "unsigned",
            SignedTurnIdentity::from_token(format!("eyJhbGciOiJub25lIn0.{payload}.")),
        ),
        (
            "expired",
            server
                .keys
                .signer()
                .mint(
                    grant(),
                    Utc::now() - chrono::Duration::hours(2),
                    chrono::Duration::minutes(15),
                )
                .unwrap(),
        ),
        (
            "another key",
            TurnKeys::generate()
                .signer()
                .mint(grant(), Utc::now(), chrono::Duration::minutes(15))
                .unwrap(),
        ),
    ];
    let before = server.state().await;
    for (what, identity) in forged {
        let mut call =
            server.tool_call(&caller, "create.department", json!({ "name": "Sciences" }));
        call.identity = identity;
        let reply = server.send(&call).await;
        assert_eq!(reply.outcome, ToolOutcome::Denied, "{what}");
        assert!(
            error(&reply).starts_with("Permission denied: no valid turn identity"),
            "{what}: {}",
            error(&reply)
        );
    }
    assert_eq!(
        server.state().await,
        before,
        "a refused call wrote something"
    );

    // The genuine identity, for contrast, is accepted.
    let mut call = server.tool_call(&caller, "create.department", json!({ "name": "Sciences" }));
    call.call_id = rover_contracts::ids::ToolCallId::for_turn(genuine_turn, "call_1");
    call.identity = genuine;
    assert_eq!(server.send(&call).await.outcome, ToolOutcome::Ok);
}

#[tokio::test]
async fn arguments_smuggling_identity_are_schema_errors_and_write_nothing() {
    let server = spawn_toolserver().await;
    let lakeside = server.db.ids.lakeside;
    let before = server.state().await;
    for smuggled in [
        json!({ "name": "Sciences", "school_id": lakeside }),
        json!({ "name": "Sciences", "schoolId": lakeside }),
        json!({ "name": "Sciences", "user_id": server.db.ids.user("admin@lakeside.college") }),
        json!({ "name": "Sciences", "campusId": server.db.ids.campus("Naalya") }),
    ] {
        let reply = server
            .call(
                "kololo.admin@hill.school",
                "create.department",
                smuggled.clone(),
            )
            .await;
        assert_eq!(reply.outcome, ToolOutcome::Invalid, "{smuggled}");
        let text = error(&reply);
        assert!(
            text.starts_with("Invalid arguments for create_department:"),
            "{text}"
        );
        assert!(
            text.contains("not allowed"),
            "the error should say the field is not allowed: {text}"
        );
    }
    assert_eq!(server.state().await, before);
}

#[tokio::test]
async fn an_identity_for_a_school_that_does_not_exist_fails_closed() {
    let server = spawn_toolserver().await;
    let mut caller = server.caller("admin@hill.school").await;
    let nowhere = rover_contracts::ids::SchoolId::new();
    caller.identity.school_id = nowhere;
    caller.scope.school_id = nowhere;
    let reply = server
        .send(&server.tool_call(&caller, "list.departments", json!({})))
        .await;
    assert_eq!(reply.outcome, ToolOutcome::Denied);
    assert_eq!(
        error(&reply),
        "Permission denied: the caller belongs to no school here"
    );
}

/// A call id that ran in one school, replayed by a caller of another school (a turn identity
/// replayed into another tenant), gets none of the first school's stored reply: the call id
/// belongs to another turn than the replayer's identity, so it is refused and nothing runs.
#[tokio::test]
async fn a_call_id_replayed_into_another_school_gets_nothing_of_the_first() {
    let server = spawn_toolserver().await;
    let hill = server.caller("admin@hill.school").await;
    let lakeside = server.caller("admin@lakeside.college").await;
    let first = server.tool_call(&hill, "create.department", json!({ "name": "Hill Only" }));
    let reply = server.send(&first).await;
    assert_eq!(reply.outcome, ToolOutcome::Ok, "{reply:?}");
    let before = server.state().await;

    let mut replayed = server.tool_call(
        &lakeside,
        "create.department",
        json!({ "name": "Lakeside Own" }),
    );
    replayed.call_id = first.call_id.clone();
    let reply = server.send(&replayed).await;
    assert_eq!(reply.outcome, ToolOutcome::Denied, "{reply:?}");
    let text = serde_json::to_string(&reply.result).unwrap();
    assert!(!text.contains("Hill Only"), "{text}");
    assert_eq!(server.state().await, before, "nothing ran");
    // And Hill's identity with the same call id still gets Hill's stored reply, unchanged.
    let again = server.send(&first).await;
    assert!(
        serde_json::to_string(&again.result)
            .unwrap()
            .contains("Hill Only")
    );
}

/// The tool server runs a call only under the identity of the turn its call id names.
#[tokio::test]
async fn a_call_id_of_another_turn_is_refused_and_runs_nothing() {
    let server = spawn_toolserver().await;
    let caller = server.caller("admin@hill.school").await;
    let before = server.state().await;
    let mut call = server.tool_call(&caller, "create.department", json!({ "name": "Sciences" }));
    call.identity = server.mint_for_turn(&caller, TurnId::new());
    let reply = server.send(&call).await;
    assert_eq!(reply.outcome, ToolOutcome::Denied, "{reply:?}");
    assert!(
        error(&reply).contains("does not belong to the verified turn"),
        "{reply:?}"
    );
    assert_eq!(server.state().await, before);
}

/// A stored reply goes back only to the actor and event it ran for: another user of the same
/// school and turn, or the same user with another tool, gets a refusal and never the reply.
#[tokio::test]
async fn a_stored_reply_is_returned_only_to_its_actor_and_event() {
    let server = spawn_toolserver().await;
    let admin = server.caller("admin@hill.school").await;
    let dos = server.caller("dos@hill.school").await;
    let turn = TurnId::new();
    let mut call = server.tool_call(&admin, "create.department", json!({ "name": "Sciences" }));
    call.call_id = rover_contracts::ids::ToolCallId::for_turn(turn, "call_1");
    call.identity = server.mint_for_turn(&admin, turn);
    let first = server.send(&call).await;
    assert_eq!(first.outcome, ToolOutcome::Ok, "{first:?}");
    let before = server.state().await;

    let mut other_actor = call.clone();
    other_actor.identity = server.mint_for_turn(&dos, turn);
    let mut other_event = call.clone();
    other_event.event = "rename.department".to_owned();
    other_event.args =
        json!({ "department": uuid::Uuid::new_v4().to_string(), "newName": "Sciences 2" });
    for (what, replayed) in [
        ("another actor", other_actor),
        ("another event", other_event),
    ] {
        let reply = server.send(&replayed).await;
        assert_eq!(reply.outcome, ToolOutcome::Denied, "{what}: {reply:?}");
        let text = serde_json::to_string(&reply.result).unwrap();
        assert!(!text.contains("Sciences"), "{what}: {text}");
    }
    assert_eq!(server.state().await, before);
    assert_eq!(
        server.send(&call).await,
        first,
        "its own actor still gets it"
    );
}
