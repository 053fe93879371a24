//! The gateway's own tests: authentication and the REST API. The chat stream is tested end to end
//! with all three binaries in the top-level `tests/` crate.

mod auth;
mod rest;
