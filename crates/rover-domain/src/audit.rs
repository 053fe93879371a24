//! The audit trail: what a write changed ([`AuditChange`], returned by every write as part of
//! [`Written`]) and the one function that records it ([`record`]), in the write's own transaction.

use rover_contracts::context::CallScope;
use rover_contracts::ids::ToolCallId;
use serde_json::Value;

use crate::{Actor, DomainError, TenantTx};

/// What a write changed, enough for an audit row and a one-line summary.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditChange {
    /// The id of the main thing changed (a department id, a class id, a teaching assignment id).
    pub subject_id: String,
    /// Its state before; `None` when the write created it.
    pub before: Option<Value>,
    /// Its state after.
    pub after: Value,
    /// The words the caller named things by, and the ids they resolved to (`{"class": {"said":
    /// "S1 Blue", "id": …}, "absent": [...]}`); `None` when nothing was named.
    pub named: Option<Value>,
}

/// The result of a write: the output the caller returns, and the change it should audit.
#[derive(Debug, Clone, PartialEq)]
pub struct Written<T> {
    /// What the tool or endpoint returns.
    pub output: T,
    /// What to pass to [`record`] in the same transaction.
    pub change: AuditChange,
}

/// One audit row: who, where, which call, and what changed.
#[derive(Debug, Clone, Copy)]
pub struct AuditEntry<'a> {
    /// The acting user.
    pub actor: &'a Actor,
    /// The call's scope; its campus, if any, is recorded.
    pub scope: &'a CallScope,
    /// The tool event (`create.department`) or the endpoint's equivalent.
    pub event: &'a str,
    /// The tool call id; `None` for writes that did not come through a tool call. At most one audit
    /// row exists per call id.
    pub call_id: Option<&'a ToolCallId>,
    /// The trace the write happened in, so an auditor can find the whole turn.
    pub trace_id: Option<&'a str>,
    /// What changed.
    pub change: &'a AuditChange,
}

/// Writes one audit row in `tx`, so it commits or rolls back with the write it describes.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", event = entry.event))]
pub async fn record(tx: &mut TenantTx, entry: &AuditEntry<'_>) -> Result<(), DomainError> {
    let school = tx.school_uuid();
    sqlx::query(
        "INSERT INTO audit_log (school_id, campus_id, actor_user_id, actor_email, event, \
         subject_id, call_id, trace_id, before, after, named) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(school)
    .bind(entry.scope.run_mode.campus().map(|c| c.id.as_uuid()))
    .bind(entry.actor.user_id.as_uuid())
    .bind(&entry.actor.email)
    .bind(entry.event)
    .bind(&entry.change.subject_id)
    .bind(entry.call_id.map(ToolCallId::as_str))
    .bind(entry.trace_id)
    .bind(&entry.change.before)
    .bind(&entry.change.after)
    .bind(&entry.change.named)
    .execute(tx.connection())
    .await?;
    Ok(())
}
