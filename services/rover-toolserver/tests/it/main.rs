//! The tool server through the real queue: every tool, every denial, tenancy, identity, audit,
//! idempotency and operations. Each test gets its own database, vhost and keys.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story: its setup, the act and every assertion in one place"
)]

mod helpers;

mod approval;
mod audit;
mod identity;
mod names;
mod operations;
mod postures;
mod round_trips;
mod tenancy;
mod tools;
