//! Rover's agent runtime: for each turn, build the agent from the runtime context — tools, skills,
//! subagents and the system prompt, all derived from the same arrays — and run a small, explicit
//! model/tool loop.

pub mod agent;
pub mod budget;
pub mod compact;
mod compat;
mod local;
pub mod model;
pub mod prompt;
pub mod run;
pub mod sandbox;
pub mod skills;

pub use agent::{Agent, Mounts, build_agent};
pub use run::{
    AgentMetrics, ArtifactStore, Emitted, Events, Journal, NewArtifact, StepPart, StepRecorder,
    ToolRpc, TurnDeps, TurnResult, pending_question, run_turn,
};
