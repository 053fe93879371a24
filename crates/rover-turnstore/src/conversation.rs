//! Conversations: threads (each belongs to one user of one school, keyed by `(school, id)`), the
//! model-level history of a thread, the events of each turn (the replay log), and the open turns
//! (queued or running) that the turn limits count.

use rover_contracts::ids::{ThreadId, TurnId, UserId};
use serde_json::Value;

use rover_domain::{DomainError, TenantTx};

/// Makes sure `thread` exists in the caller's school and belongs to `user`: creates it on first use;
/// another user's thread is `NotFound`, exactly like a thread that does not exist. The same id in
/// another school is another thread. A deleted thread is not created again (a turn of a deleted
/// chat, still queued, finds it `NotFound`); only the staff member's new message opens it again
/// ([`open_thread`]).
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread))]
pub async fn ensure_thread(
    tx: &mut TenantTx,
    thread: ThreadId,
    user: UserId,
) -> Result<(), DomainError> {
    own_thread(tx, thread, user, false).await
}

/// The gateway's [`ensure_thread`]: a staff member's message opens `thread` (creating it on first
/// use — afresh when it was deleted earlier: the message is theirs to send); another user's thread
/// is `NotFound`, exactly like one that does not exist.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread))]
pub async fn open_thread(
    tx: &mut TenantTx,
    thread: ThreadId,
    user: UserId,
) -> Result<(), DomainError> {
    own_thread(tx, thread, user, true).await
}

/// [`ensure_thread`] and [`open_thread`] in one statement: the thread created unless it exists
/// (or, unless `reopen`, was deleted), then found `user`'s or `NotFound`.
async fn own_thread(
    tx: &mut TenantTx,
    thread: ThreadId,
    user: UserId,
    reopen: bool,
) -> Result<(), DomainError> {
    let school = tx.school_id().as_uuid();
    let (forget, unless_deleted) = if reopen {
        (
            "forgotten AS (DELETE FROM deleted_threads WHERE thread_id = $1), ",
            "",
        )
    } else {
        (
            "",
            "WHERE NOT EXISTS (SELECT 1 FROM deleted_threads WHERE thread_id = $1) ",
        )
    };
    // The last SELECT sees the threads as the statement began: a row just created comes from
    // `created`.
    let owner: Option<uuid::Uuid> = sqlx::query_scalar(&format!(
        "WITH {forget}created AS (INSERT INTO threads (id, school_id, user_id) \
             SELECT $1, $2, $3 {unless_deleted}\
             ON CONFLICT (school_id, id) DO NOTHING RETURNING user_id) \
         SELECT coalesce((SELECT user_id FROM created), (SELECT user_id FROM threads WHERE id = $1))"
    ))
    .bind(thread.as_uuid())
    .bind(school)
    .bind(user.as_uuid())
    .fetch_one(tx.connection())
    .await?;
    match owner {
        Some(owner) if owner == user.as_uuid() => Ok(()),
        _ => Err(DomainError::NotFound(
            "No conversation with that id was found.".to_owned(),
        )),
    }
}

/// The thread's model-level history, oldest first.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread))]
pub async fn history(tx: &mut TenantTx, thread: ThreadId) -> Result<Vec<Value>, DomainError> {
    Ok(sqlx::query_scalar(
        "SELECT message FROM conversation_log WHERE thread_id = $1 ORDER BY position",
    )
    .bind(thread.as_uuid())
    .fetch_all(tx.connection())
    .await?)
}

/// The thread's stored summary and how many history messages (from the start) it stands for;
/// `None` until the thread is first compacted.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread))]
pub async fn summary(
    tx: &mut TenantTx,
    thread: ThreadId,
) -> Result<Option<(usize, String)>, DomainError> {
    let row: Option<(i32, Option<String>)> =
        sqlx::query_as("SELECT summary_covers, summary FROM threads WHERE id = $1")
            .bind(thread.as_uuid())
            .fetch_optional(tx.connection())
            .await?;
    Ok(row.and_then(|(covers, text)| Some((usize::try_from(covers).ok()?, text?))))
}

/// Stores the thread's summary, standing for its first `covers` history messages. A summary
/// never moves backwards: one covering fewer messages than the stored one is ignored.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread, covers))]
pub async fn save_summary(
    tx: &mut TenantTx,
    thread: ThreadId,
    covers: usize,
    text: &str,
) -> Result<(), DomainError> {
    let covers = i32::try_from(covers)
        .map_err(|_| DomainError::Invalid("The thread is too long to summarise.".to_owned()))?;
    sqlx::query(
        "UPDATE threads SET summary = $2, summary_covers = $3 \
         WHERE id = $1 AND summary_covers <= $3",
    )
    .bind(thread.as_uuid())
    .bind(text)
    .bind(covers)
    .execute(tx.connection())
    .await?;
    Ok(())
}

/// Appends a turn's messages to the thread's history.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread, turn_id = %turn, count = messages.len()))]
pub async fn append(
    tx: &mut TenantTx,
    thread: ThreadId,
    turn: TurnId,
    messages: &[Value],
) -> Result<(), DomainError> {
    let school = tx.school_id().as_uuid();
    sqlx::query(
        "INSERT INTO conversation_log (school_id, thread_id, turn_id, message) \
         SELECT $1, $2, $3, m FROM unnest($4::jsonb[]) WITH ORDINALITY AS t(m, n) ORDER BY n",
    )
    .bind(school)
    .bind(thread.as_uuid())
    .bind(turn.as_uuid())
    .bind(messages)
    .execute(tx.connection())
    .await?;
    Ok(())
}

