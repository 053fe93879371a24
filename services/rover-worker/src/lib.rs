//! `rover-worker`, Rover's agent worker: consumes turns from the turns queue, builds the agent for
//! each turn from its runtime context (nothing cached across turns), runs the model/tool loop, and
//! publishes the turn's events for whichever gateway holds the stream.
//!
//! A model error, timeout or malformed model output ends that turn with an error event and leaves
//! the worker serving others. The thread's history is kept server-side: the worker never trusts a
//! client's copy.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::FutureExt as _;
use rover_agent::compact::{self, Budget, Summary, Window};
use rover_agent::model::{ModelClient, ModelEndpoint, ModelOptions};
use rover_agent::sandbox::{Quota, Sandbox, SandboxLimits, SandboxOwner};
use rover_agent::skills::SkillLibrary;
use rover_agent::{
    Agent, AgentMetrics, Emitted, Journal, Mounts, NewArtifact, StepPart, ToolRpc, TurnDeps,
    build_agent, run_turn,
};
use rover_contracts::ErrorCode;
use rover_contracts::identity::TurnVerifier;
use rover_contracts::wire::{self, FinishReason, TurnEvent, TurnEventKind, TurnInput, TurnRequest};
use rover_messaging::{
    Broker, ConsumerOptions, Delivery, Outcome, OutgoingMessage, Publisher, RpcOptions, Topology,
};
use rover_settings::{
    AmqpSettings, DatabaseSettings, HttpSettings, ModelSettings, TelemetrySettings,
    VerifierSettings,
};
use rover_telemetry::metrics::{Metrics, TurnMetrics};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::Instrument as _;

use crate::resume::Continuation;

mod budget;
mod resume;

pub use budget::BudgetSettings;

/// The worker's settings (`rover-worker --print-config` shows the effective ones).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// Health listener.
    pub http: HttpSettings,
    /// The broker turns are consumed from.
    pub amqp: AmqpSettings,
    /// The database the conversation history lives in (as the application role).
    pub database: DatabaseSettings,
    /// The OpenAI-compatible model endpoint.
    pub model: ModelSettings,
    /// The agent: skills, sandboxes and limits.
    pub agent: AgentSettings,
    /// What a turn, a user's day and a school's day may spend.
    pub budget: BudgetSettings,
    /// The gateway's public key: every turn's runtime context must match its signed identity.
    pub identity: VerifierSettings,
    /// Logging.
    pub telemetry: TelemetrySettings,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            http: HttpSettings::on(([127, 0, 0, 1], 9091)),
            amqp: AmqpSettings::default(),
            database: DatabaseSettings::default(),
            model: ModelSettings::default(),
            agent: AgentSettings::default(),
            budget: BudgetSettings::default(),
            identity: VerifierSettings::default(),
            telemetry: TelemetrySettings::default(),
        }
    }
}

/// How agents are built and bounded.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentSettings {
    /// The skills folder (`general/`, `rover/`, one per role subagent).
    pub skills_dir: PathBuf,
    /// Where per-thread sandboxes live (`<dir>/<school>/<user>/<thread>/`); unset, threads have
    /// no files.
    pub sandbox_dir: Option<PathBuf>,
    /// Most bytes one thread's sandbox may hold.
    pub sandbox_limit_bytes: u64,
    /// Most files and directories one thread's sandbox may hold.
    pub sandbox_limit_entries: u64,
    /// Most bytes one user's sandboxes may hold together.
    pub sandbox_user_limit_bytes: u64,
    /// Most files and directories one user's sandboxes may hold together.
    pub sandbox_user_limit_entries: u64,
    /// Most bytes one school's sandboxes may hold together.
    pub sandbox_school_limit_bytes: u64,
    /// Most files and directories one school's sandboxes may hold together (this also bounds
    /// the walk that measures usage before each write).
    pub sandbox_school_limit_entries: u64,
    /// A thread's sandbox not opened for this many seconds is removed by the sweep.
    pub sandbox_max_age_secs: u64,
    /// How often the sweep runs (it also runs when the worker starts), in seconds.
    pub sandbox_sweep_interval_secs: u64,
    /// Model calls one agent may make in a turn before it stops with a clear message.
    pub step_limit: u32,
    /// Attempts of a model request on transport errors.
    pub model_attempts: u32,
    /// The longest a turn may run, in milliseconds; it then ends with an error. RabbitMQ's
    /// `consumer_timeout` must be longer (see ARCHITECTURE.md, *Durable turns*).
    pub turn_timeout_ms: u64,
    /// The most one model request may carry, in estimated tokens (system prompt, tool
    /// definitions, the thread's summary and history, the new message; a quarter is left for
    /// the turn's own steps). Older turns are summarised to stay under it.
    pub context_budget_tokens: usize,
    /// An earlier turn's tool result larger than this (estimated tokens) is sent as a stub
    /// naming its call id; the full result stays stored with the thread.
    pub tool_result_max_tokens: usize,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            skills_dir: PathBuf::from("skills"),
            sandbox_dir: None,
            sandbox_limit_bytes: 10 * 1024 * 1024,
            sandbox_limit_entries: 1_000,
            sandbox_user_limit_bytes: 50 * 1024 * 1024,
            sandbox_user_limit_entries: 5_000,
            sandbox_school_limit_bytes: 1024 * 1024 * 1024,
            sandbox_school_limit_entries: 50_000,
            sandbox_max_age_secs: 30 * 24 * 60 * 60,
            sandbox_sweep_interval_secs: 60 * 60,
            step_limit: 8,
            model_attempts: 2,
            turn_timeout_ms: 10 * 60 * 1000,
            context_budget_tokens: 32_000,
            tool_result_max_tokens: 2_000,
        }
    }
}

