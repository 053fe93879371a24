//! The wire framing: messages round-trip, and a message of another version or kind is refused with
//! an error that says so.

use rover_contracts::ErrorCode;
use rover_contracts::envelope::AgentToolResult;
use rover_contracts::identity::SignedTurnIdentity;
use rover_contracts::ids::ToolCallId;
use rover_contracts::wire::*;
use serde_json::json;

fn call() -> ToolCall {
    ToolCall {
        call_id: ToolCallId::parse("turn/call_1").unwrap(),
        event: "create.department".into(),
        identity: SignedTurnIdentity::from_token("a.b.c"),
        args: json!({ "name": "Sciences" }),
    }
}

#[test]
fn messages_round_trip_in_a_versioned_frame() {
    let bytes = encode(&call());
    let frame: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(frame["v"], 1);
    assert_eq!(frame["kind"], "tool_call");
    assert_eq!(frame["body"]["callId"], "turn/call_1");
    assert_eq!(decode::<ToolCall>(&bytes).unwrap(), call());

    let reply = ToolReply {
        call_id: call().call_id,
        outcome: ToolOutcome::Denied,
        result: AgentToolResult::error("Permission denied: create:Department"),
    };
    assert_eq!(decode::<ToolReply>(&encode(&reply)).unwrap(), reply);
}

#[test]
fn an_older_or_newer_version_is_refused_with_a_clear_error() {
    let mut frame: serde_json::Value = serde_json::from_slice(&encode(&call())).unwrap();
    frame["v"] = json!(0);
    let err = decode::<ToolCall>(&serde_json::to_vec(&frame).unwrap()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unsupported tool_call message version 0 (this service speaks version 1)"
    );
    assert_eq!(err.code(), ErrorCode::UnsupportedVersion);

    // A future version whose body no longer parses still gets the version error, not a parse error.
    frame["v"] = json!(2);
    frame["body"] = json!({ "somethingNew": true });
    let err = decode::<ToolCall>(&serde_json::to_vec(&frame).unwrap()).unwrap_err();
    assert!(
        matches!(
            err,
            WireError::UnsupportedVersion {
                got: 2,
                supported: 1,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn another_kind_or_garbage_is_refused() {
    let err = decode::<ToolReply>(&encode(&call())).unwrap_err();
    assert!(
        matches!(
            err,
            WireError::WrongKind {
                expected: "tool_reply",
                ..
            }
        ),
        "{err}"
    );
    for garbage in [&b"not json"[..], b"{}", b"{\"v\":1}", b"[]", b""] {
        assert!(matches!(
            decode::<ToolCall>(garbage).unwrap_err(),
            WireError::Malformed { .. }
        ));
    }
}

#[test]
fn turn_events_are_tagged_like_stream_chunks() {
    let event = TurnEvent {
        turn_id: rover_contracts::ids::TurnId::new(),
        seq: 3,
        subagent: Some(rover_contracts::context::Subagent::ClassTeacher),
        event: TurnEventKind::ToolInputStart {
            tool_call_id: "c1".into(),
            tool_name: "record_attendance".into(),
            label: "Recording attendance…".into(),
        },
    };
    let value = serde_json::to_value(&event).unwrap();
    assert_eq!(
        value["event"],
        json!({ "type": "tool-input-start", "toolCallId": "c1", "toolName": "record_attendance", "label": "Recording attendance…" })
    );
    assert_eq!(value["subagent"], "class_teacher");
    assert_eq!(decode::<TurnEvent>(&encode(&event)).unwrap(), event);
    let finish = serde_json::to_value(TurnEventKind::Finish {
        reason: FinishReason::ToolCalls,
        usage: None,
        model: None,
    })
    .unwrap();
    assert_eq!(finish, json!({ "type": "finish", "reason": "tool-calls" }));
    let finish = serde_json::to_value(TurnEventKind::Finish {
        reason: FinishReason::Stop,
        usage: Some(rover_contracts::wire::TokenUsage {
            input_tokens: 12,
            output_tokens: 3,
        }),
        model: Some("qwen2.5-coder-1.5b-instruct".into()),
    })
    .unwrap();
    assert_eq!(
        finish,
        json!({ "type": "finish", "reason": "stop", "usage": { "inputTokens": 12, "outputTokens": 3 }, "model": "qwen2.5-coder-1.5b-instruct" })
    );
    // A finish written before the model was carried reads as one without it.
    let earlier: TurnEventKind =
        serde_json::from_value(json!({ "type": "finish", "reason": "stop" })).unwrap();
    assert_eq!(
        earlier,
        TurnEventKind::Finish {
            reason: FinishReason::Stop,
            usage: None,
            model: None,
        }
    );
}

#[test]
fn a_reply_is_read_into_its_outcome_and_envelope_and_anything_else_is_an_error_envelope() {
    let reply = ToolReply {
        call_id: call().call_id,
        outcome: ToolOutcome::Denied,
        result: AgentToolResult::error("Permission denied: create:Department"),
    };
    assert_eq!(
        ToolReply::read(Some(&encode(&reply))),
        ("denied", reply.result.clone())
    );

    let (outcome, unreadable) = ToolReply::read(Some(b"not a reply"));
    assert_eq!(outcome, "error");
    assert!(
        unreadable
            .to_model_string()
            .contains("reply could not be read"),
        "{unreadable:?}"
    );

    let (outcome, missing) = ToolReply::read(None);
    assert_eq!(outcome, "error");
    assert!(
        missing.to_model_string().contains("did not answer in time"),
        "{missing:?}"
    );
}
