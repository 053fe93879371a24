//! `Broker`: the one connection to RabbitMQ, its supervisor (reconnect with backoff to whichever
//! of the broker's addresses answers, redeclare topology) and the options that tune it.

use std::{
    fmt,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures::StreamExt;
use lapin::{
    Channel, Connection, ConnectionProperties, Event, options::QueueDeclareOptions,
    types::FieldTable, uri::AMQPUri,
};
use rover_settings::Backoff;
use tokio::sync::watch;
use tracing::Instrument;

use crate::{MessagingError, Topology, topology};

/// How to reach RabbitMQ and how hard to try.
#[derive(Clone)]
pub struct BrokerOptions {
    /// `amqp://user:password@host:port/vhost` (the vhost URL-encoded; `%2f` is `/`). Query
    /// parameters such as `heartbeat=30` are passed to the client.
    pub url: String,
    /// `host:port` of each node of a RabbitMQ cluster, connected to with the URL's user, password,
    /// vhost and parameters. Empty: the URL's own host. The first connection starts at a node
    /// picked at random (so replicas spread over the cluster); a lost connection is replaced by
    /// one to the next node that answers, starting after the one that was lost.
    pub addresses: Vec<String>,
    /// Shown in RabbitMQ's connection list, so operators can tell services apart.
    pub connection_name: String,
    /// First delay before reconnecting after the connection is lost.
    pub reconnect_backoff_min: Duration,
    /// Longest delay between reconnect attempts; the delay doubles up to this.
    pub reconnect_backoff_max: Duration,
    /// Bound on opening one connection (TCP, TLS and AMQP handshake).
    pub connect_timeout: Duration,
    /// Bound on any single operation that may have to wait for a reconnect: a publish
    /// (including its confirm), a declaration, the start of a consumer.
    pub operation_timeout: Duration,
}

impl BrokerOptions {
    /// Options for `url` with the defaults for everything else.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ..Self::default()
        }
    }
}

impl Default for BrokerOptions {
    fn default() -> Self {
        Self {
            url: "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned(),
            addresses: Vec::new(),
            connection_name: "rover".to_owned(),
            reconnect_backoff_min: Duration::from_millis(100),
            reconnect_backoff_max: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            operation_timeout: Duration::from_secs(10),
        }
    }
}

impl fmt::Debug for BrokerOptions {
    // The URL usually carries a password: print it redacted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerOptions")
            .field("url", &redact_url(&self.url))
            .field("addresses", &self.addresses)
            .field("connection_name", &self.connection_name)
            .field("reconnect_backoff_min", &self.reconnect_backoff_min)
            .field("reconnect_backoff_max", &self.reconnect_backoff_max)
            .field("connect_timeout", &self.connect_timeout)
            .field("operation_timeout", &self.operation_timeout)
            .finish()
    }
}

/// Replaces the password of `scheme://user:password@host` with `***`.
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((userinfo, host)) = rest.rsplit_once('@') else {
        return url.to_owned();
    };
    match userinfo.split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

/// The state of the link to the broker, as published by the supervisor.
#[derive(Clone)]
pub(crate) enum Link {
    /// Connected; topology declared.
    Up(Live),
    /// Lost; the supervisor is reconnecting.
    Down,
    /// [`Broker::close`] was called or every handle was dropped.
    Closed,
}

/// One established connection and its generation number (1 for the first connection, +1 per
/// reconnect).
#[derive(Clone)]
pub(crate) struct Live {
    pub(crate) generation: u64,
    pub(crate) connection: Arc<Connection>,
}

/// State shared by the handles and the supervisor task.
struct Core {
    options: BrokerOptions,
    link: watch::Sender<Link>,
    generation: watch::Sender<u64>,
    /// Every topology declared through [`Broker::declare`], replayed after each reconnect.
    topologies: Mutex<Vec<Topology>>,
    /// The broker's nodes, as URLs to connect to.
    nodes: Vec<AMQPUri>,
    /// The index in `nodes` of the live connection's node: a reconnect tries the next one first.
    current: AtomicUsize,
}

