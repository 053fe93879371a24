//! The real worker against the scripted model, the real broker and the real tool server: each
//! utterance ends with the right tool calls and effects, denials write nothing, failures are
//! visible, and the agent is rebuilt for every turn.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story: its setup, the act and every assertion in one place"
)]

mod helpers;

mod agents;
mod budgets;
mod compaction;
mod failures;
mod followups;
mod names;
mod questions;
mod retention;
mod routes;
mod utterances;
mod warm;
