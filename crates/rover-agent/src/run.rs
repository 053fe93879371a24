//! The agent loop: call the model (streaming), emit text as it arrives, collect tool calls, run
//! them (concurrently within a step), feed the envelopes back, until the model answers without
//! tool calls, asks the user a question, or the step limit is reached.

use std::collections::BTreeMap;
use std::time::Instant;

use futures::StreamExt as _;
use rover_contracts::AgentToolResult;
use rover_contracts::context::{RuntimeContext, Subagent};
use rover_contracts::identity::SignedTurnIdentity;
use rover_contracts::ids::{ToolCallId, TurnId};
use rover_contracts::tools::ToolKind;
use rover_contracts::wire::{
    self, FinishReason, TokenUsage, ToolCall, ToolReply, TurnEventKind, TurnInput,
};
use rover_messaging::RpcClient;
use rover_telemetry::metrics::{ModelMetrics, Registry, ToolMetrics};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;
use tracing::Instrument as _;

use crate::agent::Agent;
use crate::budget::TurnBudget;
use crate::local;
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
}

/// A completed part of a turn's agent loop: the model's answer in a step (`part` = `"model"`), or
/// one tool call's result (`part` = the call id).
#[derive(Debug, Clone, PartialEq)]
pub struct StepPart {
    /// `""` for Rover, the `task` call id for a subagent's run.
    pub agent: String,
    /// The agent's model step.
    pub step: u32,
    /// `"model"`, or the tool call id.
    pub part: String,
    /// The assistant message (OpenAI format), or the tool's envelope.
    pub record: Value,
}

/// The part name of a step's model answer.
const MODEL_PART: &str = "model";

/// Stores a [`StepPart`] durably (the worker's: a row in Postgres, in the caller's tenant).
pub type StepRecorder =
    dyn Fn(StepPart) -> futures::future::BoxFuture<'static, Result<(), String>> + Send + Sync;

/// The parts a turn recorded before it was interrupted.
#[derive(Debug, Default, Clone)]
pub struct Journal {
    parts: std::collections::HashMap<(String, u32, String), Value>,
}

impl Journal {
    /// A journal of `parts`.
    pub fn new(parts: impl IntoIterator<Item = StepPart>) -> Self {
        Self {
            parts: parts
                .into_iter()
                .map(|p| ((p.agent, p.step, p.part), p.record))
                .collect(),
        }
    }

    /// How many parts it holds.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Whether it holds nothing (a fresh turn).
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    fn get(&self, agent: &str, step: u32, part: &str) -> Option<&Value> {
        self.parts.get(&(agent.to_owned(), step, part.to_owned()))
    }
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

/// How a turn ended, and what it added to the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnResult {
    /// The messages this turn added (user, assistant and tool messages, OpenAI format), to store.
    pub messages: Vec<Value>,
    /// Why it ended.
    pub finish: FinishReason,
}

/// What a finished loop produced.
struct Outcome {
    messages: Vec<Value>,
    text: String,
    finish: FinishReason,
}

/// Runs one turn of `agent` after `history` (OpenAI-format messages). A leading `system`
/// message in `history` is the thread's summary (`compact::summary_message`): it is appended to
/// the agent's system prompt, so the model sees one system message.
pub async fn run_turn(
    agent: &Agent,
    history: Vec<Value>,
    input: &TurnInput,
    deps: TurnDeps<'_>,
) -> Result<TurnResult, ModelError> {
    let mut history = history.into_iter().peekable();
    let mut system = agent.system_prompt.clone();
    if let Some(summary) = history.next_if(|m| m["role"] == "system") {
        system.push_str("\n\n");
        system.push_str(summary["content"].as_str().unwrap_or_default());
    }
    let mut conversation = Vec::with_capacity(history.len() + 2);
    conversation.push(json!({ "role": "system", "content": system }));
    conversation.extend(history);
    let first = input_message(input, deps.context);
    conversation.push(first.clone());
    let outcome = run_loop(agent, "", complete_tool_results(conversation), deps).await?;
    let mut messages = vec![first];
    messages.extend(outcome.messages);
    Ok(TurnResult {
        messages,
        finish: outcome.finish,
    })
}

