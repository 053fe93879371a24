//! The tool server's connection pool ([`CallPool`]), and [`Lease`]: a connection a [`TenantTx`]
//! holds, from this pool or from an sqlx [`PgPool`].
//!
//! Why not sqlx's pool: it sends a `Sync` to the server every time a connection goes back (its
//! release check), a round trip per call on top of the call's own — and on two shared cores each
//! round trip is mostly the cost of waking the server's backend and the client's task. A tool
//! call's connection needs no such check: [`TenantTx`] gives it back only after the transaction
//! ended with an answer from the server (`COMMIT`, `ROLLBACK`, or the last statement of
//! [`TenantTx::finish`]), and closes it instead whenever that failed. So this pool hands
//! connections back as they are, with no round trip.
//!
//! What it keeps from sqlx's: a bound on open connections (`max_connections`), a bounded wait for
//! one (`acquire_timeout_ms`, then [`sqlx::Error::PoolTimedOut`]), lazy connects, and connections
//! closed after 30 minutes of life or 10 of idleness (sqlx's defaults), checked as they are taken.
//! When a connection turns out dead (the server restarted), [`CallPool::discard_idle`] drops every
//! idle one, which a restart has killed too.
//!
//! [`TenantTx`]: crate::TenantTx
//! [`TenantTx::finish`]: crate::TenantTx

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{Connection as _, PgPool, Postgres};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A connection's longest life in the pool.
const MAX_LIFETIME: Duration = Duration::from_secs(30 * 60);
/// The longest a connection stays idle before it is closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// A pool of Postgres connections for tool calls that gives a connection back without a round
/// trip (see the module docs). Cloning it shares the pool.
#[derive(Clone)]
pub struct CallPool(Arc<Shared>);

struct Shared {
    connect: PgConnectOptions,
    permits: Arc<Semaphore>,
    acquire_timeout: Duration,
    idle: Mutex<Vec<Idle>>,
}

struct Idle {
    conn: PgConnection,
    born: Instant,
    since: Instant,
}

impl std::fmt::Debug for CallPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallPool")
            .field("free", &self.0.permits.available_permits())
            .finish_non_exhaustive()
    }
}

impl CallPool {
    /// A pool of at most `max_connections` to `url`, connecting only when a call needs one.
    ///
    /// # Errors
    /// The URL does not parse.
    pub fn new(settings: &rover_settings::DatabaseSettings) -> Result<CallPool, sqlx::Error> {
        let connect: PgConnectOptions = settings.url.expose().parse()?;
        Ok(CallPool(Arc::new(Shared {
            connect,
            permits: Arc::new(Semaphore::new(settings.max_connections.max(1) as usize)),
            acquire_timeout: Duration::from_millis(settings.acquire_timeout_ms),
            idle: Mutex::new(Vec::new()),
        })))
    }

    /// A connection: an idle one if there is one still young enough, else a new one. Waits at
    /// most the acquire timeout for a free slot and the connect together.
    ///
    /// # Errors
    /// [`sqlx::Error::PoolTimedOut`] past the timeout, [`sqlx::Error::PoolClosed`] once closed,
    /// or the connect's own error.
    pub async fn acquire(&self) -> Result<CallConnection, sqlx::Error> {
        let deadline = tokio::time::Instant::now() + self.0.acquire_timeout;
        let permit =
            match tokio::time::timeout_at(deadline, self.0.permits.clone().acquire_owned()).await {
                Err(_) => return Err(sqlx::Error::PoolTimedOut),
                Ok(Err(_)) => return Err(sqlx::Error::PoolClosed),
                Ok(Ok(permit)) => permit,
            };
        let now = Instant::now();
        loop {
            // Popped before anything else runs: the lock is not held past this line.
            let Some(idle) = self.idle().pop() else {
                break;
            };
            if now.duration_since(idle.born) < MAX_LIFETIME
                && now.duration_since(idle.since) < IDLE_TIMEOUT
            {
                return Ok(self.lease(idle.conn, idle.born, permit));
            }
            close_in_background(idle.conn);
        }
        let conn = tokio::time::timeout_at(deadline, PgConnection::connect_with(&self.0.connect))
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)??;
        Ok(self.lease(conn, now, permit))
    }

    /// Closes every idle connection: one was found dead, and whatever killed it (a server
    /// restart, a failover) killed these too. The next calls connect afresh.
    pub fn discard_idle(&self) {
        let idle = std::mem::take(&mut *self.idle());
        if !idle.is_empty() {
            tracing::info!(count = idle.len(), "closing the idle database connections");
        }
        // Dropping a connection closes its socket; the server may be gone, so no goodbye.
        drop(idle);
    }

    /// Stops handing out connections and closes the idle ones; those in use are closed as they
    /// come back.
    pub async fn close(&self) {
        self.0.permits.close();
        let idle = std::mem::take(&mut *self.idle());
        for idle in idle {
            let _ = idle.conn.close().await;
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Idle>> {
        self.0.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lease(
        &self,
        conn: PgConnection,
        born: Instant,
        permit: OwnedSemaphorePermit,
    ) -> CallConnection {
        CallConnection {
            conn: Some(conn),
            born,
            pool: self.clone(),
            discard: false,
            _permit: permit,
        }
    }
}

fn close_in_background(conn: PgConnection) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(async move {
                let _ = conn.close().await;
            });
        }
        Err(_) => drop(conn),
    }
}

