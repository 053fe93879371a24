//! Token usage and budgets: every model call of a turn reserves its tokens before it is made and
//! settles them after, per turn, user, school and (UTC) day.
//!
//! Reservations are checked and taken under a transaction-scoped advisory lock on the school and
//! day, so twenty concurrent turns of one user cannot each see room that only one of them has:
//! the limits fail closed. What a settled call used replaces what it reserved.

use chrono::NaiveDate;
use rover_contracts::ids::{TurnId, UserId};

use rover_domain::{DomainError, TenantTx};

/// The daily limits a reservation is checked against; `0` means no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DailyLimits {
    /// Tokens one user may use (and hold reserved) in a day.
    pub user_tokens: u64,
    /// Tokens one school may use (and hold reserved) in a day.
    pub school_tokens: u64,
}

/// Which daily limit a reservation would have passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DailyLimit {
    /// The user's.
    User(u64),
    /// The school's.
    School(u64),
}

/// A turn's usage so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, sqlx::FromRow)]
pub struct TurnUsage {
    /// Prompt tokens, as the model reported them.
    pub input_tokens: i64,
    /// Completion tokens, as the model reported them.
    pub output_tokens: i64,
    /// Model calls settled.
    pub model_calls: i32,
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Reserves `tokens` for a model call of `turn` on `day`, unless the user's or the school's use
/// and reservations that day would then pass a limit. Commit the transaction to keep it.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", turn_id = %turn, tokens))]
pub async fn reserve(
    tx: &mut TenantTx,
    user: UserId,
    turn: TurnId,
    day: NaiveDate,
    tokens: u64,
    limits: DailyLimits,
) -> Result<Result<(), DailyLimit>, DomainError> {
    let school = tx.school_id().as_uuid();
    // Its own statement: under READ COMMITTED a statement reads the snapshot taken when it
    // started, so sums read in the statement that waited for the lock could miss the commit of
    // the reservation it waited for.
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('rover.budget:' || $1::text || ':' || $2::text, 0))")
        .bind(school)
        .bind(day)
        .execute(tx.connection())
        .await?;
    let (user_used, school_used): (i64, i64) = sqlx::query_as(
        "SELECT coalesce(sum(input_tokens + output_tokens + reserved_tokens) FILTER (WHERE user_id = $1), 0)::bigint, \
                coalesce(sum(input_tokens + output_tokens + reserved_tokens), 0)::bigint \
         FROM token_usage WHERE day = $2",
    )
    .bind(user.as_uuid())
    .bind(day)
    .fetch_one(tx.connection())
    .await?;
    let over =
        |used: i64, limit: u64| limit > 0 && used.saturating_add(to_i64(tokens)) > to_i64(limit);
    if over(user_used, limits.user_tokens) {
        return Ok(Err(DailyLimit::User(limits.user_tokens)));
    }
    if over(school_used, limits.school_tokens) {
        return Ok(Err(DailyLimit::School(limits.school_tokens)));
    }
    sqlx::query(
        "INSERT INTO token_usage (school_id, turn_id, user_id, day, reserved_tokens) \
         VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (school_id, turn_id) DO UPDATE \
         SET reserved_tokens = token_usage.reserved_tokens + EXCLUDED.reserved_tokens",
    )
    .bind(school)
    .bind(turn.as_uuid())
    .bind(user.as_uuid())
    .bind(day)
    .bind(to_i64(tokens))
    .execute(tx.connection())
    .await?;
    Ok(Ok(()))
}

/// Settles a model call of `turn`: releases its reservation of `reserved` tokens and records
/// what it used.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", turn_id = %turn))]
pub async fn settle(
    tx: &mut TenantTx,
    turn: TurnId,
    reserved: u64,
    input_tokens: u64,
    output_tokens: u64,
) -> Result<(), DomainError> {
    sqlx::query(
        "UPDATE token_usage SET reserved_tokens = greatest(reserved_tokens - $2, 0), \
         input_tokens = input_tokens + $3, output_tokens = output_tokens + $4, \
         model_calls = model_calls + 1 WHERE turn_id = $1",
    )
    .bind(turn.as_uuid())
    .bind(to_i64(reserved))
    .bind(to_i64(input_tokens))
    .bind(to_i64(output_tokens))
    .execute(tx.connection())
    .await?;
    Ok(())
}

/// What `turns` together have used so far (a turn's approval chain and the turn itself).
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", turns = turns.len()))]
pub async fn chain_usage(tx: &mut TenantTx, turns: &[TurnId]) -> Result<TurnUsage, DomainError> {
    let ids: Vec<uuid::Uuid> = turns
        .iter()
        .map(rover_contracts::ids::TurnId::as_uuid)
        .collect();
    Ok(sqlx::query_as(
        "SELECT coalesce(sum(input_tokens), 0)::bigint AS input_tokens, \
                coalesce(sum(output_tokens), 0)::bigint AS output_tokens, \
                coalesce(sum(model_calls), 0)::int AS model_calls \
         FROM token_usage WHERE turn_id = ANY($1)",
    )
    .bind(&ids)
    .fetch_one(tx.connection())
    .await?)
}

/// What `turn` has used so far (zero when it made no model call).
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", turn_id = %turn))]
pub async fn turn_usage(tx: &mut TenantTx, turn: TurnId) -> Result<TurnUsage, DomainError> {
    Ok(sqlx::query_as(
        "SELECT input_tokens, output_tokens, model_calls FROM token_usage WHERE turn_id = $1",
    )
    .bind(turn.as_uuid())
    .fetch_optional(tx.connection())
    .await?
    .unwrap_or_default())
}
