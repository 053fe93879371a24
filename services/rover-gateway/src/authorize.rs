//! The permission check every route that needs one runs: the tool server's own
//! ([`rover_domain::policy::authorize`]), on the school's live policy rows read in the caller's
//! tenant transaction, so REST, the chat history and the tools cannot disagree about who may do
//! what.

use rover_contracts::ErrorCode;
use rover_contracts::ids::UserId;
use rover_contracts::permission::Permission;
use rover_domain::TenantTx;
use rover_domain::policy::{self, Refusal};
use tracing::Instrument as _;

use crate::error::ApiError;

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
