//! Building the agent for one turn: which tools, skills and subagents the caller gets, and the
//! system prompt assembled from those very arrays — so the prompt's tool inventory and delegate
//! roster cannot drift from what the model is actually given.
//!
//! *Architecture Invariant*: nothing here is cached per caller. The only process-wide cache is the
//! tool *definitions* (name, description, JSON schema), which are static data of the contracts.

use std::collections::HashMap;
use std::sync::OnceLock;

use rover_contracts::context::{RuntimeContext, Subagent};
use rover_contracts::tools::{Effect, Owner, REGISTRY, ToolContract, ToolKind};
use serde_json::{Value, json};

use crate::prompt;
use crate::skills::{Skill, SkillLibrary};

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
}

/// Whether the thread has a sandbox mounted (the file tools exist only then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mounts {
    /// A per-thread sandbox is mounted.
    pub sandbox: bool,
}

/// Builds this turn's agent from the caller's runtime context.
pub fn build_agent(context: &RuntimeContext, skills: &SkillLibrary, mounts: Mounts) -> Agent {
    let subagents: Vec<Agent> = context
        .capabilities
        .subagents()
        .map(|s| build_subagent(context, skills, mounts, s))
        .collect();
    let tools = select_tools(context, Owner::Rover, mounts, !subagents.is_empty());
    let skills: Vec<SkillRef> = skills
        .for_agent(None)
        .into_iter()
        .map(SkillRef::from)
        .collect();
    let system_prompt = prompt::supervisor(context, &tools, &subagents, &skills);
    Agent {
        subagent: None,
        tools,
        subagents,
        skills,
        system_prompt,
    }
}

fn build_subagent(
    context: &RuntimeContext,
    skills: &SkillLibrary,
    mounts: Mounts,
    role: Subagent,
) -> Agent {
    let tools = select_tools(context, Owner::Subagent(role), mounts, false);
    let skills: Vec<SkillRef> = skills
        .for_agent(Some(role))
        .into_iter()
        .map(SkillRef::from)
        .collect();
    let system_prompt = prompt::subagent(role, context, &tools, &skills);
    Agent {
        subagent: Some(role),
        tools,
        subagents: Vec::new(),
        skills,
        system_prompt,
    }
}

/// The local tools every subagent gets besides its own RPC tools.
const SUBAGENT_LOCAL: [&str; 2] = ["get_current_date", "read_file"];

fn select_tools(
    context: &RuntimeContext,
    owner: Owner,
    mounts: Mounts,
    has_delegates: bool,
) -> Vec<AgentTool> {
    let definitions = definitions();
    REGISTRY
        .iter()
        .copied()
        .filter(|contract| match contract.kind {
            ToolKind::Rpc { .. } => {
                contract.owner == owner
                    && contract
                        .required_permission()
                        .is_none_or(|p| context.user_permissions.allows(p))
            }
            ToolKind::Local { needs_sandbox } => {
                let mine = match owner {
                    Owner::Rover => contract.name != "task" || has_delegates,
                    Owner::Subagent(_) => SUBAGENT_LOCAL.contains(&contract.name),
                };
                mine && (!needs_sandbox || mounts.sandbox)
            }
        })
        .filter_map(|contract| {
            Some(AgentTool {
                contract,
                definition: definitions.get(contract.name)?,
            })
        })
        .collect()
}

/// The model-facing definition of every tool, built once per process from the contracts.
fn definitions() -> &'static HashMap<&'static str, Value> {
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
