//! The RPC server's own connection, driven by one task ([`Broker::serve_rpc`]).
//!
//! lapin runs each connection's socket on a thread of its own, and hands every delivery, every
//! acknowledgement and every publish across to it and back: a tool call woke a thread on the
//! other side seven times, and those wake-ups, not the call's work, were most of the tool
//! server's CPU per call (decision 0018). An RPC server needs little of AMQP — one channel, one
//! consumer, acks, rejects and replies to the default exchange — so it speaks that much itself,
//! on a connection of its own, in the task that also runs the calls' bookkeeping. A delivery is
//! read, acknowledged and started, and a finished call's reply written, by that one task; the
//! frames a pass produces go out in one write.
//!
//! It keeps the guarantees of a consumer ([`crate::consume`]): a request is acknowledged — the
//! ack written to the socket — before it runs (at most one run per delivery); one the screen
//! refuses is rejected without requeue (to the dead-letter queue); at most `prefetch` run at
//! once and the rest wait unacknowledged; a lost connection is replaced, with backoff, by one to
//! the next node that answers, and calls in flight still reply on it; shutdown cancels the
//! consumer, lets the running calls reply, then closes. What lapin does for the other services
//! — topology, publisher confirms, returns — the [`Broker`] still does; it also answers for
//! `amqps` URLs here, through the same TLS connector.

use std::{collections::VecDeque, io, sync::Arc, time::Duration};

use amq_protocol::frame::{
    AMQPContentHeader, AMQPFrame, ProtocolVersion, WriteContext, gen_frame, parse_frame,
};
use futures::{
    AsyncReadExt as _, AsyncWriteExt as _, FutureExt as _, future::BoxFuture, io::AsyncRead,
    io::AsyncWrite,
};
use lapin::{
    BasicProperties,
    protocol::{AMQPClass, basic, channel, connection},
    tcp::AMQPUriTcpExt as _,
    types::{AMQPValue, FieldTable, LongString, ShortString},
    uri::AMQPUri,
};
use rover_settings::Backoff;
use tokio::{
    sync::{oneshot, watch},
    task::JoinSet,
    time::Instant,
};
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::{
    Broker, ConsumerHandle, ConsumerOptions, Delivery, MessagingError, OutgoingMessage,
    publish::Prepared, trace::extract,
};

/// The one channel the server uses.
const CHANNEL: u16 = 1;
/// Largest frame asked for (the broker may lower it).
const FRAME_MAX: u32 = 131_072;
/// How long a clean close waits for the broker's answer.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// The screen of a request: `None` rejects it unrun; otherwise the work that answers it.
pub(crate) type Screen = Arc<dyn Fn(Delivery) -> Option<BoxFuture<'static, Vec<u8>>> + Send + Sync>;

/// Completes once, when the broker is closed.
type Closed = futures::future::Fuse<BoxFuture<'static, ()>>;

trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

fn protocol_error(what: impl Into<String>) -> lapin::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into()).into()
}

fn lost(operation: &str, error: impl Into<lapin::Error>) -> MessagingError {
    MessagingError::amqp(operation, error.into())
}

/// Serializes `frame` onto `out`.
fn put(out: &mut Vec<u8>, frame: &AMQPFrame) {
    // Encoding fails only when the buffer runs out of room, and a `Vec` grows.
    match gen_frame(frame)(WriteContext::from(std::mem::take(out))) {
        Ok(written) => *out = written.into_inner().0,
        Err(error) => tracing::error!(?error, "could not encode an AMQP frame"),
    }
}

/// A delivery's method frame or a body frame, wholly read, as `parse_frame` reads it, with what it
/// took; `None` for every other frame (and one not wholly read), which `parse_frame` reads.
///
/// Two of a request's three frames, read without the general codec: it collects a body byte by
/// byte, and was 5% of a read's instructions in the tool server (decision 0021).
fn quick_frame(bytes: &[u8]) -> Option<(usize, AMQPFrame)> {
    const METHOD: u8 = 1;
    const BODY: u8 = 3;
    const FRAME_END: u8 = 0xCE;
    let (&kind, rest) = bytes.split_first()?;
    let channel = u16::from_be_bytes(rest.get(..2)?.try_into().ok()?);
    let size = usize::try_from(u32::from_be_bytes(rest.get(2..6)?.try_into().ok()?)).ok()?;
    let payload = rest.get(6..6_usize.checked_add(size)?)?;
    if *rest.get(6 + size)? != FRAME_END {
        return None;
    }
    let used = 1 + 6 + size + 1;
    let frame = match kind {
        BODY => AMQPFrame::Body(channel, payload.to_vec()),
        METHOD => AMQPFrame::Method(
            channel,
            AMQPClass::Basic(basic::AMQPMethod::Deliver(deliver(payload)?)),
        ),
        _ => return None,
    };
    Some((used, frame))
}