/// Records a turn's events (`seq`, payload) for replay; a repeated `seq` is ignored.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", turn_id = %turn, count = events.len()))]
pub async fn record_events(
    tx: &mut TenantTx,
    thread: ThreadId,
    turn: TurnId,
    events: &[(i32, Value)],
) -> Result<(), DomainError> {
    let school = tx.school_id().as_uuid();
    let (seqs, payloads): (Vec<i32>, Vec<Value>) = events.iter().cloned().unzip();
    sqlx::query(
        "INSERT INTO turn_events (school_id, thread_id, turn_id, seq, payload) \
         SELECT $1, $2, $3, s, p FROM unnest($4::int4[], $5::jsonb[]) AS t(s, p) \
         ON CONFLICT (school_id, turn_id, seq) DO NOTHING",
    )
    .bind(school)
    .bind(thread.as_uuid())
    .bind(turn.as_uuid())
    .bind(&seqs)
    .bind(&payloads)
    .execute(tx.connection())
    .await?;
    Ok(())
}

/// A turn's recorded events, in order.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn events(tx: &mut TenantTx, turn: TurnId) -> Result<Vec<Value>, DomainError> {
    Ok(
        sqlx::query_scalar("SELECT payload FROM turn_events WHERE turn_id = $1 ORDER BY seq")
            .bind(turn.as_uuid())
            .fetch_all(tx.connection())
            .await?,
    )
}

/// Stores a file as a downloadable artifact of `thread`, made by `user`; returns its id.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread, bytes = content.len()))]
pub async fn save_artifact(
    tx: &mut TenantTx,
    thread: ThreadId,
    user: UserId,
    filename: &str,
    media_type: &str,
    content: &[u8],
) -> Result<rover_contracts::ids::ArtifactId, DomainError> {
    let school = tx.school_id().as_uuid();
    let id: uuid::Uuid = sqlx::query_scalar(
        "INSERT INTO artifacts (school_id, thread_id, filename, media_type, size_bytes, content, created_by) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
    )
    .bind(school)
    .bind(thread.as_uuid())
    .bind(filename)
    .bind(media_type)
    .bind(i64::try_from(content.len()).unwrap_or(i64::MAX))
    .bind(content)
    .bind(user.as_uuid())
    .fetch_one(tx.connection())
    .await?;
    Ok(rover_contracts::ids::ArtifactId::from_uuid(id))
}

/// The thread's current (or last) turn: `None` when the thread does not exist or never ran one;
/// `NotFound` when it is another user's.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn last_turn(
    tx: &mut TenantTx,
    thread: ThreadId,
    user: UserId,
) -> Result<Option<TurnId>, DomainError> {
    let row: Option<(uuid::Uuid, Option<uuid::Uuid>)> =
        sqlx::query_as("SELECT user_id, last_turn_id FROM threads WHERE id = $1")
            .bind(thread.as_uuid())
            .fetch_optional(tx.connection())
            .await?;
    match row {
        None => Ok(None),
        Some((owner, turn)) if owner == user.as_uuid() => Ok(turn.map(TurnId::from_uuid)),
        Some(_) => Err(DomainError::NotFound(
            "No conversation with that id was found.".to_owned(),
        )),
    }
}

/// Records a completed part of a turn before the loop moves on; a part recorded already is kept
/// as it was (the first record wins, so a resumed turn cannot rewrite its past).
#[cfg(feature = "agent")]
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", turn_id = %turn, agent = %part.agent, step = part.step, part = %part.part))]
pub async fn record_step(
    tx: &mut TenantTx,
    thread: ThreadId,
    turn: TurnId,
    part: &rover_agent::StepPart,
) -> Result<(), DomainError> {
    let school = tx.school_id().as_uuid();
    sqlx::query(
        "INSERT INTO turn_steps (school_id, thread_id, turn_id, agent, step, part, record) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) \
         ON CONFLICT (school_id, turn_id, agent, step, part) DO NOTHING",
    )
    .bind(school)
    .bind(thread.as_uuid())
    .bind(turn.as_uuid())
    .bind(&part.agent)
    .bind(i32::try_from(part.step).unwrap_or(i32::MAX))
    .bind(&part.part)
    .bind(&part.record)
    .execute(tx.connection())
    .await?;
    Ok(())
}

/// Every recorded part of the turns in `turns` (one turn, or a paused turn's chain).
#[cfg(feature = "agent")]
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", turns = turns.len()))]
pub async fn steps(
    tx: &mut TenantTx,
    turns: &[TurnId],
) -> Result<Vec<rover_agent::StepPart>, DomainError> {
    let ids: Vec<uuid::Uuid> = turns
        .iter()
        .map(rover_contracts::ids::TurnId::as_uuid)
        .collect();
    let rows: Vec<(String, i32, String, Value)> = sqlx::query_as(
        "SELECT agent, step, part, record FROM turn_steps WHERE turn_id = ANY($1) \
         ORDER BY agent, step, created_at",
    )
    .bind(&ids)
    .fetch_all(tx.connection())
    .await?;
    Ok(rows
        .into_iter()
        .map(|(agent, step, part, record)| rover_agent::StepPart {
            agent,
            step: u32::try_from(step).unwrap_or_default(),
            part,
            record,
        })
        .collect())
}

/// The last message `turn` added to the thread's history: `None` until the turn completed.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", turn_id = %turn))]
pub async fn turn_last_message(
    tx: &mut TenantTx,
    turn: TurnId,
) -> Result<Option<Value>, DomainError> {
    Ok(sqlx::query_scalar(
        "SELECT message FROM conversation_log WHERE turn_id = $1 ORDER BY position DESC LIMIT 1",
    )
    .bind(turn.as_uuid())
    .fetch_optional(tx.connection())
    .await?)
}

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
