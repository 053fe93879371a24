//! The director of studies subagent's RPC tools: teaching assignments and results.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    Effect, Owner, Posture, ResultsSummary, TeachingAssignment, Tool, ToolContract, ToolKind,
    schema_for,
};
use crate::context::Subagent;
use crate::ids::{ClassId, SubjectId, TermId, UserId};
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
    /// Only this class's assignments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_id: Option<ClassId>,
    /// Only this teacher's assignments (a staff id from `list_staff`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teacher_id: Option<UserId>,
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
    /// The teacher, by staff id from `list_staff`.
    pub teacher_id: UserId,
    /// The class.
    pub class_id: ClassId,
    /// The subject.
    pub subject_id: SubjectId,
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
    /// Only this class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_id: Option<ClassId>,
    /// Only this subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_id: Option<SubjectId>,
    /// The term; omit for the current term.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub term_id: Option<TermId>,
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
