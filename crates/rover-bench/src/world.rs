//! The bench's private world is `rover_stack::World` (a RabbitMQ vhost, a seeded Postgres database
//! and a turn-identity key pair of its own, created for the run, removed after it); what the bench
//! adds to it: the demo callers' contexts and identities, and the machine facts the report records.

use anyhow::Context as _;
use chrono::Utc;
use rover_contracts::context::RuntimeContext;
use rover_contracts::identity::{SignedTurnIdentity, TurnGrant};
use rover_contracts::ids::{ThreadId, TurnId};
pub(crate) use rover_stack::World;
use serde::{Deserialize, Serialize};

/// What the bench asks of its world beyond starting services on it.
pub(crate) trait WorldExt {
    /// The runtime context of a demo user, minted from live rows as the gateway does.
    async fn context(&self, email: &str) -> anyhow::Result<RuntimeContext>;

    /// A turn identity for `context`, signed with this run's key, valid for 15 minutes.
    fn mint(&self, context: &RuntimeContext, turn_id: TurnId)
    -> anyhow::Result<SignedTurnIdentity>;

    /// The machine and the versions of what ran.
    async fn machine(&self) -> Machine;
}

impl WorldExt for World {
    async fn context(&self, email: &str) -> anyhow::Result<RuntimeContext> {
        let school = self.db.ids.school_of(email);
        let mut tx = rover_domain::begin_tenant(&self.db.pool, school).await?;
        let context = rover_domain::context::runtime_context(
            &mut tx,
            self.db.ids.user(email),
            None,
            Vec::new(),
        )
        .await
        .with_context(|| format!("Failed to mint the runtime context of {email}"))?;
        tx.rollback().await?;
        Ok(context)
    }

    fn mint(
        &self,
        context: &RuntimeContext,
        turn_id: TurnId,
    ) -> anyhow::Result<SignedTurnIdentity> {
        let grant = TurnGrant {
            turn_id,
            thread_id: ThreadId::new(),
            identity: context.identity(),
            scope: context.call_scope(),
        };
        Ok(self
            .keys
            .signer()
            .mint(grant, Utc::now(), chrono::Duration::minutes(15))?)
    }

    async fn machine(&self) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let field = |text: &str, key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_owned())
        };
        let memory_gib = field(&meminfo, "MemTotal")
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .map(|kib| (kib / 1024.0 / 1024.0 * 10.0).round() / 10.0);
        let rabbitmq = std::process::Command::new("rabbitmqctl")
            .args(["version"])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
        let postgres = sqlx::query_scalar::<_, String>("SHOW server_version")
            .fetch_one(&self.db.pool)
            .await
            .ok();
        Machine {
            nproc: std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
            cpu: field(&cpuinfo, "model name"),
            memory_gib,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .ok()
                .map(|s| s.trim().to_owned()),
            rabbitmq,
            postgres,
        }
    }
}

/// Where the numbers came from.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Machine {
    pub(crate) nproc: usize,
    pub(crate) cpu: Option<String>,
    pub(crate) memory_gib: Option<f64>,
    pub(crate) kernel: Option<String>,
    pub(crate) rabbitmq: Option<String>,
    pub(crate) postgres: Option<String>,
}