impl AgentSettings {
    /// The sandbox quotas, per thread, user and school.
    pub fn sandbox_limits(&self) -> SandboxLimits {
        SandboxLimits {
            thread: Quota {
                bytes: self.sandbox_limit_bytes,
                entries: self.sandbox_limit_entries,
            },
            user: Quota {
                bytes: self.sandbox_user_limit_bytes,
                entries: self.sandbox_user_limit_entries,
            },
            school: Quota {
                bytes: self.sandbox_school_limit_bytes,
                entries: self.sandbox_school_limit_entries,
            },
        }
    }
}

impl rover_service::Telemetry for Settings {
    fn telemetry(&self) -> &TelemetrySettings {
        &self.telemetry
    }
}

/// Everything a turn handler shares.
#[derive(Debug)]
struct Shared {
    settings: Settings,
    pool: sqlx::PgPool,
    model: ModelClient,
    tools: ToolRpc,
    skills: SkillLibrary,
    publisher: Publisher,
    topology: Topology,
    verifier: TurnVerifier,
    turns: TurnMetrics,
    agent_metrics: AgentMetrics,
    metrics: Metrics,
}

/// A built worker: connected, skills loaded, not yet consuming.
#[derive(Debug)]
pub struct App {
    shared: Arc<Shared>,
    broker: Broker,
    listener: tokio::net::TcpListener,
}

impl App {
    /// Loads the skills (a bad skill fails start-up, naming the file), connects to the broker and
    /// the database, and binds the health listener.
    pub async fn build(settings: Settings) -> anyhow::Result<App> {
        let verifier = rover_service::turn_verifier(&settings.identity, "the worker")?;
        let skills = SkillLibrary::load(&settings.agent.skills_dir).with_context(|| {
            format!(
                "Failed to load skills from {}",
                settings.agent.skills_dir.display()
            )
        })?;
        let pool = rover_domain::app_pool(&settings.database)
            .context("Failed to configure the database pool")?;
        let (broker, topology) = rover_messaging::connect_service(&settings.amqp, "rover-worker")
            .await
            .context("Failed to connect to RabbitMQ and declare the topology")?;
        let model = ModelClient::new(ModelOptions {
            base_url: settings.model.base_url.clone(),
            api_key: settings.model.api_key.expose().clone(),
            model: settings.model.name.clone(),
            fallbacks: settings
                .model
                .fallbacks
                .iter()
                .map(|fallback| ModelEndpoint {
                    base_url: fallback.base_url.clone(),
                    api_key: fallback
                        .api_key
                        .as_ref()
                        .unwrap_or(&settings.model.api_key)
                        .expose()
                        .clone(),
                    model: fallback.name.clone(),
                })
                .collect(),
            timeout: Duration::from_millis(settings.model.timeout_ms),
            attempts: settings.agent.model_attempts,
            backoff: Duration::from_millis(settings.model.backoff_ms),
        });
        let tools = ToolRpc {
            client: broker.rpc_client(RpcOptions {
                attempt_timeout: Duration::from_millis(settings.amqp.rpc_attempt_timeout_ms),
                attempts: settings.amqp.rpc_attempts,
            }),
            exchange: topology.tools_exchange(),
        };
        let listener = tokio::net::TcpListener::bind(settings.http.listen)
            .await
            .with_context(|| format!("Failed to bind {}", settings.http.listen))?;
        let publisher = broker.publisher();
        let mut registry = rover_telemetry::metrics::Registry::default();
        let turns = TurnMetrics::register(&mut registry);
        let agent_metrics = AgentMetrics::register(&mut registry);
        let shared = Arc::new(Shared {
            turns,
            agent_metrics,
            metrics: Metrics::new(registry),
            verifier,
            settings,
            pool,
            model,
            tools,
            skills,
            publisher,
            topology,
        });
        Ok(App {
            shared,
            broker,
            listener,
        })
    }

