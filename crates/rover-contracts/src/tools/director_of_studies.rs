//! The director of studies subagent's RPC tools: teaching assignments and results.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    Effect, Owner, Posture, ResultsSummary, TeachingAssignment, Tool, ToolContract, ToolKind,
    schema_for,
};
use crate::context::Subagent;
use crate::ids::{ClassId, SubjectId, TermId, UserId};
use crate::named::Named;
use crate::permission::{Action, Permission, Subject};

const OWNER: Owner = Owner::Subagent(Subagent::DirectorOfStudies);
const fn policy(event: &'static str, action: Action, subject: Subject) -> ToolKind {
    ToolKind::Rpc {
        event,
        posture: Posture::Policy(Permission::new(action, subject)),
    }
}

/// Arguments of `list_teaching_assignments`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListTeachingAssignmentsArgs {
    /// Only this class's assignments: its name (e.g. "S1 Blue") or its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<Named<ClassId>>,
    /// Only this teacher's assignments: their name (e.g. "Okello") or their id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teacher: Option<Named<UserId>>,
}

/// `list_teaching_assignments`.
#[derive(Debug)]
pub struct ListTeachingAssignments;
impl Tool for ListTeachingAssignments {
    type Args = ListTeachingAssignmentsArgs;
    type Output = Vec<TeachingAssignment>;
    const CONTRACT: ToolContract = ToolContract {
        name: "list_teaching_assignments",
        description: "List who teaches which subject to which class this academic year, optionally for one class or one teacher.",
        label: "Looking up teaching assignments…",
        owner: OWNER,
        effect: Effect::Read,
        kind: policy(
            "list.teaching_assignments",
            Action::Read,
            Subject::TeachingAssignment,
        ),
        args_schema: schema_for::<ListTeachingAssignmentsArgs>,
        output_schema: schema_for::<Vec<TeachingAssignment>>,
    };
}

/// Arguments of `assign_subject_teacher`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AssignSubjectTeacherArgs {
    /// The teacher, by name as staff say it (e.g. "Okello") or by id.
    pub teacher: Named<UserId>,
    /// The class, as staff name it (e.g. "S1 Blue") or its id.
    pub class: Named<ClassId>,
    /// The subject, as staff name it (e.g. "Physics") or its id.
    pub subject: Named<SubjectId>,
}

/// `assign_subject_teacher`.
#[derive(Debug)]
pub struct AssignSubjectTeacher;
impl Tool for AssignSubjectTeacher {
    type Args = AssignSubjectTeacherArgs;
    type Output = TeachingAssignment;
    const CONTRACT: ToolContract = ToolContract {
        name: "assign_subject_teacher",
        description: "Assign a teacher to teach a subject to a class for the current academic year. Assigning the same teacher again changes nothing.",
        label: "Assigning a subject teacher…",
        owner: OWNER,
        effect: Effect::Write,
        kind: policy(
            "assign.subject_teacher",
            Action::Create,
            Subject::TeachingAssignment,
        ),
        args_schema: schema_for::<AssignSubjectTeacherArgs>,
        output_schema: schema_for::<TeachingAssignment>,
    };
}

/// Arguments of `get_results_summary`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GetResultsSummaryArgs {
    /// Only this class: its name (e.g. "S1 Blue") or its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<Named<ClassId>>,
    /// Only this subject: its name (e.g. "Maths") or its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Named<SubjectId>>,
    /// The term (e.g. "Term 2"); leave it out for the current term.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub term: Option<Named<TermId>>,
}

/// `get_results_summary`.
#[derive(Debug)]
pub struct GetResultsSummary;
impl Tool for GetResultsSummary {
    type Args = GetResultsSummaryArgs;
    type Output = ResultsSummary;
    const CONTRACT: ToolContract = ToolContract {
        name: "get_results_summary",
        description: "Average marks per class and subject for a term, optionally for one class or subject.",
        label: "Summarising results…",
        owner: OWNER,
        effect: Effect::Read,
        kind: policy("get.results_summary", Action::Read, Subject::Mark),
        args_schema: schema_for::<GetResultsSummaryArgs>,
        output_schema: schema_for::<ResultsSummary>,
    };
}
