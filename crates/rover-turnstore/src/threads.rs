//! Threads (`threads`): each belongs to one user of one school, keyed by `(school, id)` — created
//! on first use, reopened by the staff member's message after a deletion — with the summary that
//! stands for the start of its history and its current (or last) turn.

use rover_contracts::ids::{ThreadId, TurnId, UserId};

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
