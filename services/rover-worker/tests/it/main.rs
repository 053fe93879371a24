//! The real worker against the scripted model, the real broker and the real tool server: each
//! utterance ends with the right tool calls and effects, denials write nothing, failures are
//! visible, and the agent is rebuilt for every turn.

mod helpers;

mod agents;
mod budgets;
mod compaction;
mod failures;
mod questions;
mod utterances;
