//! Rover's exchanges and queues, named from a prefix, and the code that declares them.

use std::time::Duration;

use lapin::{
    Channel, ExchangeKind,
    options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions},
    types::{AMQPValue, FieldTable, LongString},
};

use crate::MessagingError;

/// Routing key of turn requests on the turns exchange.
pub const TURN_ROUTING_KEY: &str = "turn";

/// Routing key of the events of one turn on the turn-events exchange: `turn.<turn_id>`.
pub fn turn_event_routing_key(turn_id: &str) -> String {
    format!("turn.{turn_id}")
}

/// Routing key of a request to stop a turn on the control exchange: `stop.<turn_id>`.
pub fn stop_routing_key(turn_id: &str) -> String {
    format!("stop.{turn_id}")
}

/// Routing key on the control exchange saying a thread's turn ended while others of the thread
/// wait behind it: `ended.<thread_id>`.
pub fn ended_routing_key(thread_id: &str) -> String {
    format!("ended.{thread_id}")
}

/// Rover's RabbitMQ topology. Every name derives from a prefix (default `rover`), so tests
/// and parallel deployments can use their own.
///
/// | name | kind |
/// |---|---|
/// | `{p}.turns` | durable direct exchange |
/// | `{p}.turns` | quorum queue, bound with [`TURN_ROUTING_KEY`], at most `turns_max_length` long |
/// | `{p}.turn-events` | durable topic exchange, routing key `turn.<turn_id>` |
/// | `{p}.tools` | durable topic exchange, routing key = the tool's event |
/// | `{p}.control` | durable topic exchange: `stop.<turn_id>` (gateways ask), `ended.<thread_id>` (workers tell); every worker binds a server-named queue of its own |
/// | `{p}.tools` | durable **classic** queue, bound with `#` |
/// | `{p}.dead` | durable direct dead-letter exchange |
/// | `{p}.turns.dead`, `{p}.tools.dead` | quorum queues, bound by their source queue's name |
///
/// The turns queue carries an explicit delivery limit (RabbitMQ 3.10 has none by default, so a
/// poison turn would loop forever). The tools queue is the RPC path: a classic queue with no
/// delivery limit, because its consumers settle each request *before* running it
/// ([`Broker::serve_rpc`](crate::Broker::serve_rpc)) — a request is never redelivered once a
/// tool server has started it, and the caller's bounded retries under one call id are the
/// poison bound. Both dead-letter to `{p}.dead` with their own name as routing key (what the
/// tool server rejects unread goes there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    prefix: String,
    tools_queue_kind: QueueKind,
    delivery_limit: u32,
    consumer_timeout: Duration,
    turns_max_length: u32,
    /// Only check that the topology exists (passive declarations need no rights).
    passive: bool,
}

/// What kind of queue `{p}.tools` is ([`Topology::with_tools_queue_kind`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QueueKind {
    /// A classic queue: the fastest round trip, on one node. The default, for one broker node.
    #[default]
    Classic,
    /// A quorum queue, replicated on every node of a cluster: it outlives any one node. For a
    /// RabbitMQ cluster ([decision 0011](../../../docs/decisions/0011-rover-on-a-rabbitmq-cluster.md)).
    Quorum,
}

impl QueueKind {
    /// RabbitMQ's name for it (`x-queue-type`).
    pub fn as_str(self) -> &'static str {
        match self {
            QueueKind::Classic => "classic",
            QueueKind::Quorum => "quorum",
        }
    }
}

/// A Rover service, for its broker user's rights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// Publishes turns; follows turn events on a queue of its own.
    Gateway,
    /// Consumes turns; publishes turn events and tool calls; follows the control exchange on a
    /// queue of its own.
    Worker,
    /// Consumes tool calls; replies through the default exchange (Direct Reply-to).
    ToolServer,
}

/// A broker user's rights in the vhost: RabbitMQ's `configure`, `write` and `read` regexes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permissions {
    /// Names the user may declare or delete.
    pub configure: String,
    /// Exchanges the user may publish to, and queues it may bind.
    pub write: String,
    /// Queues the user may consume, and exchanges it may bind from.
    pub read: String,
}

impl Default for Topology {
    fn default() -> Self {
        Self::new("rover")
    }
}

