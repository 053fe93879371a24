//! RPC over RabbitMQ Direct Reply-to: the caller side (`RpcClient`, with deadlines and
//! retries under one call id) and the server side (`Broker::serve_rpc`).

use std::{
    collections::HashMap,
    fmt,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use futures::{FutureExt, StreamExt};
use lapin::{
    Channel, Consumer, options::BasicConsumeOptions, types::FieldTable, types::ShortString,
};
use tokio::{
    sync::{oneshot, watch},
    time::Instant,
};

use crate::{
    Broker, ConsumerHandle, ConsumerOptions, Delivery, MessagingError, OutgoingMessage,
    PublishError, RpcError,
    publish::{Prepared, SendError, confirmed, open_confirm_channel, start as start_publish},
    short,
};

/// The pseudo-queue replies are addressed to: RabbitMQ routes a reply straight to the channel
/// that published the request, with no reply queue.
pub const DIRECT_REPLY_TO: &str = "amq.rabbitmq.reply-to";

/// Deadlines of an [`RpcClient`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RpcOptions {
    /// How long one attempt (publish and wait for the reply) may take.
    pub attempt_timeout: Duration,
    /// How many attempts, all with the same call id, before giving up. At least 1.
    pub attempts: u32,
}

impl Default for RpcOptions {
    fn default() -> Self {
        Self {
            attempt_timeout: Duration::from_secs(10),
            attempts: 3,
        }
    }
}

/// How many times one attempt sends a nacked request again, each on a new channel and after a
/// longer pause (the broker's reconnect backoff × the count), before the nack fails the call.
/// A queue that is really full keeps nacking, so the call fails within a second rather than
/// waiting out its deadline.
const NACK_RESENDS: u32 = 3;

/// Calls waiting for their reply, by call id.
type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Vec<u8>>>>>;

fn lock(pending: &Pending) -> MutexGuard<'_, HashMap<String, oneshot::Sender<Vec<u8>>>> {
    pending
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Makes RPC calls over Direct Reply-to.
///
/// Direct Reply-to is at most once: a reply is lost if the caller's channel dies. So every
/// call has a deadline per attempt and is retried under the **same call id** (sent as the
/// correlation id), which lets an idempotent server return its stored result. Replies that
/// arrive after their call gave up, or for no known call, are dropped and counted
/// ([`RpcClient::late_replies`]).
///
/// One client serves many concurrent calls over one channel. Cheap to clone.
#[derive(Clone, Debug)]
pub struct RpcClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    broker: Broker,
    options: RpcOptions,
    pending: Pending,
    late_replies: Arc<AtomicU64>,
    /// How many requests the broker nacked and were sent again.
    nacks: watch::Sender<u64>,
    /// The channel requests are published on and replies arrive on, with the task that
    /// routes replies to their callers.
    reply_channel: tokio::sync::Mutex<Option<ReplyChannel>>,
}

struct ReplyChannel {
    channel: Channel,
    dispatcher: tokio::task::JoinHandle<()>,
    /// Turns true when the dispatcher stops: the channel is gone, and with it every reply that
    /// was to come on it.
    gone: watch::Receiver<bool>,
}

impl fmt::Debug for ReplyChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplyChannel")
            .field("channel", &self.channel.id())
            .finish_non_exhaustive()
    }
}

impl Drop for ReplyChannel {
    // Stopping the dispatcher drops its consumer, which closes the channel.
    fn drop(&mut self) {
        self.dispatcher.abort();
    }
}

/// Removes a call from the pending map however the call ends.
struct Registration<'a> {
    pending: &'a Pending,
    call_id: &'a str,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        lock(self.pending).remove(self.call_id);
    }
}

impl Broker {
    /// An RPC client with its own reply channel, opened on first use and reopened after a
    /// reconnect.
    pub fn rpc_client(&self, options: RpcOptions) -> RpcClient {
        RpcClient {
            inner: Arc::new(Inner {
                broker: self.clone(),
                options,
                pending: Pending::default(),
                late_replies: Arc::default(),
                nacks: watch::Sender::new(0),
                reply_channel: tokio::sync::Mutex::new(None),
            }),
        }
    }

