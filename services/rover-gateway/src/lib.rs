//! `rover-gateway`, the HTTP edge of Rover (seed hops 1 and 6): `POST /api/chat` speaks the AI SDK
//! UI message stream so a `useChat` Hub works unchanged; JWT authentication; the runtime context
//! minted per turn from live rows and the turn identity signed with the gateway's Ed25519 key; the
//! REST API over the same domain functions and authorization as the tools.
//!
//! [`App::build`] connects and binds; [`App::run`] serves until the shutdown future resolves, then
//! lets open streams finish up to a deadline.

mod auth;
mod caller;
mod chat;
mod chats;
mod console;
mod demo;
mod edge;
mod error;
mod events;
mod input;
mod limits;
mod mcp;
mod observe;
mod rest;
mod state;

// What the binary, the gateway's own tests and the bench and eval use; nothing else is public.
pub use auth::{Authenticator, DEVELOPMENT_HS256_SECRET, dev_token};
pub use console::NOT_BUILT;
pub use demo::narrate;
pub use edge::serve;
pub use events::TurnEvents;
pub use limits::{StreamSlots, TrustedProxies};
pub use mcp::approval::Questions;
pub use observe::metrics;
pub use rest::contracts::{REGENERATE_COMMAND, TOOL_CONTRACTS_FILE};
pub use rest::{ErrorBody, ErrorDetail, tool_contracts_json};
pub use state::{AppState, Shared};

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use rover_contracts::identity::TurnSigner;
use rover_settings::{AmqpSettings, DatabaseSettings, Secret, TelemetrySettings};
use serde::{Deserialize, Serialize};
use sqlx::postgres::PgPoolOptions;

/// The gateway's settings (`rover-gateway --print-config` shows the effective ones).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// The HTTP listener and its limits.
    pub http: GatewayHttp,
    /// The broker turns are published to.
    pub amqp: AmqpSettings,
    /// The database the runtime context is minted from.
    pub database: DatabaseSettings,
    /// How bearer tokens are verified.
    pub auth: AuthSettings,
    /// The key turn identities are signed with.
    pub identity: SigningSettings,
    /// Chat streams.
    pub chat: ChatSettings,
    /// MCP at `/mcp`.
    pub mcp: mcp::McpSettings,
    /// Logging.
    pub telemetry: TelemetrySettings,
}

/// The HTTP listener.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct GatewayHttp {
    /// Address to listen on (the public API).
    pub listen: SocketAddr,
    /// Address `/metrics` is served on: a listener of its own, so the public port does not
    /// expose the metrics (keep it off the ingress; Prometheus scrapes it inside the cluster).
    pub metrics_addr: SocketAddr,
    /// Largest request body accepted (413 beyond).
    pub body_limit_bytes: usize,
    /// Deepest nesting of arrays and objects accepted in a JSON body (400 beyond), checked on
    /// the raw bytes before parsing.
    pub max_json_depth: usize,
    /// Deadline of a non-streaming request, in milliseconds.
    pub request_timeout_ms: u64,
    /// The `Host` values every route accepts (DNS-rebinding protection; `host` matches any port,
    /// `host:port` one; `*` any host, only behind a proxy that checks it). Empty: `mcp.allowed_hosts`,
    /// else the host of `mcp.public_url`, else `localhost`, `127.0.0.1` and `::1`. The health
    /// probes answer any host.
    pub allowed_hosts: Vec<String>,
    /// How long a client may take to send a request's head once it started, in milliseconds.
    pub header_read_timeout_ms: u64,
    /// A connection on which no byte moves either way for this long is closed, in milliseconds:
    /// one that never sends a request, or an unused keep-alive connection. Keep it above
    /// `chat.keepalive_ms`, or quiet streams are cut.
    pub idle_timeout_ms: u64,
    /// How long a client may take to send a whole request body, in milliseconds (408 beyond).
    pub body_read_timeout_ms: u64,
    /// Most connections open at once on this replica; more are closed at accept. `0`: no cap.
    pub max_connections: usize,
    /// Most connections one client address may hold open on this replica (a trusted proxy's are
    /// not counted per address: the proxy caps its clients). `0`: no cap.
    pub max_connections_per_client: usize,
    /// How long open streams may run on after shutdown starts, in milliseconds.
    pub shutdown_grace_ms: u64,
    /// The reverse proxies (addresses or CIDR ranges, e.g. `10.0.0.0/8`) whose
    /// `X-Forwarded-For` is believed. A request from one of them is attributed to the last
    /// address in that header that is not itself a trusted proxy; from anyone else, the header is
    /// ignored and the peer address is the client. Empty (the default): the peer, always.
    pub trusted_proxies: Vec<String>,
    /// The built Hub console (`make console` writes `console/dist`), served at `/`; relative
    /// paths are resolved from the working directory. Missing: `/` says to run `make console`.
    /// Empty: no console (the container images), and `/` is the JSON 404.
    pub console_dir: PathBuf,
}

