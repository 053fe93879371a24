//! The settings sections services compose their `Settings` from.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::Secret;

/// RabbitMQ.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct AmqpSettings {
    /// `amqp://user:password@host:port/vhost` (the vhost URL-encoded: `%2f` is `/`).
    pub url: Secret<String>,
    /// `host:port` of each node of a RabbitMQ cluster, reached with the URL's user, password and
    /// vhost; a service connects to one, and when it is lost, to the next that answers. Empty
    /// (the default): the URL's host alone — one node, or in Kubernetes the one Service in front
    /// of the cluster. In the environment, comma-separated:
    /// `ROVER_AMQP__ADDRESSES=10.0.0.1:5672,10.0.0.2:5672,10.0.0.3:5672`.
    #[serde(deserialize_with = "list_or_comma_separated")]
    pub addresses: Vec<String>,
    /// Prefix of every exchange and queue name, so several deployments can share a broker.
    pub prefix: String,
    /// Unacknowledged messages a consumer holds at once.
    pub prefetch: u16,
    /// Deliveries of one message before it is dead-lettered.
    pub delivery_limit: u32,
    /// Deadline of one tool RPC attempt, in milliseconds.
    pub rpc_attempt_timeout_ms: u64,
    /// Attempts of one tool RPC (retries re-send the same call id).
    pub rpc_attempts: u32,
    /// Most turns the turns queue holds; a turn published beyond it is refused (the gateway
    /// answers 503). Part of the queue's declaration, so every service must use the same value.
    pub turns_max_length: u32,
    /// The kind of the tools queue: `classic` (the default: the fastest tool hop, on one node) or
    /// `quorum` (replicated, so tool calls outlive a node of a RabbitMQ cluster). Part of the
    /// queue's declaration, so every service must use the same value.
    pub tools_queue: ToolsQueue,
    /// Declare the exchanges, queues and bindings at start-up (needs the `configure` right on
    /// them). `false`: only check they exist, as a least-privilege service user must (the
    /// topology is then declared once by `rover-toolserver broker setup` as an administrator).
    pub declare_topology: bool,
}

impl Default for AmqpSettings {
    fn default() -> Self {
        Self {
            url: Secret::new("amqp://guest:guest@127.0.0.1:5672/%2f".to_owned()),
            addresses: Vec::new(),
            prefix: "rover".to_owned(),
            prefetch: 16,
            delivery_limit: 5,
            rpc_attempt_timeout_ms: 10_000,
            rpc_attempts: 3,
            turns_max_length: 10_000,
            tools_queue: ToolsQueue::Classic,
            declare_topology: true,
        }
    }
}

/// The kind of the tools queue ([`AmqpSettings::tools_queue`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolsQueue {
    /// A classic queue, on one node.
    #[default]
    Classic,
    /// A quorum queue, replicated on every node of a cluster.
    Quorum,
}

/// A list given as a list (TOML) or as one comma-separated string (an environment variable).
fn list_or_comma_separated<'de, D>(deserializer: D) -> Result<Vec<String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Given {
        List(Vec<String>),
        Text(String),
    }
    let items = match Given::deserialize(deserializer)? {
        Given::List(items) => items,
        Given::Text(text) => text.split(',').map(str::to_owned).collect(),
    };
    Ok(items
        .into_iter()
        .map(|item| item.trim().to_owned())
        .filter(|item| !item.is_empty())
        .collect())
}

/// Postgres.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct DatabaseSettings {
    /// Connection URL of the application role (not the owner, not a superuser).
    pub url: Secret<String>,
    /// Pool size.
    pub max_connections: u32,
    /// How long a request waits for a pooled connection before it fails as unavailable, in
    /// milliseconds.
    pub acquire_timeout_ms: u64,
}

impl Default for DatabaseSettings {
    fn default() -> Self {
        Self {
            url: Secret::new("postgres://rover_app:rover_app_dev@127.0.0.1:5432/rover".to_owned()),
            max_connections: 10,
            acquire_timeout_ms: 5_000,
        }
    }
}

/// How logs are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Readable lines for a terminal.
    #[default]
    Human,
    /// One JSON object per line, for log collectors in production.
    Json,
}

/// Logging and tracing.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct TelemetrySettings {
    /// Human lines or JSON.
    pub format: LogFormat,
    /// A `tracing` filter directive (`info`, `rover_worker=debug,info`). `RUST_LOG` overrides it.
    pub filter: String,
    /// Put message text, model output and tool argument values into spans. Off by default: spans
    /// then carry ids, names, counts and outcomes only. (Traces are exported over OTLP when the
    /// standard `OTEL_EXPORTER_OTLP_ENDPOINT` variable is set.)
    pub capture_content: bool,
}

impl Default for TelemetrySettings {
    fn default() -> Self {
        Self {
            format: LogFormat::Human,
            filter: "info".to_owned(),
            capture_content: false,
        }
    }
}