impl Core {
    /// `host:port` of `nodes[index]`, for logs.
    fn node(&self, index: usize) -> String {
        let authority = &self.nodes[index].authority;
        format!("{}:{}", authority.host, authority.port)
    }

    fn topologies(&self) -> MutexGuard<'_, Vec<Topology>> {
        self.topologies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Held only by [`Broker`] handles, not by the supervisor: when the last handle goes, the
/// sender is dropped and the supervisor closes the connection and stops.
struct Lifetime {
    closing: watch::Sender<bool>,
}

/// A recovering connection to RabbitMQ. Cheap to clone; every clone shares the connection.
///
/// A supervisor task owns the connection. When the broker closes it or it fails, the
/// supervisor reconnects with exponential backoff, redeclares every [`Topology`] passed to
/// [`Broker::declare`], and bumps the generation counter ([`Broker::connected`]). Publishers,
/// RPC clients and consumers open their channels from the current connection and open new
/// ones when theirs has died, so none of them needs a process restart.
///
/// The connection is closed when [`Broker::close`] is called or when the last handle
/// (including publishers, RPC clients and consumers, which hold one) is dropped.
#[derive(Clone)]
pub struct Broker {
    core: Arc<Core>,
    lifetime: Arc<Lifetime>,
}

impl fmt::Debug for Broker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Broker")
            .field("options", &self.core.options)
            .field("generation", &*self.core.generation.borrow())
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl Broker {
    /// Connects to RabbitMQ and starts the supervisor that keeps the connection alive.
    ///
    /// The first connection is made here, so a wrong URL or bad credentials fail fast with
    /// their cause; after that, losses are repaired in the background.
    #[tracing::instrument(
        name = "rover.messaging.connect",
        skip_all,
        fields(url = %redact_url(&options.url), connection_name = %options.connection_name),
    )]
    pub async fn connect(options: BrokerOptions) -> Result<Broker, MessagingError> {
        let nodes = nodes(&options)?;
        let (current, connection) =
            open(&options, &nodes, spread(nodes.len()))
                .await
                .map_err(|source| MessagingError::Connect {
                    url: redact_url(&options.url),
                    source: source.into(),
                })?;
        let live = Live {
            generation: 1,
            connection: Arc::new(connection),
        };
        let core = Arc::new(Core {
            options,
            link: watch::Sender::new(Link::Up(live.clone())),
            generation: watch::Sender::new(live.generation),
            topologies: Mutex::new(Vec::new()),
            nodes,
            current: AtomicUsize::new(current),
        });
        let (closing, closing_rx) = watch::channel(false);
        // A root span: the supervisor outlives the call that started it.
        let span = tracing::info_span!(
            parent: None,
            "rover.messaging.supervisor",
            connection_name = %core.options.connection_name,
        );
        tokio::spawn(supervise(core.clone(), live, closing_rx).instrument(span));
        tracing::info!(node = %core.node(current), "connected to RabbitMQ");
        Ok(Broker {
            core,
            lifetime: Arc::new(Lifetime { closing }),
        })
    }

    /// The options this broker was created with.
    pub fn options(&self) -> &BrokerOptions {
        &self.core.options
    }

    /// True while a connection is established and its topology declared: a readiness probe.
    pub fn is_ready(&self) -> bool {
        matches!(&*self.core.link.borrow(), Link::Up(live) if live.connection.status().connected())
    }

    /// The connection generation: 1 after [`Broker::connect`], incremented each time the
    /// supervisor has reconnected and redeclared the topology. Await a change to know that
    /// the connection is back; consumers re-subscribe just after (see
    /// [`ConsumerHandle::subscribed`](crate::ConsumerHandle::subscribed)).
    pub fn connected(&self) -> watch::Receiver<u64> {
        self.core.generation.subscribe()
    }

    /// Declares `topology` and remembers it, so it is declared again after every reconnect.
    /// Declaring the same topology again is harmless.
    #[tracing::instrument(name = "rover.messaging.declare", skip_all, fields(prefix = %topology.prefix()))]
    pub async fn declare(&self, topology: &Topology) -> Result<(), MessagingError> {
        // Remember first, so a reconnect that races with this call declares it too.
        let remembered = {
            let mut topologies = self.core.topologies();
            let new = !topologies.contains(topology);
            if new {
                topologies.push(topology.clone());
            }
            new
        };
        let result = self
            .bounded(async {
                let (_, channel) = self.open_channel().await?;
                topology.declare_on(&channel).await
            })
            .await;
        if result.is_err() && remembered {
            self.core.topologies().retain(|t| t != topology);
        }
        result
    }

    /// Declares a server-named, exclusive, auto-delete queue bound to `exchange` with each of
    /// `binding_keys`, and returns its name.
    ///
    /// The queue belongs to the current connection and disappears with it; for a consumer
    /// that survives reconnects use [`Broker::subscribe`], which declares a fresh queue on
    /// every connection.
    #[tracing::instrument(
        name = "rover.messaging.declare_subscription",
        skip_all,
        fields(exchange = %exchange),
    )]
    pub async fn declare_subscription(
        &self,
        exchange: &str,
        binding_keys: &[&str],
    ) -> Result<String, MessagingError> {
        self.bounded(async {
            let (_, channel) = self.open_channel().await?;
            declare_subscription_on(&channel, exchange, binding_keys).await
        })
        .await
    }

    /// Closes the connection and stops reconnecting. Consumers stop, and publishers, RPC
    /// clients and consumers created from this broker fail with
    /// [`MessagingError::Closed`]. Waits (bounded by the operation timeout) until the
    /// connection is closed.
    pub async fn close(&self) {
        self.lifetime.closing.send_replace(true);
        let mut link = self.core.link.subscribe();
        let closed = link.wait_for(|link| matches!(link, Link::Closed));
        let _ = tokio::time::timeout(self.core.options.operation_timeout, closed).await;
    }

    /// Completes when [`Broker::close`] is called or every handle is gone.
    pub(crate) fn closed(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut link = self.core.link.subscribe();
        async move {
            let _ = link.wait_for(|link| matches!(link, Link::Closed)).await;
        }
    }

    /// Runs `operation` bounded by the operation timeout.
    pub(crate) async fn bounded<T>(
        &self,
        operation: impl Future<Output = Result<T, MessagingError>>,
    ) -> Result<T, MessagingError> {
        let timeout = self.core.options.operation_timeout;
        tokio::time::timeout(timeout, operation)
            .await
            .unwrap_or(Err(MessagingError::NotConnected(timeout)))
    }

    /// How many messages are ready in `queue` and how many consumers it has, as the broker
    /// answers a passive declare on a channel of its own (closed after). For metrics: a queue
    /// growing with no consumer is a service that is down.
    pub async fn inspect_queue(&self, queue: &str) -> Result<QueueDepth, MessagingError> {
        let (_, channel) = self.open_channel().await?;
        let declared = channel
            .queue_declare(
                crate::short(queue)?,
                lapin::options::QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                lapin::types::FieldTable::default(),
            )
            .await
            .map_err(|e| MessagingError::amqp(format!("inspect {queue}"), e));
        let _ = channel.close(200, "inspected".into()).await;
        let declared = declared?;
        Ok(QueueDepth {
            messages: declared.message_count(),
            consumers: declared.consumer_count(),
        })
    }

    /// Opens a channel on the current connection, waiting (unbounded: callers bound it) for
    /// the supervisor to reconnect if the connection is down. Returns the connection's
    /// generation with the channel.
    pub(crate) async fn open_channel(&self) -> Result<(u64, Channel), MessagingError> {
        let mut link = self.core.link.subscribe();
        loop {
            let live = {
                let link = link
                    .wait_for(|link| !matches!(link, Link::Down))
                    .await
                    .map_err(|_| MessagingError::Closed)?;
                match &*link {
                    Link::Up(live) => live.clone(),
                    Link::Down | Link::Closed => return Err(MessagingError::Closed),
                }
            };
            match live.connection.create_channel().await {
                Ok(channel) => return Ok((live.generation, channel)),
                Err(error) => {
                    // The connection is dying and the supervisor is about to notice: wait
                    // for it to publish another state.
                    tracing::debug!(%error, generation = live.generation, "could not open a channel; waiting for the reconnect");
                    link.wait_for(
                        |link| !matches!(link, Link::Up(l) if l.generation == live.generation),
                    )
                    .await
                    .map_err(|_| MessagingError::Closed)?;
                }
            }
        }
    }
}