    /// Where the health listener is bound.
    pub fn http_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or(self.shared.settings.http.listen)
    }

    /// Consumes turns until `shutdown` resolves; then stops consuming, lets the turns in flight
    /// finish, and returns.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        let App {
            shared,
            broker,
            listener,
        } = self;
        let options = ConsumerOptions {
            prefetch: shared.settings.amqp.prefetch,
            consumer_tag: String::new(),
        };
        let http_addr = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let queue = shared.topology.turns_queue();
        let handler_shared = shared.clone();
        // Old sandboxes go before any turn runs; then periodically (below).
        sweep_sandboxes(&shared.settings.agent).await;
        let consumer = broker
            .consume_decoded(
                &queue,
                options,
                wire::decode::<TurnRequest>,
                move |request, delivery| {
                    let shared = handler_shared.clone();
                    async move { handle_turn(&shared, request, delivery).await }
                },
            )
            .await
            .context("Failed to start consuming turns")?;
        let ready = broker.clone();
        let metrics = shared.metrics.clone();
        let router = axum::Router::new()
            .route("/healthz", axum::routing::get(|| async { "ok" }))
            .route(
                "/metrics",
                axum::routing::get(move || {
                    let metrics = metrics.clone();
                    async move { metrics.response() }
                }),
            )
            .route(
                "/readyz",
                axum::routing::get(move || {
                    let ready = ready.is_ready();
                    async move {
                        if ready {
                            (axum::http::StatusCode::OK, "ready")
                        } else {
                            (
                                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                                "broker unreachable",
                            )
                        }
                    }
                }),
            );
        let (stop_sweep, sweep_stopped) = tokio::sync::oneshot::channel::<()>();
        let sweeper = tokio::spawn(sweep_sandboxes_periodically(
            shared.settings.agent.clone(),
            sweep_stopped,
        ));
        let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
        let http = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async {
                    let _ = http_stopped.await;
                })
                .await
        });
        tracing::info!(%queue, model = shared.model.model(), http = %http_addr, "worker ready; waiting for shutdown");
        shutdown.await;
        tracing::info!("draining: no new turns; finishing the turns in flight");
        consumer.shutdown().await;
        let _ = stop_sweep.send(());
        let _ = sweeper.await;
        let _ = stop_http.send(());
        let _ = http.await;
        broker.close().await;
        shared.pool.close().await;
        Ok(())
    }
}

/// Removes sandboxes unused for `sandbox_max_age_secs`, once; failures are logged (the next sweep
/// tries again). Without a sandbox directory it does nothing.
async fn sweep_sandboxes(settings: &AgentSettings) {
    let Some(base) = settings.sandbox_dir.clone() else {
        return;
    };
    let max_age = Duration::from_secs(settings.sandbox_max_age_secs);
    match tokio::task::spawn_blocking(move || rover_agent::sandbox::sweep(&base, max_age)).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => tracing::warn!(%error, "could not sweep old sandboxes"),
        Err(error) => tracing::warn!(%error, "the sandbox sweep stopped"),
    }
}

/// Sweeps old sandboxes every `sandbox_sweep_interval_secs` (the first sweep is at start-up, before
/// any turn is consumed), until `stop` resolves.
async fn sweep_sandboxes_periodically(
    settings: AgentSettings,
    stop: tokio::sync::oneshot::Receiver<()>,
) {
    if settings.sandbox_dir.is_none() {
        return;
    }
    let period = Duration::from_secs(settings.sandbox_sweep_interval_secs.max(1));
    let mut every = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let sweeping = async {
        loop {
            every.tick().await;
            sweep_sandboxes(&settings).await;
        }
    };
    tokio::select! {
        () = sweeping => {}
        _ = stop => {}
    }
}

