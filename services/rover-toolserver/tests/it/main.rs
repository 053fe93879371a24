//! The tool server through the real queue: every tool, every denial, tenancy, identity, audit,
//! idempotency and operations. Each test gets its own database, vhost and keys.

mod helpers;

mod approval;
mod audit;
mod identity;
mod operations;
mod postures;
mod round_trips;
mod tenancy;
mod tools;
