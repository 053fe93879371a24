//! Token usage and budgets: every model call of a turn reserves its tokens before it is made and
//! settles them after, per turn, user, school and (UTC) day.
//!
//! Reservations are checked and taken under a transaction-scoped advisory lock on the school and
//! day, so twenty concurrent turns of one user cannot each see room that only one of them has:
//! the limits fail closed. What a settled call used replaces what it reserved. The check reads
//! each user's total of the day (`token_usage_days`, migration `0063`: used + reserved tokens,
//! kept as the ledger changes), so it costs a row per user of the day however many calls they
//! made.

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
    // started, so totals read in the statement that waited for the lock could miss the commit of
    // the reservation it waited for.
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('rover.budget:' || $1::text || ':' || $2::text, 0))")
        .bind(school)
        .bind(day)
        .execute(tx.connection())
        .await?;
    // The day's totals: one row per user who used tokens that day, however many calls they made.
    let (user_used, school_used): (i64, i64) = sqlx::query_as(
        "SELECT coalesce(sum(tokens) FILTER (WHERE user_id = $2), 0)::bigint, \
                coalesce(sum(tokens), 0)::bigint \
         FROM token_usage_days WHERE day = $1",
    )
    .bind(day)
    .bind(user.as_uuid())
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
    // A turn's reservations count on the day of its first (a turn that runs past midnight).
    let counted: NaiveDate = sqlx::query_scalar(
        "INSERT INTO token_usage (school_id, turn_id, user_id, day, reserved_tokens) \
         VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (school_id, turn_id) DO UPDATE \
         SET reserved_tokens = token_usage.reserved_tokens + EXCLUDED.reserved_tokens \
         RETURNING day",
    )
    .bind(school)
    .bind(turn.as_uuid())
    .bind(user.as_uuid())
    .bind(day)
    .bind(to_i64(tokens))
    .fetch_one(tx.connection())
    .await?;
    add_to_total(tx, counted, user, to_i64(tokens)).await?;
    Ok(Ok(()))
}

/// Adds `tokens` (negative: takes them) to `user`'s total of `day`.
async fn add_to_total(
    tx: &mut TenantTx,
    day: NaiveDate,
    user: UserId,
    tokens: i64,
) -> Result<(), DomainError> {
    if tokens == 0 {
        return Ok(());
    }
    let school = tx.school_id().as_uuid();
    sqlx::query(
        "INSERT INTO token_usage_days AS d (school_id, day, user_id, tokens) \
         VALUES ($1, $2, $3, $4) \
         ON CONFLICT (school_id, day, user_id) DO UPDATE SET tokens = d.tokens + EXCLUDED.tokens",
    )
    .bind(school)
    .bind(day)
    .bind(user.as_uuid())
    .bind(tokens)
    .execute(tx.connection())
    .await?;
    Ok(())
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
    // What the day's total changes by: the usage, less the reservation it releases. The turn's
    // row is locked first, then the user's total, as a reservation takes them.
    let settled: Option<(NaiveDate, uuid::Uuid, i64)> = sqlx::query_as(
        "UPDATE token_usage t SET reserved_tokens = greatest(t.reserved_tokens - $2, 0), \
         input_tokens = t.input_tokens + $3, output_tokens = t.output_tokens + $4, \
         model_calls = t.model_calls + 1 \
         FROM (SELECT turn_id, reserved_tokens FROM token_usage WHERE turn_id = $1 FOR UPDATE) old \
         WHERE t.turn_id = old.turn_id \
         RETURNING t.day, t.user_id, $3 + $4 - least(old.reserved_tokens, $2)",
    )
    .bind(turn.as_uuid())
    .bind(to_i64(reserved))
    .bind(to_i64(input_tokens))
    .bind(to_i64(output_tokens))
    .fetch_optional(tx.connection())
    .await?;
    if let Some((day, user, change)) = settled {
        add_to_total(tx, day, UserId::from_uuid(user), change).await?;
    }
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
