//! The gateway's own tests: authentication, the REST API, hardened inputs and the console's routes. The chat stream is
//! tested end to end with all three binaries in the top-level `tests/` crate.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story: its setup, the act and every assertion in one place"
)]

mod audit;
mod auth;
mod chats;
mod console;
mod edge;
mod hardening;
mod mcp_door;
mod rest;
