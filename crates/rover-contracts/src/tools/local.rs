//! Local tools: they run in the worker, never touch RabbitMQ, and return the same envelope.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    AgentMap, Artifact, CurrentDate, Effect, FileEntry, FileWritten, NoArgs, Owner, Tool,
    ToolContract, ToolKind, schema_for,
};
use crate::context::Subagent;

const ALWAYS: ToolKind = ToolKind::Local {
    needs_sandbox: false,
};
const SANDBOX: ToolKind = ToolKind::Local {
    needs_sandbox: true,
};

/// `get_current_date`.
#[derive(Debug)]
pub struct GetCurrentDate;
impl Tool for GetCurrentDate {
    type Args = NoArgs;
    type Output = CurrentDate;
    const CONTRACT: ToolContract = ToolContract {
        name: "get_current_date",
        description: "Today's date and weekday in the school's time zone, with the academic year and the current term.",
        label: "Checking the date…",
        owner: Owner::Rover,
        effect: Effect::Read,
        kind: ALWAYS,
        args_schema: schema_for::<NoArgs>,
        output_schema: schema_for::<CurrentDate>,
    };
}

/// Arguments of `ask_user`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AskUserArgs {
    /// One short, specific question.
    #[schemars(length(min = 1, max = 500))]
    pub question: String,
    /// Answers to offer as buttons, if the question has a few obvious ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub choices: Vec<String>,
}

/// `ask_user`: the turn ends waiting; the answer arrives with the next message as this call's result.
#[derive(Debug)]
pub struct AskUser;
impl Tool for AskUser {
    type Args = AskUserArgs;
    type Output = String;
    const CONTRACT: ToolContract = ToolContract {
        name: "ask_user",
        description: "Ask the staff member a question when you cannot proceed without their answer (which class, which date, what they meant). The turn pauses until they reply.",
        label: "Asking you a question…",
        owner: Owner::Rover,
        effect: Effect::Read,
        kind: ALWAYS,
        args_schema: schema_for::<AskUserArgs>,
        output_schema: schema_for::<String>,
    };
}

/// `list_agent_map`.
#[derive(Debug)]
pub struct ListAgentMap;
impl Tool for ListAgentMap {
    type Args = NoArgs;
    type Output = AgentMap;
    const CONTRACT: ToolContract = ToolContract {
        name: "list_agent_map",
        description: "List what you can do in this chat: your tools, the specialists you can delegate to, and your skills.",
        label: "Checking what I can do…",
        owner: Owner::Rover,
        effect: Effect::Read,
        kind: ALWAYS,
        args_schema: schema_for::<NoArgs>,
        output_schema: schema_for::<AgentMap>,
    };
}

/// Arguments of `task`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskArgs {
    /// Which specialist to hand the work to.
    pub subagent: Subagent,
    /// Everything the specialist needs: it sees nothing of this conversation but this text.
    #[schemars(length(min = 1, max = 4000))]
    pub description: String,
}

/// `task`: delegate to a role subagent and return its final answer.
#[derive(Debug)]
pub struct Task;
impl Tool for Task {
    type Args = TaskArgs;
    type Output = String;
    const CONTRACT: ToolContract = ToolContract {
        name: "task",
        description: "Delegate work to one of your specialists by name. Give a complete instruction; you get their final answer back.",
        label: "Handing over to a specialist…",
        owner: Owner::Rover,
        effect: Effect::Read,
        kind: ALWAYS,
        args_schema: schema_for::<TaskArgs>,
        output_schema: schema_for::<String>,
    };
}

/// Arguments of `ls`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LsArgs {
    /// The directory; omit for `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// `ls`.
#[derive(Debug)]
pub struct Ls;
impl Tool for Ls {
    type Args = LsArgs;
    type Output = Vec<FileEntry>;
    const CONTRACT: ToolContract = ToolContract {
        name: "ls",
        description: "List a directory of this chat's files. Skills are under /skills/.",
        label: "Listing files…",
        owner: Owner::Rover,
        effect: Effect::Read,
        kind: SANDBOX,
        args_schema: schema_for::<LsArgs>,
        output_schema: schema_for::<Vec<FileEntry>>,
    };
}

/// Arguments of `read_file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadFileArgs {
    /// Absolute path, e.g. `/skills/rover/create-department/SKILL.md`.
    #[schemars(length(min = 1, max = 500))]
    pub path: String,
    /// First line to return (0-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u32>,
    /// How many lines to return.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// `read_file`.
#[derive(Debug)]
pub struct ReadFile;
impl Tool for ReadFile {
    type Args = ReadFileArgs;
    type Output = String;
    const CONTRACT: ToolContract = ToolContract {
        name: "read_file",
        description: "Read a file of this chat's files, or a skill under /skills/.",
        label: "Reading a file…",
        owner: Owner::Rover,
        effect: Effect::Read,
        kind: SANDBOX,
        args_schema: schema_for::<ReadFileArgs>,
        output_schema: schema_for::<String>,
    };
}

/// Arguments of `write_file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteFileArgs {
    /// Absolute path outside /skills/.
    #[schemars(length(min = 1, max = 500))]
    pub path: String,
    /// The whole new content.
    pub content: String,
}

/// `write_file`.
#[derive(Debug)]
pub struct WriteFile;
impl Tool for WriteFile {
    type Args = WriteFileArgs;
    type Output = FileWritten;
    const CONTRACT: ToolContract = ToolContract {
        name: "write_file",
        description: "Create or overwrite a file in this chat's files.",
        label: "Writing a file…",
        owner: Owner::Rover,
        effect: Effect::Write,
        kind: SANDBOX,
        args_schema: schema_for::<WriteFileArgs>,
        output_schema: schema_for::<FileWritten>,
    };
}

/// Arguments of `edit_file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditFileArgs {
    /// Absolute path outside /skills/.
    #[schemars(length(min = 1, max = 500))]
    pub path: String,
    /// Exact text to replace; must occur once unless `replaceAll` is set.
    #[schemars(length(min = 1))]
    pub old_string: String,
    /// The replacement.
    pub new_string: String,
    /// Replace every occurrence.
    #[serde(default)]
    pub replace_all: bool,
}

/// `edit_file`.
#[derive(Debug)]
pub struct EditFile;
impl Tool for EditFile {
    type Args = EditFileArgs;
    type Output = FileWritten;
    const CONTRACT: ToolContract = ToolContract {
        name: "edit_file",
        description: "Replace exact text in a file of this chat's files.",
        label: "Editing a file…",
        owner: Owner::Rover,
        effect: Effect::Write,
        kind: SANDBOX,
        args_schema: schema_for::<EditFileArgs>,
        output_schema: schema_for::<FileWritten>,
    };
}

/// Arguments of `save_artifact`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaveArtifactArgs {
    /// The file to publish.
    #[schemars(length(min = 1, max = 500))]
    pub path: String,
    /// The title the staff member sees.
    #[schemars(length(min = 1, max = 200))]
    pub title: String,
}

/// `save_artifact`: backend-bound; stores a sandbox file as a downloadable artifact of the thread.
#[derive(Debug)]
pub struct SaveArtifact;
impl Tool for SaveArtifact {
    type Args = SaveArtifactArgs;
    type Output = Artifact;
    const CONTRACT: ToolContract = ToolContract {
        name: "save_artifact",
        description: "Publish a file from this chat's files as a download the staff member can open.",
        label: "Saving a file for you…",
        owner: Owner::Rover,
        effect: Effect::Write,
        kind: SANDBOX,
        args_schema: schema_for::<SaveArtifactArgs>,
        output_schema: schema_for::<Artifact>,
    };
}
