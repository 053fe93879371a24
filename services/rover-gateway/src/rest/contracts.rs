//! `tool-contracts.json`: every tool contract in the registry as data — name, event, label,
//! description, owner, effect, posture and both JSON Schemas — for the Hub, docs and reviewers.
//! The file at the repository root is generated from [`tool_contracts_json`]; a test fails when the
//! two differ.

use rover_contracts::context::Subagent;
use rover_contracts::tools::{
    Effect, Owner, Posture, REGISTRY, Relationship, ToolContract, ToolKind,
};
use serde_json::{Map, Value, json};

/// The path of the generated file, relative to the repository root.
pub const TOOL_CONTRACTS_FILE: &str = "tool-contracts.json";

/// The command that rewrites the generated file, for the message of the test that checks it.
pub const REGENERATE_COMMAND: &str =
    "ROVER_REGENERATE=1 cargo nextest run -p rover-gateway tool_contracts";

/// Every contract of the registry, in catalogue order, pretty-printed with a final newline: the
/// exact contents of `tool-contracts.json`.
pub fn tool_contracts_json() -> String {
    let contracts: Vec<Value> = REGISTRY.iter().map(|c| contract(c)).collect();
    let mut text = serde_json::to_string_pretty(&contracts)
        .unwrap_or_else(|e| unreachable!("JSON values always serialise: {e}"));
    text.push('\n');
    text
}

/// One contract as an object: `name`, `event` (RPC tools only), `label`, `description`, `owner`,
/// `effect`, `posture`, `argsSchema`, `outputSchema`.
pub(crate) fn contract(contract: &ToolContract) -> Value {
    let mut object = Map::new();
    object.insert("name".into(), contract.name.into());
    if let Some(event) = contract.event() {
        object.insert("event".into(), event.into());
    }
    object.insert("label".into(), contract.label.into());
    object.insert("description".into(), contract.description.into());
    object.insert("owner".into(), owner(contract.owner).into());
    object.insert("effect".into(), effect(contract.effect).into());
    object.insert("posture".into(), posture(contract.kind));
    object.insert("argsSchema".into(), (contract.args_schema)().to_value());
    object.insert("outputSchema".into(), (contract.output_schema)().to_value());
    Value::Object(object)
}

fn owner(owner: Owner) -> &'static str {
    match owner {
        Owner::Rover => "rover",
        Owner::Subagent(subagent) => Subagent::name(subagent),
    }
}

fn effect(effect: Effect) -> &'static str {
    match effect {
        Effect::Read => "read",
        Effect::Write => "write",
    }
}

/// How the tool is authorised: a casbin `policy` on a permission, an ownership `relationship` the
/// domain asserts, or `local` (runs in the worker, as the turn's own user).
fn posture(kind: ToolKind) -> Value {
    match kind {
        ToolKind::Rpc {
            posture: Posture::Policy(permission),
            ..
        } => json!({ "kind": "policy", "permission": permission.to_string() }),
        ToolKind::Rpc {
            posture: Posture::Relationship(relationship),
            ..
        } => json!({ "kind": "relationship", "relationship": relationship_name(relationship) }),
        ToolKind::Local { needs_sandbox } => {
            json!({ "kind": "local", "needsSandbox": needs_sandbox })
        }
    }
}

fn relationship_name(relationship: Relationship) -> &'static str {
    match relationship {
        Relationship::ClassTeacherOfClass => "class_teacher_of_class",
        Relationship::TeachesSubjectInClass => "teaches_subject_in_class",
        Relationship::OwnTeaching => "own_teaching",
    }
}
