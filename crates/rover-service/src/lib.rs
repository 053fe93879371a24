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

/// The tokio runtime `settings` ask for ([`rover_settings::RuntimeSettings::worker_threads`]).
pub fn runtime(
    settings: &rover_settings::RuntimeSettings,
) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = match settings.worker_threads {
        1 => tokio::runtime::Builder::new_current_thread(),
        0 => tokio::runtime::Builder::new_multi_thread(),
        threads => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(threads);
            builder
        }
    };
    builder.enable_all().build()
}

/// A future that resolves on SIGTERM (how Kubernetes stops a pod) or SIGINT (Ctrl-C).
///
/// The handlers are installed when this is *called*, not when the future is first polled, so a
/// signal that arrives while the service is still starting is not lost.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let terminate = signal(SignalKind::terminate());
    let interrupt = signal(SignalKind::interrupt());
    async move {
        let (mut terminate, mut interrupt) = match (terminate, interrupt) {
            (Ok(terminate), Ok(interrupt)) => (terminate, interrupt),
            (Err(error), _) | (_, Err(error)) => {
                tracing::error!(%error, "Failed to listen for shutdown signals; stop the process with SIGKILL");
                return std::future::pending().await;
            }
        };
        tokio::select! {
            _ = terminate.recv() => tracing::info!("SIGTERM received, shutting down"),
            _ = interrupt.recv() => tracing::info!("SIGINT (Ctrl-C) received, shutting down"),
        }
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
    let shutdown = shutdown_signal();
    let _telemetry = rover_telemetry::init(settings.telemetry(), service)
        .context("Failed to start telemetry")?;
    rover_settings::fault::init();
    let rendered = serde_json::to_string(&settings).context("Failed to render settings")?;
    tracing::info!(service, version = env!("CARGO_PKG_VERSION"), settings = %rendered, "starting");
    let result = app(settings, Box::pin(shutdown)).await;
    match &result {
        Ok(()) => tracing::info!(service, "stopped"),
        Err(error) => tracing::error!(service, error = format!("{error:#}"), "failed"),
    }
    result
}

/// Loads the verifier of turn identities from the gateway's public key, or says exactly what is
/// missing and which variable sets it.
pub fn turn_verifier(
    settings: &rover_settings::VerifierSettings,
    service: &str,
) -> anyhow::Result<rover_contracts::identity::TurnVerifier> {
    let path = settings.public_key_file.as_ref().with_context(|| {
        format!(
            "identity.public_key_file is not set: {service} needs the gateway's Ed25519 public key \
             (ROVER_IDENTITY__PUBLIC_KEY_FILE)"
        )
    })?;
    let pem = std::fs::read(path).with_context(|| format!("Failed to read {}", path.display()))?;
    let max_lifetime =
        chrono::Duration::seconds(i64::try_from(settings.max_lifetime_secs).unwrap_or(i64::MAX));
    rover_contracts::identity::TurnVerifier::from_pem(&pem, max_lifetime)
        .with_context(|| format!("Failed to load {}", path.display()))
}

/// Settings that carry a telemetry section.
pub trait Telemetry {
    /// The telemetry section.
    fn telemetry(&self) -> &rover_settings::TelemetrySettings;
}
