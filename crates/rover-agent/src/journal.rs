//! The journal of a turn's agent loops: each completed part (a model answer, a tool result) is
//! recorded before the loop moves on, and replayed when a redelivered turn runs again.

use serde_json::Value;

/// A completed part of a turn's agent loop: the model's answer in a step (`part` = `"model"`), or
/// one tool call's result (`part` = the call id). The one type for it: `rover-turnstore` records
/// and reads these as they are (`turn_steps`).
#[derive(Debug, Clone, PartialEq)]
pub struct StepPart {
    /// `""` for Rover, the `task` call id for a subagent's run.
    pub agent: String,
    /// The agent's model step.
    pub step: u32,
    /// `"model"`, or the tool call id.
    pub part: String,
    /// The assistant message (OpenAI format), or the tool's envelope.
    pub record: Value,
}

/// The part name of a step's model answer.
pub(crate) const MODEL_PART: &str = "model";

/// The parts a turn recorded before it was interrupted.
#[derive(Debug, Default, Clone)]
pub struct Journal {
    parts: std::collections::HashMap<(String, u32, String), Value>,
    /// Keys recorded by earlier turns of a paused chain (see [`Journal::continuing`]): replayed
    /// silently, as the client has their events already.
    prior: std::collections::HashSet<(String, u32, String)>,
}

impl Journal {
    /// A journal of `parts`.
    pub fn new(parts: impl IntoIterator<Item = StepPart>) -> Self {
        Self {
            parts: parts
                .into_iter()
                .map(|p| ((p.agent, p.step, p.part), p.record))
                .collect(),
            prior: std::collections::HashSet::new(),
        }
    }

    /// The journal of a turn that continues a paused one: `prior` are the parts of the earlier
    /// turns of its chain (replayed without events, and not stored again), `own` this turn's.
    pub fn continuing(
        prior: impl IntoIterator<Item = StepPart>,
        own: impl IntoIterator<Item = StepPart>,
    ) -> Self {
        let mut journal = Self::new(prior);
        journal.prior = journal.parts.keys().cloned().collect();
        journal.parts.extend(
            own.into_iter()
                .map(|p| ((p.agent, p.step, p.part), p.record)),
        );
        journal
    }

    /// How many parts it holds.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// How many tool calls it holds results of (every part but the model's answers).
    pub fn tool_results(&self) -> usize {
        self.parts
            .keys()
            .filter(|(_, _, part)| part != MODEL_PART)
            .count()
    }

    /// Whether it holds nothing (a fresh turn).
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    pub(crate) fn get(&self, agent: &str, step: u32, part: &str) -> Option<&Value> {
        self.parts.get(&(agent.to_owned(), step, part.to_owned()))
    }

    /// Whether the part was recorded by an earlier turn of the chain (its events were sent then).
    pub(crate) fn is_prior(&self, agent: &str, step: u32, part: &str) -> bool {
        self.prior
            .contains(&(agent.to_owned(), step, part.to_owned()))
    }
}
