//! Which tools an MCP caller is listed, and how a tool contract reads as an MCP `Tool`.
//!
//! The list (see `server.rs`) is the worker's own rule applied to every agent of a turn at once,
//! [`offered`](rover_contracts::tools::offered) with
//! [`Offer::EveryAgent`](rover_contracts::tools::Offer::EveryAgent): an RPC tool of Rover, or of a
//! subagent the caller's live capabilities give them, whose policy permission (if any) the
//! caller's live permission snapshot holds. Local tools (`ask_user`, `task`, the sandbox) belong to
//! the agent loop and are never listed. The list is advisory, exactly as the model's is:
//! `tools/call` goes to the tool server, whose `execute()` decides from live rows.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use rover_contracts::tools::{Effect, REGISTRY, ToolContract, ToolKind};
use serde_json::{Value, json};

/// The RPC tool with this name (local tools are not served over MCP).
pub(crate) fn rpc_tool(name: &str) -> Option<&'static ToolContract> {
    rover_contracts::tools::by_name(name).filter(|c| matches!(c.kind, ToolKind::Rpc { .. }))
}

/// The MCP definition of an RPC tool, built once per process from the contracts.
pub(crate) fn definition(contract: &ToolContract) -> Option<Tool> {
    static DEFINITIONS: OnceLock<HashMap<&'static str, Tool>> = OnceLock::new();
    DEFINITIONS
        .get_or_init(|| {
            REGISTRY
                .iter()
                .filter(|c| matches!(c.kind, ToolKind::Rpc { .. }))
                .map(|c| (c.name, build(c)))
                .collect()
        })
        .get(contract.name)
        .cloned()
}

fn build(contract: &ToolContract) -> Tool {
    let input = object(serde_json::to_value((contract.args_schema)()).unwrap_or_default());
    let output =
        envelope_schema(serde_json::to_value((contract.output_schema)()).unwrap_or_default());
    let annotations = ToolAnnotations::new()
        .read_only(contract.effect == Effect::Read)
        .open_world(false);
    Tool::new(contract.name, contract.description, Arc::new(input))
        .with_raw_output_schema(Arc::new(output))
        .with_annotations(annotations)
}

/// The schema of the envelope the tool server replies with, `{"data","scopeContext"}` or
/// `{"error"}` (what `structuredContent` carries), around the tool's own output schema.
pub(crate) fn envelope_schema(data: Value) -> JsonObject {
    object(json!({
        "type": "object",
        "oneOf": [
            {
                "type": "object",
                "properties": {
                    "data": strip_titles(data),
                    "scopeContext": {
                        "type": "string",
                        "description": "How filtered `data` is: \"across the whole school\", \"across your campus, Kololo\"."
                    }
                },
                "required": ["data", "scopeContext"],
                "additionalProperties": false
            },
            {
                "type": "object",
                "properties": {
                    "error": {
                        "type": "string",
                        "description": "Why the call failed; a refusal starts with \"Permission denied:\"."
                    }
                },
                "required": ["error"],
                "additionalProperties": false
            }
        ]
    }))
}

/// A schema object, its Rust-side `title` and top-level `description` removed (they name Rust
/// types, which mean nothing to a client).
fn object(schema: Value) -> JsonObject {
    match strip_titles(schema) {
        Value::Object(mut map) => {
            map.remove("description");
            map
        }
        _ => JsonObject::default(),
    }
}

fn strip_titles(schema: Value) -> Value {
    match schema {
        Value::Object(mut map) => {
            map.remove("title");
            map.remove("$schema");
            Value::Object(map)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rpc_tool_has_a_closed_input_and_an_envelope_output_schema() {
        let rpc: Vec<_> = REGISTRY
            .iter()
            .filter(|c| matches!(c.kind, ToolKind::Rpc { .. }))
            .collect();
        assert!(!rpc.is_empty());
        for contract in rpc {
            let tool = definition(contract).expect("an RPC tool has a definition");
            assert_eq!(tool.input_schema["type"], "object", "{}", contract.name);
            assert_eq!(
                tool.input_schema["additionalProperties"], false,
                "{}",
                contract.name
            );
            let output = tool.output_schema.expect("an output schema");
            // MCP requires an object at the root of an output schema.
            assert_eq!(output["type"], "object", "{}", contract.name);
            assert_eq!(output["oneOf"][1]["required"], json!(["error"]));
        }
    }

    #[test]
    fn local_tools_are_not_served() {
        for name in [
            "ask_user",
            "task",
            "read_file",
            "write_file",
            "get_current_date",
        ] {
            assert!(rpc_tool(name).is_none(), "{name}");
        }
        assert!(rpc_tool("list_departments").is_some());
        assert!(rpc_tool("no_such_tool").is_none());
    }
}
