//! What of its thread a turn sends: the history after the stored summary, under the runtime's
//! context budget (`compact::fit`); when it does not fit, the model first folds the oldest turns
//! into the summary (`compact::summarise`), which the turn's store keeps.

use serde_json::Value;

use crate::Agent;
use crate::compact::{Summary, Window, fit, fixed_cost, summarise};
use crate::deps::TurnDeps;
use crate::error::TurnError;

/// The part of the thread's history (`history`, after the stored `summary`) a turn whose first
/// message is `input` sends, under the runtime's context budget. When it does not fit, the model
/// first folds the oldest turns into the thread's summary, which the store keeps.
#[tracing::instrument(skip_all, fields(history = history.len(), summarised = tracing::field::Empty))]
pub(crate) async fn window(
    deps: TurnDeps<'_>,
    agent: &Agent,
    input: &Value,
    history: Vec<Value>,
    mut summary: Option<Summary>,
) -> Result<Vec<Value>, TurnError> {
    let budget = deps.runtime.context;
    let fixed = fixed_cost(&agent.system_prompt, &agent.tool_definitions(), input);
    // One summarising pass always fits (see `fit`); the bound is a guard.
    for _ in 0..3 {
        let (from, to) = match fit(&history, summary.as_ref(), fixed, budget) {
            Window::Fits(messages) => return Ok(messages),
            Window::TooLarge { fixed } => return Err(TurnError::TooLong { fixed }),
            Window::Summarise { from, to } => (from, to),
        };
        tracing::Span::current().record("summarised", to);
        let previous = summary.as_ref().map(|s| s.text.as_str());
        let spend = (deps.budget, deps.store);
        let text = summarise(deps.model(), spend, previous, &history[from..to], budget).await?;
        let folded = Summary { covers: to, text };
        deps.store.save_summary(folded.clone()).await?;
        tracing::info!(covers = to, "the thread's oldest turns were summarised");
        summary = Some(folded);
    }
    Err(TurnError::Unfitted)
}
