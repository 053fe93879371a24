//! Consumers: `Delivery`, `Outcome`, `ConsumerOptions`, `ConsumerHandle`, and the task that
//! subscribes, runs handlers concurrently, settles each message and re-subscribes after a
//! reconnect.

use std::{fmt, panic::AssertUnwindSafe, sync::Arc};

use futures::{FutureExt, StreamExt, future::BoxFuture};
use lapin::{
    Acker, Channel, Consumer,
    options::{
        BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicNackOptions,
        BasicQosOptions, BasicRejectOptions,
    },
    types::FieldTable,
};
use rover_settings::Backoff;
use tokio::{
    sync::{oneshot, watch},
    task::JoinSet,
};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::{
    Broker, Headers, MessagingError,
    broker::declare_subscription_on,
    short,
    trace::{as_i128, extract, from_field_table},
};

/// A received message, as the handler sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The payload.
    pub body: Vec<u8>,
    /// String-valued headers (including `traceparent` when the publisher sent one).
    pub headers: Headers,
    /// The publisher's message id.
    pub message_id: Option<String>,
    /// The correlation id (the call id of an RPC request).
    pub correlation_id: Option<String>,
    /// Where a reply should go.
    pub reply_to: Option<String>,
    /// The content type.
    pub content_type: Option<String>,
    /// The exchange the message was published to.
    pub exchange: String,
    /// The routing key it was published with.
    pub routing_key: String,
    /// Whether the broker delivered it before (to this or another consumer).
    pub redelivered: bool,
    /// How many earlier deliveries were returned unsettled or retried: the quorum queue's
    /// `x-delivery-count` header, 0 on the first delivery.
    pub delivery_count: u64,
}

impl Delivery {
    fn from_lapin(delivery: &lapin::message::Delivery) -> Self {
        Self::from_parts(
            &delivery.properties,
            delivery.data.clone(),
            delivery.exchange.to_string(),
            delivery.routing_key.to_string(),
            delivery.redelivered,
        )
    }

    /// A delivery from its properties, body and the method that delivered it.
    pub(crate) fn from_parts(
        properties: &lapin::BasicProperties,
        body: Vec<u8>,
        exchange: String,
        routing_key: String,
        redelivered: bool,
    ) -> Self {
        let empty = FieldTable::default();
        let table = properties.headers().as_ref().unwrap_or(&empty);
        let delivery_count = table
            .inner()
            .get("x-delivery-count")
            .and_then(as_i128)
            .and_then(|count| u64::try_from(count).ok())
            .unwrap_or(0);
        let text =
            |value: &Option<lapin::types::ShortString>| value.as_ref().map(ToString::to_string);
        Self {
            body,
            headers: from_field_table(table),
            message_id: text(properties.message_id()),
            correlation_id: text(properties.correlation_id()),
            reply_to: text(properties.reply_to()),
            content_type: text(properties.content_type()),
            exchange,
            routing_key,
            redelivered,
            delivery_count,
        }
    }
}

/// What to do with a message once its handler is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The work is done (and committed): remove the message.
    Ack,
    /// The message can never be processed: reject it without requeue, which dead-letters it.
    Reject,
    /// Processing failed but may succeed later: requeue it. The queue's delivery limit
    /// dead-letters a message that keeps failing.
    Retry,
}

/// How to consume a queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerOptions {
    /// How many unacknowledged messages the broker sends at once, and so how many handlers
    /// run concurrently. At least 1.
    pub prefetch: u16,
    /// Consumer tag shown by the broker; empty lets the broker choose one.
    pub consumer_tag: String,
}

impl Default for ConsumerOptions {
    fn default() -> Self {
        Self {
            prefetch: 10,
            consumer_tag: String::new(),
        }
    }
}

/// A running consumer.
///
/// [`ConsumerHandle::shutdown`] stops it gracefully. Dropping the handle stops it too, in the
/// background, in the same way.
#[derive(Debug)]
pub struct ConsumerHandle {
    stop: watch::Sender<bool>,
    subscriptions: watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl ConsumerHandle {
    /// How many times the consumer has subscribed: 1 once [`Broker::consume`] returns, +1
    /// each time it subscribes again after losing its channel. Await a change to know a
    /// consumer is back after a reconnect.
    pub fn subscribed(&self) -> watch::Receiver<u64> {
        self.subscriptions.clone()
    }

    /// Stops consuming (`basic.cancel`), waits for the handlers already running to finish and
    /// settle their messages, then closes the consumer's channel. Messages the broker had
    /// sent but no handler had started are requeued by the broker.
    pub async fn shutdown(self) {
        self.stop.send_replace(true);
        if let Err(error) = self.task.await {
            tracing::error!(%error, "consumer task failed");
        }
    }
}

/// What a consumer reads from.
#[derive(Clone, Debug)]
pub(crate) enum Source {
    /// A named, durable queue.
    Queue(String),
    /// A fresh server-named exclusive queue, declared and bound on every connection.
    Subscription {
        exchange: String,
        binding_keys: Vec<String>,
    },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Queue(queue) => f.write_str(queue),
            Source::Subscription { exchange, .. } => write!(f, "subscription to {exchange}"),
        }
    }
}

