//! What a turn's agents run with: the worker's [`Runtime`] (model, tool RPC, skills, metrics,
//! settings), the turn itself, its [`TurnStore`], journal, budget, stop signal, events and
//! sandbox.

use rover_contracts::context::{RuntimeContext, Subagent};
use rover_contracts::wire::{TurnEventKind, TurnRequest};
use rover_messaging::RpcClient;
use rover_telemetry::metrics::{ModelMetrics, Registry, ToolMetrics};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use crate::Stop;
use crate::budget::TurnBudget;
use crate::compact::Budget;
use crate::journal::{Journal, StepPart};
use crate::model::ModelClient;
use crate::sandbox::Sandbox;
use crate::skills::SkillLibrary;
use crate::store::{StoreError, TurnStore};

/// An event of the turn, attributed to the agent that produced it.
#[derive(Debug, Clone, PartialEq)]
pub struct Emitted {
    /// `None` for Rover, the role for a subagent.
    pub subagent: Option<Subagent>,
    /// What happened.
    pub event: TurnEventKind,
}

/// Where a turn's events go, in order.
pub type Events = UnboundedSender<Emitted>;

/// The tool RPC path: Rover's RPC client and the tools exchange.
#[derive(Debug, Clone)]
pub struct ToolRpc {
    /// The client (Direct Reply-to, deadline and retries under the same call id).
    pub client: RpcClient,
    /// The tools exchange; the routing key is the tool's event.
    pub exchange: String,
}

/// What the agent loop measures: model calls (latency, tokens) and tool calls (by event and
/// outcome, with the RPC round trip).
#[derive(Debug, Clone)]
pub struct AgentMetrics {
    /// Model calls.
    pub model: ModelMetrics,
    /// Tool calls as the agent saw them.
    pub tools: ToolMetrics,
}

impl AgentMetrics {
    /// Registers the agent's families in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        Self {
            model: ModelMetrics::register(registry),
            tools: ToolMetrics::register(
                registry,
                "rover_rpc_duration_seconds",
                "Tool calls as the agent ran them: the RPC round trip for tool-server tools, \
                 the local work for the agent's own tools",
            ),
        }
    }
}

/// What every turn of a worker runs with: the model, the tool server, the skills, where calls are
/// counted, and the loop's settings. Built once per process.
#[derive(Debug)]
pub struct Runtime {
    /// The model.
    pub model: ModelClient,
    /// The tool server.
    pub tools: ToolRpc,
    /// Skill bodies, readable under `/skills/`.
    pub skills: SkillLibrary,
    /// Where model and tool calls are counted; `None` counts nothing.
    pub metrics: Option<AgentMetrics>,
    /// Put model output and tool arguments into spans (`telemetry.capture_content`).
    pub capture_content: bool,
    /// Model calls one agent may make in a turn.
    pub step_limit: u32,
    /// The model's context, as the history sent with a turn must fit it.
    pub context: Budget,
}

/// Everything a turn needs besides the agent and the conversation.
#[derive(Clone, Copy)]
pub struct TurnDeps<'a> {
    /// What every turn runs with.
    pub runtime: &'a Runtime,
    /// The turn: its ids, the caller's runtime context, and the gateway-signed identity every
    /// RPC call carries.
    pub turn: &'a TurnRequest,
    /// Where the turn's state lives: its thread, steps, approvals, ledger and artifacts.
    pub store: &'a dyn TurnStore,
    /// What this turn already did, when it is resumed after a worker died (or continues a paused
    /// chain): replayed instead of calling the model or a tool again.
    pub journal: &'a Journal,
    /// What the turn may spend, and what it has.
    pub budget: &'a TurnBudget,
    /// The turn's stop signal: once requested, nothing new starts and a model stream is cut.
    pub stop: &'a Stop,
    /// Where events go.
    pub events: &'a Events,
    /// The thread's sandbox, if mounted.
    pub sandbox: Option<&'a Sandbox>,
}

impl std::fmt::Debug for TurnDeps<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnDeps")
            .field("turn_id", &self.turn.turn_id)
            .field("sandbox", &self.sandbox.is_some())
            .finish_non_exhaustive()
    }
}

impl TurnDeps<'_> {
    /// The model.
    pub(crate) fn model(&self) -> &ModelClient {
        &self.runtime.model
    }

    /// The caller's runtime context.
    pub(crate) fn context(&self) -> &RuntimeContext {
        &self.turn.context
    }
}

/// Stores `part` before the loop moves on; a turn whose progress cannot be recorded stops. The
/// store says whether a stop was asked meanwhile: a stop whose word was lost still stops the
/// turn at its next step.
pub(crate) async fn record(
    deps: TurnDeps<'_>,
    agent: &str,
    step: u32,
    part: &str,
    record: Value,
) -> Result<(), StoreError> {
    let stopped = deps
        .store
        .record(StepPart {
            agent: agent.to_owned(),
            step,
            part: part.to_owned(),
            record,
        })
        .await?;
    if stopped {
        deps.stop.request();
    }
    Ok(())
}
