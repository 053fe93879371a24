//! Integration tests of rover-messaging against the real RabbitMQ. Each test runs in its own
//! vhost, so tests can run in parallel and `close_all_connections` only hits its own test.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story: its setup, the act and every assertion in one place"
)]

mod consume;
mod helpers;
mod publish;
mod recovery;
mod rpc;
mod topology;
mod trace;
