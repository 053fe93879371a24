//! The tool registry keeps its conventions: names and events well-formed and unique, every tool
//! labelled and described, every argument schema valid, closed, and free of identity fields.

use std::collections::HashSet;

use rover_contracts::tools::*;
use serde_json::Value;

fn is_snake(s: &str) -> bool {
    !s.is_empty()
        && s.split('_')
            .all(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase()))
}

#[test]
fn rpc_names_are_verb_subject_and_events_verb_dot_subject_with_the_same_verb() {
    for contract in REGISTRY {
        let Some(event) = contract.event() else {
            continue;
        };
        let (name_verb, name_subject) = contract
            .name
            .split_once('_')
            .unwrap_or_else(|| panic!("{} is not verb_subject", contract.name));
        let (event_verb, event_subject) = event
            .split_once('.')
            .unwrap_or_else(|| panic!("{event} is not verb.subject"));
        assert!(
            is_snake(name_verb) && is_snake(name_subject),
            "{} is not verb_subject",
            contract.name
        );
        assert!(
            is_snake(event_verb) && is_snake(event_subject),
            "{event} is not verb.subject"
        );
        assert!(
            !event_subject.contains('.'),
            "{event} has more than one dot"
        );
        assert_eq!(
            name_verb, event_verb,
            "{} and {event} use different verbs",
            contract.name
        );
    }
}

#[test]
fn local_tools_are_exactly_the_catalogue_and_carry_no_event() {
    let local: Vec<_> = REGISTRY
        .iter()
        .filter(|c| c.event().is_none())
        .map(|c| c.name)
        .collect();
    assert_eq!(
        local,
        [
            "get_current_date",
            "ask_user",
            "list_agent_map",
            "task",
            "ls",
            "read_file",
            "write_file",
            "edit_file",
            "save_artifact"
        ]
    );
    let sandboxed: Vec<_> = REGISTRY
        .iter()
        .filter(|c| c.needs_sandbox())
        .map(|c| c.name)
        .collect();
    assert_eq!(
        sandboxed,
        [
            "ls",
            "read_file",
            "write_file",
            "edit_file",
            "save_artifact"
        ]
    );
}

#[test]
fn names_and_events_are_unique() {
    let mut names = HashSet::new();
    let mut events = HashSet::new();
    for contract in REGISTRY {
        assert!(
            names.insert(contract.name),
            "duplicate name {}",
            contract.name
        );
        if let Some(event) = contract.event() {
            assert!(events.insert(event), "duplicate event {event}");
        }
    }
    assert_eq!(
        REGISTRY.len(),
        24,
        "the catalogue has 15 RPC and 9 local tools"
    );
}

#[test]
fn every_tool_has_a_label_and_a_description() {
    for contract in REGISTRY {
        assert!(
            contract.label.ends_with('…') && contract.label.len() > 4,
            "{} has no proper label",
            contract.name
        );
        assert!(
            contract
                .label
                .chars()
                .next()
                .is_some_and(char::is_uppercase),
            "{} label",
            contract.name
        );
        assert!(
            contract.description.len() >= 20 && contract.description.ends_with('.'),
            "{} description",
            contract.name
        );
    }
    assert_eq!(labels().count(), REGISTRY.len());
    assert_eq!(
        by_name("create_department").unwrap().label,
        "Creating a department…"
    );
}