/// A `basic.deliver` method's payload (class 60, method 60); `None` for any other method.
fn deliver(payload: &[u8]) -> Option<basic::Deliver> {
    let rest = payload.strip_prefix(&[0, 60, 0, 60])?;
    let (consumer_tag, rest) = short_string(rest)?;
    let (tag, rest) = rest.split_at_checked(8)?;
    let delivery_tag = u64::from_be_bytes(tag.try_into().ok()?);
    let (&bits, rest) = rest.split_first()?;
    let (exchange, rest) = short_string(rest)?;
    let (routing_key, rest) = short_string(rest)?;
    rest.is_empty().then_some(basic::Deliver {
        consumer_tag,
        delivery_tag,
        redelivered: bits & 1 != 0,
        exchange,
        routing_key,
    })
}

/// An AMQP short string (a length byte, then UTF-8) at the start of `bytes`, and what follows.
fn short_string(bytes: &[u8]) -> Option<(ShortString, &[u8])> {
    let (&len, rest) = bytes.split_first()?;
    let (text, rest) = rest.split_at_checked(usize::from(len))?;
    Some((std::str::from_utf8(text).ok()?.into(), rest))
}

fn method(out: &mut Vec<u8>, channel: u16, method: AMQPClass) {
    put(out, &AMQPFrame::Method(channel, method));
}

/// A connection: the socket, what was read and not yet parsed, and what is to be written.
struct Conn {
    io: Box<dyn Io>,
    /// What one read takes from the socket (zeroed once, not per read).
    chunk: Box<[u8]>,
    /// What was read; its first `taken` bytes are frames already parsed.
    read: Vec<u8>,
    taken: usize,
    write: Vec<u8>,
    frame_max: u32,
    heartbeat: Duration,
    last_read: Instant,
    last_write: Instant,
}

impl Conn {
    fn new(io: Box<dyn Io>) -> Self {
        let now = Instant::now();
        Self {
            io,
            chunk: vec![0_u8; 16 * 1024].into_boxed_slice(),
            read: Vec::with_capacity(32 * 1024),
            taken: 0,
            write: Vec::with_capacity(32 * 1024),
            frame_max: FRAME_MAX,
            heartbeat: Duration::ZERO,
            last_read: now,
            last_write: now,
        }
    }

    /// The next frame, reading as needed.
    async fn frame(&mut self) -> Result<AMQPFrame, lapin::Error> {
        loop {
            if let Some(frame) = self.parsed()? {
                return Ok(frame);
            }
            self.fill().await?;
        }
    }

    /// A whole frame from what was read, if there is one.
    fn parsed(&mut self) -> Result<Option<AMQPFrame>, lapin::Error> {
        let unread = &self.read[self.taken..];
        if unread.is_empty() {
            return Ok(None);
        }
        if let Some((used, frame)) = quick_frame(unread) {
            self.taken += used;
            return Ok(Some(frame));
        }
        match parse_frame(unread) {
            Ok((rest, frame)) => {
                self.taken += unread.len() - rest.len();
                Ok(Some(frame))
            }
            Err(error) if error.is_incomplete() => Ok(None),
            Err(error) => Err(protocol_error(format!("unreadable AMQP frame: {error}"))),
        }
    }

