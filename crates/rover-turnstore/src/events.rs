//! Each turn's events (`turn_events`): the replay log a resumed stream and a chat read back are
//! built from, recorded before they are published.

use rover_contracts::ids::{ThreadId, TurnId};
use serde_json::Value;
use sqlx::types::Json;

use rover_domain::{DomainError, TenantTx};

/// Records a turn's events (`seq`, payload) for replay; a repeated `seq` is ignored. Each payload
/// is serialised straight into the statement's `jsonb[]` argument.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", turn_id = %turn, count = events.len()))]
pub async fn record_events<P: serde::Serialize + Sync>(
    tx: &mut TenantTx,
    thread: ThreadId,
    turn: TurnId,
    events: &[(i32, P)],
) -> Result<(), DomainError> {
    let school = tx.school_id().as_uuid();
    let seqs: Vec<i32> = events.iter().map(|(seq, _)| *seq).collect();
    let payloads: Vec<Json<&P>> = events.iter().map(|(_, payload)| Json(payload)).collect();
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
