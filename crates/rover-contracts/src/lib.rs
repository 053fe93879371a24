//! Rover's contracts: the types every service agrees on, and nothing that does I/O.
//!
//! - [`tools`]: every tool contract (name, event, label, posture, argument and output types) and
//!   the registry of them all;
//! - [`envelope`]: `AgentToolResult<T>`, the one result shape the model reads;
//! - [`context`]: the runtime context of a turn, and the identity and call scope derived from it;
//! - [`identity`]: the gateway-signed turn identity, and the only way to verify one;
//! - [`wire`]: the versioned messages the services exchange over RabbitMQ;
//! - [`permission`], [`ids`], [`named`], [`error`]: the vocabulary the rest is written in
//!   ([`named::Named`]: a tool argument naming a class, student, … by name or id).
//!
//! *Architecture Invariant*: this crate performs no I/O (no network, no files, no clock except
//! the expiry check of a turn identity), so every service can depend on it and tests can use it freely.

pub mod context;
pub mod envelope;
pub mod error;
pub mod identity;
pub mod ids;
pub mod named;
pub mod permission;
pub mod tools;
pub mod wire;

pub use envelope::{AgentToolResult, Ask};
pub use error::ErrorCode;
