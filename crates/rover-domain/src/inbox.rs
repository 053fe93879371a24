//! The tool-call inbox: a call id's stored reply, so a redelivered or retried call returns what the
//! first delivery did instead of running again.

use rover_contracts::ids::ToolCallId;
use serde_json::Value;

use crate::{DomainError, TenantTx};

/// The stored reply of `call_id`, if the call already ran.
///
/// It first takes a transaction-scoped lock on the call id, so two deliveries of one call run one
/// after the other: the second waits until the first commits (or rolls back) and then finds its
/// reply (or runs itself). Call it first in the transaction that will run the call and
/// [`store`] its reply.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", call_id = %call_id))]
pub async fn find(tx: &mut TenantTx, call_id: &ToolCallId) -> Result<Option<Value>, DomainError> {
    let school = tx.school_uuid();
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1::text || '/' || $2, 0))")
        .bind(school)
        .bind(call_id.as_str())
        .execute(tx.connection())
        .await?;
    let reply = sqlx::query_scalar("SELECT reply FROM tool_call_inbox WHERE call_id = $1")
        .bind(call_id.as_str())
        .fetch_optional(tx.connection())
        .await?;
    Ok(reply)
}

/// Stores the reply of `call_id` (which ran as `event`), in the transaction of its effects.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", call_id = %call_id, event))]
pub async fn store(
    tx: &mut TenantTx,
    call_id: &ToolCallId,
    event: &str,
    reply: &Value,
) -> Result<(), DomainError> {
    let school = tx.school_uuid();
    sqlx::query(
        "INSERT INTO tool_call_inbox (school_id, call_id, event, reply) VALUES ($1, $2, $3, $4)",
    )
    .bind(school)
    .bind(call_id.as_str())
    .bind(event)
    .bind(reply)
    .execute(tx.connection())
    .await?;
    Ok(())
}