/// Builds and runs the worker until `shutdown` resolves.
pub async fn run(settings: Settings, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    App::build(settings).await?.run(shutdown).await
}

/// Runs one turn and settles its message. Every turn ends visibly: `finish`, or `error` then
/// `finish`; the message is acked once the outcome is recorded.
async fn handle_turn(shared: &Shared, request: TurnRequest, delivery: Delivery) -> Outcome {
    let span = tracing::info_span!(
        "rover.worker.turn",
        turn_id = %request.turn_id,
        thread_id = %request.thread_id,
        redelivered = delivery.redelivered,
        delivery_count = delivery.delivery_count,
        rover.input.text = tracing::field::Empty,
        rover.turn.finish_reason = tracing::field::Empty,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
    );
    let turn = request.turn_id;
    // The runtime context travels unsigned beside the signed identity; it must say the same, or
    // the message was not minted by a gateway and is dead-lettered without running anything.
    if let Err(reason) = check_identity(&shared.verifier, &request) {
        tracing::warn!(turn_id = %turn, reason, "refusing a turn whose identity does not verify");
        return Outcome::Reject;
    }
    if shared.settings.telemetry.capture_content
        && let TurnInput::Message { text } = &request.input
    {
        span.record("rover.input.text", text.as_str());
    }
    // What an earlier delivery of this turn did, if a worker died running it.
    let prior = match load_prior(shared, &request).instrument(span.clone()).await {
        Ok(prior) => prior,
        Err(error) => {
            tracing::warn!(parent: &span, %error, "could not read the turn's journal; retrying the turn");
            return Outcome::Retry;
        }
    };
    if prior.continuation.finished() {
        // Its worker may have died between recording the last events and publishing them.
        tracing::info!(parent: &span, "the turn had already finished; sending its end again");
        let (_, closed) = tokio::sync::mpsc::unbounded_channel::<Emitted>();
        forward_events(shared, &request, prior.continuation, closed, None)
            .instrument(span)
            .await;
        return Outcome::Ack;
    }
    if let Some(finish) = prior.completed {
        // Its worker died after saving the turn, before sending `finish`: send it now.
        tracing::info!(parent: &span, "the turn was done but never said so; finishing it");
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel::<Emitted>();
        let _ = sender.send(Emitted {
            subagent: None,
            event: TurnEventKind::Finish {
                reason: finish,
                usage: None,
            },
        });
        drop(sender);
        forward_events(shared, &request, prior.continuation, receiver, None)
            .instrument(span)
            .await;
        return Outcome::Ack;
    }
    let fresh = prior.journal.is_empty() && prior.continuation.next_seq() == 0;
    // A turn that keeps failing its workers is stopped while a worker can still tell the client:
    // on its last delivery it answers with an error, unrun, and goes to the dead-letter queue.
    let give_up =
        delivery.delivery_count + 1 >= u64::from(shared.settings.amqp.delivery_limit.max(1));
    if !fresh {
        tracing::info!(
            parent: &span,
            parts = prior.journal.len(),
            events = prior.continuation.next_seq(),
            delivery_count = delivery.delivery_count,
            give_up,
            "resuming a turn from its journal"
        );
    } else {
        shared.turns.started.inc();
    }
    let started = Instant::now();
    // The thread must exist (and be the caller's) before any event is recorded against it.
    let owned = ensure_thread(shared, &request).await;
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel::<Emitted>();
    // Events are published in the turn's span, so each carries the turn's trace context.
    let forwarder = forward_events(
        shared,
        &request,
        prior.continuation,
        receiver,
        fresh.then_some(started),
    )
    .instrument(span.clone());
    let producer = async {
        let _ = sender.send(Emitted {
            subagent: None,
            event: TurnEventKind::Start {
                message_id: request.message_id.clone(),
                trace_id: rover_telemetry::trace_id(&span),
            },
        });
        let budget = budget::turn_budget(&shared.settings.budget, &shared.pool, &request);
        let outcome = if give_up {
            Err(Failure {
                code: ErrorCode::Internal,
                message: "This request failed repeatedly and was stopped. Please try again, or \
                      rephrase it."
                    .to_owned(),
            })
        } else {
            rover_settings::fault::point("worker.turn");
            let deadline = Duration::from_millis(shared.settings.agent.turn_timeout_ms);
            async {
                owned?;
                tokio::time::timeout(
                    deadline,
                    run_request(shared, &request, &sender, &prior.journal, &budget),
                )
                .await
                .map_err(|_| Failure {
                    code: ErrorCode::DeadlineExceeded,
                    message: "This took too long and was stopped. Please try again.".to_owned(),
                })?
            }
            .instrument(span.clone())
            .await
        };
        let finish = match outcome {
            Ok(finish) => finish,
            Err(failure) => {
                tracing::warn!(parent: &span, error = %failure.message, give_up, "turn failed");
                let _ = sender.send(Emitted {
                    subagent: None,
                    event: TurnEventKind::Error {
                        code: failure.code,
                        message: failure.message,
                    },
                });
                FinishReason::Error
            }
        };
        // Counted before `finish` is sent: a client that saw the end sees it in the metrics too.
        span.record("rover.turn.finish_reason", tracing::field::debug(finish));
        tracing::info!(
            parent: &span,
            turn_id = %request.turn_id,
            ?finish,
            took_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "turn finished"
        );
        shared
            .turns
            .duration
            .observe(started.elapsed().as_secs_f64());
        if finish == FinishReason::Error {
            shared.turns.failed.inc();
        } else {
            shared.turns.completed.inc();
        }
        // The ledger has every delivery's calls; this one's are the fallback.
        let usage = budget::settled_usage(&shared.pool, school_of(&request), request.turn_id)
            .await
            .unwrap_or_else(|error| {
                tracing::warn!(parent: &span, %error, "could not read the turn's token usage");
                budget.usage()
            });
        span.record("gen_ai.usage.input_tokens", usage.input_tokens);
        span.record("gen_ai.usage.output_tokens", usage.output_tokens);
        let _ = sender.send(Emitted {
            subagent: None,
            event: TurnEventKind::Finish {
                reason: finish,
                usage: Some(usage),
            },
        });
        drop(sender);
    };
    tokio::join!(producer, forwarder);
    if give_up {
        Outcome::Reject
    } else {
        Outcome::Ack
    }
}

