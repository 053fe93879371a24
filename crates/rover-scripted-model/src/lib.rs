//! A **test double** for the model: a deterministic, rule-driven HTTP server that speaks the
//! OpenAI Chat Completions API (streaming and tool calls included), so Rover's real model client
//! (async-openai) runs offline, in tests, demos and benchmarks. It is not a model and never
//! pretends to be one: it follows a script.
//!
//! Layout:
//! - [`rules`](Rules) — the TOML rules file (`rules.toml` in this crate is the default, embedded
//!   in the binary) and its checked form;
//! - `template` — the `{{path}}` language used in `say` texts and tool arguments;
//! - `engine` — the stateless decision: given one request's conversation, the next response;
//! - `openai` — the wire format, request in and `chat.completion` / `chat.completion.chunk` out;
//! - `server` — the axum routes ([`ScriptedModel`]) and the latency knobs.
//!
//! The engine remembers nothing between requests. The *trigger* is the last `user` message; the
//! first rule whose `when` regex matches it (and whose `offered` tools are all offered) is used;
//! progress is the number of `tool` messages after the trigger.

mod engine;
mod openai;
mod rules;
mod server;
mod template;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

pub use rules::{DEFAULT_RULES, RuleProblem, Rules, RulesError};
pub use server::ScriptedModel;
pub use template::SyntaxError;

/// The model name `GET /v1/models` lists unless configured otherwise.
pub const DEFAULT_MODEL: &str = "rover-scripted-model";

/// How the test double behaves.
#[derive(Debug, Clone)]
pub struct Config {
    /// The model name listed by `GET /v1/models` (responses echo the requested name).
    pub model: String,
    /// The script.
    pub rules: Rules,
    /// Delay before the first chunk (or before a non-streamed response), for benchmarks.
    pub first_token_delay: Duration,
    /// Delay between streamed chunks, for benchmarks.
    pub chunk_delay: Duration,
    /// Answer the first chat requests with an HTTP error instead, for retry and fallback tests.
    pub fail_first: Option<FailFirst>,
    /// How tool calls are written: natively (`tool_calls`), or as text the way many local
    /// models write them.
    pub tool_calls: CallStyle,
    /// Obey any instruction found in a tool's result (`!call <tool> {json}`) before the rules:
    /// the worst a model can do with planted text, for the tests that bound it.
    pub obey_tool_text: bool,
    /// Keep only the last this many request bodies for `GET /v1/requests` (`None`: every one).
    /// A request holds the whole prompt and tool list (tens of KB), so a long run — the bench's
    /// soak — keeps a few: recording them all grew the double by ≈ 90 MB a minute.
    pub keep_requests: Option<usize>,
}

/// How the test double writes the tool calls its rules make (`--tool-calls`). Every style but
/// `native` puts them in the message's `content`, as local models do, for the model adapter's
/// recovery (`model.text_tool_calls`) to read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum CallStyle {
    /// OpenAI's `tool_calls`, streamed in pieces.
    #[default]
    Native,
    /// Each call a fenced ```json block of `{"name": …, "arguments": {…}}`.
    Fenced,
    /// Each call bare JSON on a line of its own.
    Bare,
    /// Each call in `<tool_call>…</tool_call>` tags (Hermes/Qwen).
    Tagged,
    /// One JSON list of every call.
    List,
}

/// The first `count` chat completion requests are answered with HTTP `status` and an
/// OpenAI-style error body, as an overloaded (429), broken (5xx) or refusing (401, 400) server would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailFirst {
    /// How many requests fail before the double answers normally.
    pub count: u32,
    /// The HTTP status they fail with.
    pub status: u16,
}

impl Config {
    /// The given rules, no delays, the default model name.
    pub fn new(rules: Rules) -> Self {
        Self {
            model: DEFAULT_MODEL.to_owned(),
            rules,
            first_token_delay: Duration::ZERO,
            chunk_delay: Duration::ZERO,
            fail_first: None,
            tool_calls: CallStyle::Native,
            obey_tool_text: false,
            keep_requests: None,
        }
    }
}

