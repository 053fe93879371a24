//! The class teacher subagent's RPC tools: the roster and attendance of classes the caller owns.

use chrono::NaiveDate;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    AttendanceRecorded, ClassRoster, Effect, Owner, Posture, Relationship, Tool, ToolContract,
    ToolKind, schema_for,
};
use crate::context::Subagent;
use crate::ids::{ClassId, StudentId};
use crate::named::Named;

const OWNER: Owner = Owner::Subagent(Subagent::ClassTeacher);
const fn owns_class(event: &'static str) -> ToolKind {
    ToolKind::Rpc {
        event,
        posture: Posture::Relationship(Relationship::ClassTeacherOfClass),
    }
}

/// Arguments of `get_class_roster`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GetClassRosterArgs {
    /// The class, as staff name it (e.g. "S1 Blue") or its id; leave it out for the class you are class teacher of, if you have only one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<Named<ClassId>>,
}

/// `get_class_roster`.
#[derive(Debug)]
pub struct GetClassRoster;
impl Tool for GetClassRoster {
    type Args = GetClassRosterArgs;
    type Output = ClassRoster;
    const CONTRACT: ToolContract = ToolContract {
        name: "get_class_roster",
        description: "List the students of a class you are class teacher of.",
        label: "Fetching the class roster…",
        owner: OWNER,
        effect: Effect::Read,
        kind: owns_class("get.class_roster"),
        args_schema: schema_for::<GetClassRosterArgs>,
        output_schema: schema_for::<ClassRoster>,
    };
}

/// Arguments of `record_attendance`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecordAttendanceArgs {
    /// The class, as staff name it (e.g. "S1 Blue") or its id; leave it out for the class you are class teacher of, if you have only one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<Named<ClassId>>,
    /// The students who were absent, by name exactly as the staff member said them (first names are enough) or by id. On a day not yet recorded everyone else is present; on a day already recorded they are added to its absentees. Empty when all were present.
    #[serde(default)]
    #[schemars(length(max = 500))]
    pub absent: Vec<Named<StudentId>>,
    /// Only to correct a day already recorded: students marked absent who were present after all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 500))]
    pub present: Vec<Named<StudentId>>,
    /// The day (YYYY-MM-DD), only when the staff member named a day other than today; leave it out for today. It must be in the current term.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<NaiveDate>,
}

/// `record_attendance`.
#[derive(Debug)]
pub struct RecordAttendance;
impl Tool for RecordAttendance {
    type Args = RecordAttendanceArgs;
    type Output = AttendanceRecorded;
    const CONTRACT: ToolContract = ToolContract {
        name: "record_attendance",
        description: "Record a day's attendance (the register) for a class you are class teacher of: name who was absent; everyone else is present. To correct a day already recorded, name only the change: `absent` adds absentees, `present` marks students present again, and the rest stay as recorded; naming no one marks the whole class present.",
        label: "Recording attendance…",
        owner: OWNER,
        effect: Effect::Write,
        kind: owns_class("record.attendance"),
        args_schema: schema_for::<RecordAttendanceArgs>,
        output_schema: schema_for::<AttendanceRecorded>,
    };
}
