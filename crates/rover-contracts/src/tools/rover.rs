//! The supervisor's RPC tools: departments, classes, students, enrolment and staff.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ClassList, EnrollmentSummary, StaffList, StudentSummary};
use super::{
    Department, Effect, Owner, Posture, RenamedDepartment, Tool, ToolContract, ToolKind, schema_for,
};
use crate::ids::{ClassId, DepartmentId};
use crate::named::Named;
use crate::permission::{Action, Permission, Subject};

const fn policy(event: &'static str, action: Action, subject: Subject) -> ToolKind {
    ToolKind::Rpc {
        event,
        posture: Posture::Policy(Permission::new(action, subject)),
    }
}

/// No arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// `list_departments`.
#[derive(Debug)]
pub struct ListDepartments;
impl Tool for ListDepartments {
    type Args = NoArgs;
    type Output = Vec<Department>;
    const CONTRACT: ToolContract = ToolContract {
        name: "list_departments",
        description: "List the school's departments that the user can see, with their campus when a department belongs to one.",
        label: "Looking up departments…",
        owner: Owner::Rover,
        effect: Effect::Read,
        kind: policy("list.departments", Action::Read, Subject::Department),
        args_schema: schema_for::<NoArgs>,
        output_schema: schema_for::<Vec<Department>>,
    };
}

/// Arguments of `create_department`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateDepartmentArgs {
    /// The new department's name, e.g. "Sciences".
    #[schemars(length(min = 1, max = 100))]
    pub name: String,
}

/// `create_department`.
#[derive(Debug)]
pub struct CreateDepartment;
impl Tool for CreateDepartment {
    type Args = CreateDepartmentArgs;
    type Output = Department;
    const CONTRACT: ToolContract = ToolContract {
        name: "create_department",
        description: "Create a department. In a campus chat it belongs to that campus; otherwise it is school-wide. Fails if a department with that name already exists in the same scope.",
        label: "Creating a department…",
        owner: Owner::Rover,
        effect: Effect::Write,
        kind: policy("create.department", Action::Create, Subject::Department),
        args_schema: schema_for::<CreateDepartmentArgs>,
        output_schema: schema_for::<Department>,
    };
}

/// Arguments of `rename_department`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RenameDepartmentArgs {
    /// The department: its name as staff say it (e.g. "Maths") or its id.
    pub department: Named<DepartmentId>,
    /// Its new name.
    #[schemars(length(min = 1, max = 100))]
    pub new_name: String,
}

/// `rename_department`.
#[derive(Debug)]
pub struct RenameDepartment;
impl Tool for RenameDepartment {
    type Args = RenameDepartmentArgs;
    type Output = RenamedDepartment;
    const CONTRACT: ToolContract = ToolContract {
        name: "rename_department",
        description: "Rename a department, named as the staff member names it.",
        label: "Renaming a department…",
        owner: Owner::Rover,
        effect: Effect::Write,
        kind: policy("rename.department", Action::Update, Subject::Department),
        args_schema: schema_for::<RenameDepartmentArgs>,
        output_schema: schema_for::<RenamedDepartment>,
    };
}

/// `list_classes`.
#[derive(Debug)]
pub struct ListClasses;
impl Tool for ListClasses {
    type Args = NoArgs;
    type Output = ClassList;
    const CONTRACT: ToolContract = ToolContract {
        name: "list_classes",
        description: "List the classes the user can see, with campus, class teacher and number of students. At most 200 are listed; `total` says how many there are and `truncated` whether some were left out.",
        label: "Looking up classes…",
        owner: Owner::Rover,
        effect: Effect::Read,
        kind: policy("list.classes", Action::Read, Subject::Class),
        args_schema: schema_for::<NoArgs>,
        output_schema: schema_for::<ClassList>,
    };
}

/// Arguments of `find_students`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FindStudentsArgs {
    /// Part of a student's name or admission number, as the staff member said it.
    #[schemars(length(min = 1, max = 100))]
    pub query: String,
    /// Only students of this class: its name (e.g. "S1 Blue") or its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<Named<ClassId>>,
}

/// `find_students`.
#[derive(Debug)]
pub struct FindStudents;
impl Tool for FindStudents {
    type Args = FindStudentsArgs;
    type Output = Vec<StudentSummary>;
    const CONTRACT: ToolContract = ToolContract {
        name: "find_students",
        description: "Search students by name or admission number, optionally within one class. Returns at most 50 matches.",
        label: "Searching students…",
        owner: Owner::Rover,
        effect: Effect::Read,
        kind: policy("find.students", Action::Read, Subject::Student),
        args_schema: schema_for::<FindStudentsArgs>,
        output_schema: schema_for::<Vec<StudentSummary>>,
    };
}

/// `get_enrollment_summary`.
#[derive(Debug)]
pub struct GetEnrollmentSummary;
impl Tool for GetEnrollmentSummary {
    type Args = NoArgs;
    type Output = EnrollmentSummary;
    const CONTRACT: ToolContract = ToolContract {
        name: "get_enrollment_summary",
        description: "Count enrolled students in total, per campus and per class.",
        label: "Counting enrolment…",
        owner: Owner::Rover,
        effect: Effect::Read,
        kind: policy("get.enrollment_summary", Action::Read, Subject::Student),
        args_schema: schema_for::<NoArgs>,
        output_schema: schema_for::<EnrollmentSummary>,
    };
}

/// Arguments of `list_staff`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListStaffArgs {
    /// Part of a name or email to filter by; omit to list everyone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 100))]
    pub query: Option<String>,
}

/// `list_staff`.
#[derive(Debug)]
pub struct ListStaff;
impl Tool for ListStaff {
    type Args = ListStaffArgs;
    type Output = StaffList;
    const CONTRACT: ToolContract = ToolContract {
        name: "list_staff",
        description: "List staff members with their roles and campus, optionally filtered by name or email. At most 200 are listed; `total` says how many match and `truncated` whether some were left out (narrow the query to find them).",
        label: "Looking up staff…",
        owner: Owner::Rover,
        effect: Effect::Read,
        kind: policy("list.staff", Action::Read, Subject::Staff),
        args_schema: schema_for::<ListStaffArgs>,
        output_schema: schema_for::<StaffList>,
    };
}
