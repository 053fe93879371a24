//! `rover-worker`, Rover's agent worker: consumes turns, builds the agent per turn, calls the model
//! and the tools, and publishes the turn's events. Until its issue lands it starts, logs its
//! settings and waits for a shutdown signal.

use serde::{Deserialize, Serialize};

use rover_settings::{AmqpSettings, HttpSettings, ModelSettings, TelemetrySettings};

/// The worker's settings (`rover-worker --print-config` shows the effective ones).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// Health and metrics listener.
    pub http: HttpSettings,
    /// The broker turns are consumed from.
    pub amqp: AmqpSettings,
    /// The OpenAI-compatible model endpoint.
    pub model: ModelSettings,
    /// Logging.
    pub telemetry: TelemetrySettings,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            http: HttpSettings::on(([127, 0, 0, 1], 9091)),
            amqp: AmqpSettings::default(),
            model: ModelSettings::default(),
            telemetry: TelemetrySettings::default(),
        }
    }
}

impl rover_service::Telemetry for Settings {
    fn telemetry(&self) -> &TelemetrySettings {
        &self.telemetry
    }
}

/// Runs the worker until `shutdown` resolves.
pub async fn run(
    settings: Settings,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    tracing::info!(model = %settings.model.name, "worker ready (turns arrive with the worker issue); waiting for shutdown");
    shutdown.await;
    Ok(())
}