    /// Reads once more from the socket (cancel-safe: nothing read is lost if dropped).
    async fn fill(&mut self) -> Result<(), lapin::Error> {
        let read = self.io.read(&mut self.chunk[..]).await?;
        if read == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
        }
        // What was parsed goes once per read, not once per frame.
        self.read.drain(..self.taken);
        self.taken = 0;
        self.read.extend_from_slice(&self.chunk[..read]);
        self.last_read = Instant::now();
        Ok(())
    }

    /// Writes what is pending, in one go.
    async fn flush(&mut self) -> Result<(), lapin::Error> {
        if self.write.is_empty() {
            return Ok(());
        }
        self.io.write_all(&self.write).await?;
        self.io.flush().await?;
        self.write.clear();
        self.last_write = Instant::now();
        Ok(())
    }

    /// Sends `m` on `channel` and waits for the method `want` picks out, answering a close.
    async fn call<T>(
        &mut self,
        channel: u16,
        m: AMQPClass,
        want: impl Fn(&AMQPClass) -> Option<T>,
    ) -> Result<T, lapin::Error> {
        method(&mut self.write, channel, m);
        self.flush().await?;
        loop {
            match self.frame().await? {
                AMQPFrame::Method(_, reply) => {
                    if let Some(found) = want(&reply) {
                        return Ok(found);
                    }
                    refused(&reply)?;
                }
                AMQPFrame::Heartbeat => {}
                other => return Err(protocol_error(format!("unexpected frame {other:?}"))),
            }
        }
    }

    /// Writes the reply to `reply_to` as a publish to the default exchange.
    fn publish(&mut self, reply: Prepared) {
        let Prepared {
            routing_key,
            properties,
            body,
            ..
        } = reply;
        method(
            &mut self.write,
            CHANNEL,
            AMQPClass::Basic(basic::AMQPMethod::Publish(basic::Publish {
                exchange: ShortString::from(""),
                routing_key,
                mandatory: false,
                immediate: false,
            })),
        );
        put(
            &mut self.write,
            &AMQPFrame::Header(
                CHANNEL,
                AMQPContentHeader {
                    class_id: 60,
                    body_size: body.len() as u64,
                    properties,
                },
            ),
        );
        // An empty body frame weighs 8 bytes. A reply that fits one frame (nearly every one)
        // goes out as it is, not copied.
        let chunk = (self.frame_max as usize).saturating_sub(8).max(1);
        match body.len() {
            // An empty body has no body frame.
            0 => {}
            len if len <= chunk => put(&mut self.write, &AMQPFrame::Body(CHANNEL, body)),
            _ => {
                for part in body.chunks(chunk) {
                    put(&mut self.write, &AMQPFrame::Body(CHANNEL, part.to_vec()));
                }
            }
        }
    }

    /// Writes a finished call's reply, if it has one.
    fn reply(&mut self, done: Result<Option<Prepared>, tokio::task::JoinError>) {
        match done {
            Ok(Some(reply)) => self.publish(reply),
            Ok(None) => {}
            Err(error) => tracing::error!(%error, "RPC handler task failed"),
        }
    }

    fn settle(&mut self, delivery_tag: u64, ack: bool) {
        let m = if ack {
            basic::AMQPMethod::Ack(basic::Ack {
                delivery_tag,
                multiple: false,
            })
        } else {
            basic::AMQPMethod::Reject(basic::Reject {
                delivery_tag,
                requeue: false,
            })
        };
        method(&mut self.write, CHANNEL, AMQPClass::Basic(m));
    }
}

/// Fails with the broker's reason when `m` closes the channel or the connection.
fn refused(m: &AMQPClass) -> Result<(), lapin::Error> {
    match m {
        AMQPClass::Connection(connection::AMQPMethod::Close(close)) => {
            Err(protocol_error(format!(
                "the broker closed the connection: {} {}",
                close.reply_code, close.reply_text
            )))
        }
        AMQPClass::Channel(channel::AMQPMethod::Close(close)) => Err(protocol_error(format!(
            "the broker closed the channel: {} {}",
            close.reply_code, close.reply_text
        ))),
        _ => Ok(()),
    }
}

/// What the client tells the broker about itself: its name in the connection list, and that it
/// wants to hear when the broker cancels its consumer (the queue was deleted).
fn client_properties(name: &str) -> FieldTable {
    let mut capabilities = FieldTable::default();
    capabilities.insert("consumer_cancel_notify".into(), AMQPValue::Boolean(true));
    let mut properties = FieldTable::default();
    properties.insert(
        "connection_name".into(),
        AMQPValue::LongString(LongString::from(name)),
    );
    properties.insert("product".into(), AMQPValue::LongString("rover".into()));
    properties.insert("capabilities".into(), AMQPValue::FieldTable(capabilities));
    properties
}