impl Default for GatewayHttp {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            metrics_addr: SocketAddr::from(([127, 0, 0, 1], 9090)),
            body_limit_bytes: 1024 * 1024,
            max_json_depth: 32,
            request_timeout_ms: 30_000,
            allowed_hosts: Vec::new(),
            header_read_timeout_ms: 10_000,
            idle_timeout_ms: 60_000,
            body_read_timeout_ms: 15_000,
            max_connections: 10_000,
            max_connections_per_client: 256,
            shutdown_grace_ms: 30_000,
            trusted_proxies: Vec::new(),
            console_dir: console::default_dir(),
        }
    }
}

/// Bearer-token verification. The algorithm is pinned: a token signed any other way is refused.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct AuthSettings {
    /// `HS256` (development), `RS256`, `ES256` or `EdDSA`.
    pub algorithm: String,
    /// Development mode (`ROVER_AUTH__DEVELOPMENT=true`): the only way the built-in HS256 secret
    /// (printed in the source, so anyone can sign with it) is used, when `hs256_secret` is unset.
    /// Outside it, HS256 needs a configured secret, and the built-in one is refused even when
    /// configured explicitly.
    pub development: bool,
    /// The shared secret, for HS256 (unset: start-up fails, unless in development mode).
    pub hs256_secret: Option<Secret<String>>,
    /// A PEM public key file, for RS256/ES256/EdDSA.
    pub public_key_file: Option<PathBuf>,
    /// A JWKS URL, for RS256/ES256/EdDSA (keys chosen by `kid`).
    pub jwks_url: Option<String>,
    /// The required `iss`.
    pub issuer: String,
    /// The required `aud`.
    pub audience: String,
    /// Clock skew tolerated on `exp`/`nbf`, in seconds.
    pub leeway_secs: u64,
    /// Lifetime of tokens printed by `rover-gateway token`, in seconds.
    pub dev_token_ttl_secs: u64,
    /// Rejected bearer tokens a client address may send per window; beyond it, its rejected
    /// tokens get 429 (and `Retry-After`) instead of 401 until the window ends. A valid token is
    /// never refused by this limit (tokens are verified first). Counted per client address (see
    /// `http.trusted_proxies`) and per replica; `0` turns the limit off.
    pub max_failures_per_window: u32,
    /// The window of `max_failures_per_window`, in seconds.
    pub failure_window_secs: u64,
    /// Most client addresses tracked at once (bounds the memory of the failure counter).
    pub failure_clients_tracked: usize,
}

impl Default for AuthSettings {
    fn default() -> Self {
        Self {
            algorithm: "HS256".to_owned(),
            development: false,
            hs256_secret: None,
            public_key_file: None,
            jwks_url: None,
            issuer: "rover-dev".to_owned(),
            audience: "rover".to_owned(),
            leeway_secs: 30,
            dev_token_ttl_secs: 12 * 3600,
            max_failures_per_window: 20,
            failure_window_secs: 60,
            failure_clients_tracked: 10_000,
        }
    }
}

impl AuthSettings {
    /// The defaults in development mode: HS256 with the built-in development secret (what
    /// `make run`, the tests and the benchmarks use).
    pub fn development() -> Self {
        Self {
            development: true,
            ..Self::default()
        }
    }
}

/// The gateway's Ed25519 signing key for turn identities.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct SigningSettings {
    /// PKCS#8 PEM private key (`openssl genpkey -algorithm ed25519`).
    pub private_key_file: Option<PathBuf>,
    /// How long a turn identity is valid, in seconds (must cover the longest turn).
    pub ttl_secs: u64,
}

impl Default for SigningSettings {
    fn default() -> Self {
        Self {
            private_key_file: None,
            ttl_secs: 1800,
        }
    }
}

