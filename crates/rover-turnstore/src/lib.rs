//! Where a turn's state lives in Postgres, apart from the school's domain: the threads and their
//! model-level history ([`conversation`]: history, summary, the journal of steps, events, open
//! turns and stops, artifacts), approvals before writes ([`approvals`]) and the daily token
//! ledger ([`usage`]), and chats as a Hub reads them back ([`chats`]: the list, search, one
//! chat's turns, rename, delete and erasure, feedback, retention). Every function runs inside a `rover_domain::TenantTx`, so row-level
//! security keeps each school's turns its own; the tables are in the one schema
//! `rover_domain::MIGRATOR` migrates.
//!
//! With the feature `agent`, [`PgTurnStore`] is the agent's `rover_agent::TurnStore` over these
//! tables (the worker's); the gateway uses the functions without the agent runtime.
//!
//! *API Boundary*: this crate knows nothing of HTTP or AMQP.

pub mod approvals;
pub mod chats;
pub mod conversation;
#[cfg(feature = "agent")]
mod store;
pub mod usage;

#[cfg(feature = "agent")]
pub use store::{PgTurnStore, TurnKey};
