//! The runtime context of a turn (seed hop 1): who is asking, where, what they may do, which
//! specialists exist, the calendar and the teaching map. The gateway mints it from the token's
//! subject and live rows; the model never supplies any of it.

use chrono::NaiveDate;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ids::{
    AcademicYearId, CampusId, ClassId, ProfileId, SchoolId, SubjectId, TermId, UserId,
};
use crate::permission::PermissionSnapshot;

/// A school, by id and name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SchoolRef {
    /// The tenant id.
    pub id: SchoolId,
    /// The school's name.
    pub name: String,
}

/// A campus, by id and name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CampusRef {
    /// The campus id.
    pub id: CampusId,
    /// The campus name ("Kololo").
    pub name: String,
}

/// A class, by id and name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClassRef {
    /// The class id.
    pub id: ClassId,
    /// The class name ("S1 Blue").
    pub name: String,
}

/// A subject, by id and name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubjectRef {
    /// The subject id.
    pub id: SubjectId,
    /// The subject name ("Mathematics").
    pub name: String,
}

/// What kind of staff member a user is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UserType {
    /// Teaching staff.
    Teacher,
    /// Administrators and academic leadership.
    Administrator,
    /// Non-teaching staff (bursar, secretary, …).
    Support,
}

/// Who is asking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UserDetails {
    /// Display name.
    pub name: String,
    /// Login email.
    pub email: String,
    /// The user account.
    pub user_id: UserId,
    /// The staff profile.
    pub profile_id: ProfileId,
    /// Kind of staff member.
    pub user_type: UserType,
    /// The user's school (the tenant).
    pub school: SchoolRef,
    /// The campus the user is tied to; absent for school-wide staff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub campus: Option<CampusRef>,
}

/// Where the turn runs: the whole school, or one campus.
///
/// *Architecture Invariant*: campus mode always carries its campus. A campus mode without a campus is
/// not representable, in Rust or on the wire (`{"mode":"campus"}` does not deserialise).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum RunMode {
    /// Sees the whole school.
    School,
    /// Reads are filtered to, and writes pinned to, this campus.
    Campus {
        /// The campus of the chat.
        campus: CampusRef,
    },
}

impl RunMode {
    /// The campus this mode is pinned to, if any.
    pub fn campus(&self) -> Option<&CampusRef> {
        match self {
            RunMode::School => None,
            RunMode::Campus { campus } => Some(campus),
        }
    }
}

/// The role subagents a turn may have. Each exists only when the caller's live rows say so.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Subagent {
    /// Class rosters and attendance, for the classes the staff member is class teacher of.
    ClassTeacher,
    /// Marks, for the subjects the staff member teaches.
    SubjectTeacher,
    /// Teaching assignments (who teaches which subject to which class) and results.
    DirectorOfStudies,
}

impl Subagent {
    /// Every subagent, in roster order.
    pub const ALL: [Subagent; 3] = [
        Subagent::ClassTeacher,
        Subagent::SubjectTeacher,
        Subagent::DirectorOfStudies,
    ];

    /// What the specialist does, as the model reads it (the roster, and `task`'s schema: its
    /// doc comment above says the same, which a test of the agent checks).
    pub const fn summary(self) -> &'static str {
        match self {
            Subagent::ClassTeacher => {
                "Class rosters and attendance, for the classes the staff member is class teacher of."
            }
            Subagent::SubjectTeacher => "Marks, for the subjects the staff member teaches.",
            Subagent::DirectorOfStudies => {
                "Teaching assignments (who teaches which subject to which class) and results."
            }
        }
    }

    /// The name the model uses to delegate (`task`'s `subagent` argument).
    pub const fn name(self) -> &'static str {
        match self {
            Subagent::ClassTeacher => "class_teacher",
            Subagent::SubjectTeacher => "subject_teacher",
            Subagent::DirectorOfStudies => "director_of_studies",
        }
    }
}

/// Which specialists exist this turn, from live rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Capabilities {
    /// Class teacher of at least one class.
    pub class_teacher: bool,
    /// At least one teaching assignment this academic year.
    pub subject_teacher: bool,
    /// Holds the `director_of_studies` role.
    pub director_of_studies: bool,
}

