//! The REST API: the supervisor's department, class, student and staff tools as plain HTTP
//! endpoints, run through the same steps as the tool server's `execute()` — live casbin check in the
//! tenant transaction, the same domain function, exactly one audit row per write in the same
//! transaction — plus the Hub's label registry and the OpenAPI document.
//!
//! - this file: the router, the handlers and the call pipeline ([`Call`]);
//! - [`extract`]: request extractors whose rejections are [`ApiError`]s (JSON bodies, query strings,
//!   path ids, the campus header);
//! - [`openapi`]: the OpenAPI 3.1 document, generated from the contract types;
//! - [`contracts`]: `tool-contracts.json`, every tool contract as data.
//!
//! *Architecture Invariant*: each endpoint is tied to one policy-posture tool contract (an
//! [`Endpoint`]); its permission and audit event come from that contract, never from a copy, so
//! REST and the tool cannot disagree about who may do what or how it is recorded.

pub(crate) mod contracts;
pub(crate) mod extract;
pub(crate) mod openapi;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, patch};
use axum::{Json, Router};
use rover_contracts::ErrorCode;
use rover_contracts::context::CallScope;
use rover_contracts::ids::{CampusId, ClassId, DepartmentId, UserId};
use rover_contracts::named::Named;
use rover_contracts::permission::Permission;
use rover_contracts::tools::{
    self, ClassList, CreateDepartmentArgs, Department, FindStudentsArgs, ListStaffArgs, NoArgs,
    Posture, RenameDepartmentArgs, RenamedDepartment, StaffList, StudentSummary, Tool,
    ToolContract, ToolKind,
};
use rover_domain::audit::{AuditEntry, Written};
use rover_domain::policy::{self, Refusal};
use rover_domain::{Actor, TenantTx};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tracing::Instrument as _;

pub use contracts::tool_contracts_json;
pub(crate) use extract::{Body, CAMPUS_HEADER, Campus, Params, PathId};

use crate::auth::Principal;
use crate::caller;
use crate::error::ApiError;
use crate::state::AppState;

/// The REST routes.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/api/departments",
            get(list_departments).post(create_department),
        )
        .route("/api/departments/{id}", patch(rename_department))
        .route("/api/classes", get(list_classes))
        .route("/api/students", get(find_students))
        .route("/api/staff", get(list_staff))
        .route("/api/tool-labels", get(tool_labels))
        .route("/api/openapi.json", get(openapi_document))
}

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

/// The body of every error response, as `ApiError` renders it: for the OpenAPI document and for
/// clients that want a type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// An error: a stable code and a sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorDetail {
    /// The stable, machine-readable code; it also fixes the HTTP status.
    pub code: ErrorCode,
    /// A plain sentence for the user.
    pub message: String,
}

/// One REST call between its casbin gate and its commit: the caller's tenant transaction, who they
/// act as and how far they reach.
///
/// The only way to get one is [`Call::begin`], which has already run the permission check, so a
/// handler holding a `Call` is allowed to run its domain function.
struct Call {
    endpoint: &'static Endpoint,
    tx: TenantTx,
    actor: Actor,
    scope: CallScope,
}

impl Call {
    /// Opens the caller's tenant transaction, mints their identity and scope from live rows (a
    /// campus-tied user is always in their campus) and runs the tool's live casbin check.
    async fn begin(
        state: &AppState,
        principal: &Principal,
        campus: Option<CampusId>,
        endpoint: &'static Endpoint,
    ) -> Result<Self, ApiError> {
        let mut tx = caller::tenant(state, principal).await?;
        let caller = caller::resolve(&mut tx, principal, campus, Vec::new()).await?;
        authorize(&mut tx, principal.user_id, endpoint.permission).await?;
        Ok(Self {
            endpoint,
            tx,
            actor: Actor::from(&caller.identity()),
            scope: caller.scope(),
        })
    }

    /// Ends a read: commits (nothing was written) and hands back the output.
    async fn read<T>(self, output: T) -> Result<Json<T>, ApiError> {
        self.tx.commit().await?;
        Ok(Json(output))
    }

    /// Ends a write: records exactly one audit row in the write's transaction, then commits both.
    async fn write<T>(mut self, written: Written<T>) -> Result<T, ApiError> {
        let trace_id = current_trace_id();
        let entry = AuditEntry {
            actor: &self.actor,
            scope: &self.scope,
            event: self.endpoint.event,
            call_id: None,
            trace_id: trace_id.as_deref(),
            change: &written.change,
        };
        rover_domain::audit::record(&mut self.tx, &entry).await?;
        self.tx.commit().await?;
        Ok(written.output)
    }
}

/// The tool server's permission check, the very same function
/// ([`rover_domain::policy::authorize`]): the school's live policy rows, read in the tenant
/// transaction, decide; a denial reads exactly as the tool's envelope does.
pub(crate) async fn authorize(
    tx: &mut TenantTx,
    user: UserId,
    permission: Permission,
) -> Result<(), ApiError> {
    let span = tracing::info_span!(
        "rover.gateway.permission",
        rover.permission = %permission,
        rover.permission.rule = tracing::field::Empty,
        rover.permission.allowed = tracing::field::Empty,
    );
    async {
        let (policies, assignments) = policy::load(tx).await?;
        match policy::authorize(tx.school_id(), user, permission, &policies, &assignments).await {
            Ok(_) => Ok(()),
            Err(denied @ Refusal::Denied(_)) => Err(ApiError::new(
                ErrorCode::PermissionDenied,
                denied.to_string(),
            )),
            Err(Refusal::Unevaluable(error)) => Err(ApiError::internal(error)),
        }
    }
    .instrument(span)
    .await
}

