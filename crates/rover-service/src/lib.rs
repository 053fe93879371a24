//! The scaffolding every Rover binary shares, so each `main.rs` stays a few lines: the common
//! command-line flags (`--config`, `--print-config`), settings loading, telemetry start-up, the
//! TLS crypto provider, and the shutdown signal.

use std::future::Future;
use std::path::PathBuf;

use anyhow::Context as _;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Flags every service binary accepts. Flatten it into the binary's own `clap` parser.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServiceArgs {
    /// A TOML settings file, layered over the defaults and under `ROVER_…` environment variables.
    #[arg(long, short = 'c', env = "ROVER_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the effective settings (secrets masked) as TOML and exit.
    #[arg(long)]
    pub print_config: bool,
}

impl ServiceArgs {
    /// Loads the service's settings from the configured layers.
    pub fn load<S: DeserializeOwned>(&self) -> anyhow::Result<S> {
        rover_settings::load(self.config.as_deref()).context("Failed to load settings")
    }
}

/// The effective settings as TOML, secrets masked.
pub fn render_config<S: Serialize>(settings: &S) -> anyhow::Result<String> {
    toml::to_string_pretty(settings).context("Failed to render settings as TOML")
}

/// Process-wide set-up every binary does first: the one TLS crypto provider (aws-lc-rs).
pub fn init_process() {
    // Fails only if a provider is already installed, which is what we want anyway.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// Resolves on SIGTERM (how Kubernetes stops a pod) or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "Failed to listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "Failed to listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("Ctrl-C received, shutting down"),
        () = terminate => tracing::info!("SIGTERM received, shutting down"),
    }
}

/// Runs a service's `main` body: print the settings and exit if asked, else start telemetry and
/// run `app` until it returns. `app` receives the settings and the shutdown future it must honour.
pub async fn run<S, F, Fut>(service: &'static str, args: &ServiceArgs, app: F) -> anyhow::Result<()>
where
    S: DeserializeOwned + Serialize + Telemetry,
    F: FnOnce(S, std::pin::Pin<Box<dyn Future<Output = ()> + Send>>) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    init_process();
    let settings: S = args.load()?;
    if args.print_config {
        let rendered = render_config(&settings)?;
        #[allow(clippy::print_stdout)]
        {
            print!("{rendered}");
        }
        return Ok(());
    }
    let _telemetry = rover_telemetry::init(settings.telemetry(), service)
        .context("Failed to start telemetry")?;
    let rendered = serde_json::to_string(&settings).context("Failed to render settings")?;
    tracing::info!(service, version = env!("CARGO_PKG_VERSION"), settings = %rendered, "starting");
    let result = app(settings, Box::pin(shutdown_signal())).await;
    match &result {
        Ok(()) => tracing::info!(service, "stopped"),
        Err(error) => tracing::error!(service, error = format!("{error:#}"), "failed"),
    }
    result
}

/// Settings that carry a telemetry section.
pub trait Telemetry {
    /// The telemetry section.
    fn telemetry(&self) -> &rover_settings::TelemetrySettings;
}
