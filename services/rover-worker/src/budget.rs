//! The worker's side of budgets: the limits (`budget.*` settings) of a turn, and of the user's
//! and school's UTC day in the Postgres ledger a turn's store reserves and settles tokens in.

use rover_agent::budget::{TurnBudget, TurnLimits};
use rover_contracts::ids::{SchoolId, TurnId};
use rover_contracts::wire::TokenUsage;
use rover_turnstore::usage::DailyLimits;
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

/// A turn's own limits. The daily ledger it draws on is the turn's store
/// (`rover_turnstore::PgTurnStore`, with [`daily_limits`]).
pub(crate) fn turn_budget(settings: &BudgetSettings) -> TurnBudget {
    TurnBudget::new(TurnLimits {
        tokens: settings.turn_tokens,
        model_calls: settings.turn_model_calls,
        tool_calls: settings.turn_tool_calls,
        output_reserve: settings.output_reserve_tokens,
    })
}

/// What a user's and a school's day may spend.
pub(crate) fn daily_limits(settings: &BudgetSettings) -> DailyLimits {
    DailyLimits {
        user_tokens: settings.user_daily_tokens,
        school_tokens: settings.school_daily_tokens,
    }
}

/// What `turn` used, as settled in the ledger (across every delivery of the turn).
pub(crate) async fn settled_usage(
    pool: &sqlx::PgPool,
    school: SchoolId,
    turn: TurnId,
) -> Result<TokenUsage, rover_domain::DomainError> {
    let mut tx = rover_domain::begin_tenant(pool, school).await?;
    let usage = rover_turnstore::usage::turn_usage(&mut tx, turn).await?;
    tx.commit().await?;
    Ok(TokenUsage {
        input_tokens: u64::try_from(usage.input_tokens).unwrap_or_default(),
        output_tokens: u64::try_from(usage.output_tokens).unwrap_or_default(),
    })
}