/// What earlier deliveries of a turn left behind.
struct Prior {
    /// The turn's messages are in the thread's history: it did its work, and ended so.
    completed: Option<FinishReason>,
    /// The events already sent, to continue after.
    continuation: Continuation,
    /// The parts already done, to replay.
    journal: Journal,
}

async fn load_prior(
    shared: &Shared,
    request: &TurnRequest,
) -> Result<Prior, rover_domain::DomainError> {
    let mut tx =
        rover_domain::begin_tenant(&shared.pool, request.context.user_details.school.id).await?;
    // A turn whose messages are in the history completed; it ended waiting on `ask_user` when its
    // last message asks.
    let completed = rover_domain::conversation::turn_last_message(&mut tx, request.turn_id)
        .await?
        .map(|last| {
            if rover_agent::pending_question(std::slice::from_ref(&last)).is_some() {
                FinishReason::ToolCalls
            } else {
                FinishReason::Stop
            }
        });
    let events: Vec<TurnEvent> = rover_domain::conversation::events(&mut tx, request.turn_id)
        .await?
        .into_iter()
        .filter_map(|payload| serde_json::from_value(payload).ok())
        .collect();
    let parts = rover_domain::conversation::steps(&mut tx, request.turn_id).await?;
    tx.commit().await?;
    Ok(Prior {
        completed,
        continuation: Continuation::after(events),
        journal: Journal::new(parts.into_iter().map(|p| StepPart {
            agent: p.agent,
            step: p.step,
            part: p.part,
            record: p.record,
        })),
    })
}

