//! Integration tests of the contracts crate: the registry's conventions, the turn identity, the wire
//! framing and the runtime context's shape.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story: its setup, the act and every assertion in one place"
)]

mod context;
mod fixtures;
mod fuzz;
mod guide;
mod identity;
mod offer;
mod registry;
mod wire;
