//! [`PgTurnStore`]: the agent's [`TurnStore`] over Postgres, for one turn. Each method is one
//! short transaction in the turn's school (row-level security pins it there); the turn's school,
//! user, thread and chain are fixed when the store is made, from the verified request.

use chrono::Utc;
use futures::FutureExt as _;
use futures::future::BoxFuture;
use rover_agent::approval::{Gate, GateQuery};
use rover_agent::{Loaded, NewArtifact, Reserved, StepPart, StoreError, Summary, TurnStore};
use rover_contracts::ids::{ArtifactId, SchoolId, ThreadId, TurnId, UserId};
use rover_contracts::wire::{TokenUsage, TurnInput, TurnRequest};
use rover_domain::{DomainError, TenantTx};
use rover_settings::Backoff;
use serde_json::Value;

use crate::approvals::{self, ApprovalState, GatedCall};
use crate::usage::{self, DailyLimit, DailyLimits};
use crate::{artifacts, conversation_log, journal, open_turns, threads};

/// One turn's state in Postgres.
#[derive(Debug, Clone)]
pub struct PgTurnStore {
    pool: sqlx::PgPool,
    school: SchoolId,
    user: UserId,
    thread: ThreadId,
    turn: TurnId,
    /// The turn's approval chain: the turns it continues (root first), then itself.
    chain: Vec<TurnId>,
    daily: DailyLimits,
    /// How long an approval this turn asks for can be answered.
    approval_ttl: std::time::Duration,
}

/// How long an approval can be answered unless the worker is told otherwise
/// (`agent.approval_ttl_secs`).
pub const DEFAULT_APPROVAL_TTL: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// Which turn a [`PgTurnStore`] is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnKey {
    /// The tenant.
    pub school: SchoolId,
    /// The staff member whose turn it is.
    pub user: UserId,
    /// The chat.
    pub thread: ThreadId,
    /// The turn.
    pub turn: TurnId,
    /// The paused turns it continues after an approval, root first (none for a new message).
    pub continues: Vec<TurnId>,
}

/// Attempts at recording a part of a turn, and the pauses between them (doubling, capped): about
/// 4.5 s in all, longer than a local Postgres restart.
const RECORD_ATTEMPTS: u32 = 8;
const RECORD_FIRST_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);
const RECORD_MAX_PAUSE: std::time::Duration = std::time::Duration::from_secs(1);

/// What a call was refused for when its approval cannot be used.
const VOID: &str = "This action was not approved for this request (the approval was used, \
                    expired, or was for other details), so it was not done.";

impl PgTurnStore {
    /// The store of `request`'s turn, drawing on the user's and school's `daily` token limits.
    pub fn new(pool: sqlx::PgPool, request: &TurnRequest, daily: DailyLimits) -> Self {
        let key = TurnKey {
            school: request.context.user_details.school.id,
            user: request.context.user_details.user_id,
            thread: request.thread_id,
            turn: request.turn_id,
            continues: match &request.input {
                TurnInput::Continue { chain } => chain.clone(),
                _ => Vec::new(),
            },
        };
        Self::for_turn(pool, key, daily)
    }

    /// The store of the turn `key` names.
    pub fn for_turn(pool: sqlx::PgPool, key: TurnKey, daily: DailyLimits) -> Self {
        let mut chain = key.continues;
        chain.push(key.turn);
        Self {
            pool,
            school: key.school,
            user: key.user,
            thread: key.thread,
            turn: key.turn,
            chain,
            daily,
            approval_ttl: DEFAULT_APPROVAL_TTL,
        }
    }

