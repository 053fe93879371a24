//! `GET/PUT /api/approval-policy`: a school admin reads and replaces the school's approval rules —
//! whose writes wait for their approval (`rover_turnstore::approval_policy`). Reading takes
//! `read:Role`, replacing takes `update:Role` (who may change what roles may do may change what
//! they must ask first); a replacement is audited with the rules before and after. The rules are
//! the whole school's: a campus-scoped admin may read them, not change them. They are decided
//! live on every write by the tool server and the worker's gate, so a change holds from the next
//! call.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use rover_contracts::ErrorCode;
use rover_contracts::permission::{Action, Permission, Subject};
use rover_domain::Actor;
use rover_domain::audit::AuditChange;
use rover_turnstore::approval_policy::{self, Rule};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::audit;
use crate::auth::Principal;
use crate::authorize::authorize;
use crate::caller;
use crate::error::ApiError;
use crate::extract::{Body, Campus};
use crate::state::AppState;

/// Replacing the rules, in the audit log.
pub(crate) const UPDATE_EVENT: &str = "update.approval_policy";
/// Who may read the rules.
pub(crate) const READ_PERMISSION: Permission = Permission::new(Action::Read, Subject::Role);
/// Who may replace them.
pub(crate) const UPDATE_PERMISSION: Permission = Permission::new(Action::Update, Subject::Role);

/// The school's approval rules, with what a rule may name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApprovalPolicy {
    /// The rules, most specific first. The caller's most specific rule decides whether their
    /// write waits: their role and the tool, their role and any tool (`*`), any role and the
    /// tool, any role and any tool; with no rule at all, every write waits.
    pub rules: Vec<Rule>,
    /// The school's roles, which a rule may name (or `*`).
    pub roles: Vec<String>,
    /// The write tools, which a rule may name (or `*`).
    pub tools: Vec<String>,
}

/// A replacement of the rules, whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApprovalPolicyBody {
    /// The rules (at most 200; each role and tool once).
    #[schemars(length(max = 200))]
    pub rules: Vec<Rule>,
}

/// The routes.
pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/api/approval-policy", get(read).put(replace))
}

/// `GET /api/approval-policy`.
#[tracing::instrument(name = "rover.gateway.approval_policy.read", skip_all)]
async fn read(
    State(state): State<AppState>,
    principal: Principal,
    Campus(campus): Campus,
) -> Result<Json<ApprovalPolicy>, ApiError> {
    let mut tx = caller::tenant(&state, &principal).await?;
    caller::resolve(&mut tx, &principal, campus, Vec::new()).await?;
    authorize(&mut tx, principal.user_id, READ_PERMISSION).await?;
    let rules = approval_policy::rules(&mut tx).await?;
    let policy = policy(&mut tx, rules).await?;
    tx.commit().await?;
    Ok(Json(policy))
}

/// `PUT /api/approval-policy`: replaces the rules, whole.
#[tracing::instrument(name = "rover.gateway.approval_policy.replace", skip_all)]
async fn replace(
    State(state): State<AppState>,
    principal: Principal,
    Campus(campus): Campus,
    Body(body): Body<ApprovalPolicyBody>,
) -> Result<Json<ApprovalPolicy>, ApiError> {
    let mut tx = caller::tenant(&state, &principal).await?;
    let caller = caller::resolve(&mut tx, &principal, campus, Vec::new()).await?;
    authorize(&mut tx, principal.user_id, UPDATE_PERMISSION).await?;
    if caller.scope().run_mode.campus().is_some() {
        return Err(ApiError::new(
            ErrorCode::PermissionDenied,
            "The approval rules are the whole school's: a campus-scoped admin may read them, not \
             change them.",
        ));
    }
    let before = approval_policy::rules(&mut tx).await?;
    let after = approval_policy::replace(&mut tx, &body.rules).await?;
    let change = AuditChange {
        subject_id: tx.school_id().to_string(),
        before: Some(json!({ "rules": before })),
        after: json!({ "rules": after }),
        named: None,
    };
    audit::record(
        &mut tx,
        &Actor::from(&caller.identity()),
        &caller.scope(),
        UPDATE_EVENT,
        &change,
    )
    .await?;
    let policy = policy(&mut tx, after).await?;
    tx.commit().await?;
    tracing::info!(
        rules = policy.rules.len(),
        "replaced the school's approval rules"
    );
    Ok(Json(policy))
}