/// Declares a server-named exclusive auto-delete queue on `channel` and binds it.
pub(crate) async fn declare_subscription_on(
    channel: &Channel,
    exchange: &str,
    binding_keys: &[impl AsRef<str>],
) -> Result<String, MessagingError> {
    let options = QueueDeclareOptions {
        exclusive: true,
        auto_delete: true,
        ..QueueDeclareOptions::default()
    };
    let queue = channel
        .queue_declare("".into(), options, FieldTable::default())
        .await
        .map_err(|e| MessagingError::amqp("declare subscription queue", e))?;
    let name = queue.name().to_string();
    for key in binding_keys {
        topology::bind(channel, &name, exchange, key.as_ref()).await?;
    }
    Ok(name)
}

/// The URL once per node: the URL itself when no addresses are given, else with each address
/// as its host and port.
pub(crate) fn nodes(options: &BrokerOptions) -> Result<Vec<AMQPUri>, MessagingError> {
    let invalid = |reason: String| MessagingError::Connect {
        url: redact_url(&options.url),
        source: lapin::Error::from(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            reason,
        ))
        .into(),
    };
    let uri: AMQPUri = options
        .url
        .parse()
        .map_err(|e| invalid(format!("not an AMQP URL: {e}")))?;
    if options.addresses.is_empty() {
        return Ok(vec![uri]);
    }
    options
        .addresses
        .iter()
        .map(|address| {
            let (host, port) = address
                .trim()
                .rsplit_once(':')
                .and_then(|(host, port)| Some((host, port.parse::<u16>().ok()?)))
                .filter(|(host, _)| !host.is_empty())
                .ok_or_else(|| invalid(format!("broker address {address:?} is not host:port")))?;
            let mut node = uri.clone();
            node.authority.host = host.trim_matches(['[', ']']).to_owned();
            node.authority.port = port;
            Ok(node)
        })
        .collect()
}

