//! Rover's RabbitMQ layer, and the only crate that touches `lapin`.
//!
//! - [`Topology`] names and declares the exchanges and queues (a quorum turns queue with a
//!   delivery limit, a classic tools queue for RPC, dead-lettering for both).
//! - [`Broker`] owns the connection and keeps it alive.
//! - [`Publisher`] publishes with confirms and `mandatory`, so unroutable or nacked messages
//!   are errors.
//! - [`RpcClient`] and [`Broker::serve_rpc`] do request/reply over Direct Reply-to, with a
//!   deadline per attempt and retries under the same call id; the server settles each request
//!   before running it, so the caller's attempts are the only redelivery.
//! - [`Broker::consume`] runs handlers concurrently up to the prefetch and settles each
//!   message with the handler's [`Outcome`]; [`Broker::consume_decoded`] rejects what does
//!   not decode; [`Broker::subscribe`] consumes a per-connection fan-out queue;
//!   [`ConsumerHandle::shutdown`] drains the handlers.
//! - [`inject`] and [`extract`] carry W3C trace context in message headers; publishing and
//!   consuming use them on every message.
//!
//! # Recovery
//!
//! A supervisor task, not lapin's built-in auto-recovery, keeps the connection alive. It
//! waits for the connection to fail (an error event, or a closed status), reconnects with
//! exponential backoff for as long as it takes, redeclares every topology passed to
//! [`Broker::declare`], then publishes the new connection and bumps a generation counter
//! ([`Broker::connected`]).
//!
//! Everything else is lazy: a publisher, an RPC client or a consumer holds a channel, and
//! when that channel turns out dead it opens a new one on whatever connection is current
//! (waiting for the supervisor if there is none). Consumers re-subscribe, subscriptions
//! declare a fresh queue, the RPC client starts a new Direct Reply-to consumer before it
//! publishes again.
//!
//! Why not lapin's `enable_auto_recover`: by default it gives up after 16 reconnect
//! attempts, so a long broker outage would still need a process restart; every call site
//! must still catch the error and call `wait_for_recovery`; and replaying per-channel state
//! (server-named queues, the Direct Reply-to consumer, confirm mode) happens inside the
//! library where tests cannot observe it. One rule — "if your channel is dead, open another
//! on the current connection" — plus a supervisor that never gives up is simpler to reason
//! about, and both failure modes (the broker closing the connection, the broker being
//! unreachable for a while) are covered by this crate's integration tests.
//!
//! What recovery does not hide: a message whose publish was not confirmed before the
//! connection died is published again (at least once — consumers deduplicate by message or
//! call id), an RPC reply in flight is lost (the attempt times out and is retried), and
//! messages being handled when the connection died are redelivered by the broker.

mod broker;
mod consume;
mod direct;
mod error;
mod publish;
mod rpc;
mod topology;
mod trace;

pub use broker::{Broker, BrokerOptions, QueueDepth};
pub use consume::{ConsumerHandle, ConsumerOptions, Delivery, Outcome};
pub use error::{AmqpError, MessagingError, PublishError, RpcError};
pub use publish::{OutgoingMessage, Publisher};
pub use rpc::{DIRECT_REPLY_TO, RpcClient, RpcOptions};
pub use topology::{
    Permissions, QueueKind, Service, TURN_ROUTING_KEY, Topology, ended_routing_key,
    stop_routing_key, turn_event_routing_key,
};
pub use trace::{Headers, extract, inject};

/// Connects a service to the broker named in its settings and declares Rover's topology (with the
/// configured prefix and delivery limit); the connection recovers by itself from then on.
pub async fn connect_service(
    settings: &rover_settings::AmqpSettings,
    connection_name: &str,
) -> Result<(Broker, Topology), MessagingError> {
    let broker = Broker::connect(BrokerOptions {
        connection_name: connection_name.to_owned(),
        addresses: settings.addresses.clone(),
        ..BrokerOptions::new(settings.url.expose().clone())
    })
    .await?;
    let topology = Topology::new(settings.prefix.clone())
        .with_delivery_limit(settings.delivery_limit)
        .with_turns_max_length(settings.turns_max_length)
        .with_tools_queue_kind(match settings.tools_queue {
            rover_settings::ToolsQueue::Classic => QueueKind::Classic,
            rover_settings::ToolsQueue::Quorum => QueueKind::Quorum,
        })
        .passive(!settings.declare_topology);
    broker.declare(&topology).await?;
    Ok((broker, topology))
}

/// Checks that `value` fits AMQP's 255-byte limit for names, keys and ids.
pub(crate) fn short(value: &str) -> Result<lapin::types::ShortString, MessagingError> {
    lapin::types::ShortString::try_new(value)
        .map_err(|_| MessagingError::NameTooLong(value.to_owned()))
}
