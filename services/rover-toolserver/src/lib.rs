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
    tools: ToolMetrics,
    verifier: rover_contracts::identity::TurnVerifier,
    metrics: Metrics,
    listener: tokio::net::TcpListener,
    shards: usize,
}

/// How many RPC servers `settings` ask for (`runtime.rpc_shards`; `0` — one per core), never more
/// than the prefetch or the database connections they share.
fn shard_count(settings: &Settings) -> usize {
    let asked = match settings.runtime.rpc_shards {
        0 => std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
        shards => shards,
    };
    let limit = usize::from(settings.amqp.prefetch)
        .min(usize::try_from(settings.database.max_connections).unwrap_or(usize::MAX));
    asked.min(limit).max(1)
}

/// Shard `index`'s part of `total`, split as evenly as `shards` ways allow (the parts add up to
/// `total`).
fn share(total: usize, shards: usize, index: usize) -> usize {
    total / shards + usize::from(index < total % shards)
}

/// Shard `index`'s settings: its part of the prefetch and of the database connections.
fn shard_settings(
    settings: &Settings,
    shards: usize,
    index: usize,
) -> (ConsumerOptions, DatabaseSettings) {
    let prefetch = share(usize::from(settings.amqp.prefetch), shards, index);
    let connections = share(
        usize::try_from(settings.database.max_connections).unwrap_or(usize::MAX),
        shards,
        index,
    );
    let options = ConsumerOptions {
        prefetch: u16::try_from(prefetch).unwrap_or(u16::MAX),
        consumer_tag: String::new(),
    };
    let database = DatabaseSettings {
        max_connections: u32::try_from(connections).unwrap_or(u32::MAX),
        ..settings.database.clone()
    };
    (options, database)
}