/// Where the first connection of a process starts among `count` nodes: anywhere, so that the
/// replicas of a service do not all pile onto the first node.
pub(crate) fn spread(count: usize) -> usize {
    use std::hash::{BuildHasher as _, Hasher as _};
    // A fresh `RandomState` is randomly keyed: its hash of nothing is a random number.
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    usize::try_from(random % u64::try_from(count.max(1)).unwrap_or(1)).unwrap_or(0)
}

/// Opens one connection to the first of `nodes` that answers, trying them in turn from `first`,
/// each bounded by the connect timeout. Returns the index of the node it reached.
async fn open(
    options: &BrokerOptions,
    nodes: &[AMQPUri],
    first: usize,
) -> Result<(usize, Connection), lapin::Error> {
    let mut last_error = None;
    for index in (0..nodes.len()).map(|i| (first + i) % nodes.len()) {
        let properties = ConnectionProperties::default()
            .with_connection_name(options.connection_name.clone().into());
        let attempt = tokio::time::timeout(
            options.connect_timeout,
            Connection::connect_uri(nodes[index].clone(), properties),
        )
        .await;
        let error = match attempt {
            Ok(Ok(connection)) => return Ok((index, connection)),
            Ok(Err(error)) => error,
            Err(_) => std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no connection within {:?}", options.connect_timeout),
            )
            .into(),
        };
        if nodes.len() > 1 {
            let authority = &nodes[index].authority;
            tracing::debug!(%error, node = %format!("{}:{}", authority.host, authority.port), "broker node did not answer; trying the next");
        }
        last_error = Some(error);
    }
    Err(last_error.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "no broker address").into()
    }))
}

