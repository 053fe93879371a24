//! Confirmed, mandatory publishing: `OutgoingMessage`, `Publisher`, and the publish and confirm
//! steps the RPC client shares.

use std::sync::Arc;

use lapin::{
    BasicProperties, Channel, Confirmation, PublisherConfirm,
    options::{BasicPublishOptions, ConfirmSelectOptions},
    types::ShortString,
};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::{
    AmqpError, Broker, Headers, MessagingError, PublishError, short,
    trace::{inject, to_field_table},
};

/// A message to publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutgoingMessage {
    /// The payload.
    pub body: Vec<u8>,
    /// Identifies the message for deduplication by consumers.
    pub message_id: Option<String>,
    /// Ties a reply to its request (the tool call id for RPC).
    pub correlation_id: Option<String>,
    /// Where a reply should go.
    pub reply_to: Option<String>,
    /// MIME type of the body; `application/json` unless set.
    pub content_type: String,
    /// Extra headers. `traceparent`/`tracestate` are added from the current span on publish.
    pub headers: Headers,
    /// Persistent (delivery mode 2, the default) or transient.
    pub persistent: bool,
}

impl OutgoingMessage {
    /// A persistent `application/json` message with `body`.
    pub fn new(body: impl Into<Vec<u8>>) -> Self {
        Self {
            body: body.into(),
            message_id: None,
            correlation_id: None,
            reply_to: None,
            content_type: "application/json".to_owned(),
            headers: Headers::new(),
            persistent: true,
        }
    }

    /// Sets the message id.
    #[must_use]
    pub fn with_message_id(mut self, message_id: impl Into<String>) -> Self {
        self.message_id = Some(message_id.into());
        self
    }

    /// Sets the correlation id.
    #[must_use]
    pub fn with_correlation_id(mut self, correlation_id: impl Into<String>) -> Self {
        self.correlation_id = Some(correlation_id.into());
        self
    }

    /// Sets the reply-to address.
    #[must_use]
    pub fn with_reply_to(mut self, reply_to: impl Into<String>) -> Self {
        self.reply_to = Some(reply_to.into());
        self
    }

    /// Sets the content type.
    #[must_use]
    pub fn with_content_type(mut self, content_type: impl Into<String>) -> Self {
        self.content_type = content_type.into();
        self
    }

    /// Adds a header.
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// Makes the message transient (delivery mode 1): it is not written to disk.
    #[must_use]
    pub fn transient(mut self) -> Self {
        self.persistent = false;
        self
    }
}

/// A message converted for the wire, with the trace context injected.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) routing_key: ShortString,
    pub(crate) properties: BasicProperties,
    pub(crate) body: Vec<u8>,
    pub(crate) mandatory: bool,
}

impl Prepared {
    /// Converts `message`, injecting the current span's trace context into its headers.
    pub(crate) fn new(routing_key: &str, message: OutgoingMessage) -> Result<Self, MessagingError> {
        let OutgoingMessage {
            body,
            message_id,
            correlation_id,
            reply_to,
            content_type,
            mut headers,
            persistent,
        } = message;
        inject(&tracing::Span::current().context(), &mut headers);
        let mut properties = BasicProperties::default()
            .with_content_type(short(&content_type)?)
            .with_delivery_mode(if persistent { 2 } else { 1 })
            .with_headers(to_field_table(&headers));
        if let Some(id) = message_id {
            properties = properties.with_message_id(short(&id)?);
        }
        if let Some(id) = correlation_id {
            properties = properties.with_correlation_id(short(&id)?);
        }
        if let Some(reply_to) = reply_to {
            properties = properties.with_reply_to(short(&reply_to)?);
        }
        Ok(Self {
            routing_key: short(routing_key)?,
            properties,
            body,
            mandatory: true,
        })
    }
}

/// Why one send failed.
#[derive(Debug)]
pub(crate) enum SendError {
    /// The channel or connection went away: sending again on a new channel may succeed.
    Lost(lapin::Error),
    /// The broker answered, and the answer is final.
    Failed(PublishError),
}

