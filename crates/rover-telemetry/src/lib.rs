//! Logging, tracing and metrics set-up shared by every Rover service: one call at the top of `main`.
//!
//! - **Logs**: human-readable lines for a terminal, or one JSON object per line for production,
//!   chosen by [`TelemetrySettings::format`]. `RUST_LOG`, when set, overrides the configured filter.
//! - **Traces**: when the standard `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//!   `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) variable is set, every `tracing` span is also an
//!   OpenTelemetry span exported over OTLP (`OTEL_EXPORTER_OTLP_PROTOCOL` = `http/protobuf`, the
//!   default, or `grpc`; `OTEL_SERVICE_NAME` overrides the service name). When it is unset no
//!   OpenTelemetry layer is installed at all, so tracing costs what logging costs.
//! - **Metrics**: [`metrics`] — Prometheus text for each service's `/metrics`.

mod json_fields;
pub mod metrics;
mod otlp;

use std::io::IsTerminal;

use opentelemetry::trace::TraceContextExt as _;
use rover_settings::{LogFormat, TelemetrySettings};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

pub use otlp::{ExportTarget, export_target};

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
    /// The OTLP exporter could not be built from the `OTEL_…` variables.
    #[error("invalid OTLP exporter settings: {0}")]
    Exporter(String),
    /// A global subscriber was already installed.
    #[error("telemetry was already initialised: {0}")]
    AlreadyInitialised(#[from] tracing_subscriber::util::TryInitError),
}

/// Keeps telemetry running; dropping it at the end of `main` exports the spans still buffered.
#[derive(Debug)]
#[must_use = "dropping the guard ends telemetry"]
pub struct TelemetryGuard {
    tracer: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl TelemetryGuard {
    /// Whether spans are being exported.
    pub fn exporting(&self) -> bool {
        self.tracer.is_some()
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(tracer) = self.tracer.take()
            && let Err(error) = tracer.shutdown()
        {
            // The subscriber may already be gone; stderr is the last place left to say it.
            #[allow(clippy::print_stderr)]
            {
                eprintln!("rover-telemetry: could not flush the last spans: {error}");
            }
        }
    }
}

/// Installs the global subscriber for `service`: logs, and OTLP traces when configured.
///
/// Must be called inside a Tokio runtime when traces are exported over gRPC.
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
    let target = export_target();
    let tracer = match &target {
        Some(_) => Some(otlp::provider(service)?),
        None => None,
    };
    let otel_layer = tracer.as_ref().map(otlp::layer);
    let registry = tracing_subscriber::registry().with(filter).with(otel_layer);
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
                    .with_span_list(false)
                    .fmt_fields(json_fields::AppendingJsonFields),
            )
            .try_init()?,
    }
    match target {
        Some(target) => tracing::info!(
            service,
            endpoint = %target.endpoint,
            protocol = %target.protocol,
            capture_content = settings.capture_content,
            "exporting traces over OTLP"
        ),
        None => tracing::debug!(
            service,
            "OTEL_EXPORTER_OTLP_ENDPOINT is unset; traces are not exported"
        ),
    }
    Ok(TelemetryGuard { tracer })
}

/// The W3C trace id of `span`, as 32 lowercase hex digits, when traces are being recorded.
pub fn trace_id(span: &tracing::Span) -> Option<String> {
    context_trace_id(&span.context())
}

/// The W3C trace id of an OpenTelemetry context (one extracted from a message's headers, say), as
/// 32 lowercase hex digits, when it names a valid trace. The one place a trace id becomes text.
pub fn context_trace_id(context: &opentelemetry::Context) -> Option<String> {
    let span = context.span();
    let span_context = span.span_context();
    span_context
        .is_valid()
        .then(|| span_context.trace_id().to_string())
}