impl Topology {
    /// Default number of redeliveries before a work queue dead-letters a message.
    pub const DEFAULT_DELIVERY_LIMIT: u32 = 5;
    /// Default most turns the turns queue holds before publishes are refused.
    pub const DEFAULT_TURNS_MAX_LENGTH: u32 = 10_000;
    /// Default time a consumer may hold an unacknowledged message (`x-consumer-timeout`).
    pub const DEFAULT_CONSUMER_TIMEOUT: Duration = Duration::from_secs(30 * 60);

    /// A topology whose names start with `prefix`.
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
            tools_queue_kind: QueueKind::Classic,
            delivery_limit: Self::DEFAULT_DELIVERY_LIMIT,
            consumer_timeout: Self::DEFAULT_CONSUMER_TIMEOUT,
            turns_max_length: Self::DEFAULT_TURNS_MAX_LENGTH,
            passive: false,
        }
    }

    /// Only checks that the topology exists instead of declaring it: what a service whose broker
    /// user has no `configure` right does.
    #[must_use]
    pub fn passive(mut self, passive: bool) -> Self {
        self.passive = passive;
        self
    }

    /// The least a service's broker user needs in the vhost, once the topology is declared
    /// (`rover-toolserver broker setup`). Exchanges and queues that share a name (`{p}.turns`,
    /// `{p}.tools`) cannot be told apart by RabbitMQ's regexes: a right on one is a right on the
    /// other, which lets a user bind a queue it may write to an exchange it may read — a
    /// misrouting nuisance, never a way to read or act beyond its role.
    pub fn permissions(&self, service: Service) -> Permissions {
        let p = regex_escape(&self.prefix);
        // Server-named queues (`amq.gen-…`): the gateway's own queue for turn events.
        let own = r"amq\.gen-.*";
        let reply_to = r"amq\.rabbitmq\.reply-to.*";
        let (configure, write, read) = match service {
            // The gateway also calls tools for MCP clients: it publishes tool calls and reads
            // their replies over Direct Reply-to, as the worker does.
            // It asks workers to stop turns on the control exchange.
            Service::Gateway => (
                format!("^{own}$"),
                format!(r"^({p}\.turns|{p}\.tools|{p}\.control|{own})$"),
                format!(r"^({p}\.turn-events|{own}|{reply_to})$"),
            ),
            // Its own server-named queue follows the control exchange (stops, ended turns), which
            // it also publishes to (a turn ended with others of its thread waiting).
            Service::Worker => (
                format!("^{own}$"),
                format!(r"^({p}\.turn-events|{p}\.tools|{p}\.control|{own})$"),
                format!(r"^({p}\.turns|{p}\.control|{own}|{reply_to})$"),
            ),
            Service::ToolServer => (
                "^$".to_owned(),
                r"^amq\.default$".to_owned(),
                format!(r"^{p}\.tools$"),
            ),
        };
        Permissions {
            configure,
            write,
            read,
        }
    }

    /// Sets the most turns `{p}.turns` holds (`x-max-length`); a publish beyond it is nacked
    /// (`x-overflow: reject-publish`), so the gateway can answer 503 instead of queueing forever.
    #[must_use]
    pub fn with_turns_max_length(mut self, turns_max_length: u32) -> Self {
        self.turns_max_length = turns_max_length;
        self
    }

    /// Sets the kind of `{p}.tools`: classic (the default) on one node, quorum on a cluster, so that
    /// tool calls outlive the node the queue would otherwise live on. RabbitMQ refuses to
    /// redeclare a queue as another kind: switching needs the old queue deleted first
    /// (operations.md, *A RabbitMQ cluster*).
    #[must_use]
    pub fn with_tools_queue_kind(mut self, kind: QueueKind) -> Self {
        self.tools_queue_kind = kind;
        self
    }

    /// The kind of `{p}.tools`.
    pub fn tools_queue_kind(&self) -> QueueKind {
        self.tools_queue_kind
    }

    /// Sets how many times the turns queue redelivers a message before dead-lettering it.
    #[must_use]
    pub fn with_delivery_limit(mut self, delivery_limit: u32) -> Self {
        self.delivery_limit = delivery_limit;
        self
    }

    /// Sets the turns queue's `x-consumer-timeout`. RabbitMQ 3.12 and later honour it; 3.10
    /// ignores the argument and applies the server-wide `consumer_timeout` instead.
    #[must_use]
    pub fn with_consumer_timeout(mut self, consumer_timeout: Duration) -> Self {
        self.consumer_timeout = consumer_timeout;
        self
    }

    /// The prefix every name starts with.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The turns queue's delivery limit.
    pub fn delivery_limit(&self) -> u32 {
        self.delivery_limit
    }

    /// `{p}.turns`: the direct exchange turn requests are published to.
    pub fn turns_exchange(&self) -> String {
        format!("{}.turns", self.prefix)
    }

    /// `{p}.turns`: the quorum queue all workers consume.
    pub fn turns_queue(&self) -> String {
        format!("{}.turns", self.prefix)
    }

    /// `{p}.turn-events`: the topic exchange workers publish turn events to.
    pub fn turn_events_exchange(&self) -> String {
        format!("{}.turn-events", self.prefix)
    }

    /// `{p}.tools`: the topic exchange tool requests are published to.
    pub fn tools_exchange(&self) -> String {
        format!("{}.tools", self.prefix)
    }

    /// `{p}.tools`: the classic queue all tool servers consume.
    pub fn tools_queue(&self) -> String {
        format!("{}.tools", self.prefix)
    }

    /// `{p}.control`: the topic exchange of stop requests and ended turns.
    pub fn control_exchange(&self) -> String {
        format!("{}.control", self.prefix)
    }

    /// `{p}.dead`: the dead-letter exchange of the work queues.
    pub fn dead_letter_exchange(&self) -> String {
        format!("{}.dead", self.prefix)
    }

    /// `{p}.turns.dead`: where rejected and poison turns end up.
    pub fn turns_dead_queue(&self) -> String {
        format!("{}.turns.dead", self.prefix)
    }

    /// `{p}.tools.dead`: where rejected and poison tool requests end up.
    pub fn tools_dead_queue(&self) -> String {
        format!("{}.tools.dead", self.prefix)
    }

    /// Declares everything on `channel`. Every declaration is idempotent as long as the
    /// arguments do not change (RabbitMQ refuses to redeclare a queue with other arguments).
    pub(crate) async fn declare_on(&self, channel: &Channel) -> Result<(), MessagingError> {
        if self.passive {
            return self.check_on(channel).await;
        }
        let dead = self.dead_letter_exchange();
        for (exchange, kind) in [
            (self.turns_exchange(), ExchangeKind::Direct),
            (self.turn_events_exchange(), ExchangeKind::Topic),
            (self.tools_exchange(), ExchangeKind::Topic),
            (self.control_exchange(), ExchangeKind::Topic),
            (dead.clone(), ExchangeKind::Direct),
        ] {
            let options = ExchangeDeclareOptions {
                durable: true,
                ..ExchangeDeclareOptions::default()
            };
            channel
                .exchange_declare(
                    crate::short(&exchange)?,
                    kind,
                    options,
                    FieldTable::default(),
                )
                .await
                .map_err(|e| MessagingError::amqp(format!("declare exchange {exchange}"), e))?;
        }
        for (work_queue, dead_queue, exchange, binding_key, arguments) in [
            (
                self.turns_queue(),
                self.turns_dead_queue(),
                self.turns_exchange(),
                TURN_ROUTING_KEY,
                self.turns_queue_arguments(),
            ),
            (
                self.tools_queue(),
                self.tools_dead_queue(),
                self.tools_exchange(),
                "#",
                self.tools_queue_arguments(),
            ),
        ] {
            declare_queue(channel, &dead_queue, quorum_arguments()).await?;
            bind(channel, &dead_queue, &dead, &work_queue).await?;
            declare_queue(channel, &work_queue, arguments).await?;
            bind(channel, &work_queue, &exchange, binding_key).await?;
        }
        Ok(())
    }

    /// Checks that every exchange and queue exists (passive declarations, which need no rights);
    /// bindings cannot be checked this way and are trusted to the one who declared them.
    async fn check_on(&self, channel: &Channel) -> Result<(), MessagingError> {
        let passive = || ExchangeDeclareOptions {
            passive: true,
            ..ExchangeDeclareOptions::default()
        };
        for (exchange, kind) in [
            (self.turns_exchange(), ExchangeKind::Direct),
            (self.turn_events_exchange(), ExchangeKind::Topic),
            (self.tools_exchange(), ExchangeKind::Topic),
            (self.control_exchange(), ExchangeKind::Topic),
            (self.dead_letter_exchange(), ExchangeKind::Direct),
        ] {
            channel
                .exchange_declare(crate::short(&exchange)?, kind, passive(), FieldTable::default())
                .await
                .map_err(|e| MessagingError::amqp(format!("find exchange {exchange} (declared by `rover-toolserver broker setup`?)"), e))?;
        }
        for queue in [self.turns_queue(), self.tools_queue()] {
            let options = QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            };
            channel
                .queue_declare(crate::short(&queue)?, options, FieldTable::default())
                .await
                .map_err(|e| {
                    MessagingError::amqp(
                        format!(
                            "find queue {queue} (declared by `rover-toolserver broker setup`?)"
                        ),
                        e,
                    )
                })?;
        }
        Ok(())
    }

    /// The tools queue: classic or quorum, dead-lettering what a tool server rejects unread. No
    /// delivery limit and no consumer timeout: a request is settled as soon as a tool server
    /// takes it.
    fn tools_queue_arguments(&self) -> FieldTable {
        let mut arguments = FieldTable::default();
        arguments.insert(
            "x-queue-type".into(),
            long_string(self.tools_queue_kind.as_str()),
        );
        self.dead_letter_to(&mut arguments, &self.tools_queue());
        arguments
    }

    fn dead_letter_to(&self, arguments: &mut FieldTable, queue: &str) {
        arguments.insert(
            "x-dead-letter-exchange".into(),
            long_string(&self.dead_letter_exchange()),
        );
        arguments.insert("x-dead-letter-routing-key".into(), long_string(queue));
    }

    fn turns_queue_arguments(&self) -> FieldTable {
        let mut arguments = quorum_arguments();
        arguments.insert(
            "x-delivery-limit".into(),
            AMQPValue::LongLongInt(self.delivery_limit.into()),
        );
        self.dead_letter_to(&mut arguments, &self.turns_queue());
        arguments.insert(
            "x-consumer-timeout".into(),
            AMQPValue::LongLongInt(
                i64::try_from(self.consumer_timeout.as_millis()).unwrap_or(i64::MAX),
            ),
        );
        // A bounded backlog: beyond it the publisher gets a nack, not an ever-growing queue.
        arguments.insert(
            "x-max-length".into(),
            AMQPValue::LongLongInt(self.turns_max_length.into()),
        );
        arguments.insert("x-overflow".into(), long_string("reject-publish"));
        arguments
    }
}

