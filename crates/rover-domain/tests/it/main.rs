//! Integration tests of rover-domain against a real Postgres: each test provisions, migrates and
//! seeds its own database (`TestDb`), so tests run in parallel without sharing state.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story: its setup, the act and every assertion in one place"
)]

mod approval_mode;
mod call_pool;
mod campus;
mod cross_tenant;
mod departments;
mod director;
mod helpers;
mod one_trip;
mod policy_version;
mod reads;
mod rls;
mod shard_keys;
mod store;
mod teachers;
mod usage_days;
mod user_directory;
mod write_lookups;
