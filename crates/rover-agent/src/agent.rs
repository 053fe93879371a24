//! What an agent of a turn is: its tools (contract and model-facing definition), skills and
//! subagents, and the checks of a call's arguments against a tool's schema. `build` assembles
//! one from the runtime context; `prompt` words it — from the same arrays, so the prompt's tool
//! inventory and delegate roster cannot drift from what the model is actually given.
//!
//! *Architecture Invariant*: nothing here is cached per caller. The only process-wide cache is the
//! tool *definitions* (name, description, JSON schema), which are static data of the contracts.

use std::collections::HashMap;
use std::sync::OnceLock;

use rover_contracts::context::Subagent;
use rover_contracts::tools::{Effect, REGISTRY, ToolContract};
use serde_json::{Value, json};

use crate::skills::Skill;

/// A tool as one agent holds it: its contract and the definition sent to the model.
#[derive(Debug, Clone, Copy)]
pub struct AgentTool {
    /// Everything Rover knows about the tool.
    pub contract: &'static ToolContract,
    /// `{"type":"function","function":{"name","description","parameters"}}`, as the model sees it.
    pub definition: &'static Value,
}

/// One agent of a turn: Rover, or a role subagent.
#[derive(Debug, Clone)]
pub struct Agent {
    /// `None` for Rover; the role for a subagent.
    pub subagent: Option<Subagent>,
    /// The tools the model is given, in catalogue order.
    pub tools: Vec<AgentTool>,
    /// The specialists Rover may delegate to (always empty for a subagent).
    pub subagents: Vec<Agent>,
    /// The skills listed in the prompt.
    pub skills: Vec<SkillRef>,
    /// The assembled system prompt.
    pub system_prompt: String,
}

/// A skill as the prompt lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillRef {
    /// Its name.
    pub name: String,
    /// One sentence about it.
    pub description: String,
    /// Where `read_file` finds its body (`/skills/…/SKILL.md`).
    pub path: String,
}

impl From<&Skill> for SkillRef {
    fn from(skill: &Skill) -> Self {
        Self {
            name: skill.name.clone(),
            description: skill.description.clone(),
            path: skill.path.clone(),
        }
    }
}

impl Agent {
    /// The name the agent goes by (`rover`, `class_teacher`, …).
    pub fn name(&self) -> &'static str {
        self.subagent.map_or("rover", Subagent::name)
    }

    /// The tool definitions to send to the model: exactly `self.tools`, in order.
    pub fn tool_definitions(&self) -> Vec<Value> {
        self.tools.iter().map(|t| t.definition.clone()).collect()
    }

    /// The tool with this name, if the agent holds it.
    pub fn tool(&self, name: &str) -> Option<&AgentTool> {
        self.tools.iter().find(|t| t.contract.name == name)
    }

    /// The subagent with this role, if it exists this turn.
    pub fn delegate(&self, subagent: Subagent) -> Option<&Agent> {
        self.subagents.iter().find(|a| a.subagent == Some(subagent))
    }

    /// The tool a call names, its arguments checked against the very schema the model was shown.
    /// Every call passes here before it may run or wait for approval, whether the model made it
    /// natively or wrote it as text; `Err` is the result the model reads instead, saying what it
    /// may call.
    pub(crate) fn check_call(&self, name: &str, args: &Value) -> Result<&AgentTool, String> {
        let tool = self.tool(name).ok_or_else(|| self.unknown_tool(name))?;
        validate_arguments(tool, args)?;
        Ok(tool)
    }

    /// What the model reads when it calls a tool it does not have: the tools it has, and where
    /// the one it wanted is (a specialist's, or not this staff member's at all).
    fn unknown_tool(&self, name: &str) -> String {
        let name: String = name.chars().take(64).collect();
        let mine: Vec<&str> = self.tools.iter().map(|t| t.contract.name).collect();
        let hint = if let Some(owner) = self.subagents.iter().find(|a| a.tool(&name).is_some()) {
            format!(
                " {name} is the {owner} specialist's tool: call task with subagent \"{owner}\" and a \
                 description of the work, with every detail they need.",
                owner = owner.name()
            )
        } else if rover_contracts::tools::by_name(&name).is_some() {
            format!(
                " {name} is not available to this staff member: tell them plainly that you cannot \
                 do that for them."
            )
        } else {
            " If none of them fits, answer in plain sentences.".to_owned()
        };
        format!(
            "There is no tool named {name} for you; nothing was run. Your tools: {}.{hint}",
            mine.join(", ")
        )
    }
}

/// Whether the thread has a sandbox mounted (the file tools exist only then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mounts {
    /// A per-thread sandbox is mounted.
    pub sandbox: bool,
}

/// The model-facing definition of every tool, built once per process from the contracts.
pub(crate) fn definitions() -> &'static HashMap<&'static str, Value> {
    static DEFINITIONS: OnceLock<HashMap<&'static str, Value>> = OnceLock::new();
    DEFINITIONS.get_or_init(|| {
        REGISTRY
            .iter()
            .map(|c| {
                let mut parameters = serde_json::to_value((c.args_schema)()).unwrap_or_else(|_| json!({}));
                if let Some(map) = parameters.as_object_mut() {
                    // Rust-side titles and doc headers mean nothing to a model.
                    map.remove("title");
                    map.remove("description");
                }
                let definition = json!({
                    "type": "function",
                    "function": { "name": c.name, "description": c.description, "parameters": parameters },
                });
                (c.name, definition)
            })
            .collect()
    })
}

/// Checks a local tool's arguments against the very schema the model was shown (closed: unknown
/// fields are errors), so nothing runs on arguments the contract does not allow. The message names
/// the first problem, cut short so a huge argument is never echoed back whole.
pub(crate) fn validate_arguments(tool: &AgentTool, args: &Value) -> Result<(), String> {
    static VALIDATORS: OnceLock<HashMap<&'static str, jsonschema::Validator>> = OnceLock::new();
    let validators = VALIDATORS.get_or_init(|| {
        definitions()
            .iter()
            .filter_map(|(name, definition)| {
                // The registry's schemas are checked to be valid JSON Schema by the contracts tests.
                let validator =
                    jsonschema::validator_for(&definition["function"]["parameters"]).ok()?;
                Some((*name, validator))
            })
            .collect()
    });
    let Some(validator) = validators.get(tool.contract.name) else {
        return Err(format!(
            "The arguments of {} cannot be checked, so it was not run.",
            tool.contract.name
        ));
    };
    match validator.iter_errors(args).next() {
        None => Ok(()),
        Some(error) => {
            const SHOWN: usize = 300;
            let path = error.instance_path().to_string();
            let at = if path.is_empty() {
                String::new()
            } else {
                format!(" (at {})", path.chars().take(100).collect::<String>())
            };
            let message = error.to_string();
            let mut shown: String = message.chars().take(SHOWN).collect();
            if message.chars().count() > SHOWN {
                shown.push('…');
            }
            Err(format!(
                "Invalid arguments for {}: {shown}{at}. Nothing was run.",
                tool.contract.name
            ))
        }
    }
}

/// Whether a tool changes data (for the prompt's inventory).
pub(crate) fn is_write(tool: &AgentTool) -> bool {
    tool.contract.effect == Effect::Write
}
