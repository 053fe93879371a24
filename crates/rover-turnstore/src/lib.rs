//! Where a turn's state lives in Postgres, apart from the school's domain, one module per kind of
//! row: [`threads`] (each one user's, with its summary and current turn), the model-level history
//! ([`conversation_log`]), each turn's events ([`events`], the replay log), the journal of steps
//! ([`journal`], feature `agent`), the open turns and their stops ([`open_turns`]), artifacts
//! ([`artifacts`]), approvals before writes ([`approvals`]) and the rules of who waits for one
//! ([`approval_policy`]), the daily token ledger ([`usage`]),
//! and chats as a Hub reads them back ([`chats`]: the list, search, one chat's turns, rename,
//! delete and erasure, feedback, retention). Every function runs inside a
//! `rover_domain::TenantTx`, so row-level security keeps each school's turns its own; the tables
//! are in the one schema `rover_domain::MIGRATOR` migrates.
//!
//! With the feature `agent`, [`PgTurnStore`] is the agent's `rover_agent::TurnStore` over these
//! tables (the worker's); the gateway uses the functions without the agent runtime.
//!
//! *API Boundary*: this crate knows nothing of HTTP or AMQP.

pub mod approval_policy;
pub mod approvals;
pub mod artifacts;
pub mod chats;
pub mod conversation_log;
pub mod events;
#[cfg(feature = "agent")]
pub mod journal;
pub mod open_turns;
#[cfg(feature = "agent")]
mod store;
pub mod threads;
pub mod usage;

#[cfg(feature = "agent")]
pub use store::{DEFAULT_APPROVAL_TTL, PgTurnStore, TurnKey};