/// Connects to `uri` (TCP, or TLS for `amqps`), opens the connection and its channel, sets the
/// prefetch and starts consuming `queue`.
async fn open(
    uri: &AMQPUri,
    name: &str,
    queue: &str,
    options: &ConsumerOptions,
) -> Result<(Conn, ShortString), lapin::Error> {
    let runtime = lapin::runtime::default_runtime()?;
    let mut conn = Conn::new(Box::new(uri.connect_async(&runtime).await?));
    put(
        &mut conn.write,
        &AMQPFrame::ProtocolHeader(ProtocolVersion::amqp_0_9_1()),
    );
    conn.flush().await?;
    let start = match conn.frame().await? {
        AMQPFrame::Method(0, AMQPClass::Connection(connection::AMQPMethod::Start(start))) => start,
        other => {
            return Err(protocol_error(format!(
                "expected connection.start, got {other:?}"
            )));
        }
    };
    if !start
        .mechanisms
        .to_string()
        .split(' ')
        .any(|m| m == "PLAIN")
    {
        return Err(protocol_error(
            "the broker does not offer PLAIN authentication",
        ));
    }
    let user = &uri.authority.userinfo;
    let properties = client_properties(name);
    let tune = conn
        .call(
            0,
            AMQPClass::Connection(connection::AMQPMethod::StartOk(connection::StartOk {
                client_properties: properties,
                mechanism: "PLAIN".into(),
                response: format!("\0{}\0{}", user.username, user.password).into(),
                locale: "en_US".into(),
            })),
            |m| match m {
                AMQPClass::Connection(connection::AMQPMethod::Tune(tune)) => Some(tune.clone()),
                _ => None,
            },
        )
        .await?;
    conn.frame_max = match (uri.query.frame_max.unwrap_or(FRAME_MAX), tune.frame_max) {
        (0, theirs) => theirs,
        (ours, 0) => ours,
        (ours, theirs) => ours.min(theirs),
    };
    let heartbeat = uri.query.heartbeat.unwrap_or(tune.heartbeat);
    conn.heartbeat = Duration::from_secs(u64::from(heartbeat));
    method(
        &mut conn.write,
        0,
        AMQPClass::Connection(connection::AMQPMethod::TuneOk(connection::TuneOk {
            channel_max: tune.channel_max,
            frame_max: conn.frame_max,
            heartbeat,
        })),
    );
    conn.call(
        0,
        AMQPClass::Connection(connection::AMQPMethod::Open(connection::Open {
            virtual_host: uri.vhost.as_str().into(),
        })),
        |m| matches!(m, AMQPClass::Connection(connection::AMQPMethod::OpenOk(_))).then_some(()),
    )
    .await?;
    subscribe(conn, queue, options).await
}

/// Opens the channel, sets the prefetch and starts consuming `queue`; returns the consumer tag.
async fn subscribe(
    mut conn: Conn,
    queue: &str,
    options: &ConsumerOptions,
) -> Result<(Conn, ShortString), lapin::Error> {
    conn.call(
        CHANNEL,
        AMQPClass::Channel(channel::AMQPMethod::Open(channel::Open {})),
        |m| matches!(m, AMQPClass::Channel(channel::AMQPMethod::OpenOk(_))).then_some(()),
    )
    .await?;
    conn.call(
        CHANNEL,
        AMQPClass::Basic(basic::AMQPMethod::Qos(basic::Qos {
            prefetch_count: options.prefetch.max(1),
            global: false,
        })),
        |m| matches!(m, AMQPClass::Basic(basic::AMQPMethod::QosOk(_))).then_some(()),
    )
    .await?;
    let tag = conn
        .call(
            CHANNEL,
            AMQPClass::Basic(basic::AMQPMethod::Consume(basic::Consume {
                queue: queue.into(),
                consumer_tag: options.consumer_tag.as_str().into(),
                no_local: false,
                no_ack: false,
                exclusive: false,
                nowait: false,
                arguments: FieldTable::default(),
            })),
            |m| match m {
                AMQPClass::Basic(basic::AMQPMethod::ConsumeOk(ok)) => Some(ok.consumer_tag.clone()),
                _ => None,
            },
        )
        .await?;
    Ok((conn, tag))
}

/// A delivery being read: its method, then its header, then its body.
struct Incoming {
    deliver: basic::Deliver,
    properties: Option<BasicProperties>,
    size: u64,
    body: Vec<u8>,
}

/// A request acknowledged or waiting for a free slot, as the screen made it.
struct Request {
    delivery_tag: u64,
    work: BoxFuture<'static, Vec<u8>>,
    reply_to: String,
    correlation_id: Option<String>,
    span: tracing::Span,
}

/// What the server task keeps across connections.
struct Server {
    broker: Broker,
    nodes: Vec<AMQPUri>,
    current: usize,
    queue: String,
    options: ConsumerOptions,
    screen: Screen,
    /// Calls running, across connections; each ends with its reply, published on whichever
    /// connection is up when it is collected.
    running: JoinSet<Option<Prepared>>,
}