/// Opens a connection — to the node after the one just lost first — and declares every
/// remembered topology on it.
async fn reconnect(core: &Core) -> Result<Connection, MessagingError> {
    let first = (core.current.load(Ordering::Relaxed) + 1) % core.nodes.len();
    let (current, connection) = open(&core.options, &core.nodes, first)
        .await
        .map_err(|e| MessagingError::amqp("connect", e))?;
    core.current.store(current, Ordering::Relaxed);
    let topologies = core.topologies().clone();
    if !topologies.is_empty() {
        let channel = connection
            .create_channel()
            .await
            .map_err(|e| MessagingError::amqp("open channel", e))?;
        for topology in &topologies {
            topology.declare_on(&channel).await?;
        }
    }
    Ok(connection)
}

/// The supervisor: watches the live connection, and when it is lost, reconnects with backoff
/// until it succeeds or the broker is closed.
async fn supervise(core: Arc<Core>, mut live: Live, mut closing: watch::Receiver<bool>) {
    let options = &core.options;
    loop {
        let closed = tokio::select! {
            // Err means every Broker handle was dropped: close as well.
            _ = closing.wait_for(|closing| *closing) => true,
            () = connection_lost(&live.connection) => false,
        };
        if closed {
            if live.connection.status().connected() {
                let _ = live
                    .connection
                    .close(200, "closed by the application".into())
                    .await;
            }
            core.link.send_replace(Link::Closed);
            tracing::info!("connection to RabbitMQ closed");
            return;
        }
        tracing::warn!(
            generation = live.generation,
            "connection to RabbitMQ lost; reconnecting"
        );
        core.link.send_replace(Link::Down);

        let mut backoff =
            Backoff::new(options.reconnect_backoff_min, options.reconnect_backoff_max);
        let connection = loop {
            let delay = backoff.next_delay();
            let attempt = async {
                tokio::time::sleep(delay).await;
                reconnect(&core).await
            };
            tokio::select! {
                _ = closing.wait_for(|closing| *closing) => {
                    core.link.send_replace(Link::Closed);
                    return;
                }
                result = attempt => match result {
                    Ok(connection) => break connection,
                    Err(error) => {
                        tracing::warn!(error = %error, next_attempt_in = ?backoff.peek(), "reconnect failed");
                    }
                },
            }
        };
        live = Live {
            generation: live.generation + 1,
            connection: Arc::new(connection),
        };
        core.link.send_replace(Link::Up(live.clone()));
        core.generation.send_replace(live.generation);
        tracing::info!(
            generation = live.generation,
            node = %core.node(core.current.load(Ordering::Relaxed)),
            "reconnected to RabbitMQ"
        );
    }
}

/// Completes when `connection` has failed or been closed.
async fn connection_lost(connection: &Connection) {
    let mut events = connection.events_listener();
    // Errors arrive as events; the periodic status check is a safety net for a close that
    // might not produce one.
    let mut check = tokio::time::interval(Duration::from_secs(1));
    loop {
        if !connection.status().connected() {
            return;
        }
        tokio::select! {
            event = events.next() => match event {
                Some(Event::Error(error)) => {
                    tracing::warn!(%error, "RabbitMQ connection error");
                    return;
                }
                Some(_) => {}
                None => return,
            },
            _ = check.tick() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn redacts_the_password_only() {
        assert_eq!(
            redact_url("amqp://guest:secret@localhost:5672/%2f"),
            "amqp://guest:***@localhost:5672/%2f"
        );
        assert_eq!(redact_url("amqp://localhost"), "amqp://localhost");
    }
}

/// A queue's depth as the broker reported it ([`Broker::inspect_queue`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueDepth {
    /// Messages ready for delivery.
    pub messages: u32,
    /// Consumers subscribed.
    pub consumers: u32,
}
