//! Recovery: the broker closes our connection, or becomes unreachable, and publishing,
//! consuming and RPC work again without a new `Broker`.

use std::{collections::HashSet, time::Duration};

use rover_messaging::{
    Broker, ConsumerOptions, Outcome, OutgoingMessage, RpcOptions, TURN_ROUTING_KEY, Topology,
    turn_event_routing_key,
};
use tokio::sync::{mpsc, watch};

use crate::helpers::{Proxy, TestVhost, body, collect, next, options, spawn_app, within};

#[tokio::test(flavor = "multi_thread")]
async fn after_close_all_connections_mid_stream_publish_consume_and_rpc_work_again() {
    let app = spawn_app().await;
    let turns = app.topology.turns_exchange();
    let tools = app.topology.tools_exchange();
    let (_worker, mut received) = collect(&app.broker, &app.topology.turns_queue(), 20).await;
    let _server = within(
        "start echo server",
        app.broker.serve_rpc(
            &app.topology.tools_queue(),
            ConsumerOptions::default(),
            |request| Some(async move { request.body }),
        ),
    )
    .await
    .expect("serves");
    let client = app.broker.rpc_client(RpcOptions {
        attempt_timeout: Duration::from_secs(2),
        attempts: 3,
    });
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let subscription = within(
        "subscribe to turn events",
        app.broker.subscribe(
            &app.topology.turn_events_exchange(),
            &[&turn_event_routing_key("t1")],
            ConsumerOptions::default(),
            move |delivery| {
                let _ = events_tx.send(delivery);
                async { Outcome::Ack }
            },
        ),
    )
    .await
    .expect("subscribes");
    let mut generation = app.broker.connected();
    assert_eq!(*generation.borrow_and_update(), 1);

    // A producer publishes a stream of messages until told to stop.
    let (stop_tx, stop) = watch::channel(false);
    let publisher = app.broker.publisher();
    let producer = tokio::spawn({
        let turns = turns.clone();
        async move {
            let mut sent = 0_u32;
            while !*stop.borrow() {
                let message =
                    OutgoingMessage::new(format!("m{sent}")).with_message_id(format!("m{sent}"));
                publisher.publish(&turns, TURN_ROUTING_KEY, message).await?;
                sent += 1;
            }
            Ok::<_, rover_messaging::PublishError>(sent)
        }
    });

    let mut seen = HashSet::new();
    while seen.len() < 20 {
        seen.insert(body(&next(&mut received).await));
    }
    app.vhost.close_all_connections().await;
    within("reconnect", generation.wait_for(|g| *g >= 2))
        .await
        .expect("broker alive");
    assert!(app.broker.is_ready());

    // Messages keep flowing after the reconnect...
    let before = seen.len();
    while seen.len() < before + 20 {
        seen.insert(body(&next(&mut received).await));
    }
    stop_tx.send_replace(true);
    let sent = within("producer", producer)
        .await
        .expect("producer task")
        .expect("every publish was confirmed despite the lost connection");
    // ...and none is lost: every confirmed message arrives (some maybe twice).
    while seen.len() < sent as usize {
        seen.insert(body(&next(&mut received).await));
    }
    assert!((0..sent).all(|i| seen.contains(&format!("m{i}"))));

    let reply = within(
        "rpc after reconnect",
        client.call(&tools, "echo", "call-after", b"ping".to_vec()),
    )
    .await
    .expect("replies");
    assert_eq!(reply, b"ping");

    // The subscription declared a new queue on the new connection.
    within(
        "subscription is back",
        subscription.subscribed().wait_for(|n| *n >= 2),
    )
    .await
    .expect("consumer alive");
    within(
        "publish turn event",
        app.broker.publisher().publish(
            &app.topology.turn_events_exchange(),
            &turn_event_routing_key("t1"),
            OutgoingMessage::new("event"),
        ),
    )
    .await
    .expect("routable again");
    assert_eq!(body(&next(&mut events).await), "event");
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_broker_outage_the_supervisor_reconnects_with_backoff_and_everything_works() {
    let vhost = TestVhost::create();
    let proxy = Proxy::start().await;
    let broker = within(
        "connect",
        Broker::connect(options(vhost.url_via(proxy.addr))),
    )
    .await
    .expect("connects");
    let topology = Topology::default();
    within("declare", broker.declare(&topology))
        .await
        .expect("declares");
    let (_worker, mut received) = collect(&broker, &topology.turns_queue(), 10).await;
    let publisher = broker.publisher();
    let turns = topology.turns_exchange();
    within(
        "publish",
        publisher.publish(&turns, TURN_ROUTING_KEY, OutgoingMessage::new("before")),
    )
    .await
    .expect("publishes");
    assert_eq!(body(&next(&mut received).await), "before");

    let mut generation = broker.connected();
    let mut refused = proxy.refused();
    proxy.cut();
    // The supervisor keeps trying (and failing) to reconnect while the broker is away.
    within("reconnect attempts", refused.wait_for(|n| *n >= 3))
        .await
        .expect("proxy alive");
    assert!(!broker.is_ready());
    assert_eq!(*generation.borrow_and_update(), 1);

    // A publish during the outage waits for the connection instead of failing.
    let during = tokio::spawn({
        let publisher = publisher.clone();
        let turns = turns.clone();
        async move {
            publisher
                .publish(&turns, TURN_ROUTING_KEY, OutgoingMessage::new("during"))
                .await
        }
    });
    proxy.restore();
    within("reconnect", generation.wait_for(|g| *g >= 2))
        .await
        .expect("broker alive");
    assert!(broker.is_ready());
    within("publish during outage", during)
        .await
        .expect("task")
        .expect("publishes once reconnected");
    within(
        "publish after",
        publisher.publish(&turns, TURN_ROUTING_KEY, OutgoingMessage::new("after")),
    )
    .await
    .expect("publishes");
    let mut bodies = HashSet::new();
    while !(bodies.contains("during") && bodies.contains("after")) {
        bodies.insert(body(&next(&mut received).await));
    }

    let _server = within(
        "start echo server",
        broker.serve_rpc(
            &topology.tools_queue(),
            ConsumerOptions::default(),
            |request| Some(async move { request.body }),
        ),
    )
    .await
    .expect("serves");
    let reply = within(
        "rpc after outage",
        broker.rpc_client(RpcOptions::default()).call(
            &topology.tools_exchange(),
            "echo",
            "c1",
            b"pong".to_vec(),
        ),
    )
    .await
    .expect("replies");
    assert_eq!(reply, b"pong");
    broker.close().await;
    assert!(!broker.is_ready());
}

#[tokio::test(flavor = "multi_thread")]
async fn with_several_broker_addresses_a_lost_node_is_replaced_by_one_that_answers() {
    // Two "nodes" of one broker: proxies that can each be cut on their own.
    let vhost = TestVhost::create();
    let (first, second) = (Proxy::start().await, Proxy::start().await);
    let mut node_options = options(vhost.url_via(first.addr));
    node_options.addresses = vec![first.addr.to_string(), second.addr.to_string()];

    // A node down at start-up is skipped, whichever node the broker tries first.
    first.cut();
    let broker = within("connect", Broker::connect(node_options))
        .await
        .expect("connects to the node that answers");
    let topology = Topology::default();
    within("declare", broker.declare(&topology))
        .await
        .expect("declares");
    let (_worker, mut received) = collect(&broker, &topology.turns_queue(), 10).await;
    let publisher = broker.publisher();
    let turns = topology.turns_exchange();
    within(
        "publish",
        publisher.publish(
            &turns,
            TURN_ROUTING_KEY,
            OutgoingMessage::new("on the second"),
        ),
    )
    .await
    .expect("publishes");
    assert_eq!(body(&next(&mut received).await), "on the second");

    // The second node dies for good; the first is back: the connection moves to it.
    let mut generation = broker.connected();
    first.restore();
    second.cut();
    within(
        "reconnect to the other node",
        generation.wait_for(|g| *g >= 2),
    )
    .await
    .expect("broker alive");
    within(
        "publish",
        publisher.publish(
            &turns,
            TURN_ROUTING_KEY,
            OutgoingMessage::new("on the first"),
        ),
    )
    .await
    .expect("publishes on the node that answers");
    // (The first message may come again: its ack may have been lost with the second node.)
    while body(&next(&mut received).await) != "on the first" {}
    broker.close().await;
}

#[tokio::test]
async fn a_broker_address_that_is_not_host_and_port_is_refused_by_name() {
    let mut bad = options("amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
    bad.addresses = vec!["127.0.0.1:5672".to_owned(), "rabbit-1".to_owned()];
    let error = Broker::connect(bad).await.expect_err("refused");
    let text = format!("{:#}", anyhow_chain(&error));
    assert!(text.contains("\"rabbit-1\" is not host:port"), "{text}");
}

/// An error and its sources, one line.
fn anyhow_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
