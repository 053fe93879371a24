//! Property tests (fuzzing) of step 2 of `execute()`, argument validation: for every RPC tool,
//! arbitrary JSON and argument-shaped objects (the tool's own field names with arbitrary values)
//! never panic and either validate or are an `invalid` outcome naming the tool; an extra field is
//! always refused. Failing cases are kept in `proptest-regressions/pipeline/fuzz.txt`.

use proptest::prelude::*;
use rover_contracts::wire::ToolOutcome;
use serde_json::{Map, Value};

use super::{RpcTool, compile_tools, validate};

fn tools() -> Vec<RpcTool> {
    let mut tools: Vec<RpcTool> = compile_tools().into_values().collect();
    tools.sort_by_key(|tool| tool.event);
    tools
}

/// The field names of a tool's arguments, nested ones included (from `properties` anywhere).
fn field_names(schema: &Value, out: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = map.get("properties") {
                out.extend(properties.keys().cloned());
            }
            map.values().for_each(|v| field_names(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| field_names(v, out)),
        _ => {}
    }
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,16}".prop_map(Value::String),
        Just(Value::String(uuid::Uuid::new_v4().to_string())),
        Just(Value::String("2026-02-30".into())),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..5)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// The contract on any arguments: no panic; a refusal is `invalid` and names the tool.
fn check(tool: &RpcTool, args: &Value) -> bool {
    match validate(tool, args) {
        Ok(()) => true,
        Err(failure) => {
            assert_eq!(failure.outcome, ToolOutcome::Invalid, "{}", failure.message);
            assert!(
                failure
                    .message
                    .starts_with(&format!("Invalid arguments for {}:", tool.contract.name)),
                "{}",
                failure.message
            );
            false
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_json_arguments_validate_or_are_invalid(index in any::<prop::sample::Index>(), args in any_json()) {
        let tools = tools();
        check(index.get(&tools), &args);
    }

    #[test]
    fn argument_shaped_objects_validate_or_are_invalid(
        index in any::<prop::sample::Index>(),
        picks in prop::collection::vec((any::<prop::sample::Index>(), any_json()), 0..8),
    ) {
        let tools = tools();
        let tool = index.get(&tools);
        let schema = serde_json::to_value((tool.contract.args_schema)()).unwrap();
        let mut names = Vec::new();
        field_names(&schema, &mut names);
        prop_assume!(!names.is_empty());
        let args: Map<String, Value> = picks
            .into_iter()
            .map(|(name, value)| (name.get(&names).clone(), value))
            .collect();
        check(tool, &Value::Object(args));
    }

    #[test]
    fn a_smuggled_field_is_always_refused(
        index in any::<prop::sample::Index>(),
        field in prop_oneof![Just("school_id".to_owned()), Just("schoolId".to_owned()), Just("userId".to_owned()), "[a-z]{1,12}_x"],
        value in any_json(),
    ) {
        let tools = tools();
        let tool = index.get(&tools);
        let mut args = Map::new();
        args.insert(field, value);
        prop_assert!(!check(tool, &Value::Object(args)));
    }
}

/// Every file in `tests/corpus/args/` is `{"event": …, "args": …}`, replayed against that tool.
#[test]
fn the_seed_corpus_replays() {
    let tools = compile_tools();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/args");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("the args corpus exists") {
        let path = entry.unwrap().path();
        let case: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let tool = &tools[case["event"].as_str().expect("an event")];
        let valid = check(tool, &case["args"]);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(valid, name.starts_with("ok-"), "{name}");
        seen += 1;
    }
    assert!(seen >= 6, "the corpus lost files: {seen}");
}
