//! Tenant transactions ([`TenantTx`]), the acting user ([`Actor`]), and the scope checks every
//! domain function starts with.

use std::fmt;

use rover_contracts::context::{CallScope, Identity};
use rover_contracts::ids::{SchoolId, UserId};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgPool, Row as _};
use uuid::Uuid;

use crate::DomainError;
use crate::pool::{Connections, Lease};

/// A database transaction pinned to one school.
///
/// *Architecture Invariant*: every domain function takes a `&mut TenantTx`, and the only ways to get
/// one are [`begin_tenant`] and [`begin_call`](crate::call::begin_call), which set `app.school_id`
/// for the transaction in the very round trip that opens it, before anything else runs. Row-level
/// security keys on that setting, so a domain query cannot see or write another school's rows even
/// if its SQL forgets to filter.
///
/// The transaction is opened with a plain `BEGIN` in the same simple-protocol query as the tenant
/// set-up (one round trip where sqlx's `Transaction` would take two), so this type ends it itself:
/// [`TenantTx::commit`], [`TenantTx::rollback`], or — dropped unfinished — a `ROLLBACK` sent in
/// the background before the connection goes back to the pool (or the connection is closed, if
/// that fails or there is no runtime). A pooled connection is never handed on mid-transaction.
pub struct TenantTx {
    /// `None` only once the transaction has ended.
    conn: Option<Lease>,
    school_id: SchoolId,
}

/// The statement that opens a tenant transaction: `BEGIN`, the school, and whether the role could
/// bypass row-level security. `school_id` is a parsed UUID, so formatting it into SQL is safe.
pub(crate) fn begin_sql(school_id: SchoolId) -> String {
    format!(
        "BEGIN; SELECT set_config('app.school_id', '{}', true)",
        school_id.as_uuid()
    )
}

/// The column expression saying whether the current role bypasses row-level security.
pub(crate) const BYPASSES_RLS: &str =
    "(SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user)";

/// The refusal when the pool's role is not bound by row-level security.
pub(crate) fn bypass_refused() -> DomainError {
    DomainError::Database(sqlx::Error::Configuration(
        "tenant transactions need a database role that row-level security applies to \
         (not a superuser, not BYPASSRLS, not the schema owner)"
            .into(),
    ))
}

/// Begins a transaction on `pool` and pins it to `school_id` (`set_config('app.school_id', …, true)`,
/// which lasts until the transaction ends), in one round trip.
///
/// Fails closed if the pool connects as a role that row-level security does not bind (a superuser
/// or a `BYPASSRLS` role such as the migration owner): the tenant frame would be decoration there.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", school_id = %school_id))]
pub async fn begin_tenant(pool: &PgPool, school_id: SchoolId) -> Result<TenantTx, DomainError> {
    let sql = format!(
        "{}; SELECT {BYPASSES_RLS} AS bypasses_rls",
        begin_sql(school_id)
    );
    let (tx, rows) = TenantTx::open(pool.lease().await?, school_id, sql).await?;
    let bypasses_rls = rows
        .last()
        .map(|row| row.try_get::<bool, _>("bypasses_rls"))
        .transpose()?
        .unwrap_or(true);
    if bypasses_rls {
        return Err(bypass_refused());
    }
    Ok(tx)
}

impl TenantTx {
    /// Runs `sql` (which must start the transaction and set the school) on `conn` as one
    /// simple-protocol query, returning every row it produced.
    pub(crate) async fn open(
        conn: Lease,
        school_id: SchoolId,
        sql: String,
    ) -> Result<(TenantTx, Vec<PgRow>), DomainError> {
        // The transaction owns the connection before the query is sent: if this fails half-way,
        // or the call is dropped while it waits, the connection may be inside the transaction,
        // and dropping `tx` rolls it back before anyone else gets it.
        let mut tx = TenantTx {
            conn: Some(conn),
            school_id,
        };
        let rows = fetch_simple(tx.connection(), &sql).await?;
        Ok((tx, rows))
    }

    /// The school this transaction is pinned to.
    pub fn school_id(&self) -> SchoolId {
        self.school_id
    }

    /// The underlying connection, for store code outside this crate and for tests. Row-level
    /// security still applies to whatever runs on it.
    pub fn connection(&mut self) -> &mut PgConnection {
        self.conn
            .as_deref_mut()
            .expect("a TenantTx holds its connection until it ends")
    }

    /// Commits the transaction.
    #[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
    pub async fn commit(mut self) -> Result<(), DomainError> {
        self.end("COMMIT").await
    }

    /// Runs `sql`, several statements ending with `COMMIT`, as one simple-protocol query: the
    /// transaction's last work and its commit in one round trip. `sql` must hold nothing a caller
    /// sent except as literals Postgres decodes (UUIDs, numbers, hex).
    pub(crate) async fn finish(mut self, sql: String) -> Result<(), DomainError> {
        let Some(mut conn) = self.conn.take() else {
            return Ok(());
        };
        // Dropped before the server answers (the call cancelled), its state would be unknown.
        conn.unsettled();
        if let Err(error) = fetch_simple(&mut conn, &sql).await {
            // The statement before `COMMIT` failed (the transaction is aborted, not ended) or the
            // commit did: either way this connection must not serve anyone else as it is.
            conn.close_on_drop();
            return Err(error.into());
        }
        conn.settled();
        Ok(())
    }

    /// Rolls the transaction back (dropping it does the same, without waiting).
    pub async fn rollback(mut self) -> Result<(), DomainError> {
        self.end("ROLLBACK").await
    }

    async fn end(&mut self, statement: &'static str) -> Result<(), DomainError> {
        let Some(mut conn) = self.conn.take() else {
            return Ok(());
        };
        conn.unsettled();
        if let Err(error) = run_simple(&mut conn, statement).await {
            // Whatever state it is in, it must not serve anyone else.
            conn.close_on_drop();
            return Err(error.into());
        }
        conn.settled();
        Ok(())
    }

    pub(crate) fn school_uuid(&self) -> Uuid {
        self.school_id.as_uuid()
    }
}

/// Runs one statement with the simple protocol (a named function, so the future is `Send` for
/// every lifetime when spawned).
fn run_simple<'c>(
    conn: &'c mut PgConnection,
    statement: &'static str,
) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'c {
    use sqlx::Executor as _;
    async move { conn.execute(statement).await.map(|_| ()) }
}

/// Runs `sql` (several statements) with the simple protocol and returns every row.
fn fetch_simple<'c>(
    conn: &'c mut PgConnection,
    sql: &'c str,
) -> impl Future<Output = Result<Vec<PgRow>, sqlx::Error>> + Send + 'c {
    use sqlx::Executor as _;
    async move { conn.fetch_all(sql).await }
}

impl Drop for TenantTx {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    conn.unsettled();
                    match run_simple(&mut conn, "ROLLBACK").await {
                        Ok(()) => conn.settled(),
                        Err(_) => conn.close_on_drop(),
                    }
                });
            }
            // No runtime to roll back on: close the connection, which ends the transaction.
            Err(_) => conn.close_without_runtime(),
        }
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
