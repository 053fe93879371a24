//! Rover's cross-service tests. Each module is one feature; each test starts what it needs.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story: its setup, the act and every assertion in one place"
)]

mod alert_metrics;
mod approval_rules;
mod approvals;
mod attacks;
mod brokers;
mod checker;
mod cli;
mod codemap;
mod console;
mod deploy;
mod e2e;
mod faults;
mod feedback;
mod mcp;
mod node;
mod observability;
mod prometheus;
mod runbook;
mod stack;
mod stop;
