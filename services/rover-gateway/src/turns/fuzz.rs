//! Property tests (fuzzing) of the chat request parser: arbitrary bytes, arbitrary JSON, and
//! mutations of valid `useChat` bodies never panic, and every refusal is a 400 or a 413. Failing
//! cases proptest finds are kept in `proptest-regressions/turns/fuzz.txt`; hand-picked hostile
//! bodies are replayed from `tests/corpus/chat/`.

use proptest::prelude::*;
use rover_contracts::ErrorCode;
use rover_contracts::wire::TurnInput;
use serde_json::{Value, json};

use super::request::{InputLimits, parse_chat_request};

/// Whose chat the bodies are.
const USER: rover_contracts::ids::UserId =
    rover_contracts::ids::UserId::from_uuid(uuid::Uuid::from_u128(7));

fn limits() -> InputLimits {
    InputLimits {
        max_json_depth: 32,
        max_message_bytes: 2048,
        max_stored_message_bytes: 6144,
        max_parts: 16,
        max_attachments: 4,
        max_attachment_url_bytes: 256,
        max_attachment_name_bytes: 64,
    }
}

/// The parser's contract on any input: no panic; success stays within the limits; a refusal is
/// `invalid_request` (400) or `too_large` (413).
fn check(body: &[u8]) {
    let limits = limits();
    match parse_chat_request(body, &limits, USER) {
        Ok(turn) => {
            assert!(turn.attachments.len() <= limits.max_attachments);
            for attachment in &turn.attachments {
                assert!(attachment.url.len() <= limits.max_attachment_url_bytes);
                assert!(attachment.url.starts_with("http"));
            }
            if let TurnInput::Message { text } = &turn.input {
                assert!(text.len() <= limits.max_message_bytes);
            }
            if let Some(sent) = &turn.sent {
                assert!(sent.to_string().len() <= limits.max_stored_message_bytes);
            }
        }
        Err(error) => assert!(
            matches!(error.code, ErrorCode::InvalidRequest | ErrorCode::TooLarge),
            "{error}"
        ),
    }
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,24}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("id".to_owned()),
                    Just("messages".to_owned()),
                    Just("parts".to_owned()),
                    Just("role".to_owned()),
                    Just("type".to_owned()),
                    Just("text".to_owned()),
                    Just("campusId".to_owned()),
                    ".{0,8}".prop_map(String::from),
                ],
                inner,
                0..6
            )
            .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// A part of a `useChat` message, valid or nearly so.
fn part() -> impl Strategy<Value = Value> {
    prop_oneof![
        ".{0,300}".prop_map(|text| json!({ "type": "text", "text": text })),
        (any_json()).prop_map(|text| json!({ "type": "text", "text": text })),
        (".{0,20}", ".{0,40}", prop::option::of(".{0,20}")).prop_map(|(media, url, name)| {
            json!({ "type": "file", "mediaType": media, "url": url, "filename": name })
        }),
        (
            ".{0,40}",
            any_json(),
            prop_oneof![Just("output-available"), Just("input-available"), Just("x")]
        )
            .prop_map(|(id, output, state)| json!({
                "type": "tool-ask_user", "toolCallId": id, "state": state, "output": output,
            })),
        any_json(),
    ]
}

fn message() -> impl Strategy<Value = Value> {
    (
        prop_oneof![Just("user"), Just("assistant"), Just("system"), Just("")],
        prop::collection::vec(part(), 0..24),
    )
        .prop_map(|(role, parts)| json!({ "id": "m", "role": role, "parts": parts }))
}

fn chat_body() -> impl Strategy<Value = Value> {
    (
        prop_oneof![
            "[a-zA-Z0-9_-]{1,40}",
            ".{0,260}",
            Just(uuid::Uuid::new_v4().to_string()),
        ],
        prop::collection::vec(message(), 0..4),
        prop::option::of(prop_oneof![Just(json!(uuid::Uuid::new_v4())), any_json()]),
    )
        .prop_map(|(id, messages, campus)| {
            let mut body = json!({ "id": id, "messages": messages, "trigger": "submit-message" });
            if let Some(campus) = campus {
                body["campusId"] = campus;
            }
            body
        })
}

/// A byte-level mutation of a body: overwrite, insert or delete at a position.
fn mutate(mut bytes: Vec<u8>, edits: &[(usize, u8, u8)]) -> Vec<u8> {
    for &(at, op, byte) in edits {
        if bytes.is_empty() {
            bytes.push(byte);
            continue;
        }
        let at = at % bytes.len();
        match op % 3 {
            0 => bytes[at] = byte,
            1 => bytes.insert(at, byte),
            _ => {
                bytes.remove(at);
            }
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        check(&bytes);
    }

    #[test]
    fn arbitrary_json_never_panics(value in any_json()) {
        check(value.to_string().as_bytes());
    }

    #[test]
    fn chat_shaped_bodies_never_panic_and_respect_the_limits(body in chat_body()) {
        check(body.to_string().as_bytes());
    }

    #[test]
    fn mutated_valid_bodies_never_panic(
        body in chat_body(),
        edits in prop::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..8),
    ) {
        check(&mutate(body.to_string().into_bytes(), &edits));
    }

    #[test]
    fn nesting_beyond_the_limit_is_refused(depth in 33usize..5000, open in prop_oneof![Just(b'['), Just(b'{')]) {
        let mut body = br#"{"id":"c","messages":[{"role":"user","parts":[{"type":"text","text":"#.to_vec();
        body.extend(std::iter::repeat_n(open, depth));
        let error = parse_chat_request(&body, &limits(), USER).unwrap_err();
        prop_assert_eq!(error.code, ErrorCode::InvalidRequest);
        prop_assert!(error.message.contains("deeper than"), "{}", error.message);
    }
}

/// Every body in `tests/corpus/chat/` (hostile inputs found by hand or by proptest) is replayed,
/// and those named `ok-*` must parse.
#[test]
fn the_seed_corpus_replays() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/chat");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("the chat corpus exists") {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        check(&bytes);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("ok-") {
            assert!(
                parse_chat_request(&bytes, &limits(), USER).is_ok(),
                "{name} should parse"
            );
        }
        seen += 1;
    }
    assert!(seen >= 8, "the corpus lost files: {seen}");
}