/// The async runtime the tool server runs on.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct RuntimeSettings {
    /// Threads that run the service's tasks: `1` (the default) — every task on the one thread
    /// that started the service (tokio's current-thread runtime: no hand-offs between threads);
    /// `0` — one per core, work-stealing between them (tokio's multi-threaded runtime); more —
    /// that many work-stealing threads. RabbitMQ's client (lapin) runs its own I/O thread in
    /// every case; each of the tool server's RPC servers has a connection of its own, read and
    /// written by a task.
    pub worker_threads: usize,
    /// How many RPC servers the tool server runs: the first on the runtime above, each other on a
    /// thread of its own with a current-thread runtime. Each has its own connection to the
    /// broker, its own database connections, and its share of `amqp.prefetch` and
    /// `database.max_connections` (so the tool server as a whole keeps both limits). `0` (the
    /// default) — one per core; never more than either limit. A call is then read, run and
    /// answered on one thread, with no wake-ups across threads (decision 0021).
    pub rpc_shards: usize,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        Self {
            worker_threads: 1,
            rpc_shards: 0,
        }
    }
}

/// The HTTP listener of a service (the API for the gateway; health and metrics for the others).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct HttpSettings {
    /// Address to listen on.
    pub listen: SocketAddr,
}

impl HttpSettings {
    /// Listen on `addr`.
    pub fn on(addr: ([u8; 4], u16)) -> Self {
        Self {
            listen: SocketAddr::from(addr),
        }
    }
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self::on(([127, 0, 0, 1], 8080))
    }
}

/// An OpenAI-compatible model endpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelSettings {
    /// Base URL ending in `/v1`.
    pub base_url: String,
    /// API key (any non-empty text for the scripted model).
    pub api_key: Secret<String>,
    /// Model name sent with each request.
    pub name: String,
    /// Deadline of one model request, in milliseconds.
    pub timeout_ms: u64,
    /// Endpoints tried in order when the one before fails before its first chunk (429, 5xx,
    /// a timeout, a dropped connection); a refusal (401/403, other 4xx) is not passed on.
    pub fallbacks: Vec<ModelFallback>,
    /// Wait before the second attempt of a model call, in milliseconds; doubled for each further
    /// attempt (capped at 8×).
    pub backoff_ms: u64,
    /// Tool calls the model writes as text (a fenced JSON block, bare JSON, `<tool_call>` tags)
    /// instead of `tool_calls`: `auto` recovers a message that is wholly calls, `off` leaves all
    /// text as text. Applies to the fallbacks too, unless one sets its own.
    pub text_tool_calls: TextToolCalls,
    /// Who serves the model, as traces name it (`gen_ai.provider.name`): `openai` for OpenAI
    /// and servers that speak its API unless you name them (`llama.cpp`, `vllm`, …).
    pub provider: String,
    /// When the worker starts, send the primary endpoint one small request (`max_tokens` 1) whose
    /// system prompt is the fixed rules every Rover prompt opens with, in the background, so a
    /// server that caches prompt prefixes (llama.cpp) has them before the first turn. Never
    /// delays readiness; the outcome is logged. Off by default (a hosted API gains nothing).
    pub warm_prompt_cache: bool,
}

/// What a step does with a tool call the model wrote as text (`model.text_tool_calls`).
///
/// `auto` is the default: a message is taken as calls only when it is nothing but call objects
/// naming a tool, so a prose answer is never touched, and a model that calls natively never
/// writes such a message; local models (Qwen2.5-Coder, …) write most of their calls that way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TextToolCalls {
    /// Every message's text stays text.
    Off,
    /// A message that is wholly tool calls is read as those calls.
    #[default]
    Auto,
}

impl TextToolCalls {
    /// Whether calls written as text are recovered.
    pub fn recovers(self) -> bool {
        self == TextToolCalls::Auto
    }
}

impl Default for ModelSettings {
    fn default() -> Self {
        Self {
            base_url: "http://127.0.0.1:8090/v1".to_owned(),
            api_key: Secret::new("scripted".to_owned()),
            name: "rover-scripted".to_owned(),
            timeout_ms: 60_000,
            fallbacks: Vec::new(),
            backoff_ms: 250,
            text_tool_calls: TextToolCalls::Auto,
            provider: "openai".to_owned(),
            warm_prompt_cache: false,
        }
    }
}

/// A fallback model endpoint (`model.fallbacks`, in order).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModelFallback {
    /// Base URL ending in `/v1`.
    pub base_url: String,
    /// API key; absent means the primary endpoint's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<Secret<String>>,
    /// Model name sent to this endpoint.
    pub name: String,
    /// Tool calls written as text at this endpoint; absent means the primary's setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_tool_calls: Option<TextToolCalls>,
    /// Who serves it (`gen_ai.provider.name`); absent means the primary's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

/// The gateway's Ed25519 public key, which turn identities must verify against (tool server, worker).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct VerifierSettings {
    /// PEM file of the gateway's Ed25519 public key (`-----BEGIN PUBLIC KEY-----`).
    pub public_key_file: Option<PathBuf>,
    /// Longest lifetime a turn identity may claim, in seconds.
    pub max_lifetime_secs: u64,
}

impl Default for VerifierSettings {
    fn default() -> Self {
        Self {
            public_key_file: None,
            max_lifetime_secs: 3600,
        }
    }
}