    /// Serves RPC requests from `queue`, **settling each request before running it**.
    ///
    /// `handler` first screens a request synchronously: `None` rejects it without requeue (to
    /// the queue's dead-letter exchange, counted in `rover_messages_dead_lettered_total`),
    /// unrun — use it for what can never be answered, such as a body that does not decode and
    /// names no call. `Some(work)` acks the request, then runs `work`; the reply bytes it
    /// returns are published to the request's `reply_to` through the default exchange with its
    /// correlation id, without waiting for a publisher confirm. A request without `reply_to` is
    /// rejected unrun.
    ///
    /// So a request is delivered to a handler at most once: a server that dies mid-work loses
    /// it, and no request can kill server after server. The caller's deadline and bounded
    /// retries under the same call id ([`RpcClient::call`]) make each *call* at least once, and
    /// the handler must make a repeated call id harmless (the tool server's inbox). At most
    /// `prefetch` handlers run at once.
    ///
    /// The server has a connection of its own, driven by one task, to the broker's nodes in
    /// turn: it does not cross threads per request (decision 0018).
    pub async fn serve_rpc<F, Fut>(
        &self,
        queue: &str,
        options: ConsumerOptions,
        handler: F,
    ) -> Result<ConsumerHandle, MessagingError>
    where
        F: Fn(Delivery) -> Option<Fut> + Send + Sync + 'static,
        Fut: Future<Output = Vec<u8>> + Send + 'static,
    {
        let screen: crate::direct::Screen =
            Arc::new(move |request: Delivery| handler(request).map(FutureExt::boxed));
        crate::direct::start(self, queue, options, screen).await
    }
}