/// Numbers, records and publishes a turn's events, in batches: each batch is recorded (for replay
/// and resume) before it is published, so a client that reconnects never misses an event it could
/// not have seen live. Events a client saw before a worker died are held back.
async fn forward_events(
    shared: &Shared,
    request: &TurnRequest,
    mut continuation: Continuation,
    mut receiver: tokio::sync::mpsc::UnboundedReceiver<Emitted>,
    first_token_from: Option<Instant>,
) {
    let turn = request.turn_id;
    let (school, thread) = (request.context.user_details.school.id, request.thread_id);
    let exchange = shared.topology.turn_events_exchange();
    let mut first_token_from = first_token_from;
    // A worker may have died between recording events and publishing them: publish what was
    // recorded again (gateways drop the `seq`s they have), so no client waits for a lost one.
    for event in continuation.recorded() {
        publish_event(&shared.publisher, &exchange, event).await;
    }
    let mut batch = Vec::new();
    while receiver.recv_many(&mut batch, 256).await > 0 {
        let events: Vec<TurnEvent> = batch
            .drain(..)
            .filter_map(|emitted| {
                continuation.admit(TurnEvent {
                    turn_id: turn,
                    seq: 0,
                    subagent: emitted.subagent,
                    event: emitted.event,
                })
            })
            .collect();
        if events.is_empty() {
            continue;
        }
        if let Some(from) = first_token_from
            && events
                .iter()
                .any(|e| e.subagent.is_none() && matches!(e.event, TurnEventKind::TextDelta { .. }))
        {
            first_token_from = None;
            shared
                .turns
                .time_to_first_token
                .observe(from.elapsed().as_secs_f64());
        }
        if let Err(error) = record_events(&shared.pool, school, thread, turn, &events).await {
            tracing::warn!(turn_id = %turn, %error, "could not record turn events");
        }
        if events
            .iter()
            .any(|e| matches!(e.event, TurnEventKind::Finish { .. }))
        {
            rover_settings::fault::point("worker.finish-recorded");
        }
        for event in &events {
            publish_event(&shared.publisher, &exchange, event).await;
        }
    }
}

/// Why a turn failed, for the client.
struct Failure {
    code: ErrorCode,
    message: String,
}

/// The turn's signed identity verifies, and the runtime context, turn and thread match it.
fn check_identity(verifier: &TurnVerifier, request: &TurnRequest) -> Result<(), String> {
    let verified = verifier
        .verify(&request.identity)
        .map_err(|e| e.to_string())?;
    let context = &request.context;
    let matches = verified.turn_id() == request.turn_id
        && verified.thread_id() == request.thread_id
        && verified.identity() == &context.identity()
        && verified.scope() == &context.call_scope();
    if matches {
        Ok(())
    } else {
        Err("the runtime context does not match its signed identity".to_owned())
    }
}

async fn ensure_thread(shared: &Shared, request: &TurnRequest) -> Result<(), Failure> {
    let user = request.context.user_details.user_id;
    let attempt = async {
        let mut tx =
            rover_domain::begin_tenant(&shared.pool, request.context.user_details.school.id)
                .await?;
        rover_domain::conversation::ensure_thread(&mut tx, request.thread_id, user).await?;
        tx.commit().await
    };
    attempt.await.map_err(|e| Failure {
        code: e.code(),
        message: e.to_string(),
    })
}

/// A turn stopped by a spent budget: counted by limit, and told to the client in one sentence.
fn spent_budget(shared: &Shared, spent: &rover_agent::budget::BudgetError) -> Failure {
    shared
        .turns
        .budget_exceeded
        .get_or_create(&rover_telemetry::metrics::LimitLabels {
            limit: spent.limit(),
        })
        .inc();
    Failure {
        code: ErrorCode::BudgetExceeded,
        message: spent.to_string(),
    }
}

fn school_of(request: &TurnRequest) -> rover_contracts::ids::SchoolId {
    request.context.user_details.school.id
}

