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
    /// Approved for this turn with the staff member's edits: run it with `input` instead of the
    /// model's arguments (checked again first), and tell the model what changed.
    RunEdited {
        /// The input as the staff member left it.
        input: Value,
    },
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

/// The result a call edited into arguments its schema refuses gives the model: nothing ran.
pub(crate) fn edit_refused(error: &str) -> AgentToolResult<Value> {
    AgentToolResult::error(format!(
        "The staff member's edit of this call is not valid ({error}), so nothing was run. Tell \
         them, and ask what they want."
    ))
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

/// What the model reads beside the result of a call the staff member edited as they approved
/// it: that it ran with their values, and which arguments they changed (`was → now`).
pub(crate) fn edits(proposed: &Value, ran: &Value) -> String {
    let empty = serde_json::Map::new();
    let (before, after) = (
        proposed.as_object().unwrap_or(&empty),
        ran.as_object().unwrap_or(&empty),
    );
    let mut names: Vec<&String> = before.keys().chain(after.keys()).collect();
    names.sort();
    names.dedup();
    let shown = |value: Option<&Value>| value.map_or_else(|| "(none)".to_owned(), Value::to_string);
    let changes: Vec<String> = names
        .into_iter()
        .filter(|name| before.get(*name) != after.get(*name))
        .map(|name| {
            format!(
                "{name}: {} → {}",
                shown(before.get(name)),
                shown(after.get(name))
            )
        })
        .collect();
    format!(
        "The staff member edited this call before approving it, and it ran with their values, \
         not yours ({}). Report what ran.",
        changes.join("; ")
    )
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::edits;

    #[test]
    fn an_edit_is_told_as_each_argument_that_changed() {
        let note = edits(
            &json!({ "student": "Okot", "mark": 75, "assessment": "Quiz" }),
            &json!({ "student": "Okot", "mark": 80, "comment": "late" }),
        );
        assert!(note.contains("ran with their values"), "{note}");
        assert!(
            note.contains(
                r#"assessment: "Quiz" → (none); comment: (none) → "late"; mark: 75 → 80"#
            ),
            "{note}"
        );
        assert!(!note.contains("student"), "{note}");
    }
}
