//! Publishing: confirms, unroutable messages, refused publishes, batches, properties.

use rover_messaging::{OutgoingMessage, PublishError, TURN_ROUTING_KEY};

use crate::helpers::{body, collect, next, spawn_app, within};

#[tokio::test(flavor = "multi_thread")]
async fn an_unroutable_or_refused_publish_is_an_error_and_the_publisher_keeps_working() {
    let app = spawn_app().await;
    let publisher = app.broker.publisher();
    let turn_events = app.topology.turn_events_exchange();

    let result = within(
        "unroutable publish",
        publisher.publish(&turn_events, "turn.nobody", OutgoingMessage::new("{}")),
    )
    .await;
    match result {
        Err(PublishError::Unroutable {
            exchange,
            routing_key,
            reply_text,
        }) => {
            assert_eq!(exchange, turn_events);
            assert_eq!(routing_key, "turn.nobody");
            assert_eq!(reply_text, "NO_ROUTE");
        }
        other => panic!("expected Unroutable, got {other:?}"),
    }

    let result = within(
        "publish to a missing exchange",
        publisher.publish("no-such-exchange", "x", OutgoingMessage::new("{}")),
    )
    .await;
    assert!(
        matches!(result, Err(PublishError::Refused(_))),
        "{result:?}"
    );

    // The refused publish closed the channel; the publisher opens another.
    within(
        "routable publish",
        publisher.publish(
            &app.topology.turns_exchange(),
            TURN_ROUTING_KEY,
            OutgoingMessage::new("ok"),
        ),
    )
    .await
    .expect("publishes");

    let batch = vec![
        (TURN_ROUTING_KEY.to_owned(), OutgoingMessage::new("a")),
        ("nobody".to_owned(), OutgoingMessage::new("b")),
    ];
    let result = within(
        "batch with an unroutable message",
        publisher.publish_all(&app.topology.turns_exchange(), batch),
    )
    .await;
    assert!(
        matches!(result, Err(PublishError::Unroutable { ref routing_key, .. }) if routing_key == "nobody"),
        "{result:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_is_confirmed_and_arrives_with_its_properties() {
    let app = spawn_app().await;
    let publisher = app.broker.publisher();
    let batch = (0..50).map(|i| {
        let message = OutgoingMessage::new(format!("m{i}"))
            .with_message_id(format!("id-{i}"))
            .with_correlation_id(format!("corr-{i}"))
            .with_reply_to("somewhere")
            .with_content_type("text/plain")
            .with_header("x-turn", format!("turn-{i}"));
        (TURN_ROUTING_KEY.to_owned(), message)
    });
    within(
        "publish batch",
        publisher.publish_all(&app.topology.turns_exchange(), batch),
    )
    .await
    .expect("all confirmed");

    let (_collector, mut received) = collect(&app.broker, &app.topology.turns_queue(), 10).await;
    // Handlers run concurrently, so arrival order at the collector is not publish order.
    let mut deliveries = Vec::new();
    for _ in 0..50 {
        deliveries.push(next(&mut received).await);
    }
    deliveries.sort_by_key(|d| body(d)[1..].parse::<u32>().expect("numbered"));
    for (i, delivery) in deliveries.into_iter().enumerate() {
        assert_eq!(body(&delivery), format!("m{i}"));
        assert_eq!(delivery.message_id, Some(format!("id-{i}")));
        assert_eq!(delivery.correlation_id, Some(format!("corr-{i}")));
        assert_eq!(delivery.reply_to.as_deref(), Some("somewhere"));
        assert_eq!(delivery.content_type.as_deref(), Some("text/plain"));
        assert_eq!(delivery.headers.get("x-turn"), Some(&format!("turn-{i}")));
        assert_eq!(delivery.exchange, app.topology.turns_exchange());
        assert_eq!(delivery.routing_key, TURN_ROUTING_KEY);
        assert!(!delivery.redelivered);
        assert_eq!(delivery.delivery_count, 0);
    }
}
