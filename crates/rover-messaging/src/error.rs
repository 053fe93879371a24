//! The error enums of this crate, one per boundary: connecting and declaring, publishing, RPC.

use std::time::Duration;

/// An error reported by the AMQP client library.
///
/// Kept opaque so that `lapin` types never leak into other crates' APIs; the message and the
/// source chain carry the broker's reply code and text.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct AmqpError(#[from] lapin::Error);

impl AmqpError {
    /// True for channel-level ("soft") protocol errors such as `NOT_FOUND` or
    /// `PRECONDITION_FAILED`: the broker refused *this* operation, and retrying it on a new
    /// connection would fail the same way.
    pub(crate) fn is_refusal(&self) -> bool {
        self.0.is_amqp_soft_error()
    }

    pub(crate) fn into_inner(self) -> lapin::Error {
        self.0
    }
}

/// Errors from connecting, declaring topology and starting consumers.
#[derive(Debug, thiserror::Error)]
pub enum MessagingError {
    /// The first connection to RabbitMQ could not be established.
    #[error("failed to connect to RabbitMQ at {url}")]
    Connect {
        /// The broker URL with any password redacted.
        url: String,
        /// Why the connection failed.
        #[source]
        source: AmqpError,
    },
    /// No connection was available within the operation timeout (the broker is down and the
    /// supervisor is still reconnecting).
    #[error("no connection to RabbitMQ within {0:?}")]
    NotConnected(Duration),
    /// The broker refused an operation, or the connection failed while it ran.
    #[error("RabbitMQ operation failed: {operation}")]
    Amqp {
        /// What was being done, e.g. `declare queue rover.turns`.
        operation: String,
        /// The client library's error.
        #[source]
        source: AmqpError,
    },
    /// A name or routing key is longer than the 255 bytes AMQP allows.
    #[error("AMQP name is longer than 255 bytes: {0:?}")]
    NameTooLong(String),
    /// [`Broker::close`](crate::Broker::close) was called.
    #[error("the broker connection was closed by this process")]
    Closed,
}

impl MessagingError {
    pub(crate) fn amqp(operation: impl Into<String>, source: lapin::Error) -> Self {
        Self::Amqp {
            operation: operation.into(),
            source: source.into(),
        }
    }
}

/// Errors from [`Publisher::publish`](crate::Publisher::publish).
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// No queue is bound for this routing key: the broker returned the message (`basic.return`).
    #[error(
        "message to exchange {exchange:?} with routing key {routing_key:?} was unroutable: {reply_text}"
    )]
    Unroutable {
        /// The exchange the message was published to.
        exchange: String,
        /// The routing key that matched no binding.
        routing_key: String,
        /// The broker's reason, usually `NO_ROUTE`.
        reply_text: String,
    },
    /// The broker negatively acknowledged the message (it could not store it).
    #[error(
        "message to exchange {exchange:?} with routing key {routing_key:?} was nacked by the broker"
    )]
    Nacked {
        /// The exchange the message was published to.
        exchange: String,
        /// The routing key it was published with.
        routing_key: String,
    },
    /// No confirm arrived within the operation timeout, including time spent waiting for a
    /// reconnect. The message may or may not have been delivered.
    #[error("no publisher confirm within {0:?}")]
    Timeout(Duration),
    /// The broker refused the publish, e.g. because the exchange does not exist.
    #[error("publish refused by RabbitMQ")]
    Refused(#[source] AmqpError),
    /// The connection could not be used (closed, or a name too long).
    #[error(transparent)]
    Messaging(#[from] MessagingError),
}

/// Errors from [`RpcClient::call`](crate::RpcClient::call).
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// No reply arrived within any of the attempts.
    #[error("no reply to call {call_id} after {attempts} attempts of {attempt_timeout:?}")]
    DeadlineExceeded {
        /// The call id that was sent with every attempt.
        call_id: String,
        /// How many attempts were made.
        attempts: u32,
        /// The deadline of each attempt.
        attempt_timeout: Duration,
    },
    /// The request could not be published (unroutable, refused, connection closed): retrying
    /// would not help.
    #[error("RPC request could not be published")]
    Publish(#[from] PublishError),
    /// A call with this id is already waiting for its reply on this client.
    #[error("a call with id {0} is already in flight on this client")]
    DuplicateCallId(String),
}