async fn run_request(
    shared: &Shared,
    request: &TurnRequest,
    events: &rover_agent::Events,
    journal: &Journal,
    budget: &rover_agent::budget::TurnBudget,
) -> Result<FinishReason, Failure> {
    let context = &request.context;
    let school = context.user_details.school.id;
    let internal = |what: &str| {
        let what = what.to_owned();
        move |error: rover_domain::DomainError| {
            tracing::error!(%error, "{what}");
            Failure {
                code: error.code(),
                message: "The conversation could not be loaded. Please try again.".to_owned(),
            }
        }
    };
    let mut tx = rover_domain::begin_tenant(&shared.pool, school)
        .await
        .map_err(internal("begin"))?;

    let history = rover_domain::conversation::history(&mut tx, request.thread_id)
        .await
        .map_err(internal("history"))?;
    let summary = rover_domain::conversation::summary(&mut tx, request.thread_id)
        .await
        .map_err(internal("summary"))?;
    tx.commit().await.map_err(internal("commit"))?;
    if let TurnInput::AskUserAnswer { tool_call_id, .. } = &request.input
        && rover_agent::pending_question(&history) != Some(tool_call_id.as_str())
    {
        return Err(Failure {
            code: ErrorCode::InvalidRequest,
            message: "That question is no longer waiting for an answer.".to_owned(),
        });
    }

    let sandbox = match &shared.settings.agent.sandbox_dir {
        Some(dir) => Some(
            // Per school (and user): a thread is keyed by (school, id), so the same id in two
            // schools is two threads, and must be two file areas.
            Sandbox::open(
                dir,
                SandboxOwner {
                    school,
                    user: context.user_details.user_id,
                    thread: request.thread_id,
                },
                shared.settings.agent.sandbox_limits(),
            )
            .map_err(|e| Failure {
                code: ErrorCode::Internal,
                message: format!("The chat's files are unavailable: {e}"),
            })?,
        ),
        None => None,
    };
    let artifacts = {
        let (pool, thread, user) = (
            shared.pool.clone(),
            request.thread_id,
            context.user_details.user_id,
        );
        move |artifact: NewArtifact| {
            let pool = pool.clone();
            async move {
                let mut tx = rover_domain::begin_tenant(&pool, school)
                    .await
                    .map_err(|e| e.to_string())?;
                let id = rover_domain::conversation::save_artifact(
                    &mut tx,
                    thread,
                    user,
                    &artifact.title,
                    &artifact.media_type,
                    &artifact.content,
                )
                .await
                .map_err(|e| e.to_string())?;
                tx.commit().await.map_err(|e| e.to_string())?;
                Ok(id)
            }
            .boxed()
        }
    };
    let recorder = {
        let (pool, thread, turn) = (shared.pool.clone(), request.thread_id, request.turn_id);
        move |part: StepPart| {
            let pool = pool.clone();
            async move {
                let mut tx = rover_domain::begin_tenant(&pool, school)
                    .await
                    .map_err(|e| e.to_string())?;
                let part = rover_domain::conversation::StepPart {
                    agent: part.agent,
                    step: part.step,
                    part: part.part,
                    record: part.record,
                };
                rover_domain::conversation::record_step(&mut tx, thread, turn, &part)
                    .await
                    .map_err(|e| e.to_string())?;
                tx.commit().await.map_err(|e| e.to_string())
            }
            .boxed()
        }
    };
    // Built fresh for every turn from this turn's context: a role change shows on the next turn.
    let agent = build_agent(
        context,
        &shared.skills,
        Mounts {
            sandbox: sandbox.is_some(),
        },
    );
    let history = window(shared, request, &agent, history, summary, budget).await?;
    let deps = TurnDeps {
        model: &shared.model,
        tools: &shared.tools,
        identity: &request.identity,
        context,
        skills: &shared.skills,
        sandbox: sandbox.as_ref(),
        turn_id: request.turn_id,
        step_limit: shared.settings.agent.step_limit,
        events,
        artifacts: Some(&artifacts),
        metrics: Some(&shared.agent_metrics),
        capture_content: shared.settings.telemetry.capture_content,
        journal,
        record: Some(&recorder),
        budget,
    };
    let result = run_turn(&agent, history, &request.input, deps)
        .await
        .map_err(|e| match e {
            rover_agent::model::ModelError::Budget(spent) => spent_budget(shared, &spent),
            rover_agent::model::ModelError::Journal(error) => {
                tracing::error!(%error, "could not record the turn's progress");
                Failure {
                    code: ErrorCode::Unavailable,
                    message: "The assistant could not save its progress. Please try again."
                        .to_owned(),
                }
            }
            e => Failure {
                code: ErrorCode::ModelError,
                message: format!("The assistant's model failed: {e}"),
            },
        })?;

    let mut tx = rover_domain::begin_tenant(&shared.pool, school)
        .await
        .map_err(internal("begin"))?;
    rover_domain::conversation::append(
        &mut tx,
        request.thread_id,
        request.turn_id,
        &result.messages,
    )
    .await
    .map_err(internal("append"))?;
    tx.commit().await.map_err(internal("commit"))?;
    Ok(result.finish)
}