/// How a connection's loop ended.
enum Ended {
    /// Stopped: cancelled, drained and closed.
    Stopped,
    /// The connection failed; connect again.
    Lost(MessagingError),
}

/// Starts the RPC server on `queue` and returns once it is consuming.
pub(crate) async fn start(
    broker: &Broker,
    queue: &str,
    options: ConsumerOptions,
    screen: Screen,
) -> Result<ConsumerHandle, MessagingError> {
    crate::consume::count_dead_letters(queue, 0);
    let nodes = crate::broker::nodes(broker.options())?;
    let current = crate::broker::spread(nodes.len());
    let (stop, stop_rx) = watch::channel(false);
    let (subscribed, subscriptions) = watch::channel(0);
    let (ready, ready_rx) = oneshot::channel();
    let server = Server {
        broker: broker.clone(),
        nodes,
        current,
        queue: queue.to_owned(),
        options,
        screen,
        running: JoinSet::new(),
    };
    let span = tracing::info_span!(parent: None, "rover.messaging.consumer", source = %queue);
    let task = tokio::spawn(server.run(stop_rx, ready, subscribed).instrument(span));
    ConsumerHandle::once_ready(broker, stop, subscriptions, task, ready_rx).await
}

impl Server {
    async fn run(
        mut self,
        mut stop: watch::Receiver<bool>,
        ready: oneshot::Sender<Result<(), MessagingError>>,
        subscriptions: watch::Sender<u64>,
    ) {
        let mut ready = Some(ready);
        let options = self.broker.options().clone();
        let mut backoff =
            Backoff::new(options.reconnect_backoff_min, options.reconnect_backoff_max);
        let mut closed: Closed = self.broker.closed().boxed().fuse();
        loop {
            let opened = tokio::select! {
                () = stopping(&mut stop, &mut closed) => break,
                opened = self.connect() => opened,
            };
            let (conn, tag) = match opened {
                Ok(opened) => opened,
                Err(error) => {
                    if let Some(ready) = ready.take() {
                        let _ = ready.send(Err(error));
                        return;
                    }
                    let delay = backoff.next_delay();
                    tracing::warn!(%error, retry_in = ?delay, "could not subscribe");
                    tokio::select! {
                        () = stopping(&mut stop, &mut closed) => break,
                        () = tokio::time::sleep(delay) => {}
                    }
                    continue;
                }
            };
            crate::consume::announce(&subscriptions, &mut ready, &self.queue);
            backoff.reset();
            match self.serve(conn, tag, &mut stop, &mut closed).await {
                Ended::Stopped => return,
                Ended::Lost(error) => {
                    tracing::warn!(%error, queue = %self.queue, "consumer connection lost; subscribing again");
                    self.current = (self.current + 1) % self.nodes.len();
                }
            }
        }
        // Stopped while not connected: the running calls finish; their replies have no
        // connection to go out on (their callers ask again).
        while self.running.join_next().await.is_some() {}
    }

    /// Opens a connection to the first node that answers, from the current one on.
    async fn connect(&mut self) -> Result<(Conn, ShortString), MessagingError> {
        let options = self.broker.options().clone();
        // Named apart from the service's other connection in the broker's connection list.
        let name = format!("{} (rpc server)", options.connection_name);
        let mut last = None;
        for step in 0..self.nodes.len() {
            let index = (self.current + step) % self.nodes.len();
            let attempt = tokio::time::timeout(
                options.connect_timeout,
                open(&self.nodes[index], &name, &self.queue, &self.options),
            )
            .await;
            match attempt {
                Ok(Ok(opened)) => {
                    self.current = index;
                    return Ok(opened);
                }
                Ok(Err(error)) => last = Some(lost(&format!("consume {}", self.queue), error)),
                Err(_) => last = Some(MessagingError::NotConnected(options.connect_timeout)),
            }
        }
        Err(last.unwrap_or(MessagingError::Closed))
    }

