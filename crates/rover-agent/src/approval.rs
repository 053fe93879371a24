//! Approval before writes, as the agent loop sees it: before a write tool call runs, the turn's
//! store ([`crate::TurnStore::gate`]) says whether it may (the worker's: the school's policy and
//! the approval rows in Postgres). A call waiting for the staff member pauses the turn; a declined one gets a
//! denial result the model reads.

use rover_contracts::AgentToolResult;
use serde_json::{Value, json};

/// A write call about to run.
#[derive(Debug, Clone, PartialEq)]
pub struct GateQuery {
    /// The call id (unique in the turn's chain).
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The arguments, as the model made them.
    pub input: Value,
}

/// What the gate decided for a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Run it (no approval needed, or approved for this turn).
    Run,
    /// Wait for the staff member: the turn pauses, and the client is sent this approval id.
    Pending {
        /// The id the client answers with.
        approval_id: String,
    },
    /// The staff member declined it.
    Denied {
        /// Their reason, if they gave one.
        reason: Option<String>,
    },
    /// It may not run (an approval used up, for another input, or expired): told to the model.
    Refused(String),
}

/// The result a declined call gives the model.
pub(crate) fn denial(reason: Option<&str>) -> AgentToolResult<Value> {
    let mut text = "The staff member declined this action, so it was not done. Do not try it \
                    again unless they ask."
        .to_owned();
    if let Some(reason) = reason.filter(|r| !r.trim().is_empty()) {
        text.push_str(" Their reason: ");
        text.push_str(reason);
    }
    AgentToolResult::error(text)
}

/// How a declined call's result is journalled, so a replay says `tool-output-denied` again.
pub(crate) fn journal_denied(envelope: &AgentToolResult<Value>) -> Value {
    json!({ "denied": envelope })
}

/// A journalled result: the envelope, and whether it was a denial.
pub(crate) fn from_journal(record: &Value) -> Option<(AgentToolResult<Value>, bool)> {
    if let Some(denied) = record.get("denied") {
        return serde_json::from_value(denied.clone())
            .ok()
            .map(|e| (e, true));
    }
    serde_json::from_value(record.clone())
        .ok()
        .map(|e| (e, false))
}
