//! The gateway's settings: the HTTP listener and its limits, bearer-token verification, the
//! turn-identity signing key, chat streams and MCP (`rover-gateway --print-config` shows the
//! effective ones).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use rover_contracts::identity::TurnSigner;
use rover_settings::{AmqpSettings, DatabaseSettings, Secret, TelemetrySettings};
use serde::{Deserialize, Serialize};

/// `http.console_dir`'s default: `console/dist` under the working directory (the repository
/// root for `make run`).
const DEFAULT_CONSOLE_DIR: &str = "console/dist";

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
    pub mcp: McpSettings,
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
            console_dir: PathBuf::from(DEFAULT_CONSOLE_DIR),
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
    /// Largest chat message as the chat keeps it, in bytes of JSON (413 beyond): its text and
    /// every other part, and its metadata, all of which are stored and served again by the
    /// history API and the export. Keep it above `max_message_bytes`, with room for attachments.
    pub max_stored_message_bytes: usize,
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
            max_stored_message_bytes: 96 * 1024,
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

/// The MCP endpoint's settings (`[mcp]`, `ROVER_MCP__…`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct McpSettings {
    /// The gateway's public base URL (`https://rover.example.org`): the protected resource is
    /// `<public_url>/mcp`. Unset (development): taken from each request's `Host` header, as
    /// `http://<host>`. Set it in production, where TLS ends before the gateway.
    pub public_url: Option<String>,
    /// The authorization servers (issuer URLs) the metadata names, where clients get tokens.
    /// Empty: `auth.issuer`.
    pub authorization_servers: Vec<String>,
    /// The `Host` values the gateway accepts when `http.allowed_hosts` is empty (kept for
    /// existing configurations; see `http.allowed_hosts`).
    pub allowed_hosts: Vec<String>,
    /// The `aud` values a bearer token for `/mcp` may carry (RFC 8707: tokens are bound to the
    /// resource). Empty: the resource itself, `<public_url>/mcp` — and, in development mode only,
    /// `auth.audience` too. List `auth.audience` here to keep serving clients whose tokens were
    /// issued for the whole API.
    pub audiences: Vec<String>,
    /// The `Origin` values `/mcp` accepts from browsers (requests without `Origin`, as from
    /// native clients, pass). Empty: the gateway's own origin, `<public_url>` (or `http://<Host>`
    /// in development).
    pub allowed_origins: Vec<String>,
    /// Most `/mcp` requests one user may have in flight on this replica; beyond it, 429 with
    /// `Retry-After`. `0` means no limit.
    pub max_in_flight_per_user: usize,
}

impl Default for McpSettings {
    fn default() -> Self {
        Self {
            public_url: None,
            authorization_servers: Vec::new(),
            allowed_hosts: Vec::new(),
            audiences: Vec::new(),
            allowed_origins: Vec::new(),
            max_in_flight_per_user: 4,
        }
    }
}