impl Capabilities {
    /// Whether this subagent exists for the turn.
    pub const fn has(&self, subagent: Subagent) -> bool {
        match subagent {
            Subagent::ClassTeacher => self.class_teacher,
            Subagent::SubjectTeacher => self.subject_teacher,
            Subagent::DirectorOfStudies => self.director_of_studies,
        }
    }

    /// The subagents that exist, in roster order.
    pub fn subagents(&self) -> impl Iterator<Item = Subagent> + '_ {
        Subagent::ALL.into_iter().filter(|s| self.has(*s))
    }
}

/// A term of the academic year.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Term {
    /// The term id.
    pub id: TermId,
    /// "Term 1".
    pub name: String,
    /// First day.
    pub starts_on: NaiveDate,
    /// Last day.
    pub ends_on: NaiveDate,
}

/// The current academic year and its terms, so "this term" needs no lookup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Calendar {
    /// The school's IANA time zone ("Africa/Kampala").
    pub time_zone: String,
    /// The current academic year's id.
    pub academic_year_id: AcademicYearId,
    /// The current academic year's name ("2026").
    pub academic_year: String,
    /// The year's terms, in order.
    pub terms: Vec<Term>,
}

impl Calendar {
    /// The term that contains `date`, if any (holidays fall between terms).
    pub fn term_on(&self, date: NaiveDate) -> Option<&Term> {
        self.terms
            .iter()
            .find(|t| t.starts_on <= date && date <= t.ends_on)
    }
}

/// The subjects a teacher teaches to one class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaughtClass {
    /// The class.
    pub class: ClassRef,
    /// The subjects taught to it this year.
    pub subjects: Vec<SubjectRef>,
}

/// A teacher's classes and subjects. Present for teachers, *absent* (not empty) for everyone else.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TeachingMap {
    /// Classes taught this academic year, with their subjects.
    pub teaches: Vec<TaughtClass>,
    /// Classes this user is class teacher of.
    pub class_teacher_of: Vec<ClassRef>,
}

/// A file attached to this turn's message (never the whole thread's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Attachment {
    /// The file name as the user gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// IANA media type.
    pub media_type: String,
    /// Where the content is (a `data:` URL or a Hub URL).
    pub url: String,
}

/// Everything the worker knows about the caller for one turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimeContext {
    /// Who.
    pub user_details: UserDetails,
    /// Where.
    pub run_mode: RunMode,
    /// What they may do (advisory).
    pub user_permissions: PermissionSnapshot,
    /// Which specialists exist.
    pub capabilities: Capabilities,
    /// The calendar.
    pub calendar: Calendar,
    /// Classes and subjects, for teachers only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teaching_map: Option<TeachingMap>,
    /// This message's attachments.
    #[serde(default)]
    pub attachments: Vec<Attachment>,
}

impl RuntimeContext {
    /// The identity tools act as.
    pub fn identity(&self) -> Identity {
        let u = &self.user_details;
        Identity {
            user_id: u.user_id,
            profile_id: u.profile_id,
            email: u.email.clone(),
            user_type: u.user_type,
            school_id: u.school.id,
        }
    }

    /// The scope tool calls run in.
    pub fn call_scope(&self) -> CallScope {
        CallScope {
            school_id: self.user_details.school.id,
            run_mode: self.run_mode.clone(),
        }
    }
}

/// Who a tool call acts as. Taken from the runtime context, never from model arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Identity {
    /// The acting user.
    pub user_id: UserId,
    /// Their profile.
    pub profile_id: ProfileId,
    /// Their email (for audit and logs).
    pub email: String,
    /// Kind of staff member.
    pub user_type: UserType,
    /// The tenant the user belongs to.
    pub school_id: SchoolId,
}

/// How far a tool call reaches: the tenant, and the campus if the run is pinned to one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CallScope {
    /// The tenant.
    pub school_id: SchoolId,
    /// School-wide or one campus.
    pub run_mode: RunMode,
}

impl CallScope {
    /// The sentence the model qualifies its language with (`scopeContext`).
    pub fn describe(&self) -> String {
        match &self.run_mode {
            RunMode::School => "across the whole school".to_owned(),
            RunMode::Campus { campus } => format!("across your campus, {}", campus.name),
        }
    }
}
