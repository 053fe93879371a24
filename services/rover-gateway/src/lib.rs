//! `rover-gateway`, the HTTP edge of Rover (seed hops 1 and 6): `POST /api/chat` speaks the AI SDK
//! UI message stream so a `useChat` Hub works unchanged; JWT authentication; the runtime context
//! minted per turn from live rows and the turn identity signed with the gateway's Ed25519 key; the
//! REST API over the same domain functions and authorization as the tools.
//!
//! [`App::build`] connects and binds; [`App::run`] serves until the shutdown future resolves, then
//! lets open streams finish up to a deadline.

mod approval_policy;
mod audit;
mod auth;
mod authorize;
mod caller;
mod chat_id;
mod console;
mod demo;
mod edge;
mod error;
mod events;
mod extract;
mod history;
mod input;
mod limits;
mod mcp;
mod observe;
mod openapi;
mod openapi_parts;
mod rest;
mod settings;
mod state;
mod stop;
mod turns;
mod ui_chunks;

// What the binary, the gateway's own tests and the bench and eval use; nothing else is public.
pub use auth::{Authenticator, DEVELOPMENT_HS256_SECRET, dev_token};
pub use console::NOT_BUILT;
pub use demo::narrate;
pub use edge::serve;
pub use error::{ErrorBody, ErrorDetail};
pub use events::TurnEvents;
pub use limits::{StreamSlots, TrustedProxies};
pub use mcp::approval::Questions;
pub use observe::metrics;
pub use rest::contracts::{REGENERATE_COMMAND, TOOL_CONTRACTS_FILE, tool_contracts_json};
pub use settings::{
    AuthSettings, ChatSettings, DoubleTexting, GatewayHttp, McpSettings, Settings, SigningSettings,
};
pub use state::{AppState, Shared};

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use sqlx::postgres::PgPoolOptions;

/// A built gateway: connected and bound, not yet serving.
#[derive(Debug)]
pub struct App {
    state: AppState,
    listener: tokio::net::TcpListener,
    metrics_listener: tokio::net::TcpListener,
}

impl App {
    /// Loads keys, connects to the broker (declaring the topology) and the database, and binds.
    pub async fn build(settings: Settings) -> anyhow::Result<App> {
        let signer = settings.identity.signer()?;
        let questions = mcp::approval::Questions::new(&signer)
            .context("Failed to derive the MCP approval secret from the identity key")?;
        let auth = auth::Authenticator::new(&settings.auth)
            .context("Failed to set up token verification")?;
        let proxies = limits::TrustedProxies::parse(&settings.http.trusted_proxies)?;
        let pool = rover_domain::app_pool(&settings.database)
            .context("Failed to configure the database pool")?;
        let (broker, topology) = rover_messaging::connect_service(&settings.amqp, "rover-gateway")
            .await
            .context("Failed to connect to RabbitMQ and declare the topology")?;
        let listener = tokio::net::TcpListener::bind(settings.http.listen)
            .await
            .with_context(|| format!("Failed to bind {}", settings.http.listen))?;
        let metrics_listener = tokio::net::TcpListener::bind(settings.http.metrics_addr)
            .await
            .with_context(|| format!("Failed to bind {}", settings.http.metrics_addr))?;
        let publisher = broker.publisher();
        let events = events::TurnEvents::start(&broker, &topology)
            .await
            .context("Failed to subscribe to turn events")?;
        let (metrics, registry) = observe::metrics();
        let resumes = limits::StreamSlots::new(settings.chat.max_resumes_per_user);
        let state = AppState(Arc::new(Shared {
            resumes,
            events,
            proxies,
            settings,
            pool,
            broker,
            publisher,
            topology,
            auth,
            signer,
            questions,
            metrics,
            registry,
        }));
        Ok(App {
            state,
            listener,
            metrics_listener,
        })
    }

    /// Where the gateway listens (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or(self.state.settings.http.listen)
    }

    /// Where `/metrics` is served (useful with port 0).
    pub fn metrics_addr(&self) -> SocketAddr {
        self.metrics_listener
            .local_addr()
            .unwrap_or(self.state.settings.http.metrics_addr)
    }

    /// Serves until `shutdown` resolves, then lets open streams finish up to the grace period.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let metrics_addr = self.metrics_addr();
        let App {
            state,
            listener,
            metrics_listener,
        } = self;
        let grace = Duration::from_millis(state.settings.http.shutdown_grace_ms);
        let router = router(state.clone());
        let (stop_metrics, metrics_stopped) = tokio::sync::oneshot::channel::<()>();
        let metrics = tokio::spawn(
            axum::serve(metrics_listener, metrics_router(state.clone()))
                .with_graceful_shutdown(async {
                    let _ = metrics_stopped.await;
                })
                .into_future(),
        );
        tracing::info!(listen = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(), metrics = %metrics_addr, "gateway ready; waiting for shutdown");
        let (stopping, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(edge::serve(
            listener,
            router,
            state.settings.http.clone(),
            state.proxies.clone(),
            async move {
                shutdown.await;
                let _ = stopping.send(());
            },
        ));
        let _ = stopped.await;
        match tokio::time::timeout(grace, server).await {
            Ok(joined) => joined.context("the server task failed")?,
            Err(_) => tracing::warn!(
                ?grace,
                "open streams did not finish within the grace period"
            ),
        }
        let _ = stop_metrics.send(());
        let _ = metrics.await;
        state.broker.close().await;
        state.pool.close().await;
        Ok(())
    }
}