/// A type-erased handler: it runs the work, then the message is settled with the outcome it
/// returns (at least once: a consumer that dies mid-work leaves the message to be redelivered).
/// The RPC server, which settles before it runs, has a connection of its own (`direct`).
#[derive(Clone)]
pub(crate) struct Handler(Arc<dyn Fn(Delivery) -> BoxFuture<'static, Outcome> + Send + Sync>);

impl Handler {
    fn after(
        handler: impl Fn(Delivery) -> BoxFuture<'static, Outcome> + Send + Sync + 'static,
    ) -> Self {
        Self(Arc::new(handler))
    }
}

impl Broker {
    /// Consumes `queue`, running `handler` for each message (up to `prefetch` at once) and
    /// settling the message with the [`Outcome`] it returns, after it returns.
    ///
    /// Each handler runs inside a `rover.messaging.consume` span whose parent is the trace
    /// context the publisher put in the headers. A handler that panics counts as
    /// [`Outcome::Retry`]. Returns once the consumer is subscribed; after a reconnect it
    /// subscribes again by itself.
    pub async fn consume<F, Fut>(
        &self,
        queue: &str,
        options: ConsumerOptions,
        handler: F,
    ) -> Result<ConsumerHandle, MessagingError>
    where
        F: Fn(Delivery) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        let handler = Handler::after(move |delivery| handler(delivery).boxed());
        start(self, Source::Queue(queue.to_owned()), options, handler).await
    }

    /// Like [`Broker::consume`], but decodes each body with `decode` first. A body that does
    /// not decode is logged with the error and rejected without requeue (so it goes to the
    /// dead-letter queue, not around in circles); the handler only sees decoded values.
    pub async fn consume_decoded<T, E, D, F, Fut>(
        &self,
        queue: &str,
        options: ConsumerOptions,
        decode: D,
        handler: F,
    ) -> Result<ConsumerHandle, MessagingError>
    where
        T: Send + 'static,
        E: fmt::Display,
        D: Fn(&[u8]) -> Result<T, E> + Send + Sync + 'static,
        F: Fn(T, Delivery) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        let handler = Arc::new(handler);
        self.consume(queue, options, move |delivery| {
            // Only the error's text crosses into the handler future, so `E` need not be Send.
            let decoded = decode(&delivery.body).map_err(|error| error.to_string());
            let handler = handler.clone();
            async move {
                match decoded {
                    Ok(value) => handler(value, delivery).await,
                    Err(error) => {
                        tracing::warn!(
                            %error,
                            message_id = delivery.message_id.as_deref(),
                            "rejecting a message that cannot be decoded"
                        );
                        Outcome::Reject
                    }
                }
            }
        })
        .await
    }

    /// Consumes the messages `exchange` routes with any of `binding_keys`, through a
    /// server-named exclusive queue that is declared again on every connection (messages
    /// published while the connection is down are lost: use this for live fan-out such as
    /// turn events, not for work).
    pub async fn subscribe<F, Fut>(
        &self,
        exchange: &str,
        binding_keys: &[&str],
        options: ConsumerOptions,
        handler: F,
    ) -> Result<ConsumerHandle, MessagingError>
    where
        F: Fn(Delivery) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        let source = Source::Subscription {
            exchange: exchange.to_owned(),
            binding_keys: binding_keys.iter().map(|k| (*k).to_owned()).collect(),
        };
        let handler = Handler::after(move |delivery| handler(delivery).boxed());
        start(self, source, options, handler).await
    }
}

