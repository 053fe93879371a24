//! The subject teacher subagent's RPC tools: the caller's classes and the marks of subjects they teach.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    ClassMarks, Effect, MarksRecorded, MyClass, NoArgs, Owner, Posture, Relationship, Tool,
    ToolContract, ToolKind, schema_for,
};
use crate::context::Subagent;
use crate::ids::{ClassId, StudentId, SubjectId, TermId};
use crate::named::Named;

const OWNER: Owner = Owner::Subagent(Subagent::SubjectTeacher);
const fn relationship(event: &'static str, relationship: Relationship) -> ToolKind {
    ToolKind::Rpc {
        event,
        posture: Posture::Relationship(relationship),
    }
}

/// `list_my_classes`.
#[derive(Debug)]
pub struct ListMyClasses;
impl Tool for ListMyClasses {
    type Args = NoArgs;
    type Output = Vec<MyClass>;
    const CONTRACT: ToolContract = ToolContract {
        name: "list_my_classes",
        description: "List the classes you teach this academic year, with the subjects you teach each one and its students.",
        label: "Looking up your classes…",
        owner: OWNER,
        effect: Effect::Read,
        kind: relationship("list.my_classes", Relationship::OwnTeaching),
        args_schema: schema_for::<NoArgs>,
        output_schema: schema_for::<Vec<MyClass>>,
    };
}

/// One student's score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MarkEntry {
    /// The student, by the name the staff member used (for "Give Okot 75" the student is "Okot") or by id.
    pub student: Named<StudentId>,
    /// Score out of 100.
    #[schemars(range(min = 0.0, max = 100.0))]
    pub score: f64,
}

/// Arguments of `record_marks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecordMarksArgs {
    /// The class, as staff name it (e.g. "S1 Blue") or its id; leave it out when the staff member did not say it (the students' names then tell it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<Named<ClassId>>,
    /// The subject, as staff name it (e.g. "Maths") or its id; leave it out when you teach only one subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Named<SubjectId>>,
    /// The assessment, in the words the staff member used for it (their quiz, test or exam).
    #[schemars(length(min = 1, max = 100))]
    pub assessment: String,
    /// The term (e.g. "Term 2"); leave it out for the current term.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub term: Option<Named<TermId>>,
    /// The scores.
    #[schemars(length(min = 1, max = 500))]
    pub marks: Vec<MarkEntry>,
}

/// `record_marks`.
#[derive(Debug)]
pub struct RecordMarks;
impl Tool for RecordMarks {
    type Args = RecordMarksArgs;
    type Output = MarksRecorded;
    const CONTRACT: ToolContract = ToolContract {
        name: "record_marks",
        description: "Record scores (out of 100) for an assessment in a subject you teach to a class. A student's earlier score for the same assessment is replaced.",
        label: "Recording marks…",
        owner: OWNER,
        effect: Effect::Write,
        kind: relationship("record.marks", Relationship::TeachesSubjectInClass),
        args_schema: schema_for::<RecordMarksArgs>,
        output_schema: schema_for::<MarksRecorded>,
    };
}

/// Arguments of `get_class_marks`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GetClassMarksArgs {
    /// The class, as staff name it (e.g. "S1 Blue") or its id.
    pub class: Named<ClassId>,
    /// The subject, as staff name it (e.g. "Maths") or its id.
    pub subject: Named<SubjectId>,
    /// The term (e.g. "Term 2"); leave it out for the current term.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub term: Option<Named<TermId>>,
}

/// `get_class_marks`.
#[derive(Debug)]
pub struct GetClassMarks;
impl Tool for GetClassMarks {
    type Args = GetClassMarksArgs;
    type Output = ClassMarks;
    const CONTRACT: ToolContract = ToolContract {
        name: "get_class_marks",
        description: "Show the marks recorded for a subject you teach to a class, for a term. At most 200 marks are listed; `total` says how many there are and `truncated` whether some were left out.",
        label: "Fetching marks…",
        owner: OWNER,
        effect: Effect::Read,
        kind: relationship("get.class_marks", Relationship::TeachesSubjectInClass),
        args_schema: schema_for::<GetClassMarksArgs>,
        output_schema: schema_for::<ClassMarks>,
    };
}
