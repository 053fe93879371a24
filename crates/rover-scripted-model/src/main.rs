//! The `rover-scripted-model` binary: a test double for the model, serving the OpenAI Chat
//! Completions API from a rules file. Flags override `--config` and `ROVER_SCRIPTED__…` settings.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use rover_scripted_model::Settings;

const SERVICE: &str = "rover-scripted-model";

/// A TEST DOUBLE for the model: a deterministic, rule-driven server speaking the OpenAI Chat
/// Completions API (streaming and tool calls), so Rover's real model client runs offline.
/// It is not a model; it follows the rules file.
#[derive(Debug, Parser)]
#[command(name = SERVICE, version)]
struct Cli {
    #[command(flatten)]
    service: rover_service::ServiceArgs,
    /// Address to listen on (default 127.0.0.1:8090; port 0 picks a free port, logged as
    /// `listening on <addr>`). Env: ROVER_SCRIPTED__LISTEN.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// The rules file (default: the rules.toml embedded in this binary). Env: ROVER_SCRIPTED__RULES.
    #[arg(long, value_name = "FILE")]
    rules: Option<PathBuf>,
    /// The model name listed by GET /v1/models. Env: ROVER_SCRIPTED__MODEL.
    #[arg(long)]
    model: Option<String>,
    /// Milliseconds before the first chunk, for benchmarks (default 0).
    /// Env: ROVER_SCRIPTED__FIRST_TOKEN_DELAY_MS.
    #[arg(long, value_name = "MS")]
    first_token_delay_ms: Option<u64>,
    /// Milliseconds between streamed chunks, for benchmarks (default 0).
    /// Env: ROVER_SCRIPTED__CHUNK_DELAY_MS.
    #[arg(long, value_name = "MS")]
    chunk_delay_ms: Option<u64>,
    /// Answer the first N chat requests with an HTTP error (retry and fallback tests).
    /// Env: ROVER_SCRIPTED__FAIL_FIRST.
    #[arg(long, value_name = "N")]
    fail_first: Option<u32>,
    /// The HTTP status of those errors (default 503). Env: ROVER_SCRIPTED__FAIL_STATUS.
    #[arg(long, value_name = "STATUS")]
    fail_status: Option<u16>,
    /// How tool calls are written: native `tool_calls` (default), or as text the way local
    /// models write them. Env: ROVER_SCRIPTED__TOOL_CALLS.
    #[arg(long, value_enum, value_name = "STYLE")]
    tool_calls: Option<rover_scripted_model::CallStyle>,
    /// Obey any instruction planted in a tool's result (`!call <tool> {json}`), as the most
    /// gullible model would. Env: ROVER_SCRIPTED__OBEY_TOOL_TEXT.
    #[arg(long)]
    obey_tool_text: bool,
    /// Keep only the last N request bodies for GET /v1/requests (default: all; a long benchmark
    /// keeps a few). Env: ROVER_SCRIPTED__KEEP_REQUESTS.
    #[arg(long, value_name = "N")]
    keep_requests: Option<usize>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    rover_service::init_process();
    let mut settings: Settings = cli.service.load()?;
    let s = &mut settings.scripted;
    s.listen = cli.listen.unwrap_or(s.listen);
    s.rules = cli.rules.or(s.rules.take());
    s.model = cli.model.unwrap_or(std::mem::take(&mut s.model));
    s.first_token_delay_ms = cli.first_token_delay_ms.unwrap_or(s.first_token_delay_ms);
    s.chunk_delay_ms = cli.chunk_delay_ms.unwrap_or(s.chunk_delay_ms);
    s.fail_first = cli.fail_first.unwrap_or(s.fail_first);
    s.fail_status = cli.fail_status.unwrap_or(s.fail_status);
    s.tool_calls = cli.tool_calls.unwrap_or(s.tool_calls);
    s.obey_tool_text |= cli.obey_tool_text;
    s.keep_requests = cli.keep_requests.or(s.keep_requests);
    if cli.service.print_config {
        #[allow(clippy::print_stdout)]
        {
            print!("{}", rover_service::render_config(&settings)?);
        }
        return Ok(());
    }
    let shutdown = rover_service::shutdown_signal();
    let _telemetry =
        rover_telemetry::init(&settings.telemetry, SERVICE).context("Failed to start telemetry")?;
    let result = rover_scripted_model::run(settings, shutdown).await;
    if let Err(error) = &result {
        tracing::error!(
            error = format!("{error:#}"),
            "the scripted model test double failed"
        );
    }
    result
}