/// The current OpenTelemetry trace id, if a trace is being recorded, for the audit row.
fn current_trace_id() -> Option<String> {
    rover_telemetry::trace_id(&tracing::Span::current())
}

/// `GET /api/departments`: the departments in the caller's scope.
#[tracing::instrument(skip_all, fields(rover.tool = LIST_DEPARTMENTS.contract.name))]
async fn list_departments(
    State(state): State<AppState>,
    principal: Principal,
    Campus(campus): Campus,
) -> Result<Json<Vec<Department>>, ApiError> {
    let mut call = Call::begin(&state, &principal, campus, &LIST_DEPARTMENTS).await?;
    let output =
        rover_domain::list_departments(&mut call.tx, &call.actor, &call.scope, &NoArgs {}).await?;
    call.read(output).await
}

/// `POST /api/departments`: creates a department (on the caller's campus in campus scope).
#[tracing::instrument(skip_all, fields(rover.tool = CREATE_DEPARTMENT.contract.name))]
async fn create_department(
    State(state): State<AppState>,
    principal: Principal,
    Campus(campus): Campus,
    Body(args): Body<CreateDepartmentArgs>,
) -> Result<(StatusCode, Json<Department>), ApiError> {
    let mut call = Call::begin(&state, &principal, campus, &CREATE_DEPARTMENT).await?;
    let written =
        rover_domain::create_department(&mut call.tx, &call.actor, &call.scope, &args).await?;
    Ok((StatusCode::CREATED, Json(call.write(written).await?)))
}

/// `PATCH /api/departments/{id}`: renames a department in the caller's scope.
#[tracing::instrument(skip_all, fields(rover.tool = RENAME_DEPARTMENT.contract.name))]
async fn rename_department(
    State(state): State<AppState>,
    principal: Principal,
    Campus(campus): Campus,
    PathId(department_id): PathId<DepartmentId>,
    Body(body): Body<RenameDepartmentBody>,
) -> Result<Json<RenamedDepartment>, ApiError> {
    let args = RenameDepartmentArgs {
        department: Named::id(department_id),
        new_name: body.name,
    };
    let mut call = Call::begin(&state, &principal, campus, &RENAME_DEPARTMENT).await?;
    let written =
        rover_domain::rename_department(&mut call.tx, &call.actor, &call.scope, &args).await?;
    Ok(Json(call.write(written).await?))
}

/// `GET /api/classes`: the classes in the caller's scope.
#[tracing::instrument(skip_all, fields(rover.tool = LIST_CLASSES.contract.name))]
async fn list_classes(
    State(state): State<AppState>,
    principal: Principal,
    Campus(campus): Campus,
) -> Result<Json<ClassList>, ApiError> {
    let mut call = Call::begin(&state, &principal, campus, &LIST_CLASSES).await?;
    let output =
        rover_domain::list_classes(&mut call.tx, &call.actor, &call.scope, &NoArgs {}).await?;
    call.read(output).await
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

/// `GET /api/students?query=…&classId=…`: students in scope matching the query.
#[tracing::instrument(skip_all, fields(rover.tool = FIND_STUDENTS.contract.name))]
async fn find_students(
    State(state): State<AppState>,
    principal: Principal,
    Campus(campus): Campus,
    Params(params): Params<FindStudentsParams>,
) -> Result<Json<Vec<StudentSummary>>, ApiError> {
    let args = FindStudentsArgs {
        query: params.query,
        class: params.class_id.map(Named::id),
    };
    let mut call = Call::begin(&state, &principal, campus, &FIND_STUDENTS).await?;
    let output = rover_domain::find_students(&mut call.tx, &call.actor, &call.scope, &args).await?;
    call.read(output).await
}

/// `GET /api/staff?query=…`: staff in scope, optionally filtered.
#[tracing::instrument(skip_all, fields(rover.tool = LIST_STAFF.contract.name))]
async fn list_staff(
    State(state): State<AppState>,
    principal: Principal,
    Campus(campus): Campus,
    Params(args): Params<ListStaffArgs>,
) -> Result<Json<StaffList>, ApiError> {
    let mut call = Call::begin(&state, &principal, campus, &LIST_STAFF).await?;
    let output = rover_domain::list_staff(&mut call.tx, &call.actor, &call.scope, &args).await?;
    call.read(output).await
}

/// `GET /api/tool-labels`: the Hub's label registry, tool name → activity label. Public: it holds
/// no school data.
async fn tool_labels() -> Json<serde_json::Map<String, serde_json::Value>> {
    Json(tool_labels_map())
}

/// The label registry as a JSON object.
pub(crate) fn tool_labels_map() -> serde_json::Map<String, serde_json::Value> {
    tools::labels()
        .map(|(name, label)| (name.to_owned(), serde_json::Value::from(label)))
        .collect()
}

/// `GET /api/openapi.json`: the OpenAPI 3.1 document of this API. Public.
async fn openapi_document() -> Json<serde_json::Value> {
    Json(openapi::document().clone())
}
