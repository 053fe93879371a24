//! The REST API: the supervisor's department, class, student and staff tools as plain HTTP
//! endpoints, run through the same steps as the tool server's `execute()` — live casbin check in the
//! tenant transaction, the same domain function, exactly one audit row per write in the same
//! transaction — plus the Hub's label registry.
//!
//! - this file: the router, the handlers and the call pipeline ([`Call`]);
//! - [`endpoints`]: each endpoint's tool contract, and the request types of REST's own;
//! - [`openapi`]: the REST API's part of the OpenAPI document, generated from the contract types;
//! - [`contracts`]: `tool-contracts.json`, every tool contract as data.
//!
//! *Architecture Invariant*: each endpoint is tied to one policy-posture tool contract (an
//! [`Endpoint`]); its permission and audit event come from that contract, never from a copy, so
//! REST and the tool cannot disagree about who may do what or how it is recorded.

pub(crate) mod contracts;
pub(crate) mod endpoints;
pub(crate) mod openapi;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, patch};
use axum::{Json, Router};
use rover_contracts::context::CallScope;
use rover_contracts::ids::{CampusId, DepartmentId};
use rover_contracts::named::Named;
use rover_contracts::tools::{
    self, ClassList, CreateDepartmentArgs, Department, FindStudentsArgs, ListStaffArgs, NoArgs,
    RenameDepartmentArgs, RenamedDepartment, StaffList, StudentSummary,
};
use rover_domain::audit::Written;
use rover_domain::{Actor, TenantTx};

use self::endpoints::{
    CREATE_DEPARTMENT, Endpoint, FIND_STUDENTS, FindStudentsParams, LIST_CLASSES, LIST_DEPARTMENTS,
    LIST_STAFF, RENAME_DEPARTMENT, RenameDepartmentBody,
};
use crate::audit;
use crate::auth::Principal;
use crate::authorize::authorize;
use crate::caller;
use crate::error::ApiError;
use crate::extract::{Body, Campus, Params, PathId};
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
        .route("/api/tool-schemas", get(tool_schemas))
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
        audit::record(
            &mut self.tx,
            &self.actor,
            &self.scope,
            self.endpoint.event,
            &written.change,
        )
        .await?;
        self.tx.commit().await?;
        Ok(written.output)
    }
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

/// `GET /api/tool-schemas`: every write tool's argument schema, by tool name — what the Hub's
/// approval card builds its edit form from (the very schema the model is shown and an edited
/// input is checked against). Public: it holds no school data.
async fn tool_schemas() -> Json<serde_json::Map<String, serde_json::Value>> {
    Json(
        tools::REGISTRY
            .iter()
            .filter(|c| c.effect == tools::Effect::Write && c.event().is_some())
            .filter_map(|c| {
                Some((
                    c.name.to_owned(),
                    serde_json::to_value((c.args_schema)()).ok()?,
                ))
            })
            .collect(),
    )
}

/// The label registry as a JSON object.
pub(crate) fn tool_labels_map() -> serde_json::Map<String, serde_json::Value> {
    tools::labels()
        .map(|(name, label)| (name.to_owned(), serde_json::Value::from(label)))
        .collect()
}