impl RpcClient {
    /// Sends `body` to `exchange` with `routing_key` and waits for the reply whose correlation
    /// id is `call_id`.
    ///
    /// Each attempt has its own deadline; a timed-out attempt is sent again with the same
    /// call id. Fails with [`RpcError::DeadlineExceeded`] after
    /// `attempts × attempt_timeout` at most, or at once if the request cannot be routed.
    #[tracing::instrument(
        name = "rover.messaging.rpc",
        skip_all,
        fields(
            otel.kind = "client",
            messaging.system = "rabbitmq",
            messaging.destination.name = %exchange,
            messaging.rabbitmq.destination.routing_key = %routing_key,
            call_id = %call_id,
        ),
    )]
    pub async fn call(
        &self,
        exchange: &str,
        routing_key: &str,
        call_id: &str,
        body: Vec<u8>,
    ) -> Result<Vec<u8>, RpcError> {
        let request = OutgoingMessage::new(body)
            .with_correlation_id(call_id)
            .with_reply_to(DIRECT_REPLY_TO)
            .transient();
        let request = Prepared::new(routing_key, request).map_err(PublishError::from)?;
        let exchange = short(exchange).map_err(PublishError::from)?;

        let (reply_tx, mut reply_rx) = oneshot::channel();
        {
            let mut pending = lock(&self.inner.pending);
            if pending.contains_key(call_id) {
                return Err(RpcError::DuplicateCallId(call_id.to_owned()));
            }
            pending.insert(call_id.to_owned(), reply_tx);
        }
        let _registration = Registration {
            pending: &self.inner.pending,
            call_id,
        };

        let RpcOptions {
            attempt_timeout,
            attempts,
        } = self.inner.options;
        let attempts = attempts.max(1);
        for attempt in 1..=attempts {
            let deadline = Instant::now() + attempt_timeout;
            let attempt_result =
                tokio::time::timeout_at(deadline, self.attempt(&exchange, &request, &mut reply_rx))
                    .await;
            match attempt_result {
                Ok(Ok(reply)) => return Ok(reply),
                Ok(Err(error)) => return Err(error.into()),
                Err(_) => tracing::warn!(attempt, attempts, "no reply within the attempt deadline"),
            }
        }
        Err(RpcError::DeadlineExceeded {
            call_id: call_id.to_owned(),
            attempts,
            attempt_timeout,
        })
    }

    /// How many replies arrived after their call had given up (or for no call at all) and
    /// were dropped.
    pub fn late_replies(&self) -> u64 {
        self.inner.late_replies.load(Ordering::Relaxed)
    }

    /// How many requests the broker nacked and this client sent again on a new channel, as a
    /// receiver: read it, or wait for it to move.
    pub fn nacks(&self) -> watch::Receiver<u64> {
        self.inner.nacks.subscribe()
    }

    /// Publishes the request (again, on a new channel, if the channel is lost before the
    /// reply comes) and waits for the reply. The caller bounds it with the deadline.
    ///
    /// The broker's publisher confirm is not waited for: the reply is the proof of delivery
    /// (and a missing one is the retry signal). The confirm is still read alongside the reply,
    /// so a request the broker refuses or cannot route fails at once instead of timing out.
    async fn attempt(
        &self,
        exchange: &ShortString,
        request: &Prepared,
        reply: &mut oneshot::Receiver<Vec<u8>>,
    ) -> Result<Vec<u8>, PublishError> {
        let mut nacks = 0;
        loop {
            let (channel, mut gone) = self.reply_channel().await?;
            let confirm = match start_publish(&channel, exchange, request).await {
                Ok(confirm) => confirm,
                Err(SendError::Failed(error)) => return Err(error),
                Err(SendError::Lost(error)) => {
                    tracing::debug!(%error, "channel lost while sending the request; sending again");
                    continue;
                }
            };
            let confirmed = confirmed(exchange, request, confirm);
            tokio::pin!(confirmed);
            let verdict = tokio::select! {
                biased;
                answer = &mut *reply => return received(answer).await,
                verdict = &mut confirmed => verdict,
            };
            match verdict {
                Ok(()) => {
                    // The request is in the queue; its reply comes on this channel or not at all.
                    // A channel lost with its connection (a broker node that died, say) is
                    // replaced at once and the request sent again under the same call id,
                    // rather than waiting out the attempt's deadline for a reply that cannot come.
                    tokio::select! {
                        biased;
                        answer = &mut *reply => return received(answer).await,
                        () = lost(&mut gone) => {
                            tracing::debug!("reply channel lost while waiting for the reply; sending again");
                        }
                    }
                }
                // A nacked request was not enqueued, so sending it again cannot duplicate it. A
                // channel opened while a quorum queue's leader was dying keeps that leader and has
                // every later publish nacked (seen for 30 s after a broker node's kill -9); a new
                // channel finds the new leader. Replies come on the channel that sent the
                // request, so the reply channel is renewed; calls in flight on the old one still
                // get their replies there.
                Err(SendError::Failed(PublishError::Nacked { .. })) if nacks < NACK_RESENDS => {
                    nacks += 1;
                    self.renew_reply_channel(&channel).await;
                    self.inner.nacks.send_modify(|n| *n += 1);
                    tracing::warn!(
                        nacks,
                        "an RPC request was nacked; sending it again on a new channel"
                    );
                    tokio::time::sleep(self.inner.broker.options().reconnect_backoff_min * nacks)
                        .await;
                }
                Err(SendError::Failed(error)) => return Err(error),
                Err(SendError::Lost(error)) => {
                    // The reply would come on the lost channel: it never will.
                    tracing::debug!(%error, "channel lost before the reply; sending again");
                }
            }
        }
    }

    /// Stops sending requests on `channel` if it is still the reply channel, so the next
    /// request opens another. It stays open for one attempt's time, so replies to requests
    /// already sent on it still arrive; then it closes.
    async fn renew_reply_channel(&self, channel: &Channel) {
        let mut slot = self.inner.reply_channel.lock().await;
        if slot
            .as_ref()
            .is_some_and(|c| c.channel.id() == channel.id())
            && let Some(old) = slot.take()
        {
            let linger = self.inner.options.attempt_timeout;
            tokio::spawn(async move {
                tokio::time::sleep(linger).await;
                let _ = old
                    .channel
                    .close(200, "nacked; requests moved to a new channel".into())
                    .await;
                drop(old);
            });
        }
    }

    /// The live reply channel, or a new one (consumer first, as Direct Reply-to requires), with
    /// what tells that it is gone.
    async fn reply_channel(&self) -> Result<(Channel, watch::Receiver<bool>), PublishError> {
        let mut slot = self.inner.reply_channel.lock().await;
        loop {
            if let Some(current) = slot
                .as_ref()
                .filter(|c| c.channel.status().connected() && !c.dispatcher.is_finished())
            {
                return Ok((current.channel.clone(), current.gone.clone()));
            }
            *slot = None;
            match self.open_reply_channel().await {
                Ok(opened) => *slot = Some(opened),
                Err(MessagingError::Amqp { source, .. }) if !source.is_refusal() => {
                    tracing::debug!(error = %source, "could not open the reply channel; retrying");
                    tokio::time::sleep(self.inner.broker.options().reconnect_backoff_min).await;
                }
                Err(error) => return Err(error.into()),
            }
        }
    }

    async fn open_reply_channel(&self) -> Result<ReplyChannel, MessagingError> {
        let channel = open_confirm_channel(&self.inner.broker).await?;
        let options = BasicConsumeOptions {
            no_ack: true,
            ..BasicConsumeOptions::default()
        };
        let consumer = channel
            .basic_consume(
                DIRECT_REPLY_TO.into(),
                "".into(),
                options,
                FieldTable::default(),
            )
            .await
            .map_err(|e| MessagingError::amqp("consume direct replies", e))?;
        let (gone_tx, gone) = watch::channel(false);
        let dispatching = dispatch(
            consumer,
            self.inner.pending.clone(),
            self.inner.late_replies.clone(),
        );
        let dispatcher = tokio::spawn(async move {
            dispatching.await;
            gone_tx.send_replace(true);
        });
        Ok(ReplyChannel {
            channel,
            dispatcher,
            gone,
        })
    }
}

