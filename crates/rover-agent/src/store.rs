//! The turn's store: everything the agent reads or keeps of a turn goes through [`TurnStore`] —
//! the thread it continues, each recorded step (which also says whether a stop was asked), the
//! approval gate of a write, the daily token ledger, artifacts, the summary, and the messages
//! the turn adds. The worker's implementation is Postgres (`rover-turnstore`'s `PgTurnStore`);
//! [`MemoryStore`] keeps it in memory for the agent's own tests.
//!
//! One store serves one turn: it is built with the turn's school, user, thread, turn and chain,
//! so no method takes them again and none can reach another turn's state.

use std::sync::{Mutex, PoisonError};

use futures::future::BoxFuture;
use rover_contracts::ids::ArtifactId;
use rover_contracts::wire::TokenUsage;
use serde_json::Value;

use crate::approval::{Gate, GateQuery};
use crate::journal::StepPart;

/// Why the store could not do what the turn asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store failed (after its own retries): the turn cannot go on safely.
    #[error("could not {action}: {source}")]
    Failed {
        /// What was being done, e.g. "record the turn's step".
        action: &'static str,
        /// What went wrong underneath.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// What the turn needs is no longer there (e.g. the message an approval continues).
    #[error("{0}")]
    Gone(&'static str),
}

impl StoreError {
    /// A failure to do `action`.
    pub fn failed(
        action: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Failed {
            action,
            source: source.into(),
        }
    }
}

/// What a turn reads before it runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Loaded {
    /// The thread's model-level history before the turn (for a continuation: before its chain's
    /// first message), oldest first.
    pub history: Vec<Value>,
    /// For a continuation, its chain's first message (the staff member's); `None` otherwise.
    pub first: Option<Value>,
    /// The thread's stored summary, once it has been compacted.
    pub summary: Option<Summary>,
}

/// A file `save_artifact` hands to the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewArtifact {
    /// The title the staff member sees (also the download's name).
    pub title: String,
    /// IANA media type, guessed from the file's extension.
    pub media_type: String,
    /// The file's bytes.
    pub content: Vec<u8>,
}

/// The thread's stored summary: it stands for the first `covers` messages of the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// How many messages, from the start of the history, it replaces.
    pub covers: usize,
    /// The summary itself.
    pub text: String,
}

/// Which daily limit a reservation would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DailyLimit {
    /// The user's tokens a day.
    User(u64),
    /// The school's tokens a day.
    School(u64),
}

/// Whether a reservation was taken, or which daily limit it would pass.
pub type Reserved = Result<(), DailyLimit>;

/// Where one turn's state lives.
pub trait TurnStore: Send + Sync {
    /// The thread this turn continues, and its summary.
    fn load(&self) -> BoxFuture<'_, Result<Loaded, StoreError>>;

    /// Records `part` before the loop moves on (the first record of a part wins, so a resumed
    /// turn cannot rewrite its past), and says whether the turn was asked to stop meanwhile.
    fn record(&self, part: StepPart) -> BoxFuture<'_, Result<bool, StoreError>>;

    /// Whether a write call may run now, waits for the staff member, or was declined.
    fn gate(&self, call: GateQuery) -> BoxFuture<'_, Result<Gate, StoreError>>;

    /// Reserves `tokens` in the user's and school's day, or says which daily limit they pass.
    fn reserve(&self, tokens: u64) -> BoxFuture<'_, Result<Reserved, StoreError>>;

    /// Releases a reservation of `reserved` tokens and records what the call `used`.
    fn settle(&self, reserved: u64, used: TokenUsage) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Stores a file as a downloadable artifact of the thread.
    fn save_artifact(&self, artifact: NewArtifact)
    -> BoxFuture<'_, Result<ArtifactId, StoreError>>;

    /// Keeps the thread's summary (one covering fewer messages than the stored one is ignored).
    fn save_summary(&self, summary: Summary) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Adds the turn's messages to the thread's history: the turn is done.
    fn append(&self, messages: Vec<Value>) -> BoxFuture<'_, Result<(), StoreError>>;
}

