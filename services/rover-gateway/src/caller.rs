//! Who is calling: from an authenticated principal to their school, runtime context, identity and
//! call scope — minted from live rows on every request, never from the request body.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use rover_contracts::ErrorCode;
use rover_contracts::context::{Attachment, CallScope, Identity, RuntimeContext};
use rover_contracts::ids::{CampusId, SchoolId};
use rover_domain::TenantTx;

use crate::auth::Principal;
use crate::error::ApiError;
use crate::state::AppState;

/// The header a trusted reverse proxy names the client in.
const X_FORWARDED_FOR: &str = "x-forwarded-for";

/// Handlers take `principal: Principal` to require a valid bearer token; a request without one is
/// answered with 401 before the handler runs.
impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let forwarded_for = parts
            .headers
            .get(X_FORWARDED_FOR)
            .and_then(|v| v.to_str().ok());
        let client = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(peer)| state.proxies.client(peer.ip(), forwarded_for));
        let audiences = parts.extensions.get::<crate::auth::Audiences>();
        state
            .auth
            .authenticate_from(&parts.headers, client, audiences)
            .await
    }
}

/// A caller resolved against live rows.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    /// Their school (the tenant).
    pub school: SchoolId,
    /// The full runtime context of this request.
    pub context: RuntimeContext,
}

impl Caller {
    /// Who tools and endpoints act as.
    pub(crate) fn identity(&self) -> Identity {
        self.context.identity()
    }

    /// How far they reach.
    pub(crate) fn scope(&self) -> CallScope {
        self.context.call_scope()
    }
}

/// The principal's school, or 401 when the subject is no user of any school.
pub(crate) async fn school_of(
    state: &AppState,
    principal: &Principal,
) -> Result<SchoolId, ApiError> {
    rover_domain::actor::user_school(&state.pool, principal.user_id)
        .await?
        .ok_or_else(|| {
            ApiError::unauthenticated("The token's subject is not a user of any school.")
        })
}

/// Opens a tenant transaction for the principal's school.
pub(crate) async fn tenant(state: &AppState, principal: &Principal) -> Result<TenantTx, ApiError> {
    let school = school_of(state, principal).await?;
    Ok(rover_domain::begin_tenant(&state.pool, school).await?)
}

/// Mints the caller's runtime context in `tx` (which must be the caller's tenant).
pub(crate) async fn resolve(
    tx: &mut TenantTx,
    principal: &Principal,
    campus: Option<CampusId>,
    attachments: Vec<Attachment>,
) -> Result<Caller, ApiError> {
    let context =
        rover_domain::context::runtime_context(tx, principal.user_id, campus, attachments)
            .await
            .map_err(|error| match error {
                rover_domain::DomainError::NotFound(_) if campus.is_none() => ApiError::new(
                    ErrorCode::Unauthenticated,
                    "The token's subject is not a user of this school.",
                ),
                other => other.into(),
            })?;
    Ok(Caller {
        school: tx.school_id(),
        context,
    })
}
