//! Tool contracts: the one place a tool is declared. The worker's proxies, the tool server's routing,
//! the prompt's tool inventory, the JSON schemas, the Hub's activity labels and the docs all follow
//! from the [`ToolContract`] values in [`REGISTRY`]; which of them a caller is offered is decided
//! once, by [`offered`].

mod class_teacher;
mod data;
mod director_of_studies;
mod local;
mod offer;
mod rover;
mod subject_teacher;

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use class_teacher::*;
pub use data::*;
pub use director_of_studies::*;
pub use local::*;
pub use offer::{Offer, offered};
pub use rover::*;
pub use subject_teacher::*;

use crate::context::Subagent;
use crate::permission::Permission;

/// A tool: its argument type, its output type, and its contract.
pub trait Tool {
    /// What the model passes. Closed: unknown fields are rejected.
    type Args: Serialize + DeserializeOwned + JsonSchema;
    /// What `data` holds in a successful envelope.
    type Output: Serialize + DeserializeOwned + JsonSchema;
    /// Everything else about the tool.
    const CONTRACT: ToolContract;
}

/// Everything Rover knows about one tool, as data.
#[derive(Debug, Clone, Copy)]
pub struct ToolContract {
    /// What the model and the Hub's label registry see: `verb_subject`.
    pub name: &'static str,
    /// What the model reads to decide when to call it.
    pub description: &'static str,
    /// The Hub's activity line while the tool runs ("Creating a department…").
    pub label: &'static str,
    /// Which agent carries the tool.
    pub owner: Owner,
    /// Whether a successful call changes data.
    pub effect: Effect,
    /// Where it runs, and how it is authorised.
    pub kind: ToolKind,
    /// The JSON Schema of the arguments (the very schema the model is shown and calls are checked against).
    pub args_schema: fn() -> Schema,
    /// The JSON Schema of the output.
    pub output_schema: fn() -> Schema,
}

impl ToolContract {
    /// Checks `args` against the tool's argument schema (the one the model is shown): `Err` says
    /// what is wrong, in a sentence. Compiles the schema on each use; the hot paths (the agent's
    /// check, the tool server's) keep theirs compiled.
    pub fn check_args(&self, args: &serde_json::Value) -> Result<(), String> {
        let schema = serde_json::to_value((self.args_schema)())
            .map_err(|e| format!("The schema of {} cannot be read: {e}", self.name))?;
        let validator = jsonschema::validator_for(&schema)
            .map_err(|e| format!("The schema of {} cannot be compiled: {e}", self.name))?;
        match validator.iter_errors(args).next() {
            None => Ok(()),
            Some(error) => Err(schema_error(&error)),
        }
    }

    /// The RabbitMQ routing key of an RPC tool; `None` for a local tool.
    pub const fn event(&self) -> Option<&'static str> {
        match self.kind {
            ToolKind::Rpc { event, .. } => Some(event),
            ToolKind::Local { .. } => None,
        }
    }

    /// The permission the advisory snapshot must list for this tool to be offered, if any.
    pub const fn required_permission(&self) -> Option<Permission> {
        match self.kind {
            ToolKind::Rpc {
                posture: Posture::Policy(permission),
                ..
            } => Some(permission),
            _ => None,
        }
    }

    /// Whether the tool exists only when the thread has a sandbox mounted.
    pub const fn needs_sandbox(&self) -> bool {
        matches!(
            self.kind,
            ToolKind::Local {
                needs_sandbox: true
            }
        )
    }
}

/// Which agent carries a tool. Subagents carry only their own tools and inherit nothing from Rover.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Owner {
    /// The supervisor.
    Rover,
    /// A role subagent.
    Subagent(Subagent),
}

/// Whether a tool changes data. A successful write is audited once and is idempotent by call id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Effect {
    /// Reads only.
    Read,
    /// Changes data.
    Write,
}

/// Where a tool runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    /// On the tool server, over the agent-tool queue.
    Rpc {
        /// The routing key: `verb.subject` (`create.department`).
        event: &'static str,
        /// How the tool server authorises the call.
        posture: Posture,
    },
    /// In the worker; no RabbitMQ.
    Local {
        /// Exists only when a sandbox is mounted for the thread.
        needs_sandbox: bool,
    },
}

/// How the tool server authorises an RPC tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Posture {
    /// A casbin gate on this permission, then the tenant frame.
    Policy(Permission),
    /// The domain function asserts the caller owns the thing it touches.
    Relationship(Relationship),
}

/// The ownership a relationship-posture tool asserts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relationship {
    /// The caller is class teacher of the class.
    ClassTeacherOfClass,
    /// The caller teaches the subject to the class this academic year.
    TeachesSubjectInClass,
    /// The caller's own teaching assignments.
    OwnTeaching,
}

/// The JSON Schema of `T` as tools use it: draft 2020-12, every subschema inlined (models handle
/// `$ref` poorly), closed objects wherever the type denies unknown fields.
pub fn schema_for<T: JsonSchema>() -> Schema {
    SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator()
        .into_root_schema_for::<T>()
}

/// Every tool Rover has, RPC and local, in catalogue order.
pub const REGISTRY: &[&ToolContract] = &[
    &ListDepartments::CONTRACT,
    &CreateDepartment::CONTRACT,
    &RenameDepartment::CONTRACT,
    &ListClasses::CONTRACT,
    &FindStudents::CONTRACT,
    &GetEnrollmentSummary::CONTRACT,
    &ListStaff::CONTRACT,
    &GetClassRoster::CONTRACT,
    &RecordAttendance::CONTRACT,
    &ListMyClasses::CONTRACT,
    &RecordMarks::CONTRACT,
    &GetClassMarks::CONTRACT,
    &ListTeachingAssignments::CONTRACT,
    &AssignSubjectTeacher::CONTRACT,
    &GetResultsSummary::CONTRACT,
    &GetCurrentDate::CONTRACT,
    &AskUser::CONTRACT,
    &ListAgentMap::CONTRACT,
    &Task::CONTRACT,
    &Ls::CONTRACT,
    &ReadFile::CONTRACT,
    &WriteFile::CONTRACT,
    &EditFile::CONTRACT,
    &SaveArtifact::CONTRACT,
];

/// What a schema refused in a call's arguments, as a clause: the error, and where it is
/// (`… (at /name)`) when it is not the whole input.
pub fn schema_error(error: &jsonschema::ValidationError<'_>) -> String {
    let path = error.instance_path().to_string();
    if path.is_empty() {
        error.to_string()
    } else {
        format!("{error} (at {path})")
    }
}

/// The contract with this model-facing name.
pub fn by_name(name: &str) -> Option<&'static ToolContract> {
    REGISTRY.iter().copied().find(|c| c.name == name)
}

/// The RPC contract with this routing key.
pub fn by_event(event: &str) -> Option<&'static ToolContract> {
    REGISTRY.iter().copied().find(|c| c.event() == Some(event))
}

/// The Hub's label registry: tool name → activity label.
pub fn labels() -> impl Iterator<Item = (&'static str, &'static str)> {
    REGISTRY.iter().map(|c| (c.name, c.label))
}