    /// Serves on one connection until it is lost or the server is stopped.
    async fn serve(
        &mut self,
        mut conn: Conn,
        tag: ShortString,
        stop: &mut watch::Receiver<bool>,
        closed: &mut Closed,
    ) -> Ended {
        let prefetch = usize::from(self.options.prefetch.max(1));
        let mut incoming: Option<Incoming> = None;
        let mut waiting: VecDeque<Request> = VecDeque::new();
        let mut cancelling = false;
        let heartbeat = conn.heartbeat;
        let mut beat = tokio::time::interval(if heartbeat.is_zero() {
            Duration::from_secs(3600)
        } else {
            heartbeat / 2
        });
        // The read that brought `basic.consume-ok` may have brought deliveries behind it.
        match self.take_frames(&mut conn, &mut incoming) {
            Ok(requests) => waiting.extend(requests),
            Err(error) => return Ended::Lost(error),
        }
        let mut replied = false;
        loop {
            // Start what fits; each is acknowledged — the ack written — before it starts.
            let mut starting = Vec::new();
            while self.running.len() + starting.len() < prefetch
                && let Some(request) = waiting.pop_front()
            {
                conn.settle(request.delivery_tag, true);
                starting.push(request);
            }
            // One write for the pass: rejects, acks, replies, a heartbeat.
            if let Err(error) = conn.flush().await {
                return Ended::Lost(lost("write", error));
            }
            for request in starting {
                self.run_call(request);
            }
            if std::mem::take(&mut replied) {
                rover_settings::fault::point("toolserver.after-reply");
            }
            if cancelling && self.running.is_empty() {
                close(&mut conn).await;
                return Ended::Stopped;
            }
            tokio::select! {
                read = conn.fill() => {
                    let taken = read
                        .map_err(|error| lost("read", error))
                        .and_then(|()| self.take_frames(&mut conn, &mut incoming));
                    match taken {
                        // After a cancel, what still arrives stays unacknowledged: the broker
                        // requeues it when the connection closes.
                        Ok(requests) if !cancelling => waiting.extend(requests),
                        Ok(_) => {}
                        Err(error) => return Ended::Lost(error),
                    }
                }
                Some(done) = self.running.join_next(), if !self.running.is_empty() => {
                    replied = true;
                    conn.reply(done);
                    while let Some(done) = self.running.try_join_next() {
                        conn.reply(done);
                    }
                }
                _ = beat.tick(), if !heartbeat.is_zero() => {
                    if conn.last_read.elapsed() > heartbeat * 2 {
                        return Ended::Lost(lost("heartbeat", protocol_error("no heartbeat from the broker")));
                    }
                    if conn.last_write.elapsed() >= heartbeat / 2 {
                        put(&mut conn.write, &AMQPFrame::Heartbeat);
                    }
                }
                // Asked to stop, or the broker was closed: no new calls; the running ones reply.
                () = stopping(stop, closed), if !cancelling => {
                    cancelling = true;
                    // Never acknowledged: the broker requeues them when the connection closes.
                    waiting.clear();
                    method(&mut conn.write, CHANNEL, AMQPClass::Basic(basic::AMQPMethod::Cancel(basic::Cancel {
                        consumer_tag: tag.clone(),
                        nowait: false,
                    })));
                }
            }
        }
    }

    /// Takes the whole frames read so far; returns the requests they completed.
    fn take_frames(
        &self,
        conn: &mut Conn,
        incoming: &mut Option<Incoming>,
    ) -> Result<Vec<Request>, MessagingError> {
        let mut requests = Vec::new();
        while let Some(frame) = conn.parsed().map_err(|error| lost("read", error))? {
            if let Some(request) = self
                .frame(conn, frame, incoming)?
                .and_then(|message| self.screened(conn, message))
            {
                requests.push(request);
            }
        }
        Ok(requests)
    }

