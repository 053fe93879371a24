//! The floor: RabbitMQ's own RPC round trip with no framework — a bare lapin echo server and a
//! Direct Reply-to client, no publisher confirms, no tracing headers, no retries, on a queue of its
//! own. What Rover's tool hop is compared with.
//!
//! This file (and only this file) uses `lapin` outside `rover-messaging`: measuring the broker
//! without Rover's layer is the point (see ARCHITECTURE.md).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use futures::StreamExt as _;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use tokio::sync::oneshot;

const REPLY_TO: &str = "amq.rabbitmq.reply-to";

/// Which kind of queue the echo server consumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueKind {
    /// A transient classic queue: RabbitMQ's RPC tutorial, the reference floor.
    Classic,
    /// A durable quorum queue, like Rover's `{p}.tools` (transient messages on it).
    Quorum,
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Vec<u8>>>>>;

/// A running echo server and a client to call it.
pub(crate) struct Floor {
    server: Connection,
    client: Connection,
    channel: Channel,
    queue: ShortString,
    pending: Pending,
    next: AtomicU64,
    body: Vec<u8>,
}

impl std::fmt::Debug for Floor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Floor")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl Floor {
    /// Starts the echo server on its own connection and opens the client's; every request body is
    /// `body_len` bytes.
    pub(crate) async fn start(url: &str, kind: QueueKind, body_len: usize) -> anyhow::Result<Self> {
        let queue = match kind {
            QueueKind::Classic => "bench.echo.classic",
            QueueKind::Quorum => "bench.echo.quorum",
        };
        Self::open(url, kind, queue, body_len, true).await
    }

    /// The floor's client on a classic queue of its own that nothing answers yet: for Rover's own
    /// RPC server to serve (the *messaging* rows).
    pub(crate) async fn unserved(url: &str, body_len: usize) -> anyhow::Result<Self> {
        Self::open(
            url,
            QueueKind::Classic,
            "bench.echo.unserved",
            body_len,
            false,
        )
        .await
    }

    /// The queue the echo requests go to.
    pub(crate) fn queue(&self) -> &str {
        self.queue.as_str()
    }

    /// A request body as [`Floor::call`] sends it.
    pub(crate) fn body(&self) -> Vec<u8> {
        self.body.clone()
    }

    /// Connects the server's and the client's connections, declares the queue, starts the bare
    /// echo server on it when `echo`, and the client's reply consumer.
    async fn open(
        url: &str,
        kind: QueueKind,
        queue: &str,
        body_len: usize,
        echo: bool,
    ) -> anyhow::Result<Self> {
        let server = Connection::connect(url, ConnectionProperties::default())
            .await
            .context("Failed to connect the echo server")?;
        let client = Connection::connect(url, ConnectionProperties::default())
            .await
            .context("Failed to connect the echo client")?;
        let queue: ShortString = queue.into();

        let serving = server.create_channel().await?;
        serving.basic_qos(256, BasicQosOptions::default()).await?;
        let mut arguments = FieldTable::default();
        if kind == QueueKind::Quorum {
            arguments.insert(
                "x-queue-type".into(),
                AMQPValue::LongString("quorum".into()),
            );
        }
        let options = QueueDeclareOptions {
            durable: kind == QueueKind::Quorum,
            ..QueueDeclareOptions::default()
        };
        serving
            .queue_declare(queue.clone(), options, arguments)
            .await
            .context("Failed to declare the echo queue")?;
        if echo {
            Self::echo(&serving, &queue).await?;
        }

        let channel = client.create_channel().await?;
        let mut replies = channel
            .basic_consume(
                REPLY_TO.into(),
                "".into(),
                BasicConsumeOptions {
                    no_ack: true,
                    ..BasicConsumeOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .context("Failed to consume direct replies")?;
        let pending = Pending::default();
        let routes = pending.clone();
        tokio::spawn(async move {
            while let Some(Ok(reply)) = replies.next().await {
                let id = reply
                    .properties
                    .correlation_id()
                    .as_ref()
                    .and_then(|id| id.as_str().parse::<u64>().ok());
                let waiter = id.and_then(|id| lock(&routes).remove(&id));
                if let Some(waiter) = waiter {
                    let _ = waiter.send(reply.data);
                }
            }
        });
        Ok(Self {
            server,
            client,
            channel,
            queue,
            pending,
            next: AtomicU64::new(0),
            body: vec![b'x'; body_len],
        })
    }

    /// The bare echo server: each request's body published back to its `reply_to`, then acked.
    async fn echo(serving: &Channel, queue: &ShortString) -> anyhow::Result<()> {
        let mut requests = serving
            .basic_consume(
                queue.clone(),
                "".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await?;
        let serving = serving.clone();
        tokio::spawn(async move {
            while let Some(Ok(request)) = requests.next().await {
                let channel = serving.clone();
                tokio::spawn(async move {
                    let Some(reply_to) = request.properties.reply_to().clone() else {
                        return;
                    };
                    let mut properties = BasicProperties::default();
                    if let Some(id) = request.properties.correlation_id().clone() {
                        properties = properties.with_correlation_id(id);
                    }
                    let _ = channel
                        .basic_publish(
                            "".into(),
                            reply_to,
                            BasicPublishOptions::default(),
                            &request.data,
                            properties,
                        )
                        .await;
                    let _ = request.acker.ack(BasicAckOptions::default()).await;
                });
            }
        });
        Ok(())
    }

    /// One round trip: publish the padded body, wait for its echo.
    pub(crate) async fn call(&self) -> Result<(), EchoError> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        let properties = BasicProperties::default()
            .with_reply_to(REPLY_TO.into())
            .with_correlation_id(id.to_string().into());
        self.channel
            .basic_publish(
                "".into(),
                self.queue.clone(),
                BasicPublishOptions::default(),
                &self.body,
                properties,
            )
            .await
            .map_err(EchoError::Publish)?;
        let echo = rx.await.map_err(|_| EchoError::NoEcho)?;
        if echo.len() == self.body.len() {
            Ok(())
        } else {
            Err(EchoError::WrongLength {
                got: echo.len(),
                sent: self.body.len(),
            })
        }
    }

    /// Deletes the queue and closes both connections.
    pub(crate) async fn stop(self) {
        let _ = self
            .channel
            .queue_delete(self.queue.clone(), QueueDeleteOptions::default())
            .await;
        let _ = self.client.close(200, "bench done".into()).await;
        let _ = self.server.close(200, "bench done".into()).await;
    }
}

/// Why one echo round trip failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EchoError {
    #[error("publishing the echo request: {0}")]
    Publish(lapin::Error),
    #[error("the echo never came (its waiter was dropped)")]
    NoEcho,
    #[error("echo of {got} bytes, sent {sent}")]
    WrongLength { got: usize, sent: usize },
}

fn lock(pending: &Pending) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Vec<u8>>>> {
    pending
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
