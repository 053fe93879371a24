//! The live authorisation rows of the current school: casbin's policy (`p`) and grouping (`g`) rows,
//! read per call so a change is seen on the next one.

pub use rover_authz::{PolicyRow, RoleAssignment};
use rover_contracts::ids::UserId;
use rover_contracts::permission::Permission;
use uuid::Uuid;

use crate::{DomainError, TenantTx};

/// `(is a policy, role, action, subject, user)`: a policy row or a role assignment.
pub(crate) type AuthzRow = (bool, String, Option<String>, Option<String>, Option<Uuid>);

/// The current school's policy rows and role assignments, in a stable order.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn load(tx: &mut TenantTx) -> Result<(Vec<PolicyRow>, Vec<RoleAssignment>), DomainError> {
    // One round trip for both tables: this runs on every policy-gated tool call.
    let rows: Vec<AuthzRow> = sqlx::query_as(LOAD_SQL).fetch_all(tx.connection()).await?;
    from_rows(rows)
}

/// The query [`load`] runs; its columns are named so that other statements can carry it.
pub(crate) const LOAD_SQL: &str = "SELECT true AS is_policy, role, action, subject, NULL::uuid AS user_id FROM authz_policies \
     UNION ALL \
     SELECT false, role, NULL, NULL, user_id FROM role_assignments \
     ORDER BY 1 DESC, 5, 2, 3, 4";

/// Splits the rows of [`LOAD_SQL`] into policy rows and role assignments.
pub(crate) fn from_rows(
    rows: Vec<AuthzRow>,
) -> Result<(Vec<PolicyRow>, Vec<RoleAssignment>), DomainError> {
    let mut policies = Vec::new();
    let mut assignments = Vec::new();
    for (is_policy, role, action, subject, user_id) in rows {
        match (is_policy, action, subject, user_id) {
            (true, Some(action), Some(subject), _) => policies.push(PolicyRow {
                role,
                permission: Permission::new(
                    action.parse().map_err(decode_error)?,
                    subject.parse().map_err(decode_error)?,
                ),
            }),
            (false, _, _, Some(user_id)) => assignments.push(RoleAssignment {
                user_id: UserId::from_uuid(user_id),
                role,
            }),
            _ => {
                return Err(decode_error(std::io::Error::other(
                    "a policy or role assignment row with missing columns",
                )));
            }
        }
    }
    Ok((policies, assignments))
}

/// A column value the schema should have ruled out.
pub(crate) fn decode_error(error: impl std::error::Error + Send + Sync + 'static) -> DomainError {
    DomainError::Database(sqlx::Error::Decode(Box::new(error)))
}