/// A [`TurnStore`] in memory: a thread, and what a turn did to it. Approval is asked of every
/// write unless [`MemoryStore::approving`]; a stop or a daily limit can be set to test how the
/// loop answers them.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<Memory>,
}

/// What a [`MemoryStore`] holds.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Memory {
    /// The thread before the turn.
    pub loaded: Loaded,
    /// The parts recorded, in order.
    pub parts: Vec<StepPart>,
    /// Writes asked about, in order.
    pub gated: Vec<GateQuery>,
    /// What the gate answers for writes (default: [`Gate::Run`]).
    pub gate: Option<Gate>,
    /// Tokens reserved and not settled.
    pub reserved: u64,
    /// Tokens a day may hold (`0`: no limit).
    pub daily_tokens: u64,
    /// What settled calls used.
    pub used: TokenUsage,
    /// Artifacts saved.
    pub artifacts: Vec<NewArtifact>,
    /// The summary saved last.
    pub summary: Option<Summary>,
    /// Messages appended.
    pub appended: Vec<Value>,
    /// A stop was asked: the next record says so.
    pub stop: bool,
}

impl MemoryStore {
    /// A store of `memory`.
    pub fn new(memory: Memory) -> Self {
        Self {
            state: Mutex::new(memory),
        }
    }

    /// What it holds now.
    pub fn snapshot(&self) -> Memory {
        self.state().clone()
    }

    /// Asks the turn to stop: the next recorded step learns it.
    pub fn request_stop(&self) {
        self.state().stop = true;
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn ready<T: Send + 'static>(value: T) -> BoxFuture<'static, Result<T, StoreError>> {
        Box::pin(std::future::ready(Ok(value)))
    }
}

impl TurnStore for MemoryStore {
    fn load(&self) -> BoxFuture<'_, Result<Loaded, StoreError>> {
        Self::ready(self.state().loaded.clone())
    }

    fn record(&self, part: StepPart) -> BoxFuture<'_, Result<bool, StoreError>> {
        let mut state = self.state();
        let known = state
            .parts
            .iter()
            .any(|p| (&p.agent, p.step, &p.part) == (&part.agent, part.step, &part.part));
        if !known {
            state.parts.push(part);
        }
        Self::ready(state.stop)
    }

    fn gate(&self, call: GateQuery) -> BoxFuture<'_, Result<Gate, StoreError>> {
        let mut state = self.state();
        state.gated.push(call);
        Self::ready(state.gate.clone().unwrap_or(Gate::Run))
    }

    fn reserve(&self, tokens: u64) -> BoxFuture<'_, Result<Reserved, StoreError>> {
        let mut state = self.state();
        let held = state.reserved + state.used.input_tokens + state.used.output_tokens;
        if state.daily_tokens > 0 && held + tokens > state.daily_tokens {
            return Self::ready(Err(DailyLimit::User(state.daily_tokens)));
        }
        state.reserved += tokens;
        Self::ready(Ok(()))
    }

    fn settle(&self, reserved: u64, used: TokenUsage) -> BoxFuture<'_, Result<(), StoreError>> {
        let mut state = self.state();
        state.reserved = state.reserved.saturating_sub(reserved);
        state.used.input_tokens += used.input_tokens;
        state.used.output_tokens += used.output_tokens;
        Self::ready(())
    }

    fn save_artifact(
        &self,
        artifact: NewArtifact,
    ) -> BoxFuture<'_, Result<ArtifactId, StoreError>> {
        self.state().artifacts.push(artifact);
        Self::ready(ArtifactId::new())
    }

    fn save_summary(&self, summary: Summary) -> BoxFuture<'_, Result<(), StoreError>> {
        let mut state = self.state();
        if state
            .summary
            .as_ref()
            .is_none_or(|s| s.covers <= summary.covers)
        {
            state.summary = Some(summary);
        }
        Self::ready(())
    }

    fn append(&self, messages: Vec<Value>) -> BoxFuture<'_, Result<(), StoreError>> {
        self.state().appended.extend(messages);
        Self::ready(())
    }
}