/// The reply, once it came. The sender lives in the pending map until a reply comes, so it
/// cannot be dropped first; were it, the attempt waits for its deadline rather than invent an
/// outcome.
async fn received(
    answer: Result<Vec<u8>, oneshot::error::RecvError>,
) -> Result<Vec<u8>, PublishError> {
    match answer {
        Ok(reply) => Ok(reply),
        Err(_) => std::future::pending().await,
    }
}

/// Completes when the reply channel is gone.
async fn lost(gone: &mut watch::Receiver<bool>) {
    // An error means the dispatcher's sender was dropped: gone as well.
    let _ = gone.wait_for(|gone| *gone).await.map(|_| ());
}

/// Routes each reply to the call waiting for its correlation id; counts the rest.
async fn dispatch(mut replies: Consumer, pending: Pending, late_replies: Arc<AtomicU64>) {
    while let Some(reply) = replies.next().await {
        let reply = match reply {
            Ok(reply) => reply,
            Err(error) => {
                tracing::debug!(%error, "reply channel closed");
                return;
            }
        };
        let call_id = reply
            .properties
            .correlation_id()
            .as_ref()
            .map(lapin::types::ShortString::as_str);
        let waiter = call_id.and_then(|id| lock(&pending).remove(id));
        let delivered = waiter.is_some_and(|waiter| waiter.send(reply.data).is_ok());
        if !delivered {
            late_replies.fetch_add(1, Ordering::Relaxed);
            tracing::info!(call_id, "dropping a late or unknown RPC reply");
        }
    }
}