    /// Takes one frame; returns a delivery once its last frame is in.
    fn frame(
        &self,
        conn: &mut Conn,
        frame: AMQPFrame,
        incoming: &mut Option<Incoming>,
    ) -> Result<Option<Incoming>, MessagingError> {
        match frame {
            AMQPFrame::Method(_, AMQPClass::Basic(basic::AMQPMethod::Deliver(deliver))) => {
                *incoming = Some(Incoming {
                    deliver,
                    properties: None,
                    size: 0,
                    body: Vec::new(),
                });
                Ok(None)
            }
            AMQPFrame::Header(_, header) => {
                let Some(message) = incoming.as_mut() else {
                    return Err(lost(
                        "read",
                        protocol_error("a content header without a delivery"),
                    ));
                };
                message.size = header.body_size;
                message.properties = Some(header.properties);
                Ok(if header.body_size == 0 {
                    incoming.take()
                } else {
                    None
                })
            }
            AMQPFrame::Body(_, part) => {
                let Some(message) = incoming.as_mut() else {
                    return Err(lost(
                        "read",
                        protocol_error("a content body without a delivery"),
                    ));
                };
                if message.body.is_empty() {
                    // The whole body in one frame (nearly every request): kept, not copied.
                    message.body = part;
                } else {
                    message.body.extend_from_slice(&part);
                }
                Ok(if message.body.len() as u64 >= message.size {
                    incoming.take()
                } else {
                    None
                })
            }
            AMQPFrame::Heartbeat => Ok(None),
            AMQPFrame::Method(_, AMQPClass::Basic(basic::AMQPMethod::CancelOk(_))) => Ok(None),
            AMQPFrame::Method(_, AMQPClass::Basic(basic::AMQPMethod::Cancel(_))) => Err(lost(
                &format!("consume {}", self.queue),
                protocol_error("the broker cancelled the consumer"),
            )),
            AMQPFrame::Method(channel, AMQPClass::Channel(channel::AMQPMethod::Flow(flow))) => {
                method(
                    &mut conn.write,
                    channel,
                    AMQPClass::Channel(channel::AMQPMethod::FlowOk(channel::FlowOk {
                        active: flow.active,
                    })),
                );
                Ok(None)
            }
            AMQPFrame::Method(channel, m) => {
                if let Err(error) = refused(&m) {
                    // Answer the close, so the broker does not wait for it.
                    let ok = match m {
                        AMQPClass::Connection(_) => AMQPClass::Connection(
                            connection::AMQPMethod::CloseOk(connection::CloseOk {}),
                        ),
                        _ => AMQPClass::Channel(channel::AMQPMethod::CloseOk(channel::CloseOk {})),
                    };
                    method(&mut conn.write, channel, ok);
                    let _ = conn.flush().now_or_never();
                    return Err(lost(&format!("consume {}", self.queue), error));
                }
                tracing::debug!(method = ?m, "ignoring an AMQP method");
                Ok(None)
            }
            other => {
                tracing::debug!(frame = ?other, "ignoring an AMQP frame");
                Ok(None)
            }
        }
    }

    /// Screens a whole delivery: rejects it (written with the next flush) or makes its request.
    fn screened(&self, conn: &mut Conn, message: Incoming) -> Option<Request> {
        let Incoming {
            deliver,
            properties,
            body,
            ..
        } = message;
        let properties = properties.unwrap_or_default();
        let delivery = Delivery::from_parts(
            &properties,
            body,
            deliver.exchange.to_string(),
            deliver.routing_key.to_string(),
            deliver.redelivered,
        );
        let span = crate::consume::delivery_span(&self.queue, &delivery);
        // Fails only when no OpenTelemetry layer is installed, and then there is nothing to link.
        let _ = span.set_parent(extract(&delivery.headers));
        let reply_to = delivery.reply_to.clone();
        let correlation_id = delivery.correlation_id.clone();
        let screen = &self.screen;
        let work = match reply_to {
            None => {
                tracing::warn!(parent: &span, message_id = delivery.message_id.as_deref(), "rejecting an RPC request without reply_to");
                None
            }
            Some(_) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                span.in_scope(|| screen(delivery))
            }))
            .unwrap_or_else(|_| {
                tracing::error!(parent: &span, "message screen panicked; rejecting the message");
                None
            }),
        };
        let Some((work, reply_to)) = work.zip(reply_to) else {
            span.record(
                "messaging.rabbitmq.outcome",
                tracing::field::debug(crate::Outcome::Reject),
            );
            crate::consume::count_dead_letters(&self.queue, 1);
            conn.settle(deliver.delivery_tag, false);
            return None;
        };
        span.record(
            "messaging.rabbitmq.outcome",
            tracing::field::debug(crate::Outcome::Ack),
        );
        Some(Request {
            delivery_tag: deliver.delivery_tag,
            work,
            reply_to,
            correlation_id,
            span,
        })
    }

    /// Runs an acknowledged request; its task ends with the reply to publish.
    fn run_call(&mut self, request: Request) {
        let Request {
            work,
            reply_to,
            correlation_id,
            span,
            ..
        } = request;
        self.running.spawn(
            async move {
                let Ok(body) = std::panic::AssertUnwindSafe(work).catch_unwind().await else {
                    tracing::error!("message handler panicked after the message was settled");
                    return None;
                };
                let mut reply = OutgoingMessage::new(body).transient();
                reply.correlation_id = correlation_id;
                match Prepared::new(&reply_to, reply) {
                    Ok(reply) => Some(reply),
                    Err(error) => {
                        tracing::warn!(%error, "could not publish the reply");
                        None
                    }
                }
            }
            .instrument(span),
        );
    }
}