/// The metrics listener's routes: `/metrics` only. Each scrape first reads the turns and tools
/// queues' depth and consumers from the broker.
pub fn metrics_router(state: AppState) -> Router {
    Router::new()
        .route(
            "/metrics",
            axum::routing::get(
                |axum::extract::State(state): axum::extract::State<AppState>| async move {
                    refresh_queues(&state).await;
                    state.registry.response()
                },
            ),
        )
        .with_state(state)
}

/// Sets `rover_queue_messages` and `rover_queue_consumers` for the queues workers and tool servers
/// consume, as the broker reports them now (a second at most each; a queue the broker does not
/// answer for keeps its last values, and the failure is logged).
async fn refresh_queues(state: &AppState) {
    for queue in [state.topology.turns_queue(), state.topology.tools_queue()] {
        let inspected = tokio::time::timeout(
            std::time::Duration::from_secs(1),
            state.broker.inspect_queue(&queue),
        )
        .await;
        match inspected {
            Ok(Ok(depth)) => state
                .metrics
                .queues
                .set(&queue, depth.messages, depth.consumers),
            Ok(Err(error)) => tracing::warn!(%error, queue, "could not inspect the queue"),
            Err(_) => tracing::warn!(queue, "inspecting the queue took over a second"),
        }
    }
}

/// The whole public HTTP API (`/metrics` is not part of it: see [`metrics_router`]).
pub fn router(state: AppState) -> Router {
    use axum::routing::get;
    let limits = &state.settings.http;
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .merge(turns::router())
        .merge(stop::router())
        .merge(history::router())
        .merge(
            mcp::router(&state).layer(tower_http::timeout::TimeoutLayer::with_status_code(
                axum::http::StatusCode::GATEWAY_TIMEOUT,
                Duration::from_millis(limits.request_timeout_ms),
            )),
        )
        // Streams are bounded by the chat idle timeout instead; everything else by the request timeout.
        .merge(
            rest::router().merge(approval_policy::router()).merge(openapi::router()).layer(tower_http::timeout::TimeoutLayer::with_status_code(
                axum::http::StatusCode::GATEWAY_TIMEOUT,
                Duration::from_millis(limits.request_timeout_ms),
            )),
        )
        .merge(console::router(state.settings.auth.development))
        // Unknown `/api/…` endpoints are the JSON 404; any other page is the built console.
        .fallback(console::fallback)
        // A request body arrives whole in time, or the request ends (408).
        .layer(axum::middleware::from_fn_with_state(
            (
                Duration::from_millis(limits.body_read_timeout_ms),
                limits.body_limit_bytes,
            ),
            edge::body_deadline,
        ))
        // Every error response, whoever made it, has the one JSON error shape.
        .layer(axum::middleware::from_fn(error::json_errors))
        // No host but the gateway's own (DNS rebinding), on every route.
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(edge::allowed_hosts(&state.settings)),
            edge::check_host,
        ))
        .layer(axum::middleware::from_fn(edge::security_headers))
        // Every request is the root (or the continuation) of a trace.
        .layer(axum::middleware::from_fn(observe::http_span))
        // Extractors answer an oversized body with the JSON `too_large` error (413).
        .layer(axum::extract::DefaultBodyLimit::max(
            limits.body_limit_bytes,
        ))
        .layer(tower_http::request_id::PropagateRequestIdLayer::x_request_id())
        .layer(tower_http::request_id::SetRequestIdLayer::x_request_id(
            tower_http::request_id::MakeRequestUuid,
        ))
        .with_state(state)
}

async fn ready(
    axum::extract::State(state): axum::extract::State<AppState>,
) -> (axum::http::StatusCode, &'static str) {
    if !state.broker.is_ready() {
        return (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "broker unreachable",
        );
    }
    match sqlx::query("SELECT 1").execute(&state.pool).await {
        Ok(_) => (axum::http::StatusCode::OK, "ready"),
        Err(_) => (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "database unreachable",
        ),
    }
}

/// Builds and runs the gateway until `shutdown` resolves.
pub async fn run(
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    App::build(settings).await?.run(shutdown).await
}

/// A development token for the user with this email (`rover-gateway token --email …`).
pub async fn dev_token_for_email(settings: &Settings, email: &str) -> anyhow::Result<String> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(5))
        .connect(settings.database.url.expose())
        .await
        .context("Failed to connect to the database")?;
    let session = console::dev_session(&pool, &settings.auth, email).await;
    pool.close().await;
    Ok(session?.token)
}
