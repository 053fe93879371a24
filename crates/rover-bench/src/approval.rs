//! The approval gate of an approved write, as the worker runs it before the call's RPC: the turn
//! store's gate (`PgTurnStore::gate`), one transaction that reads the school's policy and the
//! call's approval row and finds it approved for this turn and input. That is all approval adds to the call
//! that runs: the pause and the staff member's answer are turns of their own. Measured in process,
//! through a pool like the worker's, against a call approved once in this run's database.

use std::sync::Arc;

use rover_agent::TurnStore as _;
use rover_agent::approval::GateQuery;
use rover_contracts::ids::{ThreadId, TurnId};
use rover_settings::{DatabaseSettings, Secret};
use rover_turnstore::approvals::{ApprovalAnswer, ApprovalState, GatedCall};
use rover_turnstore::usage::DailyLimits;
use rover_turnstore::{PgTurnStore, TurnKey};
use serde_json::json;

use crate::toolhop::{POOL_SIZE, WRITER};
use crate::world::World;

/// A pool like the worker's, the store of the turn an approved write runs in, and the call.
#[derive(Debug)]
pub(crate) struct Gate {
    pool: sqlx::PgPool,
    store: PgTurnStore,
    call: GatedCall,
}

impl Gate {
    /// Pauses a turn on a `create_department` call and approves it for the next turn, as a chat
    /// would; the gated call is that next turn's.
    pub(crate) async fn start(world: &World) -> anyhow::Result<Arc<Gate>> {
        let pool = rover_domain::app_pool(&DatabaseSettings {
            url: Secret::new(world.db.app_url().to_owned()),
            max_connections: POOL_SIZE.parse()?,
            ..DatabaseSettings::default()
        })?;
        let school = world.db.ids.school_of(WRITER);
        let user = world.db.ids.user(WRITER);
        let (thread, paused, answering) = (ThreadId::new(), TurnId::new(), TurnId::new());
        let mut call = GatedCall {
            thread,
            chain: vec![paused],
            user,
            call_id: "0-call_bench".to_owned(),
            tool: "create_department".to_owned(),
            input: json!({ "name": "Bench Sciences" }),
        };
        let mut tx = rover_domain::begin_tenant(&pool, school).await?;
        // The demo seed lets writes run without approval; here every write needs it.
        sqlx::query("DELETE FROM tool_approval_policy")
            .execute(tx.connection())
            .await?;
        rover_turnstore::threads::ensure_thread(&mut tx, thread, user).await?;
        let ApprovalState::Pending { approval_id } = rover_turnstore::approvals::approval_for(
            &mut tx,
            &call,
            rover_turnstore::DEFAULT_APPROVAL_TTL,
        )
        .await?
        else {
            anyhow::bail!("a new approval is not pending");
        };
        let answer = ApprovalAnswer {
            approval_id,
            call_id: call.call_id.clone(),
            tool: call.tool.clone(),
            input: call.input.clone(),
            approved: true,
            reason: None,
            edited: None,
        };
        rover_turnstore::approvals::answer(&mut tx, thread, user, answering, &[answer])
            .await?
            .ok_or_else(|| anyhow::anyhow!("the approval was not recorded"))?;
        tx.commit().await?;
        call.chain.push(answering);
        let key = TurnKey {
            school,
            user,
            thread,
            turn: answering,
            continues: vec![paused],
        };
        let store = PgTurnStore::for_turn(pool.clone(), key, DailyLimits::default());
        let gate = Gate { pool, store, call };
        anyhow::ensure!(gate.decide().await.is_ok(), "the call is not approved");
        Ok(Arc::new(gate))
    }

    /// The worker's gate: the call must come out approved.
    pub(crate) async fn decide(&self) -> Result<(), GateError> {
        let query = GateQuery {
            call_id: self.call.call_id.clone(),
            tool: self.call.tool.clone(),
            input: self.call.input.clone(),
        };
        match self.store.gate(query).await? {
            rover_agent::approval::Gate::Run => Ok(()),
            decided => Err(GateError::NotApproved(decided)),
        }
    }

    pub(crate) async fn stop(self) {
        self.pool.close().await;
    }
}

/// Why the gate did not let the approved call through.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GateError {
    #[error("the gate's transaction failed: {0}")]
    Store(#[from] rover_agent::StoreError),
    #[error("the gate decided {0:?}")]
    NotApproved(rover_agent::approval::Gate),
}
