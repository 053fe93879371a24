//! Integration tests of rover-domain against a real Postgres: each test provisions, migrates and
//! seeds its own database (`TestDb`), so tests run in parallel without sharing state.

mod campus;
mod cross_tenant;
mod departments;
mod director;
mod helpers;
mod reads;
mod rls;
mod store;
mod teachers;