/// Spawns the consumer task and waits until it has subscribed once.
pub(crate) async fn start(
    broker: &Broker,
    source: Source,
    options: ConsumerOptions,
    handler: Handler,
) -> Result<ConsumerHandle, MessagingError> {
    // A named queue's dead-letter count starts at 0, so the first message dead-lettered is an
    // increase an alert sees (subscription queues, named by the broker, are counted when one is).
    if let Source::Queue(queue) = &source {
        count_dead_letters(queue, 0);
    }
    let (stop, stop_rx) = watch::channel(false);
    let (subscribed, subscriptions) = watch::channel(0);
    let (ready, ready_rx) = oneshot::channel();
    // A root span: the consumer outlives the call that started it.
    let span = tracing::info_span!(parent: None, "rover.messaging.consumer", source = %source);
    let task = tokio::spawn(
        run(
            broker.clone(),
            source,
            options,
            handler,
            stop_rx,
            ready,
            subscribed,
        )
        .instrument(span),
    );
    ConsumerHandle::once_ready(broker, stop, subscriptions, task, ready_rx).await
}

impl ConsumerHandle {
    /// The handle of a consumer task, once it says it subscribed — or its error — within the
    /// broker's operation timeout.
    pub(crate) async fn once_ready(
        broker: &Broker,
        stop: watch::Sender<bool>,
        subscriptions: watch::Receiver<u64>,
        task: tokio::task::JoinHandle<()>,
        ready: oneshot::Receiver<Result<(), MessagingError>>,
    ) -> Result<ConsumerHandle, MessagingError> {
        let timeout = broker.options().operation_timeout;
        match tokio::time::timeout(timeout, ready).await {
            Ok(Ok(Ok(()))) => Ok(ConsumerHandle {
                stop,
                subscriptions,
                task,
            }),
            Ok(Ok(Err(error))) => Err(error),
            // The task ended without a word: only possible if it panicked.
            Ok(Err(_)) => Err(MessagingError::Closed),
            // Dropping `stop` ends the task.
            Err(_) => Err(MessagingError::NotConnected(timeout)),
        }
    }
}

/// Adds `rejected` to `queue`'s dead-letter count (`rover_messages_dead_lettered_total`); with
/// 0, makes the series exist at 0, so the first message dead-lettered is an increase an alert
/// sees.
pub(crate) fn count_dead_letters(queue: &str, rejected: u64) {
    rover_telemetry::metrics::dead_lettered()
        .get_or_create(&rover_telemetry::metrics::QueueLabels {
            queue: queue.to_owned(),
        })
        .inc_by(rejected);
}

/// Says a consumer subscribed: counts it, and tells whoever waits for the first time, or logs
/// that it is back.
pub(crate) fn announce(
    subscriptions: &watch::Sender<u64>,
    ready: &mut Option<oneshot::Sender<Result<(), MessagingError>>>,
    queue: &str,
) {
    subscriptions.send_modify(|count| *count += 1);
    match ready.take() {
        Some(ready) => {
            let _ = ready.send(Ok(()));
        }
        None => tracing::info!(queue, "consumer subscribed again"),
    }
}

/// Completes when the handle asks the consumer to stop or is dropped.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// The consumer task: subscribe, dispatch deliveries, and subscribe again when the channel is
/// lost, until stopped.
async fn run(
    broker: Broker,
    source: Source,
    options: ConsumerOptions,
    handler: Handler,
    mut stop: watch::Receiver<bool>,
    ready: oneshot::Sender<Result<(), MessagingError>>,
    subscriptions: watch::Sender<u64>,
) {
    let mut ready = Some(ready);
    let mut in_flight = JoinSet::new();
    let mut backoff = Backoff::new(
        broker.options().reconnect_backoff_min,
        broker.options().reconnect_backoff_max,
    );
    loop {
        let subscribed = tokio::select! {
            () = stopped(&mut stop) => break,
            subscribed = subscribe(&broker, &source, &options) => subscribed,
        };
        let (channel, mut consumer, queue) = match subscribed {
            Ok(subscribed) => subscribed,
            Err(error) => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Err(error));
                    return;
                }
                if matches!(error, MessagingError::Closed) {
                    break;
                }
                let delay = backoff.next_delay();
                tracing::warn!(%error, retry_in = ?delay, "could not subscribe");
                tokio::select! {
                    () = stopped(&mut stop) => break,
                    () = tokio::time::sleep(delay) => {}
                }
                continue;
            }
        };
        announce(&subscriptions, &mut ready, &queue);
        backoff.reset();
        loop {
            tokio::select! {
                () = stopped(&mut stop) => {
                    // Cancel first so no new deliveries start, let the running handlers
                    // settle their messages on this channel, then close it.
                    if let Err(error) = channel
                        .basic_cancel(consumer.tag(), BasicCancelOptions::default())
                        .await
                    {
                        tracing::debug!(%error, "basic.cancel failed");
                    }
                    drain(&mut in_flight).await;
                    drop(consumer);
                    let _ = channel.close(200, "consumer shut down".into()).await;
                    return;
                }
                Some(joined) = in_flight.join_next() => report(joined),
                next = consumer.next() => match next {
                    Some(Ok(delivery)) => {
                        in_flight.spawn(process(delivery, queue.clone(), handler.clone()));
                    }
                    Some(Err(error)) => {
                        tracing::warn!(%error, queue, "consumer channel lost; subscribing again");
                        break;
                    }
                    None => {
                        tracing::warn!(queue, "consumer cancelled by the broker; subscribing again");
                        break;
                    }
                },
            }
        }
    }
    drain(&mut in_flight).await;
}

