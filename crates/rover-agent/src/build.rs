//! Building the agent for one turn from the caller's runtime context: which tools, skills and
//! subagents the caller gets, and the system prompt assembled from those very arrays.

use rover_contracts::context::{RuntimeContext, Subagent};
use rover_contracts::tools::{Offer, Owner, REGISTRY, ToolKind};

use crate::agent::{Agent, AgentTool, Mounts, SkillRef, definition, task_definition};
use crate::prompt;
use crate::skills::SkillLibrary;

/// Builds this turn's agent from the caller's runtime context.
pub fn build_agent(context: &RuntimeContext, skills: &SkillLibrary, mounts: Mounts) -> Agent {
    let subagents: Vec<Agent> = context
        .capabilities
        .subagents()
        .map(|s| build_subagent(context, skills, mounts, s))
        .collect();
    let delegates: Vec<Subagent> = subagents.iter().filter_map(|a| a.subagent).collect();
    let mut tools = select_tools(context, Owner::Rover, mounts, &delegates);
    tools.extend(held_from(&subagents));
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

pub(crate) fn build_subagent(
    context: &RuntimeContext,
    skills: &SkillLibrary,
    mounts: Mounts,
    role: Subagent,
) -> Agent {
    let tools = select_tools(context, Owner::Subagent(role), mounts, &[]);
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

/// The tools Rover holds from its specialists: each one's RPC tools, which a call hands to that
/// specialist (`AgentTool::via`). A small model makes the call the staff member asked for when it
/// is offered; asked to pick a specialist and describe the work, it picks the wrong one or
/// describes a different task (decision 0012).
fn held_from(subagents: &[Agent]) -> impl Iterator<Item = AgentTool> + '_ {
    subagents.iter().flat_map(|agent| {
        let role = agent.subagent;
        agent
            .tools
            .iter()
            .filter(|t| matches!(t.contract.kind, ToolKind::Rpc { .. }))
            .filter_map(move |t| Some(t.via(role?)))
    })
}

/// The local tools every subagent gets besides its own RPC tools.
pub(crate) const SUBAGENT_LOCAL: [&str; 2] = ["get_current_date", "read_file"];

/// The tools `owner` is offered, in catalogue order: its RPC tools by the one offer rule
/// ([`Offer::includes`]: its agent exists and the snapshot holds the tool's permission), and its
/// local tools (`task`, offering exactly `delegates`, only when there are some; file tools only
/// with a sandbox).
pub(crate) fn select_tools(
    context: &RuntimeContext,
    owner: Owner,
    mounts: Mounts,
    delegates: &[Subagent],
) -> Vec<AgentTool> {
    REGISTRY
        .iter()
        .copied()
        .filter(|contract| match contract.kind {
            ToolKind::Rpc { .. } => Offer::of(owner).includes(context, contract),
            ToolKind::Local { needs_sandbox } => {
                let mine = match owner {
                    Owner::Rover => contract.name != "task" || !delegates.is_empty(),
                    Owner::Subagent(_) => SUBAGENT_LOCAL.contains(&contract.name),
                };
                mine && (!needs_sandbox || mounts.sandbox)
            }
        })
        .filter_map(|contract| {
            let definition = if contract.name == "task" {
                task_definition(delegates)
            } else {
                definition(contract.name)?
            };
            Some(AgentTool::new(contract, definition))
        })
        .collect()
}
