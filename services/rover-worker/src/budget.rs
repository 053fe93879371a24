//! The worker's side of budgets: the limits (`budget.*` settings) and the Postgres ledger a
//! turn's model calls reserve and settle their tokens in, per user, school and UTC day.

use chrono::Utc;
use futures::FutureExt as _;
use futures::future::BoxFuture;
use rover_agent::budget::{BudgetError, Ledger, TurnBudget, TurnLimits};
use rover_contracts::ids::{SchoolId, TurnId, UserId};
use rover_contracts::wire::{TokenUsage, TurnRequest};
use rover_domain::usage::{DailyLimit, DailyLimits};
use serde::{Deserialize, Serialize};

/// What a turn, and a user's and a school's day, may spend; `0` means no limit.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct BudgetSettings {
    /// Tokens (input + output, as the model reports them) one turn may use.
    pub turn_tokens: u64,
    /// Model calls one turn may make, Rover's and its subagents' together.
    pub turn_model_calls: u32,
    /// Tool calls one turn may make, Rover's and its subagents' together.
    pub turn_tool_calls: u32,
    /// Tokens one user may use in a (UTC) day.
    pub user_daily_tokens: u64,
    /// Tokens one school may use in a (UTC) day.
    pub school_daily_tokens: u64,
    /// Tokens held for a model call's output until it reports what it used.
    pub output_reserve_tokens: u64,
}

impl Default for BudgetSettings {
    fn default() -> Self {
        Self {
            turn_tokens: 200_000,
            turn_model_calls: 24,
            turn_tool_calls: 48,
            user_daily_tokens: 2_000_000,
            school_daily_tokens: 50_000_000,
            output_reserve_tokens: 2_000,
        }
    }
}

/// A turn's budget, drawing on the Postgres ledger.
pub(crate) fn turn_budget(
    settings: &BudgetSettings,
    pool: &sqlx::PgPool,
    request: &TurnRequest,
) -> TurnBudget {
    let limits = TurnLimits {
        tokens: settings.turn_tokens,
        model_calls: settings.turn_model_calls,
        tool_calls: settings.turn_tool_calls,
        output_reserve: settings.output_reserve_tokens,
    };
    let ledger = PgLedger {
        pool: pool.clone(),
        school: request.context.user_details.school.id,
        user: request.context.user_details.user_id,
        turn: request.turn_id,
        limits: DailyLimits {
            user_tokens: settings.user_daily_tokens,
            school_tokens: settings.school_daily_tokens,
        },
    };
    TurnBudget::new(limits, Some(Box::new(ledger)))
}

/// What `turn` used, as settled in the ledger (across every delivery of the turn).
pub(crate) async fn settled_usage(
    pool: &sqlx::PgPool,
    school: SchoolId,
    turn: TurnId,
) -> Result<TokenUsage, rover_domain::DomainError> {
    let mut tx = rover_domain::begin_tenant(pool, school).await?;
    let usage = rover_domain::usage::turn_usage(&mut tx, turn).await?;
    tx.commit().await?;
    Ok(TokenUsage {
        input_tokens: u64::try_from(usage.input_tokens).unwrap_or_default(),
        output_tokens: u64::try_from(usage.output_tokens).unwrap_or_default(),
    })
}

struct PgLedger {
    pool: sqlx::PgPool,
    school: SchoolId,
    user: UserId,
    turn: TurnId,
    limits: DailyLimits,
}

impl Ledger for PgLedger {
    fn reserve(&self, tokens: u64) -> BoxFuture<'_, Result<(), BudgetError>> {
        async move {
            let fail = |e: rover_domain::DomainError| BudgetError::Ledger(e.to_string());
            let mut tx = rover_domain::begin_tenant(&self.pool, self.school)
                .await
                .map_err(fail)?;
            let day = Utc::now().date_naive();
            let reserved = rover_domain::usage::reserve(
                &mut tx,
                self.user,
                self.turn,
                day,
                tokens,
                self.limits,
            )
            .await
            .map_err(fail)?;
            match reserved {
                Ok(()) => tx.commit().await.map_err(fail),
                Err(DailyLimit::User(limit)) => Err(BudgetError::UserDaily(limit)),
                Err(DailyLimit::School(limit)) => Err(BudgetError::SchoolDaily(limit)),
            }
        }
        .boxed()
    }

    fn settle(&self, reserved: u64, used: TokenUsage) -> BoxFuture<'_, Result<(), String>> {
        async move {
            let mut tx = rover_domain::begin_tenant(&self.pool, self.school)
                .await
                .map_err(|e| e.to_string())?;
            rover_domain::usage::settle(
                &mut tx,
                self.turn,
                reserved,
                used.input_tokens,
                used.output_tokens,
            )
            .await
            .map_err(|e| e.to_string())?;
            tx.commit().await.map_err(|e| e.to_string())
        }
        .boxed()
    }
}