/// The part of the thread's history this turn sends, under the context budget
/// (`rover_agent::compact`). When it does not fit, the model first folds the oldest turns into
/// the thread's stored summary.
#[tracing::instrument(skip_all, fields(history = history.len(), summarised = tracing::field::Empty))]
async fn window(
    shared: &Shared,
    request: &TurnRequest,
    agent: &Agent,
    history: Vec<Value>,
    stored: Option<(usize, String)>,
    spend: &rover_agent::budget::TurnBudget,
) -> Result<Vec<Value>, Failure> {
    let budget = Budget {
        max_tokens: shared.settings.agent.context_budget_tokens,
        tool_result_max_tokens: shared.settings.agent.tool_result_max_tokens,
    };
    let input = rover_agent::run::input_message(&request.input, &request.context);
    let fixed = compact::fixed_cost(&agent.system_prompt, &agent.tool_definitions(), &input);
    let mut summary = stored.map(|(covers, text)| Summary { covers, text });
    // One summarising pass always fits (see `compact::fit`); the bound is a guard.
    for _ in 0..3 {
        let (from, to) = match compact::fit(&history, summary.as_ref(), fixed, budget) {
            Window::Fits(messages) => return Ok(messages),
            Window::TooLarge { fixed } => {
                return Err(Failure {
                    code: ErrorCode::InvalidRequest,
                    message: format!(
                        "This message, with Rover's instructions and tools (about {fixed} \
                         tokens), is too long for the model's context. Please shorten it."
                    ),
                });
            }
            Window::Summarise { from, to } => (from, to),
        };
        tracing::Span::current().record("summarised", to);
        let previous = summary.as_ref().map(|s| s.text.as_str());
        let text = compact::summarise(&shared.model, spend, previous, &history[from..to], budget)
            .await
            .map_err(|e| match e {
                rover_agent::model::ModelError::Budget(spent) => spent_budget(shared, &spent),
                e => Failure {
                    code: ErrorCode::ModelError,
                    message: format!(
                        "The assistant's model failed while summarising the thread: {e}"
                    ),
                },
            })?;
        let saved = async {
            let mut tx =
                rover_domain::begin_tenant(&shared.pool, request.context.user_details.school.id)
                    .await?;
            rover_domain::conversation::save_summary(&mut tx, request.thread_id, to, &text).await?;
            tx.commit().await
        };
        saved.await.map_err(|error| {
            tracing::error!(%error, "could not store the thread's summary");
            Failure {
                code: error.code(),
                message: "The conversation could not be saved. Please try again.".to_owned(),
            }
        })?;
        tracing::info!(covers = to, "the thread's oldest turns were summarised");
        summary = Some(Summary { covers: to, text });
    }
    Err(Failure {
        code: ErrorCode::Internal,
        message: "The conversation could not be fitted to the model's context.".to_owned(),
    })
}

async fn publish_event(publisher: &Publisher, exchange: &str, event: &TurnEvent) {
    let key = rover_messaging::turn_event_routing_key(&event.turn_id.to_string());
    let message = OutgoingMessage::new(wire::encode(event))
        .with_message_id(format!("{}/{}", event.turn_id, event.seq))
        .transient();
    match publisher.publish(exchange, &key, message).await {
        Ok(()) => {}
        // Nobody is streaming this turn right now; the recorded events serve a later resume.
        Err(rover_messaging::PublishError::Unroutable { .. }) => {
            tracing::debug!(seq = event.seq, "no gateway is following this turn")
        }
        Err(error) => tracing::warn!(%error, seq = event.seq, "could not publish a turn event"),
    }
}

async fn record_events(
    pool: &sqlx::PgPool,
    school: rover_contracts::ids::SchoolId,
    thread: rover_contracts::ids::ThreadId,
    turn: rover_contracts::ids::TurnId,
    events: &[TurnEvent],
) -> Result<(), rover_domain::DomainError> {
    let rows: Vec<(i32, serde_json::Value)> = events
        .iter()
        .map(|e| {
            (
                i32::try_from(e.seq).unwrap_or(i32::MAX),
                serde_json::to_value(e).unwrap_or_default(),
            )
        })
        .collect();
    let mut tx = rover_domain::begin_tenant(pool, school).await?;
    rover_domain::conversation::record_events(&mut tx, thread, turn, &rows).await?;
    // The turn ends with its `finish`, recorded here before it is published: from then on it no
    // longer counts against its user, school or thread, so a client that saw the end can send
    // the next message at once. A redelivered turn closes again, harmlessly.
    if events
        .iter()
        .any(|e| matches!(e.event, TurnEventKind::Finish { .. }))
    {
        rover_domain::conversation::close_turn(&mut tx, turn).await?;
    }
    tx.commit().await
}
