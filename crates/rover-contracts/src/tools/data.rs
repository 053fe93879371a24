//! The shapes tools return in `data`: what the model reads. Small and flat on purpose.

use chrono::NaiveDate;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::{CampusRef, ClassRef, SubjectRef, Term, UserType};
use crate::ids::{DepartmentId, StudentId, TeachingAssignmentId, UserId};

/// A department.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Department {
    /// Its id.
    pub id: DepartmentId,
    /// Its name.
    pub name: String,
    /// The campus it belongs to; absent for a school-wide department.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub campus: Option<CampusRef>,
}

/// A department after a rename.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RenamedDepartment {
    /// The department, with its new name.
    pub department: Department,
    /// The name it had before.
    pub previous_name: String,
}

/// A staff member, by id and name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StaffRef {
    /// The staff member's user id.
    pub id: UserId,
    /// Their name.
    pub name: String,
}

/// A class, with its campus and size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassSummary {
    /// The class.
    #[serde(flatten)]
    pub class: ClassRef,
    /// Its campus.
    pub campus: CampusRef,
    /// Its class teacher, if one is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_teacher: Option<StaffRef>,
    /// How many students it has.
    pub student_count: u32,
}

/// The most rows a listing tool returns (`list_classes`, `list_staff`, `get_class_marks`); each
/// says how many there are in all and whether it left some out.
pub const MAX_LIST_ROWS: u32 = 200;

/// The classes in scope, at most 200 of them (`MAX_LIST_ROWS`), and how many there are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassList {
    /// The classes, by campus and name.
    pub classes: Vec<ClassSummary>,
    /// How many classes are in scope in all.
    pub total: u32,
    /// Whether only the first of them are listed.
    pub truncated: bool,
}

/// A student, by id and name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StudentRef {
    /// Their id.
    pub id: StudentId,
    /// Their full name.
    pub name: String,
}

/// A student, with where they study.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StudentSummary {
    /// The student.
    #[serde(flatten)]
    pub student: StudentRef,
    /// Admission number.
    pub admission_number: String,
    /// Their class.
    pub class: ClassRef,
    /// Their campus.
    pub campus: CampusRef,
}

/// A count of students in one group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Count {
    /// The group's name (a campus or a class).
    pub name: String,
    /// How many students.
    pub students: u32,
}

/// Enrolment totals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnrollmentSummary {
    /// All students in scope.
    pub total: u32,
    /// Per campus.
    pub by_campus: Vec<Count>,
    /// Per class.
    pub by_class: Vec<Count>,
}

/// A staff member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StaffMember {
    /// The staff member.
    #[serde(flatten)]
    pub staff: StaffRef,
    /// Their email.
    pub email: String,
    /// Kind of staff member.
    pub user_type: UserType,
    /// Their campus; absent for school-wide staff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub campus: Option<CampusRef>,
    /// Their roles in the school.
    pub roles: Vec<String>,
}

/// The staff in scope matching the query, at most 200 (`MAX_LIST_ROWS`), and how many match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StaffList {
    /// The staff members, by name.
    pub staff: Vec<StaffMember>,
    /// How many match in all.
    pub total: u32,
    /// Whether only the first of them are listed (narrow the query to see others).
    pub truncated: bool,
}

/// The students of a class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassRoster {
    /// The class.
    pub class: ClassRef,
    /// Its students, by name.
    pub students: Vec<StudentRef>,
}

/// What `record_attendance` stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttendanceRecorded {
    /// The class.
    pub class: ClassRef,
    /// The day.
    pub date: NaiveDate,
    /// How many were marked present.
    pub present: u32,
    /// Who was marked absent.
    pub absent: Vec<StudentRef>,
}

/// A class a subject teacher teaches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MyClass {
    /// The class.
    pub class: ClassRef,
    /// The subjects taught to it this year.
    pub subjects: Vec<SubjectRef>,
    /// Whether the caller is also its class teacher.
    pub is_class_teacher: bool,
    /// Its students, by name, so marks can name them by id.
    pub students: Vec<StudentRef>,
}

/// What `record_marks` stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MarksRecorded {
    /// The class.
    pub class: ClassRef,
    /// The subject.
    pub subject: SubjectRef,
    /// The term the marks count towards.
    pub term: String,
    /// The assessment ("Mid-term test").
    pub assessment: String,
    /// How many marks were stored.
    pub recorded: u32,
}

/// One student's mark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MarkRow {
    /// The student.
    pub student: StudentRef,
    /// The assessment.
    pub assessment: String,
    /// Score out of 100.
    pub score: f64,
}

/// Marks of a class in a subject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassMarks {
    /// The class.
    pub class: ClassRef,
    /// The subject.
    pub subject: SubjectRef,
    /// The term.
    pub term: String,
    /// The marks, by student and assessment; at most 200 (`MAX_LIST_ROWS`).
    pub marks: Vec<MarkRow>,
    /// How many marks there are in all.
    pub total: u32,
    /// Whether only the first of them are listed.
    pub truncated: bool,
}

/// A teaching assignment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TeachingAssignment {
    /// Its id.
    pub id: TeachingAssignmentId,
    /// Who teaches.
    pub teacher: StaffRef,
    /// To which class.
    pub class: ClassRef,
    /// Which subject.
    pub subject: SubjectRef,
    /// In which academic year.
    pub academic_year: String,
}

/// Average results of one class in one subject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResultsRow {
    /// The class.
    pub class: ClassRef,
    /// The subject.
    pub subject: SubjectRef,
    /// How many marks were averaged.
    pub marks: u32,
    /// The mean score out of 100.
    pub average: f64,
}

/// Results for a term.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResultsSummary {
    /// The term.
    pub term: String,
    /// One row per class and subject with marks.
    pub rows: Vec<ResultsRow>,
}

/// Today, in the school's time zone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CurrentDate {
    /// The date.
    pub date: NaiveDate,
    /// The weekday ("Wednesday").
    pub weekday: String,
    /// The school's time zone.
    pub time_zone: String,
    /// The academic year.
    pub academic_year: String,
    /// The term today falls in; absent in the holidays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub term: Option<Term>,
}

/// A tool, as the agent map lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentMapEntry {
    /// Its name.
    pub name: String,
    /// One line about it.
    pub description: String,
}

/// What this turn's Rover can do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentMap {
    /// The tools Rover holds.
    pub tools: Vec<AgentMapEntry>,
    /// The specialists Rover can delegate to.
    pub subagents: Vec<AgentMapEntry>,
    /// The skills Rover can read.
    pub skills: Vec<AgentMapEntry>,
}

/// An entry of a sandbox directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileEntry {
    /// Absolute sandbox path.
    pub path: String,
    /// Whether it is a directory.
    pub is_dir: bool,
    /// Size in bytes (files only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// A file that was written or edited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileWritten {
    /// Absolute sandbox path.
    pub path: String,
    /// Its size now.
    pub bytes: u64,
}

/// A stored artifact of the thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// Its id.
    pub id: crate::ids::ArtifactId,
    /// The title shown to the staff member.
    pub title: String,
    /// The sandbox file it was made from.
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
}
