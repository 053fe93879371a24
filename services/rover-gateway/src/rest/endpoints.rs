//! Each REST endpoint's tool contract ([`Endpoint`]: the contract, its audit event and its
//! permission, taken from the contract and never copied), and the request types REST has of its
//! own (a body without the id the path holds; a query string of ids). The handlers and the
//! OpenAPI part both read them here.

use rover_contracts::ids::ClassId;
use rover_contracts::permission::Permission;
use rover_contracts::tools::{self, Posture, Tool, ToolContract, ToolKind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A REST endpoint's tool: the contract it mirrors, with the event its writes are audited as and
/// the permission its casbin gate checks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Endpoint {
    /// The tool contract.
    pub contract: &'static ToolContract,
    /// The tool's event (`create.department`), recorded on audit rows.
    pub event: &'static str,
    /// The permission the tool's policy posture requires.
    pub permission: Permission,
}

impl Endpoint {
    /// The endpoint of a policy-posture RPC tool. Evaluated in `const` items, so tying an endpoint
    /// to a local or relationship-posture tool fails to compile.
    pub(crate) const fn policy(contract: &'static ToolContract) -> Self {
        match contract.kind {
            ToolKind::Rpc {
                event,
                posture: Posture::Policy(permission),
            } => Self {
                contract,
                event,
                permission,
            },
            _ => panic!("a REST endpoint mirrors a policy-posture RPC tool"),
        }
    }
}

/// `GET /api/departments`.
pub(crate) const LIST_DEPARTMENTS: Endpoint = Endpoint::policy(&tools::ListDepartments::CONTRACT);
/// `POST /api/departments`.
pub(crate) const CREATE_DEPARTMENT: Endpoint = Endpoint::policy(&tools::CreateDepartment::CONTRACT);
/// `PATCH /api/departments/{id}`.
pub(crate) const RENAME_DEPARTMENT: Endpoint = Endpoint::policy(&tools::RenameDepartment::CONTRACT);
/// `GET /api/classes`.
pub(crate) const LIST_CLASSES: Endpoint = Endpoint::policy(&tools::ListClasses::CONTRACT);
/// `GET /api/students`.
pub(crate) const FIND_STUDENTS: Endpoint = Endpoint::policy(&tools::FindStudents::CONTRACT);
/// `GET /api/staff`.
pub(crate) const LIST_STAFF: Endpoint = Endpoint::policy(&tools::ListStaff::CONTRACT);

/// The body of `PATCH /api/departments/{id}`: the department comes from the path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RenameDepartmentBody {
    /// The department's new name.
    #[schemars(length(min = 1, max = 100))]
    pub name: String,
}

/// The query string of `GET /api/students`: REST callers hold ids (the tool takes a class's name
/// too, resolved by the tool server).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct FindStudentsParams {
    /// Part of a student's name or admission number, e.g. "Nakato".
    #[schemars(length(min = 1, max = 100))]
    pub(crate) query: String,
    /// Only students of this class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) class_id: Option<ClassId>,
}
