//! `rover-toolserver`, Rover's tool server: consumes tool RPCs and runs the secure `execute()`
//! pipeline against the school domain. Until its issue lands it starts, logs its settings and
//! waits for a shutdown signal.

use serde::{Deserialize, Serialize};

use rover_settings::{AmqpSettings, DatabaseSettings, HttpSettings, TelemetrySettings};

/// The tool server's settings (`rover-toolserver --print-config` shows the effective ones).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// Health and metrics listener.
    pub http: HttpSettings,
    /// The broker tool calls are consumed from.
    pub amqp: AmqpSettings,
    /// The school database, as the application role.
    pub database: DatabaseSettings,
    /// Logging.
    pub telemetry: TelemetrySettings,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            http: HttpSettings::on(([127, 0, 0, 1], 9092)),
            amqp: AmqpSettings::default(),
            database: DatabaseSettings::default(),
            telemetry: TelemetrySettings::default(),
        }
    }
}

impl rover_service::Telemetry for Settings {
    fn telemetry(&self) -> &TelemetrySettings {
        &self.telemetry
    }
}

/// Runs the tool server until `shutdown` resolves.
pub async fn run(
    settings: Settings,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    tracing::info!(prefix = %settings.amqp.prefix, "tool server ready (tools arrive with the tool server issue); waiting for shutdown");
    shutdown.await;
    Ok(())
}
