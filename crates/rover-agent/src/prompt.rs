//! The system prompts: fixed copy, then sections generated from the very arrays the agent holds
//! (tool inventory, delegate roster, skills), then the runtime context as JSON.

use std::fmt::Write as _;

use rover_contracts::context::{RuntimeContext, Subagent};

use crate::agent::{Agent, AgentTool, SkillRef, is_write};

/// The heading of the tool inventory; tests parse the section under it.
pub const TOOLS_HEADING: &str = "## Your tools";
/// The heading of the delegate roster.
pub const DELEGATES_HEADING: &str = "## Specialists you can delegate to";

const SUPERVISOR: &str = "\
You are Rover, the assistant inside a school-management Hub. You help one staff member at a time, \
always as that person, inside their school, and never with more power than they have.

How you work:
- Read and change school data only through your tools; never invent ids, names or numbers.
- Every tool result is {\"data\":…,\"scopeContext\":\"…\"} or {\"error\":\"…\"}. Qualify what you say \
with scopeContext: a campus-scoped answer is about that campus, not the whole school.
- If a tool answers with an error (\"Permission denied: …\"), say plainly what could not be done and why.
- If you cannot proceed without the staff member's answer, call ask_user with one clear question.
- Hand role work (a class's attendance, a subject's marks, teaching assignments) to the matching \
specialist with task, giving them every detail they need: they see nothing else of this chat.
- Be brief and concrete.";

/// Rover's prompt.
pub(crate) fn supervisor(
    context: &RuntimeContext,
    tools: &[AgentTool],
    subagents: &[Agent],
    skills: &[SkillRef],
) -> String {
    let mut prompt = String::with_capacity(4096);
    prompt.push_str(SUPERVISOR);
    push_tools(&mut prompt, tools);
    let _ = write!(prompt, "\n\n{DELEGATES_HEADING} (with `task`)\n");
    if subagents.is_empty() {
        prompt.push_str("- none this turn\n");
    }
    for agent in subagents {
        let role = agent.subagent.map_or("", |s| role_summary(s));
        let names: Vec<&str> = agent.tools.iter().map(|t| t.contract.name).collect();
        let _ = writeln!(
            prompt,
            "- {} — {role} (tools: {})",
            agent.name(),
            names.join(", ")
        );
    }
    push_skills(&mut prompt, skills);
    push_context(&mut prompt, context);
    prompt
}

/// A role subagent's prompt: its own copy, tools and skills; nothing of Rover's.
pub(crate) fn subagent(
    role: Subagent,
    context: &RuntimeContext,
    tools: &[AgentTool],
    skills: &[SkillRef],
) -> String {
    let mut prompt = String::with_capacity(3072);
    let _ = write!(
        prompt,
        "You are the {} specialist working for Rover in a school-management Hub: {}.\n\
         You act as the staff member below, inside their school, with only the tools listed. Use the \
         ids in the runtime context and in tool results; never invent them. When you are done, answer \
         with a short summary of what you did (or could not do, and why) — that is all Rover will see.",
        role.name().replace('_', " "),
        role_summary(role),
    );
    push_tools(&mut prompt, tools);
    push_skills(&mut prompt, skills);
    push_context(&mut prompt, context);
    prompt
}

fn role_summary(role: Subagent) -> &'static str {
    match role {
        Subagent::ClassTeacher => {
            "class rosters and attendance for the classes the staff member is class teacher of"
        }
        Subagent::SubjectTeacher => "marks for the subjects the staff member teaches",
        Subagent::DirectorOfStudies => "teaching assignments and results across the school",
    }
}

fn push_tools(prompt: &mut String, tools: &[AgentTool]) {
    let _ = write!(prompt, "\n\n{TOOLS_HEADING}\n");
    for tool in tools {
        let kind = if is_write(tool) {
            "changes data"
        } else {
            "reads"
        };
        let _ = writeln!(
            prompt,
            "- {} ({kind}) — {}",
            tool.contract.name, tool.contract.description
        );
    }
}

fn push_skills(prompt: &mut String, skills: &[SkillRef]) {
    prompt.push_str("\n## Skills (read the body with read_file when one applies)\n");
    if skills.is_empty() {
        prompt.push_str("- none\n");
    }
    for skill in skills {
        let _ = writeln!(
            prompt,
            "- {} — {} ({})",
            skill.name, skill.description, skill.path
        );
    }
}

fn push_context(prompt: &mut String, context: &RuntimeContext) {
    prompt.push_str("\n## Who you are helping, where, and what they may do\n<runtime_context>\n");
    prompt.push_str(&serde_json::to_string(context).unwrap_or_default());
    prompt.push_str("\n</runtime_context>\n");
}

/// The tool names listed in a prompt's inventory section, in order (for drift tests).
pub fn inventory(prompt: &str) -> Vec<&str> {
    section(prompt, TOOLS_HEADING)
        .filter_map(|line| line.strip_prefix("- ")?.split(' ').next())
        .collect()
}

/// The agent names listed in a prompt's delegate roster, in order (for drift tests).
pub fn roster(prompt: &str) -> Vec<&str> {
    section(prompt, DELEGATES_HEADING)
        .filter_map(|line| line.strip_prefix("- ")?.split(' ').next())
        .filter(|name| *name != "none")
        .collect()
}

fn section<'a>(prompt: &'a str, heading: &str) -> impl Iterator<Item = &'a str> {
    prompt
        .split_once(heading)
        .map(|(_, rest)| rest)
        .unwrap_or_default()
        .lines()
        .skip(1)
        .take_while(|line| !line.starts_with("##") && !line.starts_with('<'))
        .filter(|line| line.starts_with("- "))
}
