//! Consuming: outcomes, dead-lettering of poison and undecodable messages, graceful shutdown.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use rover_messaging::{ConsumerOptions, Outcome, OutgoingMessage, TURN_ROUTING_KEY, Topology};
use tokio::sync::{Notify, mpsc};

use crate::helpers::{body, collect, next, spawn_app, spawn_app_with, within};

#[tokio::test(flavor = "multi_thread")]
async fn a_poison_message_is_dead_lettered_after_the_delivery_limit_while_good_messages_flow() {
    let app = spawn_app_with(Topology::default().with_delivery_limit(2)).await;
    let poison_counts = Arc::new(Mutex::new(Vec::new()));
    let (good_tx, mut good) = mpsc::unbounded_channel();
    let options = ConsumerOptions {
        prefetch: 5,
        ..ConsumerOptions::default()
    };
    let queue = app.topology.turns_queue();
    let _worker = within("start worker", {
        let poison_counts = poison_counts.clone();
        app.broker.consume(&queue, options, move |delivery| {
            let outcome = if delivery.body == b"poison" {
                poison_counts.lock().unwrap().push(delivery.delivery_count);
                Outcome::Retry
            } else {
                let _ = good_tx.send(delivery);
                Outcome::Ack
            };
            async move { outcome }
        })
    })
    .await
    .expect("consumes");
    let (_dead_collector, mut dead) =
        collect(&app.broker, &app.topology.turns_dead_queue(), 10).await;

    let publisher = app.broker.publisher();
    let mut batch = vec![(TURN_ROUTING_KEY.to_owned(), OutgoingMessage::new("poison"))];
    batch.extend((0..20).map(|i| {
        (
            TURN_ROUTING_KEY.to_owned(),
            OutgoingMessage::new(format!("good-{i}")),
        )
    }));
    within(
        "publish",
        publisher.publish_all(&app.topology.turns_exchange(), batch),
    )
    .await
    .expect("publishes");

    let mut good_bodies = Vec::new();
    for _ in 0..20 {
        good_bodies.push(body(&next(&mut good).await));
    }
    good_bodies.sort();
    let mut expected: Vec<_> = (0..20).map(|i| format!("good-{i}")).collect();
    expected.sort();
    assert_eq!(good_bodies, expected);

    let dead_letter = next(&mut dead).await;
    assert_eq!(dead_letter.body, b"poison");
    assert_eq!(
        dead_letter
            .headers
            .get("x-first-death-reason")
            .map(String::as_str),
        Some("delivery_limit")
    );
    // Delivered once, then redelivered until it had been returned more than the limit.
    assert_eq!(*poison_counts.lock().unwrap(), vec![0, 1, 2]);
    assert!(
        good.try_recv().is_err(),
        "no good message was dead-lettered or duplicated"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_undecodable_message_is_rejected_straight_into_the_dead_letter_queue() {
    let app = spawn_app().await;
    let (decoded_tx, mut decoded) = mpsc::unbounded_channel();
    let _worker = within(
        "start typed worker",
        app.broker.consume_decoded(
            &app.topology.turns_queue(),
            ConsumerOptions::default(),
            |bytes: &[u8]| {
                std::str::from_utf8(bytes)
                    .map_err(|e| e.to_string())?
                    .parse::<u32>()
                    .map_err(|e| e.to_string())
            },
            move |number: u32, _delivery| {
                let _ = decoded_tx.send(number);
                async { Outcome::Ack }
            },
        ),
    )
    .await
    .expect("consumes");
    let (_dead_collector, mut dead) =
        collect(&app.broker, &app.topology.turns_dead_queue(), 10).await;

    let publisher = app.broker.publisher();
    for message in ["not a number", "42"] {
        within(
            "publish",
            publisher.publish(
                &app.topology.turns_exchange(),
                TURN_ROUTING_KEY,
                OutgoingMessage::new(message),
            ),
        )
        .await
        .expect("publishes");
    }

    assert_eq!(within("decoded", decoded.recv()).await, Some(42));
    let dead_letter = next(&mut dead).await;
    assert_eq!(body(&dead_letter), "not a number");
    assert_eq!(
        dead_letter
            .headers
            .get("x-first-death-reason")
            .map(String::as_str),
        Some("rejected")
    );
    assert!(decoded.try_recv().is_err());
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_waits_for_the_in_flight_handler_to_finish_and_ack() {
    let app = spawn_app().await;
    let entered = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let finished = Arc::new(AtomicBool::new(false));
    let options = ConsumerOptions {
        prefetch: 1,
        ..ConsumerOptions::default()
    };
    let queue = app.topology.turns_queue();
    let worker = within("start worker", {
        let (entered, release, finished) = (entered.clone(), release.clone(), finished.clone());
        app.broker.consume(&queue, options, move |_delivery| {
            let (entered, release, finished) = (entered.clone(), release.clone(), finished.clone());
            async move {
                entered.notify_one();
                release.notified().await;
                finished.store(true, Ordering::SeqCst);
                Outcome::Ack
            }
        })
    })
    .await
    .expect("consumes");

    let publisher = app.broker.publisher();
    let turns = app.topology.turns_exchange();
    within(
        "publish",
        publisher.publish(&turns, TURN_ROUTING_KEY, OutgoingMessage::new("first")),
    )
    .await
    .expect("publishes");
    within("handler started", entered.notified()).await;

    let mut shutdown = tokio::spawn(worker.shutdown());
    // While the handler runs, shutdown must not return.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), &mut shutdown)
            .await
            .is_err(),
        "shutdown returned while a handler was still running"
    );
    release.notify_one();
    within("shutdown", shutdown).await.expect("shutdown task");
    assert!(finished.load(Ordering::SeqCst));

    // "first" was acked: had it been requeued it would come before "second".
    within(
        "publish",
        publisher.publish(&turns, TURN_ROUTING_KEY, OutgoingMessage::new("second")),
    )
    .await
    .expect("publishes");
    let (_collector, mut received) = collect(&app.broker, &app.topology.turns_queue(), 1).await;
    assert_eq!(body(&next(&mut received).await), "second");
}
