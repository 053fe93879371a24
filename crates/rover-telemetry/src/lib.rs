//! Logging and tracing set-up shared by every Rover service: one call at the top of `main`.
//!
//! Human-readable lines for a terminal, or one JSON object per line for production, chosen by
//! [`TelemetrySettings::format`]. `RUST_LOG`, when set, overrides the configured filter.

use std::io::IsTerminal;

use rover_settings::{LogFormat, TelemetrySettings};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Telemetry could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The filter directive does not parse.
    #[error("invalid log filter {filter:?}: {source}")]
    Filter {
        /// The directive.
        filter: String,
        /// Why it does not parse.
        source: tracing_subscriber::filter::ParseError,
    },
    /// A global subscriber was already installed.
    #[error("telemetry was already initialised: {0}")]
    AlreadyInitialised(#[from] tracing_subscriber::util::TryInitError),
}

/// Keeps telemetry running; dropping it at the end of `main` flushes what is buffered.
#[derive(Debug)]
#[must_use = "dropping the guard ends telemetry"]
pub struct TelemetryGuard {
    _private: (),
}

/// Installs the global subscriber for `service`.
pub fn init(
    settings: &TelemetrySettings,
    service: &'static str,
) -> Result<TelemetryGuard, TelemetryError> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(from_env) if !from_env.is_empty() => from_env,
        _ => settings.filter.clone(),
    };
    let filter =
        EnvFilter::try_new(&filter).map_err(|source| TelemetryError::Filter { filter, source })?;
    let registry = tracing_subscriber::registry().with(filter);
    match settings.format {
        LogFormat::Human => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(std::io::stdout().is_terminal())
                    .with_target(true),
            )
            .try_init()?,
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_span_list(false),
            )
            .try_init()?,
    }
    tracing::debug!(service, "telemetry initialised");
    Ok(TelemetryGuard { _private: () })
}
