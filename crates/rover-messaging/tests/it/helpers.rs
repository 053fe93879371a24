//! Test scaffolding: a private vhost per test, a connected broker with the topology declared,
//! message collectors, bounded waits and a TCP proxy that can simulate a broker outage.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use rover_messaging::{
    Broker, BrokerOptions, ConsumerHandle, ConsumerOptions, Delivery, Outcome, Topology,
};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::{mpsc, watch},
};

pub(crate) use rover_testkit::{TestVhost, within};

/// Logs to the test's captured output, which nextest shows when a test fails.
fn init_tracing() {
    let filter =
        std::env::var("RUST_LOG").unwrap_or_else(|_| "rover_messaging=debug,lapin=warn".to_owned());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// A broker connected to a fresh vhost, with a topology declared.
#[derive(Debug)]
pub(crate) struct TestApp {
    // Dropped first, so the broker stops before its vhost disappears.
    pub(crate) broker: Broker,
    pub(crate) topology: Topology,
    pub(crate) vhost: TestVhost,
}

pub(crate) fn options(url: String) -> BrokerOptions {
    BrokerOptions {
        connection_name: "rover-messaging-test".to_owned(),
        reconnect_backoff_min: Duration::from_millis(50),
        reconnect_backoff_max: Duration::from_millis(500),
        operation_timeout: Duration::from_secs(10),
        ..BrokerOptions::new(url)
    }
}

pub(crate) async fn spawn_app() -> TestApp {
    spawn_app_with(Topology::default()).await
}

pub(crate) async fn spawn_app_with(topology: Topology) -> TestApp {
    init_tracing();
    let vhost = TestVhost::create();
    let broker = within("connect", Broker::connect(options(vhost.url())))
        .await
        .expect("connects");
    within("declare", broker.declare(&topology))
        .await
        .expect("declares the topology");
    TestApp {
        broker,
        topology,
        vhost,
    }
}

/// Consumes `queue`, acking every message and forwarding it to the returned receiver.
pub(crate) async fn collect(
    broker: &Broker,
    queue: &str,
    prefetch: u16,
) -> (ConsumerHandle, mpsc::UnboundedReceiver<Delivery>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let options = ConsumerOptions {
        prefetch,
        ..ConsumerOptions::default()
    };
    let handle = within(
        "start collector",
        broker.consume(queue, options, move |delivery| {
            let _ = tx.send(delivery);
            async { Outcome::Ack }
        }),
    )
    .await
    .expect("consumes");
    (handle, rx)
}

/// Receives the next message, bounded.
pub(crate) async fn next(received: &mut mpsc::UnboundedReceiver<Delivery>) -> Delivery {
    within("next message", received.recv())
        .await
        .expect("collector is running")
}

pub(crate) fn body(delivery: &Delivery) -> String {
    String::from_utf8_lossy(&delivery.body).into_owned()
}

/// A TCP proxy in front of RabbitMQ that can be switched off (cutting every connection and
/// refusing new ones) and on again: a broker outage without touching the shared broker.
#[derive(Debug)]
pub(crate) struct Proxy {
    pub(crate) addr: SocketAddr,
    up: watch::Sender<bool>,
    refused: watch::Receiver<u64>,
}

impl Proxy {
    pub(crate) async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let addr = listener.local_addr().expect("has an address");
        let (up, up_rx) = watch::channel(true);
        let (refused_tx, refused) = watch::channel(0);
        let refused_tx = Arc::new(refused_tx);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if !*up_rx.borrow() {
                    drop(client);
                    refused_tx.send_modify(|n| *n += 1);
                    continue;
                }
                let mut up = up_rx.clone();
                tokio::spawn(async move {
                    let Ok(mut upstream) = TcpStream::connect("127.0.0.1:5672").await else {
                        return;
                    };
                    let mut client = client;
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
                        _ = up.wait_for(|up| !*up) => {}
                    }
                });
            }
        });
        Self { addr, up, refused }
    }

    /// Cuts every proxied connection and refuses new ones until [`Proxy::restore`].
    pub(crate) fn cut(&self) {
        self.up.send_replace(false);
    }

    pub(crate) fn restore(&self) {
        self.up.send_replace(true);
    }

    /// How many connection attempts were refused while cut.
    pub(crate) fn refused(&self) -> watch::Receiver<u64> {
        self.refused.clone()
    }
}
