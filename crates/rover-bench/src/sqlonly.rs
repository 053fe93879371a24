//! The tool hop's SQL alone, pgbench-style: exactly the statements the tool server sends for
//! `list_departments` (the opening query and the query in one round trip) and `create_department`
//! (the opening query, the insert, the audit and inbox rows with `COMMIT`), run in process through
//! the same kind of pool, with no broker, no pipeline and no serialisation — how far Postgres
//! itself lets that work go on this machine.

use std::sync::Arc;

use rover_contracts::context::CallScope;
use rover_contracts::ids::{ThreadId, ToolCallId, TurnId};
use rover_contracts::tools::{CreateDepartmentArgs, NoArgs};
use rover_domain::Actor;
use rover_domain::audit::AuditEntry;
use rover_domain::call::{ApprovalRead, CallReads, begin_call, commit_write};
use rover_settings::{DatabaseSettings, Secret};

use crate::toolhop::{POOL_SIZE, READER, WRITE_EVENT, WRITER};
use crate::world::{World, WorldExt as _};

/// A pool and the two callers, as the tool server would see them.
#[derive(Debug)]
pub(crate) struct SqlOnly {
    pool: rover_domain::pool::CallPool,
    reader: (Actor, CallScope),
    writer: (Actor, CallScope),
    /// The policy version the last call read (the tool server keeps it per school): the rows are
    /// read again only when it moves. `-1`: none yet.
    policy_version: std::sync::atomic::AtomicI64,
}

impl SqlOnly {
    pub(crate) async fn start(world: &World) -> anyhow::Result<Arc<SqlOnly>> {
        let pool = rover_domain::call_pool(&DatabaseSettings {
            url: Secret::new(world.db.app_url().to_owned()),
            max_connections: POOL_SIZE.parse()?,
            ..DatabaseSettings::default()
        })?;
        let caller = |context: rover_contracts::context::RuntimeContext| {
            (Actor::from(&context.identity()), context.call_scope())
        };
        Ok(Arc::new(SqlOnly {
            pool,
            reader: caller(world.context(READER).await?),
            writer: caller(world.context(WRITER).await?),
            policy_version: std::sync::atomic::AtomicI64::new(-1),
        }))
    }

    /// The policy version to send: the last one read, as the tool server sends it.
    fn cached(&self) -> Option<i64> {
        Some(
            self.policy_version
                .load(std::sync::atomic::Ordering::Relaxed),
        )
        .filter(|v| *v >= 0)
    }

    fn remember(&self, version: Option<i64>) {
        if let Some(version) = version {
            self.policy_version
                .store(version, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The read's SQL, as the tool server sends it: once the school's policy version is known,
    /// the opening query and the query in one round trip (one read-only implicit transaction);
    /// before that (the first call), or when the version moved, the opening query with the policy
    /// rows, then the query, rolled back.
    pub(crate) async fn read(&self) -> Result<(), SqlError> {
        let (actor, scope) = &self.reader;
        if let Some(version) = self.cached() {
            let read = rover_domain::list_departments_in_one_trip(scope, &NoArgs::default());
            let read =
                rover_domain::call::read_in_one_trip(&self.pool, scope.school_id, version, read)
                    .await
                    .map_err(SqlError::step("reading in one round trip"))?;
            if read.is_some() {
                return Ok(());
            }
        }
        let reads = CallReads {
            policy: true,
            policy_cached: self.cached(),
            inbox: None,
            approval: None,
        };
        let mut start = begin_call(&self.pool, scope.school_id, reads)
            .await
            .map_err(SqlError::step("opening the read's transaction"))?;
        self.remember(start.policy_version);
        rover_domain::list_departments(&mut start.tx, actor, scope, &NoArgs::default())
            .await
            .map_err(SqlError::step("listing the departments"))?;
        Ok(())
    }

    /// The write's SQL: opening query (with the call id's lock and inbox), the insert, the audit
    /// and inbox rows, `COMMIT`.
    pub(crate) async fn write(&self, n: u64) -> Result<(), SqlError> {
        let (actor, scope) = &self.writer;
        let turn = TurnId::new();
        let model_call_id = format!("sql_{n}");
        let call_id = ToolCallId::for_turn(turn, &model_call_id);
        let name = format!(
            "SQL {n} {}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let input = serde_json::json!({ "name": name });
        let reads = CallReads {
            policy: true,
            policy_cached: self.cached(),
            inbox: Some(&call_id),
            approval: Some(ApprovalRead {
                tool: "create_department",
                call_id: &model_call_id,
                turn,
                thread: ThreadId::new(),
                user: actor.user_id,
                input: &input,
            }),
        };
        let mut start = begin_call(&self.pool, scope.school_id, reads)
            .await
            .map_err(SqlError::step("opening the write's transaction"))?;
        self.remember(start.policy_version);
        let args = CreateDepartmentArgs { name };
        let written = rover_domain::create_department(&mut start.tx, actor, scope, &args)
            .await
            .map_err(SqlError::step("creating the department"))?;
        let entry = AuditEntry {
            actor,
            scope,
            event: WRITE_EVENT,
            call_id: Some(&call_id),
            trace_id: None,
            change: &written.change,
        };
        let reply = serde_json::to_string(&written.output).map_err(SqlError::Reply)?;
        commit_write(start.tx, &entry, &call_id, &reply)
            .await
            .map_err(SqlError::step(
                "writing the audit and inbox rows and committing",
            ))
    }
}

/// Why one in-process read or write failed, and at which step.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SqlError {
    #[error("{step}: {error}")]
    Domain {
        step: &'static str,
        error: rover_domain::DomainError,
    },
    #[error("serialising the department as the reply: {0}")]
    Reply(serde_json::Error),
}

impl SqlError {
    /// Wraps a domain error as failing at `step`.
    fn step(step: &'static str) -> impl FnOnce(rover_domain::DomainError) -> SqlError {
        move |error| SqlError::Domain { step, error }
    }
}
