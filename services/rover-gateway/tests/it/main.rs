//! The gateway's own tests: authentication, the REST API and hardened inputs. The chat stream is
//! tested end to end with all three binaries in the top-level `tests/` crate.

mod auth;
mod hardening;
mod rest;