/// Completes when the handle asks the server to stop (or is dropped), or the broker is closed.
async fn stopping(stop: &mut watch::Receiver<bool>, closed: &mut Closed) {
    tokio::select! {
        _ = stop.wait_for(|stop| *stop) => {}
        () = closed => {}
    }
}

/// Closes the channel and the connection, waiting a little for the broker's answers.
async fn close(conn: &mut Conn) {
    let closing = async {
        conn.call(
            0,
            AMQPClass::Connection(connection::AMQPMethod::Close(connection::Close {
                reply_code: 200,
                reply_text: "consumer shut down".into(),
                class_id: 0,
                method_id: 0,
            })),
            |m| {
                matches!(m, AMQPClass::Connection(connection::AMQPMethod::CloseOk(_))).then_some(())
            },
        )
        .await
    };
    if let Ok(Err(error)) = tokio::time::timeout(CLOSE_TIMEOUT, closing).await {
        tracing::debug!(%error, "closing the consumer connection");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(frame: &AMQPFrame) -> Vec<u8> {
        let mut bytes = Vec::new();
        put(&mut bytes, frame);
        bytes
    }

    fn deliver_frame(redelivered: bool) -> AMQPFrame {
        AMQPFrame::Method(
            CHANNEL,
            AMQPClass::Basic(basic::AMQPMethod::Deliver(basic::Deliver {
                consumer_tag: "amq.ctag-Zx9 tools".into(),
                delivery_tag: 0x0102_0304_0506_0708,
                redelivered,
                exchange: "rover.tools — école".into(),
                routing_key: "call.list_departments".into(),
            })),
        )
    }

    #[test]
    fn a_delivery_and_its_body_are_read_as_the_codec_reads_them() {
        let frames = [
            deliver_frame(false),
            deliver_frame(true),
            AMQPFrame::Body(CHANNEL, b"{\"v\":1,\"kind\":\"tool_call\"}".to_vec()),
            AMQPFrame::Body(7, Vec::new()),
            AMQPFrame::Body(CHANNEL, (0..=255).collect()),
        ];
        for frame in frames {
            let mut bytes = written(&frame);
            let whole = bytes.len();
            // Whatever follows the frame (the next one) is left unread.
            bytes.extend_from_slice(&written(&AMQPFrame::Heartbeat));
            let (rest, codec) = parse_frame(bytes.as_slice()).expect("the codec reads it");
            assert_eq!(whole, bytes.len() - rest.len());
            assert_eq!(quick_frame(&bytes), Some((whole, codec)));
        }
    }

    #[test]
    fn every_other_frame_and_a_frame_not_wholly_read_are_left_to_the_codec() {
        let header = AMQPFrame::Header(
            CHANNEL,
            AMQPContentHeader {
                class_id: 60,
                body_size: 3,
                properties: BasicProperties::default()
                    .with_reply_to("amq.rabbitmq.reply-to".into()),
            },
        );
        let cancel_ok = AMQPFrame::Method(
            CHANNEL,
            AMQPClass::Basic(basic::AMQPMethod::CancelOk(basic::CancelOk {
                consumer_tag: "tag".into(),
            })),
        );
        for frame in [header, cancel_ok, AMQPFrame::Heartbeat] {
            assert_eq!(quick_frame(&written(&frame)), None, "{frame:?}");
        }
        for frame in [
            deliver_frame(false),
            AMQPFrame::Body(CHANNEL, b"body".to_vec()),
        ] {
            let bytes = written(&frame);
            for cut in 0..bytes.len() {
                assert_eq!(quick_frame(&bytes[..cut]), None, "cut at {cut}");
            }
            // A frame that does not end where its size says is not read here either.
            let mut bad_end = bytes.clone();
            *bad_end.last_mut().unwrap() = 0;
            assert_eq!(quick_frame(&bad_end), None);
            // Nor a delivery whose payload is longer than its fields.
            if let AMQPFrame::Method(..) = frame {
                let mut longer = bytes[..bytes.len() - 1].to_vec();
                longer.push(0);
                longer.push(0xCE);
                let size = u32::from_be_bytes(longer[3..7].try_into().unwrap()) + 1;
                longer[3..7].copy_from_slice(&size.to_be_bytes());
                assert_eq!(quick_frame(&longer), None);
            }
        }
    }
}