fn quorum_arguments() -> FieldTable {
    let mut arguments = FieldTable::default();
    arguments.insert("x-queue-type".into(), long_string("quorum"));
    arguments
}

fn long_string(value: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(value))
}

async fn declare_queue(
    channel: &Channel,
    queue: &str,
    arguments: FieldTable,
) -> Result<(), MessagingError> {
    let options = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    let kind = match arguments.inner().get("x-queue-type") {
        Some(AMQPValue::LongString(kind)) => kind.to_string(),
        _ => "classic".to_owned(),
    };
    channel
        .queue_declare(crate::short(queue)?, options, arguments)
        .await
        .map_err(|e| {
            // PRECONDITION_FAILED here is most often a queue of the same name and another kind
            // (amqp.tools_queue changed): RabbitMQ cannot turn one into the other.
            MessagingError::amqp(
                format!(
                    "declare queue {queue} as a {kind} queue (a queue of that name and another \
                     kind must be deleted first: see operations.md, A RabbitMQ cluster)"
                ),
                e,
            )
        })?;
    Ok(())
}

pub(crate) async fn bind(
    channel: &Channel,
    queue: &str,
    exchange: &str,
    binding_key: &str,
) -> Result<(), MessagingError> {
    channel
        .queue_bind(
            crate::short(queue)?,
            crate::short(exchange)?,
            crate::short(binding_key)?,
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(|e| {
            MessagingError::amqp(format!("bind {queue} to {exchange} with {binding_key}"), e)
        })
}

/// `text` with the regex metacharacters RabbitMQ's permission patterns know escaped.
fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let escape = "\\.+*?()|[]{}^$".contains(c);
            escape.then_some('\\').into_iter().chain(std::iter::once(c))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{Service, Topology, regex_escape};

    #[test]
    fn a_prefix_is_matched_literally_in_the_rights() {
        assert_eq!(regex_escape("rover.test+1"), r"rover\.test\+1");
        let rights = Topology::new("a.b").permissions(Service::ToolServer);
        assert_eq!(rights.read, r"^a\.b\.tools$");
        assert_eq!(rights.configure, "^$", "services declare nothing");
    }
}