/// A connection taken from a [`CallPool`]: back into the pool as it is when dropped (its holder
/// ends any transaction first), or closed after [`CallConnection::close_on_drop`].
pub struct CallConnection {
    conn: Option<PgConnection>,
    born: Instant,
    pool: CallPool,
    discard: bool,
    // Dropped after `drop` has put the connection back, so a waiter finds it idle.
    _permit: OwnedSemaphorePermit,
}

impl std::fmt::Debug for CallConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallConnection")
            .field("close_on_drop", &self.discard)
            .finish_non_exhaustive()
    }
}

impl CallConnection {
    /// Close the connection when dropped instead of giving it back (its state is unknown).
    pub fn close_on_drop(&mut self) {
        self.discard = true;
    }
}

impl Deref for CallConnection {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        self.conn
            .as_ref()
            .expect("a leased connection is held until dropped")
    }
}

impl DerefMut for CallConnection {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.conn
            .as_mut()
            .expect("a leased connection is held until dropped")
    }
}

impl Drop for CallConnection {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        if self.discard || self.pool.0.permits.is_closed() {
            close_in_background(conn);
            return;
        }
        self.pool.idle().push(Idle {
            conn,
            born: self.born,
            since: Instant::now(),
        });
    }
}

/// Where a tenant transaction's connection comes from: the tool server's [`CallPool`], or an sqlx
/// [`PgPool`] (the REST API's, the worker's, tests').
pub trait Connections: Sync {
    /// A connection for one transaction.
    fn lease(&self) -> impl Future<Output = Result<Lease, sqlx::Error>> + Send;

    /// A connection was found dead: drop the idle ones that died with it (sqlx's pool checks its
    /// own as they come back).
    fn discard_idle(&self) {}
}

impl Connections for PgPool {
    async fn lease(&self) -> Result<Lease, sqlx::Error> {
        Ok(Lease::Pooled(self.acquire().await?))
    }
}

impl Connections for CallPool {
    async fn lease(&self) -> Result<Lease, sqlx::Error> {
        Ok(Lease::Call(self.acquire().await?))
    }

    fn discard_idle(&self) {
        CallPool::discard_idle(self);
    }
}

/// A connection held by a [`TenantTx`](crate::TenantTx).
#[derive(Debug)]
pub enum Lease {
    /// From an sqlx pool, which checks it with a round trip as it goes back.
    Pooled(PoolConnection<Postgres>),
    /// From a [`CallPool`], which takes it back as it is.
    Call(CallConnection),
}

impl Lease {
    /// Closes the connection now, without a goodbye to the server (no runtime to send one on).
    pub fn close_without_runtime(self) {
        match self {
            Lease::Pooled(conn) => drop(conn.detach()),
            Lease::Call(mut conn) => {
                conn.close_on_drop();
                drop(conn);
            }
        }
    }

    /// Marks the connection as waiting on the server for the statement that ends its
    /// transaction: dropped in that state (the call cancelled mid-wait), it is closed, not given
    /// back. sqlx's pool needs no mark: its release check drains a half-read answer.
    pub(crate) fn unsettled(&mut self) {
        if let Lease::Call(conn) = self {
            conn.discard = true;
        }
    }

    /// The server answered: the transaction is over and the connection may go back.
    pub(crate) fn settled(&mut self) {
        if let Lease::Call(conn) = self {
            conn.discard = false;
        }
    }

    /// Close the connection when dropped instead of giving it back.
    pub fn close_on_drop(&mut self) {
        match self {
            Lease::Pooled(conn) => conn.close_on_drop(),
            Lease::Call(conn) => conn.close_on_drop(),
        }
    }
}

impl Deref for Lease {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        match self {
            Lease::Pooled(conn) => conn,
            Lease::Call(conn) => conn,
        }
    }
}

impl DerefMut for Lease {
    fn deref_mut(&mut self) -> &mut PgConnection {
        match self {
            Lease::Pooled(conn) => conn,
            Lease::Call(conn) => conn,
        }
    }
}
