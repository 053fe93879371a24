//! `rover-toolserver`, Rover's tool server: consumes tool RPCs from the tools queue and runs every
//! call through one `execute()` pipeline (see [`Pipeline`]) against the school domain.
//!
//! [`App::build`] connects and binds; [`App::run`] serves until the shutdown future resolves, then
//! stops consuming, lets the calls in flight finish, and exits. Tests drive the very same code.

mod database;
mod dispatch;
mod health;
mod pipeline;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use rover_messaging::{Broker, ConsumerOptions, Permissions, Service, Topology};
use rover_settings::{
    AmqpSettings, DatabaseSettings, HttpSettings, RuntimeSettings, TelemetrySettings,
    VerifierSettings,
};
use rover_telemetry::metrics::{Metrics, ToolMetrics};
use serde::{Deserialize, Serialize};

pub use database::{SetupArgs, setup};
pub use pipeline::{Pipeline, Reply};

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
    /// How turn identities are verified.
    pub identity: VerifierSettings,
    /// Logging.
    pub telemetry: TelemetrySettings,
    /// The threads its tasks run on.
    pub runtime: RuntimeSettings,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            http: HttpSettings::on(([127, 0, 0, 1], 9092)),
            amqp: AmqpSettings::default(),
            database: DatabaseSettings::default(),
            identity: VerifierSettings::default(),
            telemetry: TelemetrySettings::default(),
            runtime: RuntimeSettings::default(),
        }
    }
}

impl rover_service::Telemetry for Settings {
    fn telemetry(&self) -> &TelemetrySettings {
        &self.telemetry
    }
}

/// A built tool server: connected, bound, not yet consuming.
#[derive(Debug)]
pub struct App {
    settings: Settings,
    broker: Broker,
    pool: rover_domain::pool::CallPool,
    topology: Topology,
    pipeline: Arc<Pipeline>,
    metrics: Metrics,
    listener: tokio::net::TcpListener,
}

impl App {
    /// Loads the key, connects to the broker (declaring the topology) and the database, and binds
    /// the health listener.
    pub async fn build(settings: Settings) -> anyhow::Result<App> {
        let verifier = rover_service::turn_verifier(&settings.identity, "the tool server")?;
        let pool = rover_domain::call_pool(&settings.database)
            .context("Failed to configure the database pool")?;
        let (broker, topology) =
            rover_messaging::connect_service(&settings.amqp, "rover-toolserver")
                .await
                .context("Failed to connect to RabbitMQ and declare the topology")?;
        let listener = tokio::net::TcpListener::bind(settings.http.listen)
            .await
            .with_context(|| format!("Failed to bind {}", settings.http.listen))?;
        let mut registry = rover_telemetry::metrics::Registry::default();
        let tools = ToolMetrics::register(
            &mut registry,
            "rover_tool_execute_duration_seconds",
            "The tool server's execute(): identity, schema, tenant, permission, posture, audit",
        );
        let metrics = Metrics::new(registry);
        let pipeline = Arc::new(
            Pipeline::new(verifier, pool.clone())
                .with_metrics(tools)
                .capture_content(settings.telemetry.capture_content),
        );
        Ok(App {
            settings,
            broker,
            pool,
            topology,
            pipeline,
            metrics,
            listener,
        })
    }

    /// Where the health listener is bound (useful with port 0).
    pub fn http_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or(self.settings.http.listen)
    }

    /// Serves tool calls until `shutdown` resolves; then stops consuming, finishes the calls in
    /// flight, and returns.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        let App {
            settings,
            broker,
            pool,
            topology,
            pipeline,
            metrics,
            listener,
        } = self;
        let http_addr = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let options = ConsumerOptions {
            prefetch: settings.amqp.prefetch,
            consumer_tag: String::new(),
        };
        let consumer = broker
            .serve_rpc(&topology.tools_queue(), options, move |delivery| {
                pipeline.handle(delivery)
            })
            .await
            .context("Failed to start consuming tool calls")?;
        let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
        let router = health::router(health::Probes {
            broker: broker.clone(),
            pool: pool.clone(),
            metrics,
        });
        let http = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async {
                    let _ = http_stopped.await;
                })
                .await
        });
        tracing::info!(queue = %topology.tools_queue(), http = %http_addr, "tool server ready; waiting for shutdown");
        shutdown.await;
        tracing::info!("draining: no new tool calls; finishing the calls in flight");
        consumer.shutdown().await;
        let _ = stop_http.send(());
        match http.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "health listener failed"),
            Err(error) => tracing::warn!(%error, "health listener task failed"),
        }
        broker.close().await;
        pool.close().await;
        Ok(())
    }
}

/// Builds and runs the tool server until `shutdown` resolves.
pub async fn run(settings: Settings, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    App::build(settings).await?.run(shutdown).await
}

/// `rover-toolserver broker setup`: declares the whole topology with the configured (administrator)
/// broker user, and returns each service's least-privilege rights in that vhost, for
/// `rabbitmqctl set_permissions` (docs/design/messaging.md, *Broker users*).
pub async fn broker_setup(settings: &Settings) -> anyhow::Result<Vec<(&'static str, Permissions)>> {
    let mut amqp = settings.amqp.clone();
    amqp.declare_topology = true;
    let (broker, topology) = rover_messaging::connect_service(&amqp, "rover-broker-setup")
        .await
        .context("Failed to connect to RabbitMQ and declare the topology")?;
    broker.close().await;
    Ok([
        ("rover-gateway", Service::Gateway),
        ("rover-worker", Service::Worker),
        ("rover-toolserver", Service::ToolServer),
    ]
    .into_iter()
    .map(|(name, service)| (name, topology.permissions(service)))
    .collect())
}
