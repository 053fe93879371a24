//! Rover's agent runtime: for each turn, build the agent from the runtime context — tools, skills,
//! subagents and the system prompt, all derived from the same arrays — and run a small, explicit
//! model/tool loop.

pub mod agent;
pub mod approval;
pub mod budget;
mod build;
pub mod compact;
mod compat;
mod deps;
mod journal;
mod local;
mod messages;
pub mod model;
pub mod prompt;
mod rpc;
pub mod run;
pub mod sandbox;
pub mod skills;
mod step;
pub mod stop;
mod textcalls;

pub use agent::{Agent, Mounts};
pub use build::build_agent;
pub use deps::{AgentMetrics, ArtifactStore, Emitted, Events, NewArtifact, ToolRpc, TurnDeps};
pub use journal::{Journal, StepPart, StepRecorder};
pub use run::{TurnResult, continue_turn, pending_question, run_turn};
pub use stop::Stop;
