//! The local tools: they run in the worker, never touch RabbitMQ, and return the same envelope as
//! RPC tools. (`task` lives in the loop, since it runs a subagent's loop.)

use chrono::{Datelike as _, Utc};
use rover_contracts::AgentToolResult;
use rover_contracts::tools::{
    self, AgentMap, AgentMapEntry, CurrentDate, EditFileArgs, FileEntry, LsArgs, ReadFileArgs,
    SaveArtifactArgs, WriteFileArgs,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::agent::Agent;
use crate::deps::TurnDeps;
use crate::sandbox::SandboxError;
use crate::store::NewArtifact;

/// The activity label of a tool; for an unknown name, copy derived from its verb.
pub(crate) fn label(name: &str) -> String {
    match tools::by_name(name) {
        Some(contract) => contract.label.to_owned(),
        None => {
            let verb = name.split('_').next().unwrap_or(name);
            format!("Running {verb}…")
        }
    }
}

fn parse<T: DeserializeOwned>(name: &str, args: Value) -> Result<T, AgentToolResult<Value>> {
    serde_json::from_value(args)
        .map_err(|e| AgentToolResult::error(format!("Invalid arguments for {name}: {e}.")))
}

fn data<T: Serialize>(value: T, scope: String) -> AgentToolResult<Value> {
    match serde_json::to_value(value) {
        Ok(value) => AgentToolResult::data(value, scope),
        Err(error) => AgentToolResult::error(format!("The result could not be encoded: {error}.")),
    }
}

const SKILLS_ROOT: &str = "/skills";

/// Runs a local tool (other than `task`).
pub(crate) async fn run(
    agent: &Agent,
    name: &str,
    args: Value,
    deps: TurnDeps<'_>,
) -> AgentToolResult<Value> {
    let scope = deps.context().call_scope().describe();
    let result = match name {
        "get_current_date" => Ok(data(current_date(deps), scope)),
        "list_agent_map" => Ok(data(agent_map(agent), scope)),
        "ls" => parse::<LsArgs>(name, args).map(|a| ls(agent, a, deps, scope)),
        "read_file" => parse::<ReadFileArgs>(name, args).map(|a| read_file(agent, a, deps, scope)),
        "write_file" => parse::<WriteFileArgs>(name, args).map(|a| {
            with_sandbox(deps, |s| s.write(&a.path, &a.content)).map_or_else(
                |e| AgentToolResult::error(e.to_string()),
                |w| data(w, scope),
            )
        }),
        "edit_file" => parse::<EditFileArgs>(name, args).map(|a| {
            with_sandbox(deps, |s| {
                s.edit(&a.path, &a.old_string, &a.new_string, a.replace_all)
            })
            .map_or_else(
                |e| AgentToolResult::error(e.to_string()),
                |w| data(w, scope),
            )
        }),
        "save_artifact" => match parse::<SaveArtifactArgs>(name, args) {
            Ok(args) => Ok(save_artifact(args, deps, scope).await),
            Err(error) => Err(error),
        },
        other => Ok(AgentToolResult::error(format!(
            "{other} cannot be run here."
        ))),
    };
    result.unwrap_or_else(|error| error)
}

fn with_sandbox<T>(
    deps: TurnDeps<'_>,
    f: impl FnOnce(&crate::sandbox::Sandbox) -> Result<T, SandboxError>,
) -> Result<T, SandboxError> {
    deps.sandbox.map_or(Err(SandboxError::Unmounted), f)
}

fn current_date(deps: TurnDeps<'_>) -> CurrentDate {
    let calendar = &deps.context().calendar;
    let date = match calendar.time_zone.parse::<chrono_tz::Tz>() {
        Ok(zone) => Utc::now().with_timezone(&zone).date_naive(),
        Err(_) => Utc::now().date_naive(),
    };
    CurrentDate {
        date,
        weekday: date.weekday().to_string(),
        time_zone: calendar.time_zone.clone(),
        academic_year: calendar.academic_year.clone(),
        term: calendar.term_on(date).cloned(),
    }
}

fn agent_map(agent: &Agent) -> AgentMap {
    let entry = |name: &str, description: &str| AgentMapEntry {
        name: name.to_owned(),
        description: description.to_owned(),
    };
    AgentMap {
        tools: agent
            .tools
            .iter()
            .map(|t| entry(t.contract.name, t.contract.label))
            .collect(),
        subagents: agent
            .subagents
            .iter()
            .map(|s| {
                entry(
                    s.name(),
                    &s.tools
                        .iter()
                        .map(|t| t.contract.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                )
            })
            .collect(),
        skills: agent
            .skills
            .iter()
            .map(|s| entry(&s.name, &s.description))
            .collect(),
    }
}

fn is_skill_path(path: &str) -> bool {
    path == SKILLS_ROOT || path.starts_with("/skills/")
}

fn ls(agent: &Agent, args: LsArgs, deps: TurnDeps<'_>, scope: String) -> AgentToolResult<Value> {
    let path = args.path.unwrap_or_else(|| "/".to_owned());
    if is_skill_path(&path) {
        let dir = path.trim_end_matches('/');
        let entries: Vec<FileEntry> = deps
            .runtime
            .skills
            .list_dir_as(agent.subagent, dir)
            .into_iter()
            .map(|name| FileEntry {
                is_dir: name != "SKILL.md",
                path: format!("{dir}/{name}"),
                size: None,
            })
            .collect();
        return data(entries, scope);
    }
    with_sandbox(deps, |s| s.ls(&path)).map_or_else(
        |e| AgentToolResult::error(e.to_string()),
        |mut entries| {
            if path == "/" {
                entries.push(FileEntry {
                    path: SKILLS_ROOT.to_owned(),
                    is_dir: true,
                    size: None,
                });
            }
            data(entries, scope)
        },
    )
}

fn read_file(
    agent: &Agent,
    args: ReadFileArgs,
    deps: TurnDeps<'_>,
    scope: String,
) -> AgentToolResult<Value> {
    if is_skill_path(&args.path) {
        return match &deps.runtime.skills.read_as(agent.subagent, &args.path) {
            Some(skill) => AgentToolResult::data(Value::String(skill.body.clone()), scope),
            None => AgentToolResult::error(format!(
                "There is no skill at {}.",
                args.path.chars().take(200).collect::<String>()
            )),
        };
    }
    with_sandbox(deps, |s| s.read(&args.path, args.offset, args.limit)).map_or_else(
        |e| AgentToolResult::error(e.to_string()),
        |text| AgentToolResult::data(Value::String(text), scope),
    )
}

async fn save_artifact(
    args: SaveArtifactArgs,
    deps: TurnDeps<'_>,
    scope: String,
) -> AgentToolResult<Value> {
    let content = match with_sandbox(deps, |s| s.read_bytes(&args.path)) {
        Ok(content) => content,
        Err(error) => return AgentToolResult::error(error.to_string()),
    };
    let bytes = content.len() as u64;
    let artifact = NewArtifact {
        title: args.title.clone(),
        media_type: media_type(&args.path).to_owned(),
        content,
    };
    match deps.store.save_artifact(artifact).await {
        Ok(id) => data(
            tools::Artifact {
                id,
                title: args.title,
                path: args.path,
                bytes,
            },
            scope,
        ),
        Err(error) => AgentToolResult::error(format!("The file could not be published: {error}")),
    }
}

/// A media type from a file name's extension.
fn media_type(path: &str) -> &'static str {
    match path
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .as_deref()
    {
        Some("md") => "text/markdown",
        Some("txt") => "text/plain",
        Some("csv") => "text/csv",
        Some("json") => "application/json",
        Some("html") => "text/html",
        _ => "application/octet-stream",
    }
}
