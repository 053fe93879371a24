//! The live authorisation rows of the current school: casbin's policy (`p`) and grouping (`g`) rows,
//! read per call so a change is seen on the next one; and [`authorize`], the one decision both
//! doors (the gateway's REST API and the tool server) make from them.

pub use rover_authz::{Authorizer, PolicyRow, RoleAssignment};
use rover_authz::{AuthzError, Decision};
use rover_contracts::ids::{SchoolId, UserId};
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

/// Why [`authorize`] did not allow a call.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The live rows grant the user no role with this permission in the school. The message is
    /// the one both doors show (REST's 403 body, the tool's error envelope).
    #[error("Permission denied: {0}")]
    Denied(Permission),
    /// The policy could not be evaluated (a broken model or rule: a bug, never a denial).
    #[error(transparent)]
    Unevaluable(#[from] AuthzError),
}

/// May `user` exercise `permission` in `school`, by the school's *live* rows — the policy rows and
/// role assignments the caller has just read in its tenant transaction (REST with [`load`], the
/// tool server in its opening query)? The one authorisation decision of REST and tools: since the
/// rows are read on every call, a revoked permission is refused on the very next one.
///
/// Records the deciding rule and the outcome as `rover.permission.rule` and
/// `rover.permission.allowed` on the current span (each door opens its own permission span).
pub async fn authorize(
    school: SchoolId,
    user: UserId,
    permission: Permission,
    policies: &[PolicyRow],
    assignments: &[RoleAssignment],
) -> Result<Decision, Refusal> {
    let authorizer = Authorizer::build(school, policies, assignments).await?;
    decide(&authorizer, user, permission)
}

/// [`authorize`] on an [`Authorizer`] the caller built from the school's live rows and kept (the
/// tool server keeps one per school and policy version, built once when it reads a version's
/// rows): the same decision, the same span fields, without comparing the rows again.
pub fn decide(
    authorizer: &Authorizer,
    user: UserId,
    permission: Permission,
) -> Result<Decision, Refusal> {
    let decision = authorizer.decide(user, permission)?;
    let span = tracing::Span::current();
    span.record("rover.permission.rule", decision.rule.as_str());
    span.record("rover.permission.allowed", decision.allowed);
    if decision.allowed {
        Ok(decision)
    } else {
        Err(Refusal::Denied(permission))
    }
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

#[cfg(test)]
mod tests {
    use rover_contracts::permission::{Action, Subject};

    use super::*;

    fn grant(role: &str, permission: Permission) -> PolicyRow {
        PolicyRow {
            role: role.into(),
            permission,
        }
    }

    #[tokio::test]
    async fn allows_by_the_rows_given_and_refuses_once_they_no_longer_grant_it() {
        let school = SchoolId::new();
        let user = UserId::new();
        let create = Permission::new(Action::Create, Subject::Department);
        let read = Permission::new(Action::Read, Subject::Department);
        let assignments = [RoleAssignment {
            user_id: user,
            role: "registrar".into(),
        }];
        let granted = [grant("registrar", create), grant("registrar", read)];
        let decision = authorize(school, user, create, &granted, &assignments)
            .await
            .expect("allowed");
        assert!(decision.allowed);
        assert_eq!(decision.rule, "role registrar may create:Department");
        // The very next call, with the grant revoked in the live rows, is refused.
        let revoked = [grant("registrar", read)];
        let refusal = authorize(school, user, create, &revoked, &assignments)
            .await
            .expect_err("revoked");
        assert!(matches!(refusal, Refusal::Denied(p) if p == create));
        assert_eq!(refusal.to_string(), "Permission denied: create:Department");
        // Nor does a role granted in the rows help a user not assigned to it.
        let stranger = UserId::new();
        let refusal = authorize(school, stranger, read, &granted, &assignments)
            .await
            .expect_err("no role");
        assert!(matches!(refusal, Refusal::Denied(p) if p == read));
    }
}