/// Opens a channel, sets the prefetch, declares the queue if it is a subscription, and
/// starts consuming.
async fn subscribe(
    broker: &Broker,
    source: &Source,
    options: &ConsumerOptions,
) -> Result<(Channel, Consumer, String), MessagingError> {
    let (_, channel) = broker.open_channel().await?;
    channel
        .basic_qos(options.prefetch.max(1), BasicQosOptions::default())
        .await
        .map_err(|e| MessagingError::amqp("set prefetch", e))?;
    let queue = match source {
        Source::Queue(queue) => queue.clone(),
        Source::Subscription {
            exchange,
            binding_keys,
        } => declare_subscription_on(&channel, exchange, binding_keys).await?,
    };
    let consumer = channel
        .basic_consume(
            short(&queue)?,
            short(&options.consumer_tag)?,
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(|e| MessagingError::amqp(format!("consume {queue}"), e))?;
    Ok((channel, consumer, queue))
}

/// The span a delivery is handled in (its parent is set from the message's headers after).
pub(crate) fn delivery_span(queue: &str, message: &Delivery) -> tracing::Span {
    tracing::info_span!(
        "rover.messaging.consume",
        otel.kind = "consumer",
        messaging.system = "rabbitmq",
        messaging.operation.type = "process",
        messaging.destination.name = %queue,
        messaging.message.id = message.message_id.as_deref(),
        messaging.message.conversation_id = message.correlation_id.as_deref(),
        messaging.rabbitmq.message.delivery_count = message.delivery_count,
        messaging.rabbitmq.outcome = tracing::field::Empty,
    )
}

/// Runs the handler for one delivery inside a span parented by the publisher's trace
/// context, then settles the message with its outcome.
async fn process(delivery: lapin::message::Delivery, queue: String, handler: Handler) {
    let message = Delivery::from_lapin(&delivery);
    let span = delivery_span(&queue, &message);
    // Fails only when no OpenTelemetry layer is installed, and then there is nothing to link.
    let _ = span.set_parent(extract(&message.headers));
    // The handler is called inside the span too: a closure may do work before its future.
    let handled =
        std::panic::catch_unwind(AssertUnwindSafe(|| span.in_scope(|| (handler.0)(message))));
    let outcome = match handled {
        Ok(future) => AssertUnwindSafe(future)
            .catch_unwind()
            .instrument(span.clone())
            .await
            .ok(),
        Err(_) => None,
    };
    let outcome = outcome.unwrap_or_else(|| {
        tracing::error!(parent: &span, "message handler panicked; requeueing the message");
        Outcome::Retry
    });
    span.record("messaging.rabbitmq.outcome", tracing::field::debug(outcome));
    if outcome == Outcome::Reject {
        count_dead_letters(&queue, 1);
    }
    settle(&delivery.acker, outcome).instrument(span).await;
}

async fn settle(acker: &Acker, outcome: Outcome) {
    let settled = match outcome {
        Outcome::Ack => acker.ack(BasicAckOptions::default()).await,
        Outcome::Reject => acker.reject(BasicRejectOptions { requeue: false }).await,
        Outcome::Retry => {
            acker
                .nack(BasicNackOptions {
                    requeue: true,
                    multiple: false,
                })
                .await
        }
    };
    match settled {
        Ok(true) => {}
        Ok(false) => tracing::warn!(
            ?outcome,
            "channel closed before the message was settled; the broker will redeliver it"
        ),
        Err(error) => tracing::warn!(
            %error,
            ?outcome,
            "could not settle the message; the broker will redeliver it"
        ),
    }
}

async fn drain(in_flight: &mut JoinSet<()>) {
    while let Some(joined) = in_flight.join_next().await {
        report(joined);
    }
}

fn report(joined: Result<(), tokio::task::JoinError>) {
    if let Err(error) = joined {
        tracing::error!(%error, "message task failed");
    }
}