#[test]
fn catalogue_postures_owners_and_effects_match_the_domain() {
    use rover_contracts::context::Subagent::*;
    use rover_contracts::permission::{Action::*, Permission, Subject::*};
    let policy = |a, s| Some(Permission::new(a, s));
    let expected = [
        (
            "list_departments",
            Owner::Rover,
            Effect::Read,
            policy(Read, Department),
        ),
        (
            "create_department",
            Owner::Rover,
            Effect::Write,
            policy(Create, Department),
        ),
        (
            "rename_department",
            Owner::Rover,
            Effect::Write,
            policy(Update, Department),
        ),
        (
            "list_classes",
            Owner::Rover,
            Effect::Read,
            policy(Read, Class),
        ),
        (
            "find_students",
            Owner::Rover,
            Effect::Read,
            policy(Read, Student),
        ),
        (
            "get_enrollment_summary",
            Owner::Rover,
            Effect::Read,
            policy(Read, Student),
        ),
        (
            "list_staff",
            Owner::Rover,
            Effect::Read,
            policy(Read, Staff),
        ),
        (
            "get_class_roster",
            Owner::Subagent(ClassTeacher),
            Effect::Read,
            None,
        ),
        (
            "record_attendance",
            Owner::Subagent(ClassTeacher),
            Effect::Write,
            None,
        ),
        (
            "list_my_classes",
            Owner::Subagent(SubjectTeacher),
            Effect::Read,
            None,
        ),
        (
            "record_marks",
            Owner::Subagent(SubjectTeacher),
            Effect::Write,
            None,
        ),
        (
            "get_class_marks",
            Owner::Subagent(SubjectTeacher),
            Effect::Read,
            None,
        ),
        (
            "list_teaching_assignments",
            Owner::Subagent(DirectorOfStudies),
            Effect::Read,
            policy(Read, TeachingAssignment),
        ),
        (
            "assign_subject_teacher",
            Owner::Subagent(DirectorOfStudies),
            Effect::Write,
            policy(Create, TeachingAssignment),
        ),
        (
            "get_results_summary",
            Owner::Subagent(DirectorOfStudies),
            Effect::Read,
            policy(Read, Mark),
        ),
    ];
    for (name, owner, effect, permission) in expected {
        let contract = by_name(name).unwrap();
        assert_eq!(
            (
                contract.owner,
                contract.effect,
                contract.required_permission()
            ),
            (owner, effect, permission),
            "{name}"
        );
        assert!(by_event(contract.event().unwrap()).is_some_and(|c| c.name == name));
        if permission.is_none() {
            assert!(
                matches!(
                    contract.kind,
                    ToolKind::Rpc {
                        posture: Posture::Relationship(_),
                        ..
                    }
                ),
                "{name} should be relationship"
            );
        }
    }
}

fn schemas() -> impl Iterator<Item = (&'static str, Value)> {
    REGISTRY
        .iter()
        .map(|c| (c.name, serde_json::to_value((c.args_schema)()).unwrap()))
}

#[test]
fn every_argument_and_output_schema_is_valid_json_schema() {
    for contract in REGISTRY {
        for (what, schema) in [
            ("args", (contract.args_schema)()),
            ("output", (contract.output_schema)()),
        ] {
            let value = serde_json::to_value(schema).unwrap();
            if let Err(e) = jsonschema::meta::validate(&value) {
                panic!(
                    "{} {what} schema is not valid JSON Schema: {e}\n{value:#}",
                    contract.name
                );
            }
            assert!(
                !value.to_string().contains("$ref"),
                "{} {what} schema is not inlined",
                contract.name
            );
        }
    }
}

/// Visits every object schema inside `schema`.
fn objects<'a>(schema: &'a Value, out: &mut Vec<&'a Value>) {
    match schema {
        Value::Object(map) => {
            if map.get("type") == Some(&Value::String("object".into()))
                || map.contains_key("properties")
            {
                out.push(schema);
            }
            map.values().for_each(|v| objects(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| objects(v, out)),
        _ => {}
    }
}

#[test]
fn every_argument_schema_is_closed() {
    for (name, schema) in schemas() {
        assert_eq!(schema["type"], "object", "{name} args must be an object");
        let mut found = Vec::new();
        objects(&schema, &mut found);
        for object in found {
            assert_eq!(
                object.get("additionalProperties"),
                Some(&Value::Bool(false)),
                "{name}: open object {object}"
            );
        }
    }
}

#[test]
fn no_argument_schema_has_a_field_for_school_campus_or_user_identity() {
    const FORBIDDEN: [&str; 8] = [
        "school", "campus", "tenant", "user", "actor", "identity", "profile", "email",
    ];
    for (name, schema) in schemas() {
        let mut found = Vec::new();
        objects(&schema, &mut found);
        for object in found {
            for field in object
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flat_map(|p| p.keys())
            {
                let lower = field.to_lowercase();
                assert!(
                    !FORBIDDEN.iter().any(|f| lower.contains(f)),
                    "{name} has identity field {field}"
                );
            }
        }
    }
}

#[test]
fn argument_types_reject_unknown_fields_and_the_schema_agrees() {
    let smuggled = serde_json::json!({ "name": "Sciences", "school_id": "00000000-0000-0000-0000-000000000000" });
    assert!(serde_json::from_value::<CreateDepartmentArgs>(smuggled.clone()).is_err());
    let schema = serde_json::to_value((CreateDepartment::CONTRACT.args_schema)()).unwrap();
    assert!(!jsonschema::is_valid(&schema, &smuggled));
    assert!(jsonschema::is_valid(
        &schema,
        &serde_json::json!({ "name": "Sciences" })
    ));
    assert!(!jsonschema::is_valid(
        &schema,
        &serde_json::json!({ "name": "" })
    ));
}
