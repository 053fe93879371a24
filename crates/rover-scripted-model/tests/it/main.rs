//! Integration tests of the scripted model test double: the server in-process on port 0, driven
//! by the real async-openai client the worker uses, streaming and not.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story: its setup, the act and every assertion in one place"
)]

mod binary;
mod endpoints;
mod failures;
mod helpers;
mod refusals;
mod rules_file;
mod streaming;
mod utterances;