    /// The same store, its approvals answerable for `ttl` (then they expire).
    #[must_use]
    pub fn with_approval_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.approval_ttl = ttl;
        self
    }

    async fn begin(&self) -> Result<TenantTx, DomainError> {
        rover_domain::begin_tenant(&self.pool, self.school).await
    }

    async fn load_now(&self) -> Result<Loaded, DomainError> {
        let mut tx = self.begin().await?;
        // A continuation starts again from its chain's first message, after the thread before it.
        let (history, first) = match self.chain.as_slice() {
            [root, _, ..] => approvals::history_before(&mut tx, self.thread, *root).await?,
            _ => (conversation_log::history(&mut tx, self.thread).await?, None),
        };
        let summary = threads::summary(&mut tx, self.thread)
            .await?
            .map(|(covers, text)| Summary { covers, text });
        tx.commit().await?;
        Ok(Loaded {
            history,
            first,
            summary,
        })
    }

    /// Records `part` and reads whether the turn was asked to stop, in one transaction.
    async fn record_once(&self, part: &StepPart) -> Result<bool, DomainError> {
        let mut tx = self.begin().await?;
        journal::record_step(&mut tx, self.thread, self.turn, part).await?;
        let stopped = open_turns::stop_requested(&mut tx, self.turn).await?;
        tx.commit().await?;
        Ok(stopped)
    }

    /// A part is recorded after what it records happened (a write committed by the tool server),
    /// so a failed record is tried again for a few seconds — a Postgres restart or failover —
    /// before the turn gives up (recording is idempotent: the first record wins).
    async fn record_now(&self, part: StepPart) -> Result<bool, DomainError> {
        let mut pause = Backoff::new(RECORD_FIRST_PAUSE, RECORD_MAX_PAUSE);
        let mut attempt = 1;
        loop {
            match self.record_once(&part).await {
                Err(error) if attempt < RECORD_ATTEMPTS => {
                    tracing::warn!(%error, attempt, "could not record the turn's progress; trying again");
                    tokio::time::sleep(pause.next_delay()).await;
                    attempt += 1;
                }
                recorded => return recorded,
            }
        }
    }

    async fn gate_now(&self, query: GateQuery) -> Result<Gate, DomainError> {
        let mut tx = self.begin().await?;
        let call = GatedCall {
            thread: self.thread,
            chain: self.chain.clone(),
            user: self.user,
            call_id: query.call_id,
            tool: query.tool,
            input: query.input,
        };
        // An answered call is decided by its row, whatever the policy says now.
        let needs = approvals::needs_approval(&mut tx, &call.tool, call.user).await?;
        let state = match approvals::decided(&mut tx, &call).await? {
            Some(state) => state,
            None if !needs => {
                tx.commit().await?;
                return Ok(Gate::Run);
            }
            None => approvals::approval_for(&mut tx, &call, self.approval_ttl).await?,
        };
        tx.commit().await?;
        Ok(match state {
            ApprovalState::Pending { approval_id } => Gate::Pending {
                approval_id: approval_id.to_string(),
            },
            ApprovalState::Approved { edited: None } => Gate::Run,
            ApprovalState::Approved {
                edited: Some(input),
            } => Gate::RunEdited { input },
            ApprovalState::Denied { reason } => Gate::Denied { reason },
            ApprovalState::Void => Gate::Refused(VOID.to_owned()),
        })
    }

    async fn reserve_now(&self, tokens: u64) -> Result<Reserved, DomainError> {
        let mut tx = self.begin().await?;
        let day = Utc::now().date_naive();
        let reserved =
            usage::reserve(&mut tx, self.user, self.turn, day, tokens, self.daily).await?;
        Ok(match reserved {
            Ok(()) => {
                tx.commit().await?;
                Ok(())
            }
            Err(DailyLimit::User(limit)) => Err(rover_agent::DailyLimit::User(limit)),
            Err(DailyLimit::School(limit)) => Err(rover_agent::DailyLimit::School(limit)),
        })
    }

    async fn settle_now(&self, reserved: u64, used: TokenUsage) -> Result<(), DomainError> {
        let mut tx = self.begin().await?;
        let (input, output) = (used.input_tokens, used.output_tokens);
        usage::settle(&mut tx, self.turn, reserved, input, output).await?;
        tx.commit().await
    }

    async fn save_artifact_now(&self, artifact: NewArtifact) -> Result<ArtifactId, DomainError> {
        let mut tx = self.begin().await?;
        let id = artifacts::save_artifact(
            &mut tx,
            self.thread,
            self.user,
            &artifact.title,
            &artifact.media_type,
            &artifact.content,
        )
        .await?;
        tx.commit().await?;
        Ok(id)
    }

    async fn save_summary_now(&self, summary: Summary) -> Result<(), DomainError> {
        let mut tx = self.begin().await?;
        threads::save_summary(&mut tx, self.thread, summary.covers, &summary.text).await?;
        tx.commit().await
    }

    async fn append_now(&self, messages: Vec<Value>) -> Result<(), DomainError> {
        let mut tx = self.begin().await?;
        conversation_log::append(&mut tx, self.thread, self.turn, &messages).await?;
        tx.commit().await
    }
}

/// `action` failed with `error`, logged where it happened.
fn failed(action: &'static str) -> impl FnOnce(DomainError) -> StoreError {
    move |error| {
        tracing::error!(%error, "could not {action}");
        StoreError::failed(action, error)
    }
}

impl TurnStore for PgTurnStore {
    fn load(&self) -> BoxFuture<'_, Result<Loaded, StoreError>> {
        let loading = self.load_now();
        async { loading.await.map_err(failed("load the conversation")) }.boxed()
    }

    fn record(&self, part: StepPart) -> BoxFuture<'_, Result<bool, StoreError>> {
        let recording = self.record_now(part);
        async {
            recording
                .await
                .map_err(failed("record the turn's progress"))
        }
        .boxed()
    }

    fn gate(&self, call: GateQuery) -> BoxFuture<'_, Result<Gate, StoreError>> {
        let gating = self.gate_now(call);
        async { gating.await.map_err(failed("read the call's approval")) }.boxed()
    }

    fn reserve(&self, tokens: u64) -> BoxFuture<'_, Result<Reserved, StoreError>> {
        let reserving = self.reserve_now(tokens);
        async {
            reserving
                .await
                .map_err(failed("reserve tokens in the ledger"))
        }
        .boxed()
    }

    fn settle(&self, reserved: u64, used: TokenUsage) -> BoxFuture<'_, Result<(), StoreError>> {
        let settling = self.settle_now(reserved, used);
        async {
            settling
                .await
                .map_err(failed("settle tokens in the ledger"))
        }
        .boxed()
    }

    fn save_artifact(
        &self,
        artifact: NewArtifact,
    ) -> BoxFuture<'_, Result<ArtifactId, StoreError>> {
        let saving = self.save_artifact_now(artifact);
        async { saving.await.map_err(failed("save the artifact")) }.boxed()
    }

    fn save_summary(&self, summary: Summary) -> BoxFuture<'_, Result<(), StoreError>> {
        let saving = self.save_summary_now(summary);
        async { saving.await.map_err(failed("save the thread's summary")) }.boxed()
    }

    fn append(&self, messages: Vec<Value>) -> BoxFuture<'_, Result<(), StoreError>> {
        let appending = self.append_now(messages);
        async { appending.await.map_err(failed("save the conversation")) }.boxed()
    }
}
