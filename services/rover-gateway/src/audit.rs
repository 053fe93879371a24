//! The gateway's audit rows: the one place a route builds one — a REST write, a chat deleted, a
//! staff member's chats erased — in the write's own transaction, with one rule for its trace id:
//! the current trace's when a trace is being recorded, else none (never a made-up one, which would
//! send an auditor looking for a trace that does not exist).

use rover_contracts::context::CallScope;
use rover_domain::audit::{AuditChange, AuditEntry};
use rover_domain::{Actor, TenantTx};

use crate::error::ApiError;
use crate::observe::recorded_trace_id;

/// Records one audit row in `tx`: `actor`, acting within `scope`, wrote `change` as `event`.
pub(crate) async fn record(
    tx: &mut TenantTx,
    actor: &Actor,
    scope: &CallScope,
    event: &str,
    change: &AuditChange,
) -> Result<(), ApiError> {
    let trace_id = recorded_trace_id();
    let entry = AuditEntry {
        actor,
        scope,
        event,
        call_id: None,
        trace_id: trace_id.as_deref(),
        change,
    };
    rover_domain::audit::record(tx, &entry).await?;
    Ok(())
}
