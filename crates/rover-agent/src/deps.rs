//! What a turn's agents run with: the event channel, the tool RPC, the model, the journal's
//! recorder, the sandbox and the artifact store, and the metrics they count in.

use rover_contracts::context::{RuntimeContext, Subagent};
use rover_contracts::identity::SignedTurnIdentity;
use rover_contracts::ids::{ThreadId, TurnId};
use rover_contracts::wire::TurnEventKind;
use rover_messaging::RpcClient;
use rover_telemetry::metrics::{ModelMetrics, Registry, ToolMetrics};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use crate::budget::TurnBudget;
use crate::journal::{Journal, StepPart, StepRecorder};
use crate::model::{ModelClient, ModelError};
use crate::sandbox::Sandbox;
use crate::skills::SkillLibrary;

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

/// Everything a turn needs besides the agent and the conversation.
#[derive(Clone, Copy)]
pub struct TurnDeps<'a> {
    /// The model.
    pub model: &'a ModelClient,
    /// The tool server.
    pub tools: &'a ToolRpc,
    /// The gateway-signed identity every RPC call carries.
    pub identity: &'a SignedTurnIdentity,
    /// The caller's runtime context.
    pub context: &'a RuntimeContext,
    /// Skill bodies, readable under `/skills/`.
    pub skills: &'a SkillLibrary,
    /// The thread's sandbox, if mounted.
    pub sandbox: Option<&'a Sandbox>,
    /// The turn (scopes tool call ids).
    pub turn_id: TurnId,
    /// The thread (the chat): the turn's GenAI spans carry it as `gen_ai.conversation.id`.
    pub thread_id: ThreadId,
    /// Model calls one agent may make in a turn.
    pub step_limit: u32,
    /// Where events go.
    pub events: &'a Events,
    /// Stores a file as a downloadable artifact of the thread (`save_artifact`); `None` without a
    /// backend to store into.
    pub artifacts: Option<&'a ArtifactStore>,
    /// Where model and tool calls are counted; `None` counts nothing.
    pub metrics: Option<&'a AgentMetrics>,
    /// Put model output and tool arguments into spans (`telemetry.capture_content`).
    pub capture_content: bool,
    /// What this turn already did, when it is resumed after a worker died: replayed instead of
    /// calling the model or a tool again.
    pub journal: &'a Journal,
    /// Records each completed part before the loop moves on; `None` records nothing.
    pub record: Option<&'a StepRecorder>,
    /// What the turn may spend, and what it has.
    pub budget: &'a TurnBudget,
    /// Asked before a write tool call runs (approval before writes); `None` runs every call.
    pub approvals: Option<&'a crate::approval::ApprovalGate>,
    /// The turn's stop signal: once requested, nothing new starts and a model stream is cut.
    pub stop: &'a crate::Stop,
}

impl std::fmt::Debug for TurnDeps<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnDeps")
            .field("turn_id", &self.turn_id)
            .field("step_limit", &self.step_limit)
            .field("sandbox", &self.sandbox.is_some())
            .field("artifacts", &self.artifacts.is_some())
            .finish_non_exhaustive()
    }
}

/// A file `save_artifact` hands to the backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewArtifact {
    /// The title the staff member sees (also the download's name).
    pub title: String,
    /// IANA media type, guessed from the file's extension.
    pub media_type: String,
    /// The file's bytes.
    pub content: Vec<u8>,
}

/// The backend that stores artifacts (the worker's: a row in Postgres, in the caller's tenant).
pub type ArtifactStore = dyn Fn(
        NewArtifact,
    ) -> futures::future::BoxFuture<'static, Result<rover_contracts::ids::ArtifactId, String>>
    + Send
    + Sync;

/// Stores `part` before the loop moves on; a turn whose progress cannot be recorded stops.
pub(crate) async fn record(
    deps: TurnDeps<'_>,
    agent: &str,
    step: u32,
    part: &str,
    record: Value,
) -> Result<(), ModelError> {
    let Some(recorder) = deps.record else {
        return Ok(());
    };
    recorder(StepPart {
        agent: agent.to_owned(),
        step,
        part: part.to_owned(),
        record,
    })
    .await
    .map_err(ModelError::Journal)
}