impl Default for Config {
    /// The embedded `rules.toml`, no delays.
    fn default() -> Self {
        Self::new(Rules::builtin())
    }
}

/// Serves the test double on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    ScriptedModel::new(config).serve(listener, shutdown).await
}

/// The binary's settings: defaults, then `--config` TOML, then `ROVER_…` variables, then flags.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// The test double itself (`ROVER_SCRIPTED__…`).
    pub scripted: ScriptedSettings,
    /// Logging (`ROVER_TELEMETRY__…`).
    pub telemetry: rover_settings::TelemetrySettings,
}

/// The `[scripted]` section.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ScriptedSettings {
    /// Address to listen on; port 0 picks a free port (the log line says which).
    pub listen: SocketAddr,
    /// A rules file; absent means the embedded `rules.toml`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules: Option<PathBuf>,
    /// The model name `GET /v1/models` lists.
    pub model: String,
    /// Milliseconds before the first chunk (`ROVER_SCRIPTED__FIRST_TOKEN_DELAY_MS`).
    pub first_token_delay_ms: u64,
    /// Milliseconds between chunks (`ROVER_SCRIPTED__CHUNK_DELAY_MS`).
    pub chunk_delay_ms: u64,
    /// Fail this many chat requests first (`ROVER_SCRIPTED__FAIL_FIRST`), with `fail_status`.
    pub fail_first: u32,
    /// The HTTP status of those failures (`ROVER_SCRIPTED__FAIL_STATUS`, default 503).
    pub fail_status: u16,
    /// How tool calls are written (`ROVER_SCRIPTED__TOOL_CALLS`: native, fenced, bare, tagged, list).
    pub tool_calls: CallStyle,
    /// Obey instructions planted in tool results (`ROVER_SCRIPTED__OBEY_TOOL_TEXT`).
    pub obey_tool_text: bool,
    /// Keep only the last N request bodies (`ROVER_SCRIPTED__KEEP_REQUESTS`; absent: all).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_requests: Option<usize>,
}

impl Default for ScriptedSettings {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8090)),
            rules: None,
            model: DEFAULT_MODEL.to_owned(),
            first_token_delay_ms: 0,
            chunk_delay_ms: 0,
            fail_first: 0,
            fail_status: 503,
            tool_calls: CallStyle::Native,
            obey_tool_text: false,
            keep_requests: None,
        }
    }
}

impl rover_service::Telemetry for Settings {
    fn telemetry(&self) -> &rover_settings::TelemetrySettings {
        &self.telemetry
    }
}

impl ScriptedSettings {
    /// The [`Config`] these settings describe, reading the rules file if one is named.
    pub fn config(&self) -> anyhow::Result<Config> {
        let rules = match &self.rules {
            None => Rules::builtin(),
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("Failed to read the rules file {}", path.display()))?;
                Rules::parse(&text)
                    .with_context(|| format!("Failed to load the rules file {}", path.display()))?
            }
        };
        Ok(Config {
            model: self.model.clone(),
            rules,
            first_token_delay: Duration::from_millis(self.first_token_delay_ms),
            chunk_delay: Duration::from_millis(self.chunk_delay_ms),
            fail_first: (self.fail_first > 0).then_some(FailFirst {
                count: self.fail_first,
                status: self.fail_status,
            }),
            tool_calls: self.tool_calls,
            obey_tool_text: self.obey_tool_text,
            keep_requests: self.keep_requests,
        })
    }
}

/// Binds the configured address and serves until `shutdown` resolves: what the binary runs.
pub async fn run(
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let config = settings.scripted.config()?;
    let listener = tokio::net::TcpListener::bind(settings.scripted.listen)
        .await
        .with_context(|| format!("Failed to listen on {}", settings.scripted.listen))?;
    serve(listener, config, shutdown).await
}
