//! Open turns (`open_turns`): the turns queued or running, which the per-user and per-school turn
//! limits count and behind which a thread's next turn waits, and the stops asked of them.

use rover_contracts::ids::{ThreadId, TurnId, UserId};

use rover_domain::{DomainError, TenantTx};

/// How many turns may be open (queued or running) at once, and for how long an open turn counts
/// at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnLimits {
    /// Open turns per user, across every gateway; `0` means no limit.
    pub per_user: u32,
    /// Open turns per school, across every gateway; `0` means no limit.
    pub per_school: u32,
    /// An open turn stops counting this long after it opened, even if nothing closed it (its
    /// turn identity has expired by then, so the turn cannot act any more).
    pub ttl: std::time::Duration,
}

/// Why [`open_turn`] did not open a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnRefused {
    /// The thread already has a turn queued or running.
    ThreadBusy,
    /// The user has `per_user` turns open.
    UserBusy,
    /// The school has `per_school` turns open.
    SchoolBusy,
}

/// What [`open_turn`] does on a thread that has a turn open already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenBusy {
    /// Refuse the new turn ([`TurnRefused::ThreadBusy`]).
    Refuse,
    /// Open it behind the thread's open turns: it runs once they have closed
    /// ([`waits_behind`]).
    Queue,
}

/// Opens `turn` on `thread` for `user`, within `limits`: it counts until [`close_turn`] (or its
/// `ttl`). Checks and insert are serialised per school (a transaction-scoped advisory lock), so
/// concurrent requests cannot both take the last place; hold `tx` only briefly after this.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread, turn_id = %turn))]
pub async fn open_turn(
    tx: &mut TenantTx,
    thread: ThreadId,
    turn: TurnId,
    user: UserId,
    limits: TurnLimits,
    when_busy: WhenBusy,
) -> Result<Result<(), TurnRefused>, DomainError> {
    let school = tx.school_id().as_uuid();
    lock_open_turns(tx).await?;
    // Expired rows (turns nothing closed) count for nothing: the school's are swept here.
    sqlx::query("DELETE FROM open_turns WHERE expires_at <= now()")
        .execute(tx.connection())
        .await?;
    let (thread_open, user_open, school_open): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE thread_id = $1), count(*) FILTER (WHERE user_id = $2), \
         count(*) FROM open_turns",
    )
    .bind(thread.as_uuid())
    .bind(user.as_uuid())
    .fetch_one(tx.connection())
    .await?;
    let full = |limit: u32, open: i64| limit > 0 && open >= i64::from(limit);
    if thread_open > 0 && when_busy == WhenBusy::Refuse {
        return Ok(Err(TurnRefused::ThreadBusy));
    }
    if full(limits.per_user, user_open) {
        return Ok(Err(TurnRefused::UserBusy));
    }
    if full(limits.per_school, school_open) {
        return Ok(Err(TurnRefused::SchoolBusy));
    }
    let ttl_secs = f64::from(u32::try_from(limits.ttl.as_secs()).unwrap_or(u32::MAX));
    sqlx::query(
        "INSERT INTO open_turns (school_id, turn_id, thread_id, user_id, expires_at) \
         VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))",
    )
    .bind(school)
    .bind(turn.as_uuid())
    .bind(thread.as_uuid())
    .bind(user.as_uuid())
    .bind(ttl_secs)
    .execute(tx.connection())
    .await?;
    Ok(Ok(()))
}

/// Closes `turn`: it no longer counts against its user, school or thread. Closing a closed (or
/// unknown) turn does nothing, so a redelivered turn may close again. Returns the thread when
/// other turns of it are still open (queued behind this one), so their workers can be told.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", turn_id = %turn))]
pub async fn close_turn(tx: &mut TenantTx, turn: TurnId) -> Result<Option<ThreadId>, DomainError> {
    let waiting: Option<uuid::Uuid> = sqlx::query_scalar(
        "WITH closed AS (DELETE FROM open_turns WHERE turn_id = $1 RETURNING thread_id), \
         active AS (UPDATE threads SET last_activity_at = now() \
             WHERE id IN (SELECT thread_id FROM closed)) \
         SELECT c.thread_id FROM closed c \
         WHERE EXISTS (SELECT 1 FROM open_turns o WHERE o.thread_id = c.thread_id AND o.turn_id <> $1)",
    )
    .bind(turn.as_uuid())
    .fetch_optional(tx.connection())
    .await?;
    Ok(waiting.map(ThreadId::from_uuid))
}

/// Asks every open turn of `thread` to stop (the running one, and any queued behind it): marks
/// them, and returns those not marked before, for the caller to tell the workers after it
/// commits. A worker sees the mark at its turn's next recorded step even if the word is lost.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread))]
pub async fn request_stop(tx: &mut TenantTx, thread: ThreadId) -> Result<Vec<TurnId>, DomainError> {
    mark_stop(tx, "thread_id", thread.as_uuid()).await
}

/// [`request_stop`] for every open turn of `user` (all their chats).
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn request_stop_of_user(
    tx: &mut TenantTx,
    user: UserId,
) -> Result<Vec<TurnId>, DomainError> {
    mark_stop(tx, "user_id", user.as_uuid()).await
}

/// Serialises, per school, what opens turns with what stops them, for the rest of `tx`: a stop
/// that arrives while a message's turn is being opened waits for that transaction, then sees
/// (and stops) the turn, instead of finding nothing and letting it run.
async fn lock_open_turns(tx: &mut TenantTx) -> Result<(), DomainError> {
    let school = tx.school_id().as_uuid();
    sqlx::query(
        "SELECT pg_advisory_xact_lock(hashtextextended('rover.open_turns:' || $1::text, 0))",
    )
    .bind(school)
    .execute(tx.connection())
    .await?;
    Ok(())
}

/// Marks the open turns whose `column` is `id` as asked to stop; returns those newly marked.
async fn mark_stop(
    tx: &mut TenantTx,
    column: &'static str,
    id: uuid::Uuid,
) -> Result<Vec<TurnId>, DomainError> {
    lock_open_turns(tx).await?;
    let turns: Vec<uuid::Uuid> = sqlx::query_scalar(&format!(
        "UPDATE open_turns SET stop_requested_at = now() \
         WHERE {column} = $1 AND expires_at > now() AND stop_requested_at IS NULL \
         RETURNING turn_id"
    ))
    .bind(id)
    .fetch_all(tx.connection())
    .await?;
    Ok(turns.into_iter().map(TurnId::from_uuid).collect())
}

/// Whether `turn` was asked to stop.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", turn_id = %turn))]
pub async fn stop_requested(tx: &mut TenantTx, turn: TurnId) -> Result<bool, DomainError> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM open_turns WHERE turn_id = $1 AND stop_requested_at IS NOT NULL)",
    )
    .bind(turn.as_uuid())
    .fetch_one(tx.connection())
    .await?)
}

/// Whether `turn` waits behind another open turn of its thread (one opened before it that has
/// not closed or expired): it may not run yet.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", turn_id = %turn))]
pub async fn waits_behind(tx: &mut TenantTx, turn: TurnId) -> Result<bool, DomainError> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM open_turns me JOIN open_turns ahead \
           ON ahead.thread_id = me.thread_id AND ahead.position < me.position \
         WHERE me.turn_id = $1 AND ahead.expires_at > now())",
    )
    .bind(turn.as_uuid())
    .fetch_one(tx.connection())
    .await?)
}
