//! Tenant transactions ([`TenantTx`]), the acting user ([`Actor`]), and the scope checks every
//! domain function starts with.

use std::fmt;

use rover_contracts::context::{CallScope, Identity};
use rover_contracts::ids::{SchoolId, UserId};
use sqlx::{PgConnection, PgPool, Postgres, Transaction};
use uuid::Uuid;

use crate::DomainError;

/// A database transaction pinned to one school.
///
/// *Architecture Invariant*: every domain function takes a `&mut TenantTx`, and the only way to get
/// one is [`begin_tenant`], which sets `app.school_id` for the transaction before anything else runs.
/// Row-level security keys on that setting, so a domain query cannot see or write another school's
/// rows even if its SQL forgets to filter.
pub struct TenantTx {
    tx: Transaction<'static, Postgres>,
    school_id: SchoolId,
}

/// Begins a transaction on `pool` and pins it to `school_id` (`set_config('app.school_id', …, true)`,
/// which lasts until the transaction ends).
///
/// Fails closed if the pool connects as a role that row-level security does not bind (a superuser
/// or a `BYPASSRLS` role such as the migration owner): the tenant frame would be decoration there.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", school_id = %school_id))]
pub async fn begin_tenant(pool: &PgPool, school_id: SchoolId) -> Result<TenantTx, DomainError> {
    let mut tx = pool.begin().await?;
    let (_, bypasses_rls): (String, bool) = sqlx::query_as(
        "SELECT set_config('app.school_id', $1, true), \
                (SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user)",
    )
    .bind(school_id.to_string())
    .fetch_one(&mut *tx)
    .await?;
    if bypasses_rls {
        return Err(DomainError::Database(sqlx::Error::Configuration(
            "tenant transactions need a database role that row-level security applies to \
             (not a superuser, not BYPASSRLS, not the schema owner)"
                .into(),
        )));
    }
    Ok(TenantTx { tx, school_id })
}

impl TenantTx {
    /// The school this transaction is pinned to.
    pub fn school_id(&self) -> SchoolId {
        self.school_id
    }

    /// The underlying connection, for store code outside this crate and for tests. Row-level
    /// security still applies to whatever runs on it.
    pub fn connection(&mut self) -> &mut PgConnection {
        &mut self.tx
    }

    /// Commits the transaction.
    #[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
    pub async fn commit(self) -> Result<(), DomainError> {
        Ok(self.tx.commit().await?)
    }

    /// Rolls the transaction back (dropping it does the same, without waiting).
    pub async fn rollback(self) -> Result<(), DomainError> {
        Ok(self.tx.rollback().await?)
    }

    pub(crate) fn school_uuid(&self) -> Uuid {
        self.school_id.as_uuid()
    }
}

impl fmt::Debug for TenantTx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TenantTx")
            .field("school_id", &self.school_id)
            .finish_non_exhaustive()
    }
}

/// Who a domain call acts as: written into rows (`recorded_by`) and audit entries, and checked by
/// relationship-posture functions (the class teacher, the subject teacher).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// The acting user.
    pub user_id: UserId,
    /// Their email, for the audit log.
    pub email: String,
}

impl From<&Identity> for Actor {
    fn from(identity: &Identity) -> Self {
        Actor {
            user_id: identity.user_id,
            email: identity.email.clone(),
        }
    }
}

impl Actor {
    pub(crate) fn uuid(&self) -> Uuid {
        self.user_id.as_uuid()
    }
}

/// The campus a call is pinned to (`None` in school mode), after checking that the scope names the
/// transaction's school. A mismatch is a bug in the caller, refused rather than trusted.
pub(crate) fn campus_of(tx: &TenantTx, scope: &CallScope) -> Result<Option<Uuid>, DomainError> {
    if scope.school_id != tx.school_id {
        return Err(DomainError::Denied(
            "the call's school is not the school this request runs in".to_owned(),
        ));
    }
    Ok(scope.run_mode.campus().map(|c| c.id.as_uuid()))
}

/// Whether the transaction's school exists. The tool server fails closed when it does not: an
/// identity whose tenant is unknown gets nothing, not an empty answer.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn school_exists(tx: &mut TenantTx) -> Result<bool, DomainError> {
    // Row-level security on `schools` shows only the transaction's own school, if it exists.
    Ok(sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM schools)")
        .fetch_one(tx.connection())
        .await?)
}