impl App {
    /// Loads the key, connects to the broker (declaring the topology) and the database, and binds
    /// the health listener.
    pub async fn build(settings: Settings) -> anyhow::Result<App> {
        let verifier = rover_service::turn_verifier(&settings.identity, "the tool server")?;
        let shards = shard_count(&settings);
        let (_, database) = shard_settings(&settings, shards, 0);
        let mut registry = rover_telemetry::metrics::Registry::default();
        let tools = ToolMetrics::register(
            &mut registry,
            "rover_tool_execute_duration_seconds",
            "The tool server's execute(): identity, schema, tenant, permission, posture, audit",
        );
        let metrics = Metrics::new(registry);
        let (pool, pipeline) = rpc_server_pipeline(
            &database,
            verifier.clone(),
            tools.clone(),
            settings.telemetry.capture_content,
        )?;
        let (broker, topology) =
            rover_messaging::connect_service(&settings.amqp, "rover-toolserver")
                .await
                .context("Failed to connect to RabbitMQ and declare the topology")?;
        let listener = tokio::net::TcpListener::bind(settings.http.listen)
            .await
            .with_context(|| format!("Failed to bind {}", settings.http.listen))?;
        Ok(App {
            settings,
            broker,
            pool,
            topology,
            pipeline,
            tools,
            verifier,
            metrics,
            listener,
            shards,
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
            tools,
            verifier,
            metrics,
            listener,
            shards,
        } = self;
        let http_addr = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let (options, _) = shard_settings(&settings, shards, 0);
        let consumer = consume(&broker, &topology.tools_queue(), options, pipeline).await?;
        let mut others = Vec::with_capacity(shards - 1);
        for index in 1..shards {
            let shard = Shard::start(
                &settings, &broker, &topology, &tools, &verifier, shards, index,
            );
            match shard.await {
                Ok(shard) => others.push(shard),
                Err(error) => {
                    for shard in others {
                        shard.stop().await;
                    }
                    consumer.shutdown().await;
                    return Err(error);
                }
            }
        }
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
        tracing::info!(queue = %topology.tools_queue(), http = %http_addr, rpc_servers = shards, "tool server ready; waiting for shutdown");
        shutdown.await;
        tracing::info!("draining: no new tool calls; finishing the calls in flight");
        // Every RPC server stops consuming at once; each lets its calls in flight reply.
        let stopping: Vec<_> = others.into_iter().map(Shard::stopping).collect();
        tokio::join!(consumer.shutdown(), async {
            for stopped in stopping {
                let _ = stopped.await;
            }
        });
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

/// An RPC server's database pool, and the pipeline that runs its calls on it.
fn rpc_server_pipeline(
    database: &DatabaseSettings,
    verifier: rover_contracts::identity::TurnVerifier,
    tools: ToolMetrics,
    capture_content: bool,
) -> anyhow::Result<(rover_domain::pool::CallPool, Arc<Pipeline>)> {
    let pool =
        rover_domain::call_pool(database).context("Failed to configure the database pool")?;
    let pipeline = Pipeline::new(verifier, pool.clone())
        .with_metrics(tools)
        .capture_content(capture_content);
    Ok((pool, Arc::new(pipeline)))
}

/// Consumes `queue` with `options`, every call run by `pipeline`.
async fn consume(
    broker: &Broker,
    queue: &str,
    options: ConsumerOptions,
    pipeline: Arc<Pipeline>,
) -> anyhow::Result<rover_messaging::ConsumerHandle> {
    broker
        .serve_rpc(queue, options, move |delivery| pipeline.handle(delivery))
        .await
        .context("Failed to start consuming tool calls")
}

/// An RPC server beyond the first: a thread with a current-thread runtime, its own database pool
/// and pipeline, consuming the tools queue on a connection of its own.
struct Shard {
    stop: tokio::sync::oneshot::Sender<()>,
    stopped: tokio::sync::oneshot::Receiver<()>,
}

impl Shard {
    /// Starts shard `index` of `shards`; returns once it is consuming.
    async fn start(
        settings: &Settings,
        broker: &Broker,
        topology: &Topology,
        tools: &ToolMetrics,
        verifier: &rover_contracts::identity::TurnVerifier,
        shards: usize,
        index: usize,
    ) -> anyhow::Result<Shard> {
        let (options, database) = shard_settings(settings, shards, index);
        // The key read once, at start-up: every RPC server verifies with the same one.
        let verifier = verifier.clone();
        let (tools, capture) = (tools.clone(), settings.telemetry.capture_content);
        let (broker, queue) = (broker.clone(), topology.tools_queue());
        let (ready_tx, ready) = tokio::sync::oneshot::channel::<anyhow::Result<()>>();
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (stopped_tx, stopped) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("Failed to build an RPC server's runtime")?;
        std::thread::Builder::new()
            .name(format!("rover-rpc-{index}"))
            .spawn(move || {
                // The pool is made on this thread's runtime, so its tasks and connections are
                // this RPC server's own.
                runtime.block_on(async move {
                    let started = async {
                        let (pool, pipeline) =
                            rpc_server_pipeline(&database, verifier, tools, capture)?;
                        let consumer = consume(&broker, &queue, options, pipeline).await?;
                        anyhow::Ok((pool, consumer))
                    };
                    let (pool, consumer) = match started.await {
                        Ok(started) => started,
                        Err(error) => {
                            let _ = ready_tx.send(Err(error));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(()));
                    // Asked to stop, or the tool server is gone.
                    let _ = stop_rx.await;
                    consumer.shutdown().await;
                    pool.close().await;
                    drop(stopped_tx);
                });
            })
            .context("Failed to start an RPC server's thread")?;
        ready
            .await
            .context("An RPC server's thread ended while starting")??;
        Ok(Shard { stop, stopped })
    }

    /// Asks it to stop consuming and let its calls in flight reply; the receiver ends when it has.
    fn stopping(self) -> tokio::sync::oneshot::Receiver<()> {
        let _ = self.stop.send(());
        self.stopped
    }

    /// Stops it and waits until its calls in flight have replied.
    async fn stop(self) {
        let _ = self.stopping().await;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(prefetch: u16, connections: u32, shards: usize) -> Settings {
        let mut settings = Settings::default();
        settings.amqp.prefetch = prefetch;
        settings.database.max_connections = connections;
        settings.runtime.rpc_shards = shards;
        settings
    }

    #[test]
    fn no_more_rpc_servers_than_the_prefetch_or_the_connections_allow_and_at_least_one() {
        assert_eq!(shard_count(&settings(64, 16, 4)), 4);
        assert_eq!(shard_count(&settings(2, 16, 5)), 2);
        assert_eq!(shard_count(&settings(64, 3, 5)), 3);
        assert_eq!(shard_count(&settings(0, 0, 5)), 1);
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        assert_eq!(shard_count(&settings(64, 64, 0)), cores.min(64));
    }

    #[test]
    fn the_shares_add_up_to_the_tool_servers_limits() {
        for (prefetch, connections, shards) in [(64, 16, 3), (8, 8, 3), (5, 2, 2), (1, 1, 1)] {
            let settings = settings(prefetch, connections, shards);
            let count = shard_count(&settings);
            let (prefetches, pools): (Vec<_>, Vec<_>) = (0..count)
                .map(|index| {
                    let (options, database) = shard_settings(&settings, count, index);
                    (options.prefetch, database.max_connections)
                })
                .unzip();
            assert_eq!(prefetches.iter().sum::<u16>(), prefetch, "{prefetches:?}");
            assert_eq!(pools.iter().sum::<u32>(), connections, "{pools:?}");
            assert!(prefetches.iter().all(|&p| p >= 1), "{prefetches:?}");
            assert!(pools.iter().all(|&p| p >= 1), "{pools:?}");
            let (min, max) = (prefetches.iter().min(), prefetches.iter().max());
            assert!(
                max.zip(min).is_some_and(|(max, min)| max - min <= 1),
                "{prefetches:?}"
            );
        }
    }
}