impl SigningSettings {
    /// Loads the signer, or says exactly what is missing.
    pub fn signer(&self) -> anyhow::Result<TurnSigner> {
        let path = self.private_key_file.as_ref().context(
            "identity.private_key_file is not set: the gateway needs its Ed25519 private key \
             (ROVER_IDENTITY__PRIVATE_KEY_FILE)",
        )?;
        let pem =
            std::fs::read(path).with_context(|| format!("Failed to read {}", path.display()))?;
        TurnSigner::from_pem(&pem).with_context(|| format!("Failed to load {}", path.display()))
    }
}

/// Chat streams.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ChatSettings {
    /// A keep-alive comment is sent after this much silence, in milliseconds.
    pub keepalive_ms: u64,
    /// A stream with no event for this long ends with an error, in milliseconds.
    pub idle_timeout_ms: u64,
    /// Longest text of one chat message (its text parts together), and of an `ask_user` answer,
    /// in bytes (413 beyond).
    pub max_message_bytes: usize,
    /// Most parts in the chat message the gateway reads (413 beyond).
    pub max_parts: usize,
    /// Most file attachments in one chat message (413 beyond).
    pub max_attachments: usize,
    /// Longest attachment URL, in bytes (413 beyond). Attachments must be `https`/`http` links:
    /// they travel in the runtime context, so inline `data:` URLs are refused.
    pub max_attachment_url_bytes: usize,
    /// Longest attachment file name and media type, in bytes (413 beyond).
    pub max_attachment_name_bytes: usize,
    /// Most turns one user may have queued or running at once, across every gateway replica
    /// (counted in Postgres from the POST until the worker ends the turn, whatever the client
    /// does meanwhile). Beyond it, 429 with `Retry-After`; `0` means no limit.
    pub max_concurrent_turns_per_user: u32,
    /// Most turns one school may have queued or running at once, across every replica, so one
    /// school cannot fill the turns queue for the others; `0` means no limit.
    pub max_concurrent_turns_per_school: u32,
    /// Most resumed streams (`GET /api/chat/{id}/stream`) one user may have open at once on this
    /// replica; beyond it, 429 with `Retry-After`. `0` means no limit.
    pub max_resumes_per_user: usize,
    /// The `Retry-After` sent with a 429 for too many open turns or streams, in seconds.
    pub busy_retry_after_secs: u64,
    /// How long `POST /api/chat/{id}/stop` waits for the reply to end before it answers 202
    /// (stopping) instead of 200 (stopped), in milliseconds.
    pub stop_wait_ms: u64,
    /// What a new message does on a chat whose reply is still running: `reject` (409
    /// `turn_in_progress`), `enqueue` (it runs once the reply ends) or `interrupt` (the reply is
    /// stopped, then it runs).
    pub double_texting: DoubleTexting,
}

/// What a new message does on a chat whose reply is still running.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DoubleTexting {
    /// Refused with 409 `turn_in_progress`; the client sends it again after the reply ends.
    #[default]
    Reject,
    /// Accepted and queued behind the running reply; its stream starts when that one ends.
    Enqueue,
    /// The running reply is stopped (it ends with `abort`, what it said kept), then this runs.
    Interrupt,
}

impl Default for ChatSettings {
    fn default() -> Self {
        Self {
            keepalive_ms: 15_000,
            idle_timeout_ms: 300_000,
            max_message_bytes: 32 * 1024,
            max_parts: 64,
            max_attachments: 8,
            max_attachment_url_bytes: 2048,
            max_attachment_name_bytes: 255,
            max_concurrent_turns_per_user: 4,
            max_concurrent_turns_per_school: 200,
            max_resumes_per_user: 4,
            busy_retry_after_secs: 5,
            stop_wait_ms: 10_000,
            double_texting: DoubleTexting::Reject,
        }
    }
}

impl rover_service::Telemetry for Settings {
    fn telemetry(&self) -> &TelemetrySettings {
        &self.telemetry
    }
}

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
        .merge(chat::router())
        .merge(chats::router())
        .merge(
            mcp::router(&state).layer(tower_http::timeout::TimeoutLayer::with_status_code(
                axum::http::StatusCode::GATEWAY_TIMEOUT,
                Duration::from_millis(limits.request_timeout_ms),
            )),
        )
        // Streams are bounded by the chat idle timeout instead; everything else by the request timeout.
        .merge(
            rest::router().layer(tower_http::timeout::TimeoutLayer::with_status_code(
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
