//! Topology: what `Broker::declare` creates, that it can run twice, and routing through it.

use rover_messaging::{
    ConsumerOptions, Outcome, OutgoingMessage, PublishError, Topology, turn_event_routing_key,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::helpers::{body, collect, next, spawn_app, within};

fn find<'a>(rows: &'a [Value], key: &str, name: &str) -> &'a Value {
    rows.iter()
        .find(|row| row[key] == name)
        .unwrap_or_else(|| panic!("no {name} in {rows:?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn declare_creates_the_documented_topology_and_can_run_again() {
    let app = spawn_app().await;
    within("declare again", app.broker.declare(&Topology::default()))
        .await
        .expect("redeclaring is harmless");

    let queues = app
        .vhost
        .list("list_queues", &["name", "type", "durable", "arguments"]);
    let turns = find(&queues, "name", "rover.turns");
    assert_eq!(turns["type"], "quorum", "{turns}");
    assert_eq!(turns["durable"], true, "{turns}");
    let arguments = &turns["arguments"];
    assert_eq!(arguments["x-queue-type"], "quorum", "{turns}");
    assert_eq!(arguments["x-delivery-limit"], 5, "{turns}");
    assert_eq!(arguments["x-consumer-timeout"], 30 * 60 * 1000, "{turns}");
    // The RPC path: a classic queue, settled before each request runs, so no delivery limit.
    let tools = find(&queues, "name", "rover.tools");
    assert_eq!(tools["type"], "classic", "{tools}");
    assert_eq!(tools["durable"], true, "{tools}");
    assert_eq!(tools["arguments"]["x-queue-type"], "classic", "{tools}");
    assert!(
        tools["arguments"].get("x-delivery-limit").is_none(),
        "{tools}"
    );
    for (queue, dead) in [
        ("rover.turns", "rover.turns.dead"),
        ("rover.tools", "rover.tools.dead"),
    ] {
        let row = find(&queues, "name", queue);
        let arguments = &row["arguments"];
        assert_eq!(arguments["x-dead-letter-exchange"], "rover.dead", "{row}");
        assert_eq!(arguments["x-dead-letter-routing-key"], queue, "{row}");
        assert_eq!(find(&queues, "name", dead)["type"], "quorum");
    }

    let exchanges = app
        .vhost
        .list("list_exchanges", &["name", "type", "durable"]);
    for (exchange, kind) in [
        ("rover.turns", "direct"),
        ("rover.turn-events", "topic"),
        ("rover.tools", "topic"),
        ("rover.dead", "direct"),
    ] {
        let row = find(&exchanges, "name", exchange);
        assert_eq!(row["type"], kind, "{row}");
        assert_eq!(row["durable"], true, "{row}");
    }

    let bindings = app.vhost.list(
        "list_bindings",
        &["source_name", "destination_name", "routing_key"],
    );
    for binding in [
        json!({"source_name": "rover.turns", "destination_name": "rover.turns", "routing_key": "turn"}),
        json!({"source_name": "rover.tools", "destination_name": "rover.tools", "routing_key": "#"}),
        json!({"source_name": "rover.dead", "destination_name": "rover.turns.dead", "routing_key": "rover.turns"}),
        json!({"source_name": "rover.dead", "destination_name": "rover.tools.dead", "routing_key": "rover.tools"}),
    ] {
        assert!(
            bindings.contains(&binding),
            "missing {binding} in {bindings:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_tool_event_reaches_the_tools_queue_and_turn_events_reach_their_subscription() {
    let app = spawn_app().await;
    let publisher = app.broker.publisher();

    within(
        "publish tool request",
        publisher.publish(
            &app.topology.tools_exchange(),
            "any.tool.event",
            OutgoingMessage::new("tool"),
        ),
    )
    .await
    .expect("the tools queue takes every routing key");
    let (_tools, mut tool_requests) = collect(&app.broker, &app.topology.tools_queue(), 1).await;
    assert_eq!(body(&next(&mut tool_requests).await), "tool");

    let events_exchange = app.topology.turn_events_exchange();
    let queue = within(
        "declare subscription",
        app.broker
            .declare_subscription(&events_exchange, &[&turn_event_routing_key("t1")]),
    )
    .await
    .expect("declares");
    assert!(queue.starts_with("amq.gen-"), "{queue}");
    let (tx, mut events) = mpsc::unbounded_channel();
    let _gateway = within(
        "consume subscription",
        app.broker
            .consume(&queue, ConsumerOptions::default(), move |delivery| {
                let _ = tx.send(delivery);
                async { Outcome::Ack }
            }),
    )
    .await
    .expect("consumes");

    within(
        "publish t1 event",
        publisher.publish(
            &events_exchange,
            &turn_event_routing_key("t1"),
            OutgoingMessage::new("e1"),
        ),
    )
    .await
    .expect("routable");
    assert_eq!(body(&next(&mut events).await), "e1");

    let result = within(
        "publish t2 event",
        publisher.publish(
            &events_exchange,
            &turn_event_routing_key("t2"),
            OutgoingMessage::new("e2"),
        ),
    )
    .await;
    assert!(
        matches!(result, Err(PublishError::Unroutable { .. })),
        "{result:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn on_a_cluster_the_tools_queue_is_a_quorum_queue_and_a_classic_one_of_its_name_is_named_in_the_error()
 {
    use rover_messaging::QueueKind;
    let app = crate::helpers::spawn_app_with(
        Topology::new("quorum").with_tools_queue_kind(QueueKind::Quorum),
    )
    .await;
    let queues = app
        .vhost
        .list("list_queues", &["name", "type", "arguments"]);
    let tools = find(&queues, "name", "quorum.tools");
    assert_eq!(tools["type"], "quorum", "{tools}");
    assert!(
        tools["arguments"].get("x-delivery-limit").is_none(),
        "settled before it runs: no delivery limit: {tools}"
    );
    // Every request still reaches a tool server and its reply the caller.
    let _server = within(
        "serve",
        app.broker.serve_rpc(
            &app.topology.tools_queue(),
            ConsumerOptions::default(),
            |request| Some(async move { request.body }),
        ),
    )
    .await
    .expect("serves");
    let reply = within(
        "call",
        app.broker
            .rpc_client(rover_messaging::RpcOptions::default())
            .call(&app.topology.tools_exchange(), "echo", "c1", b"hi".to_vec()),
    )
    .await
    .expect("replies");
    assert_eq!(reply, b"hi");

    // An existing deployment's classic queue cannot become a quorum one: the error says which
    // queue, which kind, and where the way forward is written.
    let classic = Topology::new("quorum");
    let error = within("declare as classic", app.broker.declare(&classic))
        .await
        .expect_err("refused");
    let text = error.to_string();
    assert!(
        text.contains("declare queue quorum.tools as a classic queue")
            && text.contains("A RabbitMQ cluster"),
        "{text}"
    );
}