/// The message a turn's input becomes: the staff member's text, or the answer to the `ask_user`
/// call the thread waits on, as that call's result.
pub fn input_message(input: &TurnInput, context: &RuntimeContext) -> Value {
    match input {
        TurnInput::Message { text } => json!({ "role": "user", "content": text }),
        TurnInput::AskUserAnswer {
            tool_call_id,
            output,
        } => {
            let answer = AgentToolResult::data(output.clone(), context.call_scope().describe());
            json!({ "role": "tool", "tool_call_id": tool_call_id, "content": answer.to_model_string() })
        }
    }
}

/// A tool call the model made, as assembled from the stream.
#[derive(Debug, Default, Clone)]
struct Call {
    id: String,
    name: String,
    arguments: String,
}

/// Stores `part` before the loop moves on; a turn whose progress cannot be recorded stops.
async fn record(
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

/// Emits a recorded model answer as it was streamed and returns its text and calls.
fn replay_model(
    assistant: &Value,
    step: &str,
    emit: &impl Fn(TurnEventKind),
) -> (String, Vec<Call>) {
    let text = assistant["content"].as_str().unwrap_or_default().to_owned();
    if !text.is_empty() {
        let id = format!("{step}-text");
        emit(TurnEventKind::TextStart { id: id.clone() });
        emit(TurnEventKind::TextDelta {
            id: id.clone(),
            delta: text.clone(),
        });
        emit(TurnEventKind::TextEnd { id });
    }
    let calls: Vec<Call> = assistant["tool_calls"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|call| Call {
            id: call["id"].as_str().unwrap_or_default().to_owned(),
            name: call["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            arguments: call["function"]["arguments"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        })
        .collect();
    for call in &calls {
        emit(TurnEventKind::ToolInputStart {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            label: local::label(&call.name),
        });
    }
    (text, calls)
}

/// The agent loop of `agent`, journalled under `key` (`""` for Rover, the `task` call id for a
/// subagent).
async fn run_loop(
    agent: &Agent,
    key: &str,
    mut conversation: Vec<Value>,
    deps: TurnDeps<'_>,
) -> Result<Outcome, ModelError> {
    let emit = |event| {
        let _ = deps.events.send(Emitted {
            subagent: agent.subagent,
            event,
        });
    };
    let tools = agent.tool_definitions();
    // Call ids are unique in the turn: a subagent's carry the `task` call that started it.
    let prefix = agent
        .subagent
        .map_or(String::new(), |s| format!("{key}/{}-", s.name()));
    let mut added = Vec::new();
    for step in 0..deps.step_limit {
        emit(TurnEventKind::StartStep);
        let span = tracing::info_span!(
            "gen_ai.chat",
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.request.model = deps.model.model(),
            gen_ai.response.model = tracing::field::Empty,
            gen_ai.agent.name = agent.name(),
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            gen_ai.response.finish_reasons = tracing::field::Empty,
            gen_ai.output.text = tracing::field::Empty,
        );
        let step_name = format!("{prefix}{step}");
        let recorded = deps.journal.get(key, step, MODEL_PART);
        let (text, calls) = match recorded {
            Some(assistant) => replay_model(assistant, &step_name, &emit),
            None => {
                let (text, calls) = stream_step(deps, &conversation, &tools, &step_name, &emit)
                    .instrument(span)
                    .await?;
                record(
                    deps,
                    key,
                    step,
                    MODEL_PART,
                    assistant_message(&text, &calls),
                )
                .await?;
                (text, calls)
            }
        };
        let assistant = assistant_message(&text, &calls);
        if calls.is_empty() {
            conversation.push(assistant.clone());
            added.push(assistant);
            emit(TurnEventKind::FinishStep);
            return Ok(Outcome {
                messages: added,
                text,
                finish: FinishReason::Stop,
            });
        }
        conversation.push(assistant.clone());
        added.push(assistant);
        let inputs: Vec<Result<Value, String>> = calls
            .iter()
            .map(|c| parse_arguments(&c.arguments))
            .collect();
        for (call, input) in calls.iter().zip(&inputs) {
            let input = input
                .clone()
                .unwrap_or_else(|_| Value::String(call.arguments.clone()));
            emit(TurnEventKind::ToolInputAvailable {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                input,
            });
        }
        // `ask_user` alone ends the turn waiting: its answer arrives as the next message, the one
        // result the step lacks. Beside other calls it is refused with an error result (below),
        // so every call of a step always has its result and the thread stays valid.
        if asks_alone(agent, &calls, &inputs) {
            emit(TurnEventKind::FinishStep);
            return Ok(Outcome {
                messages: added,
                text,
                finish: FinishReason::ToolCalls,
            });
        }
        // The step's calls fit the turn's budget together, or none of them starts.
        let fresh = calls
            .iter()
            .filter(|c| deps.journal.get(key, step, &c.id).is_none())
            .count();
        deps.budget.before_tool_calls(fresh)?;
        // Each result is recorded as it arrives; a resumed step runs only the calls it lacks.
        let results = futures::future::join_all(calls.iter().zip(inputs).map(|(call, input)| {
            let recorded = deps
                .journal
                .get(key, step, &call.id)
                .and_then(|v| serde_json::from_value::<AgentToolResult<Value>>(v.clone()).ok());
            async move {
                if let Some(envelope) = recorded {
                    return Ok(envelope);
                }
                let envelope = execute(agent, call, input, deps).await;
                let stored = serde_json::to_value(&envelope).unwrap_or_default();
                record(deps, key, step, &call.id, stored).await?;
                Ok::<_, ModelError>(envelope)
            }
        }))
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
        // A subagent that spent the turn's budget failed its `task`; the turn stops here too.
        if let Some(spent) = deps.budget.exhausted() {
            return Err(spent.into());
        }
        for (call, envelope) in calls.iter().zip(results) {
            let content = envelope.to_model_string();
            match &envelope {
                AgentToolResult::Data { .. } => emit(TurnEventKind::ToolOutputAvailable {
                    tool_call_id: call.id.clone(),
                    output: serde_json::from_str(&content)
                        .unwrap_or(Value::String(content.clone())),
                }),
                AgentToolResult::Error { error } => emit(TurnEventKind::ToolOutputError {
                    tool_call_id: call.id.clone(),
                    error_text: error.clone(),
                }),
            }
            let message = json!({ "role": "tool", "tool_call_id": call.id, "content": content });
            conversation.push(message.clone());
            added.push(message);
        }
        emit(TurnEventKind::FinishStep);
    }
    // Out of steps: end with a clear sentence, not silence.
    let id = format!("{prefix}limit");
    let notice = format!(
        "I stopped because this needed more than {} steps. Please narrow the request or ask again.",
        deps.step_limit
    );
    emit(TurnEventKind::TextStart { id: id.clone() });
    emit(TurnEventKind::TextDelta {
        id: id.clone(),
        delta: notice.clone(),
    });
    emit(TurnEventKind::TextEnd { id });
    added.push(json!({ "role": "assistant", "content": notice }));
    Ok(Outcome {
        messages: added,
        text: notice,
        finish: FinishReason::Length,
    })
}

/// Streams one model call: emits text as it arrives and tool-input starts as calls appear.
async fn stream_step(
    deps: TurnDeps<'_>,
    conversation: &[Value],
    tools: &[Value],
    step: &str,
    emit: &impl Fn(TurnEventKind),
) -> Result<(String, Vec<Call>), ModelError> {
    let prompt: usize = conversation
        .iter()
        .chain(tools)
        .map(crate::compact::estimate)
        .sum();
    let prompt = u64::try_from(prompt).unwrap_or(u64::MAX);
    let reservation = deps.budget.before_model_call(prompt).await?;
    let started = Instant::now();
    let mut usage = None;
    let mut model = deps.model.model().to_owned();
    let streamed = async {
        let mut stream = deps.model.stream(conversation, tools).await?;
        tracing::Span::current().record("gen_ai.response.model", stream.model.as_str());
        model = stream.model;
        read_step(&mut stream.chunks, step, emit, &mut usage).await
    }
    .await;
    if let Some(metrics) = deps.metrics {
        metrics
            .model
            .observe(&model, streamed.is_ok(), started.elapsed(), usage);
    }
    // What the model reported; a server that reports nothing is charged the estimate.
    let used = match (usage, &streamed) {
        (Some((input, output)), _) => TokenUsage {
            input_tokens: input.into(),
            output_tokens: output.into(),
        },
        (None, Ok((text, calls))) => TokenUsage {
            input_tokens: prompt,
            output_tokens: (text.len() + calls.iter().map(|c| c.arguments.len()).sum::<usize>())
                .div_ceil(4) as u64,
        },
        (None, Err(_)) => TokenUsage {
            input_tokens: prompt,
            output_tokens: 0,
        },
    };
    deps.budget.after_model_call(reservation, used).await;
    if deps.capture_content
        && let Ok((text, _)) = &streamed
    {
        tracing::Span::current().record("gen_ai.output.text", text.as_str());
    }
    streamed
}

/// Reads one model call's stream to its end.
async fn read_step(
    stream: &mut crate::model::ChunkStream,
    step: &str,
    emit: &impl Fn(TurnEventKind),
    usage_seen: &mut Option<(u32, u32)>,
) -> Result<(String, Vec<Call>), ModelError> {
    let text_id = format!("{step}-text");
    let mut text = String::new();
    let mut calls: BTreeMap<u32, Call> = BTreeMap::new();
    let mut finish_reason = None;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if let Some(usage) = &chunk.usage {
            *usage_seen = Some((usage.prompt_tokens, usage.completion_tokens));
            tracing::Span::current().record("gen_ai.usage.input_tokens", usage.prompt_tokens);
            tracing::Span::current().record("gen_ai.usage.output_tokens", usage.completion_tokens);
        }
        for choice in chunk.choices {
            if let Some(delta) = choice.delta.content.filter(|d| !d.is_empty()) {
                if text.is_empty() {
                    emit(TurnEventKind::TextStart {
                        id: text_id.clone(),
                    });
                }
                text.push_str(&delta);
                emit(TurnEventKind::TextDelta {
                    id: text_id.clone(),
                    delta,
                });
            }
            for piece in choice.delta.tool_calls.unwrap_or_default() {
                let call = calls.entry(piece.index).or_default();
                if let Some(id) = piece.id.filter(|id| !id.is_empty()) {
                    // Scope the model's id to the agent and step, so ids never repeat in a turn.
                    call.id = format!("{step}-{}", id.chars().take(64).collect::<String>());
                }
                if let Some(function) = piece.function {
                    if let Some(name) = function.name.filter(|n| !n.is_empty()) {
                        call.name = name;
                        let label = local::label(&call.name);
                        let id = if call.id.is_empty() {
                            format!("{step}-{}", piece.index)
                        } else {
                            call.id.clone()
                        };
                        call.id = id.clone();
                        emit(TurnEventKind::ToolInputStart {
                            tool_call_id: id,
                            tool_name: call.name.clone(),
                            label,
                        });
                    }
                    if let Some(arguments) = function.arguments {
                        call.arguments.push_str(&arguments);
                    }
                }
            }
            if let Some(reason) = choice.finish_reason {
                finish_reason = Some(format!("{reason:?}").to_lowercase());
            }
        }
    }
    if !text.is_empty() {
        emit(TurnEventKind::TextEnd { id: text_id });
    }
    if let Some(reason) = &finish_reason {
        tracing::Span::current().record("gen_ai.response.finish_reasons", reason.as_str());
    }
    let calls: Vec<Call> = calls.into_values().filter(|c| !c.name.is_empty()).collect();
    if finish_reason.is_none() && calls.is_empty() && text.is_empty() {
        return Err(ModelError::Malformed(
            "the stream ended without a response".to_owned(),
        ));
    }
    Ok((text, calls))
}

/// The tool that pauses the turn for the staff member's answer.
const ASK_USER: &str = "ask_user";

/// The result of an `ask_user` call made beside other calls.
const ASK_ALONE: &str = "The question was not asked: ask_user must be the only tool call in its \
     step. Wait for the other calls' results, then call ask_user on its own if you still need \
     the answer.";

/// Whether the step is one valid `ask_user` call and nothing else: only then does the turn end
/// waiting for the answer.
fn asks_alone(agent: &Agent, calls: &[Call], inputs: &[Result<Value, String>]) -> bool {
    match (calls, inputs) {
        ([call], [Ok(args)]) if call.name == ASK_USER => agent
            .tool(ASK_USER)
            .is_some_and(|tool| crate::agent::validate_arguments(tool, args).is_ok()),
        _ => false,
    }
}

/// Gives every tool call in `conversation` a result: a call left without one (a thread stored
/// before `ask_user` had to be asked alone) gets an error result right after its siblings', so
/// the model is never sent a thread it would refuse.
fn complete_tool_results(conversation: Vec<Value>) -> Vec<Value> {
    let mut completed = Vec::with_capacity(conversation.len());
    let mut pending: Vec<String> = Vec::new();
    let flush = |completed: &mut Vec<Value>, pending: &mut Vec<String>| {
        for id in pending.drain(..) {
            let missing = AgentToolResult::<Value>::error(
                "This call has no result: it was not run, or its question was not answered. Call it \
                 again if it is still needed.",
            );
            completed.push(
                json!({ "role": "tool", "tool_call_id": id, "content": missing.to_model_string() }),
            );
        }
    };
    for message in conversation {
        if message["role"] == "tool" {
            let id = message["tool_call_id"].as_str().unwrap_or_default();
            pending.retain(|p| p != id);
        } else {
            flush(&mut completed, &mut pending);
            if message["role"] == "assistant" {
                pending = message["tool_calls"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|call| call["id"].as_str().map(str::to_owned))
                    .collect();
            }
        }
        completed.push(message);
    }
    flush(&mut completed, &mut pending);
    completed
}

/// The assistant message of a step, as the conversation (and the journal) keep it.
fn assistant_message(text: &str, calls: &[Call]) -> Value {
    let mut assistant = json!({ "role": "assistant", "content": if text.is_empty() { Value::Null } else { Value::String(text.to_owned()) } });
    if !calls.is_empty() {
        assistant["tool_calls"] = calls
            .iter()
            .map(|c| json!({ "id": c.id, "type": "function", "function": { "name": c.name, "arguments": c.arguments } }))
            .collect();
    }
    assistant
}

fn parse_arguments(arguments: &str) -> Result<Value, String> {
    if arguments.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str(arguments).map_err(|e| format!("The arguments are not valid JSON: {e}."))
}

/// Runs one tool call and returns the envelope the model reads. Never fails: every failure is an
/// error envelope the model can explain.
async fn execute(
    agent: &Agent,
    call: &Call,
    input: Result<Value, String>,
    deps: TurnDeps<'_>,
) -> AgentToolResult<Value> {
    let span = tracing::info_span!(
        "gen_ai.execute_tool",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %call.name,
        gen_ai.tool.call.id = %call.id,
        gen_ai.tool.call.arguments = tracing::field::Empty,
        rover.tool.outcome = tracing::field::Empty,
    );
    if deps.capture_content {
        span.record("gen_ai.tool.call.arguments", call.arguments.as_str());
    }
    let started = Instant::now();
    let (event, outcome, result) = run_tool(agent, call, input, deps)
        .instrument(span.clone())
        .await;
    span.record("rover.tool.outcome", outcome);
    if let Some(metrics) = deps.metrics {
        metrics.tools.observe(event, outcome, started.elapsed());
    }
    result
}

/// Runs the call: returns the tool's event (its name for local tools), the outcome label and the
/// envelope.
async fn run_tool<'c>(
    agent: &Agent,
    call: &'c Call,
    input: Result<Value, String>,
    deps: TurnDeps<'_>,
) -> (&'c str, &'static str, AgentToolResult<Value>) {
    let Some(tool) = agent.tool(&call.name) else {
        return (
            "unknown",
            "invalid",
            AgentToolResult::error(format!(
                "There is no tool named {} here.",
                call.name.chars().take(64).collect::<String>()
            )),
        );
    };
    let args = match input {
        Ok(args) => args,
        Err(error) => return (&call.name, "invalid", AgentToolResult::error(error)),
    };
    if call.name == ASK_USER {
        // Only reached when the question was not asked alone (or its arguments are invalid).
        let error = crate::agent::validate_arguments(tool, &args)
            .err()
            .unwrap_or_else(|| ASK_ALONE.to_owned());
        return (&call.name, "invalid", AgentToolResult::error(error));
    }
    match tool.contract.kind {
        ToolKind::Rpc { event, .. } => {
            let (outcome, result) = call_rpc(event, &call.id, args, deps).await;
            (event, outcome, result)
        }
        ToolKind::Local { .. } => {
            if let Err(error) = crate::agent::validate_arguments(tool, &args) {
                return (&call.name, "invalid", AgentToolResult::error(error));
            }
            let result = if call.name == "task" {
                delegate(agent, &call.id, args, deps).await
            } else {
                local::run(agent, &call.name, args, deps).await
            };
            let outcome = if result.is_error() { "error" } else { "ok" };
            (&call.name, outcome, result)
        }
    }
}

/// The generic RPC proxy: identity and scope come from the signed turn identity, never from the
/// model's arguments; the tool server checks the arguments against the same schema.
async fn call_rpc(
    event: &str,
    call_id: &str,
    args: Value,
    deps: TurnDeps<'_>,
) -> (&'static str, AgentToolResult<Value>) {
    let call_id = ToolCallId::for_turn(deps.turn_id, call_id);
    let call = ToolCall {
        call_id: call_id.clone(),
        event: event.to_owned(),
        identity: deps.identity.clone(),
        args,
    };
    let reply = deps
        .tools
        .client
        .call(
            &deps.tools.exchange,
            event,
            call_id.as_str(),
            wire::encode(&call),
        )
        .await;
    match reply {
        Ok(bytes) => match wire::decode::<ToolReply>(&bytes) {
            Ok(reply) => (reply.outcome.as_str(), reply.result),
            Err(error) => (
                "error",
                AgentToolResult::error(format!(
                    "The tool server's reply could not be read: {error}."
                )),
            ),
        },
        Err(error) => {
            tracing::warn!(%error, event, "tool call failed");
            (
                "error",
                AgentToolResult::error("The tool did not answer in time. Try again in a moment."),
            )
        }
    }
}

/// `task`: runs a role subagent on the description and returns its final answer.
async fn delegate(
    agent: &Agent,
    call_id: &str,
    args: Value,
    deps: TurnDeps<'_>,
) -> AgentToolResult<Value> {
    let args: rover_contracts::tools::TaskArgs = match serde_json::from_value(args) {
        Ok(args) => args,
        Err(error) => {
            return AgentToolResult::error(format!("Invalid arguments for task: {error}."));
        }
    };
    let Some(subagent) = agent.delegate(args.subagent) else {
        return AgentToolResult::error(format!(
            "There is no {} specialist for you this turn.",
            args.subagent.name()
        ));
    };
    let conversation = vec![
        json!({ "role": "system", "content": subagent.system_prompt }),
        json!({ "role": "user", "content": args.description }),
    ];
    let span = tracing::info_span!(
        "gen_ai.invoke_agent",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = subagent.name()
    );
    match Box::pin(run_loop(subagent, call_id, conversation, deps))
        .instrument(span)
        .await
    {
        Ok(outcome) => AgentToolResult::data(
            Value::String(outcome.text),
            deps.context.call_scope().describe(),
        ),
        Err(error) => AgentToolResult::error(format!(
            "The {} specialist failed: {error}.",
            args.subagent.name()
        )),
    }
}

/// The id of the `ask_user` call the thread is waiting on, if its last message asked one. Only
/// that call may be answered: a client cannot add a tool result for any other call.
pub fn pending_question(history: &[Value]) -> Option<&str> {
    let last = history.last()?;
    if last["role"] != "assistant" {
        return None;
    }
    last["tool_calls"]
        .as_array()?
        .iter()
        .find(|call| call["function"]["name"] == "ask_user")
        .and_then(|call| call["id"].as_str())
}
