//! Rover's agent runtime: for each turn, build the agent from the runtime context — tools, skills,
//! subagents and the system prompt, all derived from the same arrays — and run a small, explicit
//! model/tool loop.

pub mod agent;
pub mod approval;
pub mod budget;
mod build;
mod cannot;
pub mod claims;
pub mod compact;
mod compat;
mod dates;
mod deps;
mod error;
mod journal;
mod local;
mod messages;
pub mod model;
pub mod prompt;
mod rpc;
pub mod run;
mod said;
pub mod sandbox;
pub mod skills;
mod step;
pub mod stop;
mod store;
mod textcalls;
pub mod warm;
mod window;

pub use agent::{Agent, Mounts};
pub use build::build_agent;
pub use deps::{AgentMetrics, Emitted, Events, Runtime, ToolRpc, TurnDeps};
pub use error::{FailureKind, TurnError};
pub use journal::{Journal, StepPart};
pub use run::{pending_question, run};
pub use stop::Stop;
pub use store::{
    DailyLimit, Loaded, Memory, MemoryStore, NewArtifact, Reserved, StoreError, Summary, TurnStore,
};
