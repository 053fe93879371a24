//! Running a turn's request: the sandbox and the agent built from the runtime context, the turn's
//! Postgres store, and the agent's run (`rover_agent::run`); a failure becomes what the client
//! reads.

use rover_agent::budget::{BudgetError, TurnBudget};
use rover_agent::sandbox::{Sandbox, SandboxOwner};
use rover_agent::{FailureKind, Journal, Mounts, TurnDeps, TurnError, build_agent};
use rover_contracts::ErrorCode;
use rover_contracts::wire::{FinishReason, TurnRequest};
use rover_turnstore::PgTurnStore;

use crate::{Shared, budget};

/// What a turn runs with besides its request: where its events go, what it already did, what it
/// may spend, and its stop signal.
pub(crate) struct Running<'a> {
    pub(crate) events: &'a rover_agent::Events,
    pub(crate) journal: &'a Journal,
    pub(crate) budget: &'a TurnBudget,
    pub(crate) stop: &'a rover_agent::Stop,
}

pub(crate) async fn run_request(
    shared: &Shared,
    request: &TurnRequest,
    running: Running<'_>,
) -> Result<FinishReason, Failure> {
    let sandbox = open_sandbox(shared, request)?;
    // Built fresh for every turn from this turn's context: a role change shows on the next turn.
    let agent = build_agent(
        &request.context,
        &shared.runtime.skills,
        Mounts {
            sandbox: sandbox.is_some(),
        },
    );
    let store = PgTurnStore::new(
        shared.pool.clone(),
        request,
        budget::daily_limits(&shared.settings.budget),
    )
    .with_approval_ttl(std::time::Duration::from_secs(
        shared.settings.agent.approval_ttl_secs.max(1),
    ));
    let deps = TurnDeps {
        runtime: &shared.runtime,
        turn: request,
        store: &store,
        journal: running.journal,
        budget: running.budget,
        stop: running.stop,
        events: running.events,
        sandbox: sandbox.as_ref(),
    };
    rover_agent::run(&agent, deps)
        .await
        .map_err(|error| failure(shared, error))
}

/// The thread's file area, when the worker mounts sandboxes.
fn open_sandbox(shared: &Shared, request: &TurnRequest) -> Result<Option<Sandbox>, Failure> {
    let Some(dir) = &shared.settings.agent.sandbox_dir else {
        return Ok(None);
    };
    // Per school (and user): a thread is keyed by (school, id), so the same id in two schools is
    // two threads, and must be two file areas.
    let owner = SandboxOwner {
        school: request.context.user_details.school.id,
        user: request.context.user_details.user_id,
        thread: request.thread_id,
    };
    Sandbox::open(dir, owner, shared.settings.agent.sandbox_limits())
        .map(Some)
        .map_err(|e| Failure {
            code: ErrorCode::Internal,
            message: format!("The chat's files are unavailable: {e}"),
        })
}

/// What the client reads of a failed turn.
fn failure(shared: &Shared, error: TurnError) -> Failure {
    let code = match error.kind() {
        FailureKind::Budget => {
            if let TurnError::Budget(spent) = &error {
                count_spent(shared, spent);
            }
            ErrorCode::BudgetExceeded
        }
        FailureKind::Model => ErrorCode::ModelError,
        FailureKind::Invalid => ErrorCode::InvalidRequest,
        FailureKind::Unavailable => ErrorCode::Unavailable,
        FailureKind::Internal => ErrorCode::Internal,
    };
    let message = match error {
        // Which statement failed is in the log; the staff member reads what to do.
        TurnError::Store(rover_agent::StoreError::Failed { .. }) => {
            "The assistant could not load or save the conversation. Please try again.".to_owned()
        }
        error => error.to_string(),
    };
    Failure { code, message }
}

/// Why a turn failed, for the client.
pub(crate) struct Failure {
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
}

/// A turn stopped by a spent budget is counted by limit.
fn count_spent(shared: &Shared, spent: &BudgetError) {
    shared
        .turns
        .budget_exceeded
        .get_or_create(&rover_telemetry::metrics::LimitLabels {
            limit: spent.limit(),
        })
        .inc();
}
