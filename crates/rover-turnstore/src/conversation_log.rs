//! A thread's model-level history (`conversation_log`): the messages each turn added, in order,
//! as the model reads them back.

use rover_contracts::ids::{ThreadId, TurnId};
use serde_json::Value;

use rover_domain::{DomainError, TenantTx};

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

/// The last message `turn` added to `thread`'s history: `None` until the turn completed. Read
/// through the thread's index: the school's whole log is not scanned (which grew with every turn
/// the school ever had).
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", turn_id = %turn))]
pub async fn turn_last_message(
    tx: &mut TenantTx,
    thread: ThreadId,
    turn: TurnId,
) -> Result<Option<Value>, DomainError> {
    Ok(sqlx::query_scalar(
        "SELECT message FROM conversation_log WHERE thread_id = $1 AND turn_id = $2 \
         ORDER BY position DESC LIMIT 1",
    )
    .bind(thread.as_uuid())
    .bind(turn.as_uuid())
    .fetch_optional(tx.connection())
    .await?)
}
