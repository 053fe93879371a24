//! Property tests (fuzzing) of `wire::decode` for every message a service reads off the broker —
//! turn requests, tool calls, tool replies and turn events: arbitrary bytes and mutations of valid
//! frames (byte edits, and any JSON value swapped for another) never panic, and whatever decodes
//! re-encodes to a frame that decodes to the same message. Failing cases are kept in
//! `proptest-regressions/fuzz.txt`; hand-picked frames are replayed from `tests/corpus/wire/`.

use proptest::prelude::*;
use rover_contracts::envelope::AgentToolResult;
use rover_contracts::identity::SignedTurnIdentity;
use rover_contracts::ids::{ThreadId, ToolCallId, TurnId};
use rover_contracts::wire::*;
use serde_json::{Value, json};

use crate::fixtures::teacher_context;

fn frames() -> Vec<Vec<u8>> {
    let turn = TurnId::new();
    vec![
        encode(&TurnRequest {
            turn_id: turn,
            thread_id: ThreadId::new(),
            message_id: "msg-1".into(),
            context: teacher_context(),
            identity: SignedTurnIdentity::from_token("a.b.c"),
            input: TurnInput::Message {
                text: "Record attendance for S1 Blue".into(),
            },
        }),
        encode(&ToolCall {
            call_id: ToolCallId::parse("turn/call_1").unwrap(),
            event: "record.attendance".into(),
            identity: SignedTurnIdentity::from_token("a.b.c"),
            args: json!({ "class": "S1 Blue", "absent": ["Nakato"] }),
        }),
        encode(&ToolReply::<serde_json::Value> {
            call_id: ToolCallId::parse("turn/call_1").unwrap(),
            outcome: ToolOutcome::Ok,
            result: AgentToolResult::error("Permission denied: create:Department"),
        }),
        encode(&TurnEvent {
            turn_id: turn,
            seq: 7,
            subagent: Some(rover_contracts::context::Subagent::ClassTeacher),
            event: TurnEventKind::ToolOutputAvailable {
                tool_call_id: "c1".into(),
                output: json!({ "data": [1, 2], "scopeContext": "across the whole school" }),
            },
        }),
    ]
}

/// Decodes `bytes` as every message kind; what decodes must survive a re-encode unchanged.
fn check(bytes: &[u8]) {
    fn one<M: WireMessage + PartialEq + std::fmt::Debug>(bytes: &[u8]) {
        if let Ok(message) = decode::<M>(bytes) {
            let again = decode::<M>(&encode(&message)).expect("a decoded message re-decodes");
            assert_eq!(again, message);
        }
    }
    one::<TurnRequest>(bytes);
    one::<ToolCall>(bytes);
    one::<ToolReply>(bytes);
    one::<TurnEvent>(bytes);
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        ".{0,16}".prop_map(Value::String),
        Just(json!(1)),
        Just(json!("tool_call")),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..5)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Replaces the `n`-th value (in a depth-first walk) of `value` with `with`.
fn replace_nth(value: &mut Value, n: &mut usize, with: &Value) -> bool {
    if *n == 0 {
        *value = with.clone();
        return true;
    }
    *n -= 1;
    match value {
        Value::Array(items) => items.iter_mut().any(|v| replace_nth(v, n, with)),
        Value::Object(map) => map.values_mut().any(|v| replace_nth(v, n, with)),
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        check(&bytes);
    }

    #[test]
    fn byte_edits_of_valid_frames_never_panic(
        which in 0usize..4,
        edits in prop::collection::vec((any::<usize>(), 0u8..3, any::<u8>()), 1..8),
    ) {
        let mut bytes = frames().swap_remove(which);
        for (at, op, byte) in edits {
            let at = at % bytes.len().max(1);
            match op {
                0 if !bytes.is_empty() => bytes[at] = byte,
                1 => bytes.insert(at.min(bytes.len()), byte),
                _ if !bytes.is_empty() => { bytes.remove(at); }
                _ => {}
            }
        }
        check(&bytes);
    }

    #[test]
    fn swapped_values_in_valid_frames_never_panic(
        which in 0usize..4,
        at in 0usize..200,
        with in any_json(),
    ) {
        let mut frame: Value = serde_json::from_slice(&frames().swap_remove(which)).unwrap();
        let mut n = at;
        replace_nth(&mut frame, &mut n, &with);
        check(frame.to_string().as_bytes());
    }
}

/// Every frame in `tests/corpus/wire/` is replayed; those named `ok-<kind>-*` must decode as that
/// kind.
#[test]
fn the_seed_corpus_replays() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/wire");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("the wire corpus exists") {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        check(&bytes);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("ok-tool_call") {
            assert!(decode::<ToolCall>(&bytes).is_ok(), "{name}");
        } else if name.starts_with("ok-tool_reply") {
            assert!(decode::<ToolReply>(&bytes).is_ok(), "{name}");
        } else if name.starts_with("ok-turn_event") {
            assert!(decode::<TurnEvent>(&bytes).is_ok(), "{name}");
        } else if name.starts_with("ok-") {
            panic!("{name}: unknown kind");
        }
        seen += 1;
    }
    assert!(seen >= 6, "the corpus lost files: {seen}");
}

/// Regenerates the valid frames of the corpus (`ROVER_REGENERATE=1`), so they track the types.
#[test]
fn valid_frames_are_in_the_corpus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/wire");
    let frames = frames();
    for (name, bytes) in [
        ("ok-tool_call.json", &frames[1]),
        ("ok-tool_reply.json", &frames[2]),
        ("ok-turn_event.json", &frames[3]),
    ] {
        if std::env::var_os("ROVER_REGENERATE").is_some() {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        assert!(
            dir.join(name).is_file(),
            "{name} is missing; run with ROVER_REGENERATE=1"
        );
    }
}