async fn policy(
    tx: &mut rover_domain::TenantTx,
    rules: Vec<Rule>,
) -> Result<ApprovalPolicy, ApiError> {
    Ok(ApprovalPolicy {
        rules,
        roles: approval_policy::roles(tx).await?,
        tools: approval_policy::write_tools()
            .into_iter()
            .map(str::to_owned)
            .collect(),
    })
}

/// This API's paths in the OpenAPI document.
pub(crate) fn paths() -> serde_json::Map<String, serde_json::Value> {
    use crate::openapi_parts::{
        BAD_REQUEST, FORBIDDEN, TOO_LARGE, UNAUTHENTICATED, component, json_response,
    };
    let campus = json!({ "$ref": "#/components/parameters/Campus" });
    let errors = |list: &[(&str, &str, &str)]| {
        list.iter()
            .map(|(name, code, _)| {
                (
                    (*code).to_owned(),
                    json!({ "$ref": format!("#/components/responses/{name}") }),
                )
            })
            .collect::<serde_json::Map<_, _>>()
    };
    let mut read = errors(&[UNAUTHENTICATED, FORBIDDEN]);
    read.insert(
        "200".to_owned(),
        json_response("The school's approval rules.", component("ApprovalPolicy")),
    );
    let mut replaced = errors(&[BAD_REQUEST, UNAUTHENTICATED, FORBIDDEN, TOO_LARGE]);
    replaced.insert(
        "200".to_owned(),
        json_response("The rules as stored.", component("ApprovalPolicy")),
    );
    let mut paths = serde_json::Map::new();
    paths.insert(
        "/api/approval-policy".to_owned(),
        json!({
            "get": {
                "operationId": "read_approval_policy",
                "summary": "Read the approval rules",
                "description": "Whose writes wait for their approval: the school's rules (role or `*`, \
                    write tool or `*`, `always` or `never`), most specific first, with the roles and \
                    tools a rule may name. The caller's most specific rule decides: their role and \
                    the tool, their role and any tool, any role and the tool, the school's default; \
                    with no rule, every write waits. Requires `read:Role`.",
                "tags": ["settings"],
                "parameters": [campus.clone()],
                "responses": read,
                "x-rover-permission": READ_PERMISSION.to_string(),
            },
            "put": {
                "operationId": "replace_approval_policy",
                "summary": "Replace the approval rules",
                "description": "Replaces the school's rules, whole; the next write is decided by them. \
                    Each role and tool once, roles the school has, write tools. A campus-scoped \
                    admin may not change them (403). Requires `update:Role`. Audited as \
                    `update.approval_policy`, with the rules before and after.",
                "tags": ["settings"],
                "parameters": [campus],
                "requestBody": {
                    "required": true,
                    "content": { "application/json": { "schema": component("ApprovalPolicyBody") } },
                },
                "responses": replaced,
                "x-rover-permission": UPDATE_PERMISSION.to_string(),
                "x-rover-audit-event": UPDATE_EVENT,
            },
        }),
    );
    paths
}

/// The component schemas this API's operations refer to.
pub(crate) fn schemas(add: &mut impl FnMut(&str, schemars::Schema)) {
    use rover_contracts::tools::schema_for;
    add("ApprovalPolicy", schema_for::<ApprovalPolicy>());
    add("ApprovalPolicyBody", schema_for::<ApprovalPolicyBody>());
}
