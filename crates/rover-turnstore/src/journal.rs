//! The journal of steps (`turn_steps`): each completed part of a turn's agent loop — a model
//! answer, a tool result — recorded before the loop moves on, and read back when a redelivered or
//! continued turn replays its past. The parts are the agent's own [`StepPart`]s (hence the feature
//! `agent`).

use rover_agent::StepPart;
use rover_contracts::ids::{ThreadId, TurnId};
use serde_json::Value;

use rover_domain::{DomainError, TenantTx};

/// Records a completed part of a turn before the loop moves on; a part recorded already is kept
/// as it was (the first record wins, so a resumed turn cannot rewrite its past).
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", turn_id = %turn, agent = %part.agent, step = part.step, part = %part.part))]
pub async fn record_step(
    tx: &mut TenantTx,
    thread: ThreadId,
    turn: TurnId,
    part: &StepPart,
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
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", turns = turns.len()))]
pub async fn steps(tx: &mut TenantTx, turns: &[TurnId]) -> Result<Vec<StepPart>, DomainError> {
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
        .map(|(agent, step, part, record)| StepPart {
            agent,
            step: u32::try_from(step).unwrap_or_default(),
            part,
            record,
        })
        .collect())
}