impl From<lapin::Error> for SendError {
    fn from(error: lapin::Error) -> Self {
        let error = AmqpError::from(error);
        if error.is_refusal() {
            Self::Failed(PublishError::Refused(error))
        } else {
            Self::Lost(error.into_inner())
        }
    }
}

/// Starts publishing `message` on `channel` (mandatory unless the message says otherwise); on a
/// channel in confirm mode the returned confirm carries the broker's verdict.
pub(crate) async fn start(
    channel: &Channel,
    exchange: &ShortString,
    message: &Prepared,
) -> Result<PublisherConfirm, SendError> {
    let options = BasicPublishOptions {
        mandatory: message.mandatory,
        ..BasicPublishOptions::default()
    };
    Ok(channel
        .basic_publish(
            exchange.clone(),
            message.routing_key.clone(),
            options,
            &message.body,
            message.properties.clone(),
        )
        .await?)
}

/// Waits for the broker's verdict on one message.
pub(crate) async fn confirmed(
    exchange: &ShortString,
    message: &Prepared,
    confirm: PublisherConfirm,
) -> Result<(), SendError> {
    match confirm.await? {
        Confirmation::Ack(None) => Ok(()),
        // Mandatory and unroutable: the broker sends basic.return, then acks.
        Confirmation::Ack(Some(returned)) | Confirmation::Nack(Some(returned)) => {
            Err(SendError::Failed(PublishError::Unroutable {
                exchange: exchange.to_string(),
                routing_key: message.routing_key.to_string(),
                reply_text: returned.reply_text.to_string(),
            }))
        }
        // NotRequested cannot happen on a channel in confirm mode; never report it as success.
        Confirmation::Nack(None) | Confirmation::NotRequested => {
            Err(SendError::Failed(PublishError::Nacked {
                exchange: exchange.to_string(),
                routing_key: message.routing_key.to_string(),
            }))
        }
    }
}

/// Opens a channel in confirm mode.
pub(crate) async fn open_confirm_channel(broker: &Broker) -> Result<Channel, MessagingError> {
    let (_, channel) = broker.open_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(|e| MessagingError::amqp("enable publisher confirms", e))?;
    Ok(channel)
}

/// Publishes with publisher confirms and `mandatory`, so that every failure is an error:
/// an unroutable message is [`PublishError::Unroutable`], a nack is [`PublishError::Nacked`].
///
/// If the connection is lost before a message is confirmed, the message is published again
/// on the next connection (within the operation timeout). Delivery is therefore at least
/// once: give messages an id and let consumers deduplicate.
///
/// Cheap to clone; clones share one channel.
#[derive(Clone, Debug)]
pub struct Publisher {
    broker: Broker,
    channel: Arc<tokio::sync::Mutex<Option<Channel>>>,
}

impl Broker {
    /// A publisher with its own channel, opened on first use and reopened after a reconnect.
    pub fn publisher(&self) -> Publisher {
        Publisher {
            broker: self.clone(),
            channel: Arc::default(),
        }
    }
}

