//! `rover-gateway`, the HTTP edge of Rover: `useChat` over SSE, JWT authentication, runtime-context
//! minting and the REST API. Until its issue lands it starts, logs its settings and waits for a
//! shutdown signal.

use serde::{Deserialize, Serialize};

use rover_settings::{AmqpSettings, DatabaseSettings, HttpSettings, TelemetrySettings};

/// The gateway's settings (`rover-gateway --print-config` shows the effective ones).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// Where the API listens.
    pub http: HttpSettings,
    /// The broker turns are published to.
    pub amqp: AmqpSettings,
    /// The database the runtime context is minted from.
    pub database: DatabaseSettings,
    /// Logging.
    pub telemetry: TelemetrySettings,
}

impl rover_service::Telemetry for Settings {
    fn telemetry(&self) -> &TelemetrySettings {
        &self.telemetry
    }
}

/// Runs the gateway until `shutdown` resolves.
pub async fn run(
    settings: Settings,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    tracing::info!(listen = %settings.http.listen, "gateway ready (serving arrives with the gateway issue); waiting for shutdown");
    shutdown.await;
    Ok(())
}
