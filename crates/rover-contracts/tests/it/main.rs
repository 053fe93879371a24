//! Integration tests of the contracts crate: the registry's conventions, the turn identity, the wire
//! framing and the runtime context's shape.

mod context;
mod fixtures;
mod fuzz;
mod guide;
mod identity;
mod offer;
mod registry;
mod wire;
