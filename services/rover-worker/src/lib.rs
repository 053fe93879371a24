//! `rover-worker`, Rover's agent worker: consumes turns from the turns queue, builds the agent for
//! each turn from its runtime context (nothing cached across turns), runs the model/tool loop, and
//! publishes the turn's events for whichever gateway holds the stream.
//!
//! A model error, timeout or malformed model output ends that turn with an error event and leaves
//! the worker serving others. The thread's history is kept server-side: the worker never trusts a
//! client's copy.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rover_agent::model::{ModelClient, ModelEndpoint, ModelOptions};
use rover_agent::skills::SkillLibrary;
use rover_agent::{AgentMetrics, Runtime, ToolRpc};
use rover_contracts::identity::TurnVerifier;
use rover_contracts::wire::{self, TurnRequest};
use rover_messaging::{Broker, ConsumerOptions, Publisher, RpcOptions, Topology};
use rover_telemetry::metrics::{ApprovalMetrics, Metrics, TurnMetrics};

use crate::turn::handle_turn;

mod budget;
mod control;
mod events;
mod request;
mod resume;
pub mod retention;
mod settings;
mod turn;

pub use budget::BudgetSettings;
pub use settings::{AgentSettings, Settings};

/// Everything a turn handler shares.
#[derive(Debug)]
struct Shared {
    settings: Settings,
    pool: sqlx::PgPool,
    /// The model, the tool RPC, the skills and the loop's settings every turn runs with.
    runtime: Runtime,
    publisher: Publisher,
    topology: Topology,
    verifier: TurnVerifier,
    turns: TurnMetrics,
    /// Refreshed from the database each time `/metrics` is scraped.
    approvals: ApprovalMetrics,
    metrics: Metrics,
    /// The turns running here (to stop them) and the threads whose turns wait here.
    control: Arc<control::Control>,
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
        let model = model_client(&settings);
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
        let turns = TurnMetrics::register(&mut registry, &rover_agent::budget::BudgetError::LIMITS);
        let approvals = ApprovalMetrics::register(&mut registry);
        let runtime = Runtime {
            model,
            tools,
            skills,
            metrics: Some(AgentMetrics::register(&mut registry)),
            capture_content: settings.telemetry.capture_content,
            step_limit: settings.agent.step_limit,
            context: rover_agent::compact::Budget {
                max_tokens: settings.agent.context_budget_tokens,
                tool_result_max_tokens: settings.agent.tool_result_max_tokens,
            },
        };
        let shared = Arc::new(Shared {
            turns,
            approvals,
            metrics: Metrics::new(registry),
            verifier,
            settings,
            pool,
            runtime,
            publisher,
            topology,
            control: Arc::default(),
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
        // Stops and ended turns are followed before any turn runs, so none is missed.
        let control = shared
            .control
            .follow(&broker, &shared.topology)
            .await
            .context("Failed to follow the control exchange")?;
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
        let router = health_router(&broker, &shared);
        let (stop_sweep, sweep_stopped) = tokio::sync::oneshot::channel::<()>();
        let sweeper = tokio::spawn(sweep_sandboxes_periodically(
            shared.settings.agent.clone(),
            sweep_stopped,
        ));
        let (stop_retention, retention_stopped) = tokio::sync::oneshot::channel::<()>();
        let retention = tokio::spawn(retention::sweep_periodically(
            shared.pool.clone(),
            Duration::from_secs(shared.settings.agent.chat_sweep_interval_secs),
            retention_stopped,
        ));
        let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
        let http = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async {
                    let _ = http_stopped.await;
                })
                .await
        });
        // In the background: readiness never waits for the model server.
        let warming = shared
            .settings
            .model
            .warm_prompt_cache
            .then(|| tokio::spawn(warm_prompt_cache(shared.runtime.model.clone())));
        tracing::info!(%queue, model = shared.runtime.model.model(), http = %http_addr, "worker ready; waiting for shutdown");
        shutdown.await;
        if let Some(warming) = warming {
            warming.abort();
        }
        tracing::info!("draining: no new turns; finishing the turns in flight");
        consumer.shutdown().await;
        control.shutdown().await;
        let _ = stop_sweep.send(());
        let _ = sweeper.await;
        let _ = stop_retention.send(());
        let _ = retention.await;
        let _ = stop_http.send(());
        let _ = http.await;
        broker.close().await;
        shared.pool.close().await;
        Ok(())
    }
}

/// Reads the approvals waiting across every school into `approvals`, within a second; when the
/// database does not answer, the last values stay and the failure is logged (the scrape itself
/// still answers, so the other series are not lost with it).
async fn refresh_approvals(approvals: &ApprovalMetrics, pool: &sqlx::PgPool) {
    let read = tokio::time::timeout(
        Duration::from_secs(1),
        rover_turnstore::approvals::waiting(pool),
    )
    .await;
    match read {
        Ok(Ok((waiting, oldest))) => {
            approvals.waiting.set(waiting);
            approvals.oldest_wait_seconds.set(oldest);
        }
        Ok(Err(error)) => tracing::warn!(%error, "could not read the approvals waiting"),
        Err(_) => tracing::warn!("reading the approvals waiting took over a second"),
    }
}

/// `/healthz`, `/metrics` and `/readyz` (ready while the broker is reachable).
fn health_router(broker: &Broker, shared: &Shared) -> axum::Router {
    let ready = broker.clone();
    let scraped = (
        shared.metrics.clone(),
        shared.approvals.clone(),
        shared.pool.clone(),
    );
    axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .route(
            "/metrics",
            axum::routing::get(move || {
                let (metrics, approvals, pool) = scraped.clone();
                async move {
                    refresh_approvals(&approvals, &pool).await;
                    metrics.response()
                }
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
        )
}

/// Warms the model server's prompt cache with the fixed rules of Rover's prompt
/// (`model.warm_prompt_cache`), logging how long it took or why it failed; a failure changes
/// nothing else.
async fn warm_prompt_cache(model: ModelClient) {
    tracing::info!(
        model = model.model(),
        "warming the model server's prompt cache with the rules of Rover's prompt"
    );
    match rover_agent::warm::warm_prompt_cache(&model).await {
        Ok(took) => tracing::info!(
            took_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            "warmed the model server's prompt cache"
        ),
        Err(error) => tracing::warn!(%error, "could not warm the model server's prompt cache"),
    }
}

/// The model client from `model.*` (its fallbacks inherit the primary's key, call style and
/// provider unless they set their own) and the retry settings.
fn model_client(settings: &Settings) -> ModelClient {
    let model = &settings.model;
    ModelClient::new(ModelOptions {
        base_url: model.base_url.clone(),
        api_key: model.api_key.expose().clone(),
        model: model.name.clone(),
        text_tool_calls: model.text_tool_calls.recovers(),
        provider: model.provider.clone(),
        fallbacks: model
            .fallbacks
            .iter()
            .map(|fallback| ModelEndpoint {
                base_url: fallback.base_url.clone(),
                api_key: fallback
                    .api_key
                    .as_ref()
                    .unwrap_or(&model.api_key)
                    .expose()
                    .clone(),
                model: fallback.name.clone(),
                text_tool_calls: fallback
                    .text_tool_calls
                    .unwrap_or(model.text_tool_calls)
                    .recovers(),
                provider: fallback
                    .provider
                    .clone()
                    .unwrap_or_else(|| model.provider.clone()),
            })
            .collect(),
        timeout: Duration::from_millis(model.timeout_ms),
        attempts: settings.agent.model_attempts,
        backoff: Duration::from_millis(model.backoff_ms),
    })
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