impl Publisher {
    /// Publishes one message and waits for the broker's confirm.
    #[tracing::instrument(
        name = "rover.messaging.publish",
        skip_all,
        fields(
            otel.kind = "producer",
            messaging.system = "rabbitmq",
            messaging.destination.name = %exchange,
            messaging.rabbitmq.destination.routing_key = %routing_key,
            messaging.message.id = message.message_id.as_deref(),
        ),
    )]
    pub async fn publish(
        &self,
        exchange: &str,
        routing_key: &str,
        message: OutgoingMessage,
    ) -> Result<(), PublishError> {
        let prepared = vec![Prepared::new(routing_key, message)?];
        self.send_all(exchange, prepared).await
    }

    /// Publishes several messages to one exchange, pipelined on one channel, and waits until
    /// the broker has confirmed all of them. Fails on the first message that is unroutable or
    /// nacked; the others may have been published.
    #[tracing::instrument(
        name = "rover.messaging.publish",
        skip_all,
        fields(
            otel.kind = "producer",
            messaging.system = "rabbitmq",
            messaging.destination.name = %exchange,
            messaging.batch.message_count = tracing::field::Empty,
        ),
    )]
    pub async fn publish_all(
        &self,
        exchange: &str,
        messages: impl IntoIterator<Item = (String, OutgoingMessage)>,
    ) -> Result<(), PublishError> {
        let prepared = messages
            .into_iter()
            .map(|(routing_key, message)| Prepared::new(&routing_key, message))
            .collect::<Result<Vec<_>, _>>()?;
        tracing::Span::current().record("messaging.batch.message_count", prepared.len());
        self.send_all(exchange, prepared).await
    }

    async fn send_all(&self, exchange: &str, messages: Vec<Prepared>) -> Result<(), PublishError> {
        let exchange = short(exchange)?;
        let timeout = self.broker.options().operation_timeout;
        tokio::time::timeout(timeout, self.send_until_confirmed(&exchange, messages))
            .await
            .unwrap_or(Err(PublishError::Timeout(timeout)))
    }

    async fn send_until_confirmed(
        &self,
        exchange: &ShortString,
        mut pending: Vec<Prepared>,
    ) -> Result<(), PublishError> {
        // A nack is sent once more, on a new channel: a channel opened while a quorum queue's
        // leader was dying keeps that leader and has every later publish nacked (seen for 30 s
        // after a broker node's kill -9), where a new channel finds the new leader. A nacked
        // message was not enqueued, so sending it again cannot duplicate it; a queue that is
        // really full nacks the second send too.
        let mut nacked_once = false;
        loop {
            let channel = self.channel().await?;
            // Pipeline: send everything, then collect the confirms.
            let mut started = Vec::with_capacity(pending.len());
            for message in &pending {
                started.push(start(&channel, exchange, message).await);
            }
            let mut lost = Vec::new();
            let mut last_error = None;
            let mut renew = false;
            for (message, confirm) in pending.into_iter().zip(started) {
                let result = match confirm {
                    Ok(confirm) => confirmed(exchange, &message, confirm).await,
                    Err(error) => Err(error),
                };
                match result {
                    Ok(()) => {}
                    Err(SendError::Failed(PublishError::Nacked { .. })) if !nacked_once => {
                        renew = true;
                        lost.push(message);
                    }
                    Err(SendError::Failed(error)) => return Err(error),
                    Err(SendError::Lost(error)) => {
                        last_error = Some(error);
                        lost.push(message);
                    }
                }
            }
            if lost.is_empty() {
                return Ok(());
            }
            if renew {
                nacked_once = true;
                self.forget_channel(channel).await;
                tracing::warn!("a publish was nacked; sending it once more on a new channel");
            }
            if let Some(error) = last_error {
                tracing::warn!(%error, unconfirmed = lost.len(), "channel lost before the broker confirmed; publishing again");
            }
            pending = lost;
        }
    }

    /// Stops publishing on `channel` if it is still the one publishes use, so the next publish
    /// opens another; it is closed once the broker has confirmed what others sent on it.
    async fn forget_channel(&self, channel: Channel) {
        let mut slot = self.channel.lock().await;
        if slot.as_ref().is_some_and(|c| c.id() == channel.id()) {
            *slot = None;
            tokio::spawn(async move {
                let _ = channel.wait_for_confirms().await;
                let _ = channel
                    .close(200, "nacked; publishing on a new channel".into())
                    .await;
            });
        }
    }

    /// The current channel, or a new one if it has died.
    async fn channel(&self) -> Result<Channel, PublishError> {
        let mut slot = self.channel.lock().await;
        loop {
            if let Some(channel) = slot.as_ref().filter(|c| c.status().connected()) {
                return Ok(channel.clone());
            }
            match open_confirm_channel(&self.broker).await {
                Ok(channel) => *slot = Some(channel),
                Err(MessagingError::Amqp { source, .. }) if !source.is_refusal() => {
                    // The connection died between opening the channel and enabling confirms.
                    tracing::debug!(error = %source, "could not open a publishing channel; retrying");
                    tokio::time::sleep(self.broker.options().reconnect_backoff_min).await;
                }
                Err(error) => return Err(error.into()),
            }
        }
    }
}
