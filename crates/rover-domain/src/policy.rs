//! The live authorisation rows of the current school: casbin's policy (`p`) and grouping (`g`) rows,
//! read per call so a change is seen on the next one.

pub use rover_authz::{PolicyRow, RoleAssignment};
use rover_contracts::ids::UserId;
use rover_contracts::permission::Permission;
use uuid::Uuid;

use crate::{DomainError, TenantTx};

/// The current school's policy rows and role assignments, in a stable order.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn load(tx: &mut TenantTx) -> Result<(Vec<PolicyRow>, Vec<RoleAssignment>), DomainError> {
    let policies: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT role, action, subject FROM authz_policies ORDER BY role, action, subject",
    )
    .fetch_all(tx.connection())
    .await?;
    let assignments: Vec<(Uuid, String)> =
        sqlx::query_as("SELECT user_id, role FROM role_assignments ORDER BY user_id, role")
            .fetch_all(tx.connection())
            .await?;

    let policies = policies
        .into_iter()
        .map(|(role, action, subject)| {
            Ok(PolicyRow {
                role,
                permission: Permission::new(
                    action.parse().map_err(decode_error)?,
                    subject.parse().map_err(decode_error)?,
                ),
            })
        })
        .collect::<Result<_, DomainError>>()?;
    let assignments = assignments
        .into_iter()
        .map(|(user_id, role)| RoleAssignment {
            user_id: UserId::from_uuid(user_id),
            role,
        })
        .collect();
    Ok((policies, assignments))
}

/// A column value the schema should have ruled out.
pub(crate) fn decode_error(error: impl std::error::Error + Send + Sync + 'static) -> DomainError {
    DomainError::Database(sqlx::Error::Decode(Box::new(error)))
}
