//! RPC over Direct Reply-to: round trips, deadlines, retries under one call id, late replies.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures::future::join_all;
use rover_messaging::{ConsumerOptions, OutgoingMessage, RpcError, RpcOptions, TURN_ROUTING_KEY};
use tokio::{sync::Notify, time::Instant};

use crate::helpers::{body, collect, next, spawn_app, spawn_app_with, within};

/// An echo server that answers `<correlation id>:<body>`.
async fn echo_server(app: &crate::helpers::TestApp) -> rover_messaging::ConsumerHandle {
    let options = ConsumerOptions {
        prefetch: 20,
        ..ConsumerOptions::default()
    };
    within(
        "start echo server",
        app.broker
            .serve_rpc(&app.topology.tools_queue(), options, |request| {
                Some(async move {
                    let call_id = request.correlation_id.unwrap_or_default();
                    format!("{call_id}:{}", String::from_utf8_lossy(&request.body)).into_bytes()
                })
            }),
    )
    .await
    .expect("serves")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_gets_its_reply_and_many_concurrent_calls_get_theirs() {
    let app = spawn_app().await;
    let _server = echo_server(&app).await;
    let client = app.broker.rpc_client(RpcOptions {
        attempt_timeout: Duration::from_secs(5),
        attempts: 1,
    });
    let exchange = app.topology.tools_exchange();

    let reply = within(
        "one call",
        client.call(&exchange, "echo", "call-1", b"hi".to_vec()),
    )
    .await
    .expect("replies");
    assert_eq!(reply, b"call-1:hi");

    let calls = (0..200).map(|i| {
        let client = client.clone();
        let exchange = exchange.clone();
        async move {
            let call_id = format!("call-{i}");
            client
                .call(&exchange, "echo", &call_id, i.to_string().into_bytes())
                .await
        }
    });
    let replies = within("200 concurrent calls", join_all(calls)).await;
    for (i, reply) in replies.into_iter().enumerate() {
        assert_eq!(
            reply.expect("replies"),
            format!("call-{i}:{i}").into_bytes()
        );
    }
    assert_eq!(client.late_replies(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_server_the_call_fails_within_its_deadline_after_sending_the_same_call_id_each_attempt()
 {
    let app = spawn_app().await;
    let client = app.broker.rpc_client(RpcOptions {
        attempt_timeout: Duration::from_millis(300),
        attempts: 3,
    });
    let exchange = app.topology.tools_exchange();

    let started = Instant::now();
    let result = within(
        "call without a server",
        client.call(&exchange, "search", "call-deadline", b"{}".to_vec()),
    )
    .await;
    let elapsed = started.elapsed();

    match result {
        Err(RpcError::DeadlineExceeded {
            call_id, attempts, ..
        }) => {
            assert_eq!(call_id, "call-deadline");
            assert_eq!(attempts, 3);
        }
        other => panic!("expected DeadlineExceeded, got {other:?}"),
    }
    assert!(
        elapsed >= Duration::from_millis(900),
        "gave up early: {elapsed:?}"
    );
    assert!(
        elapsed < Duration::from_millis(900 + 300),
        "overran the deadline: {elapsed:?}"
    );

    // The three attempts wait in the queue, all under the same call id, and nothing else.
    let publisher = app.broker.publisher();
    within(
        "publish marker",
        publisher.publish(&exchange, "marker", OutgoingMessage::new("marker")),
    )
    .await
    .expect("publishes");
    let (_collector, mut received) = collect(&app.broker, &app.topology.tools_queue(), 1).await;
    for attempt in 1..=3 {
        let request = next(&mut received).await;
        assert_eq!(
            request.correlation_id.as_deref(),
            Some("call-deadline"),
            "attempt {attempt}"
        );
        assert!(
            request
                .reply_to
                .as_deref()
                .is_some_and(|r| r.starts_with("amq.rabbitmq.reply-to")),
            "attempt {attempt} has a direct reply-to address: {:?}",
            request.reply_to
        );
    }
    assert_eq!(body(&next(&mut received).await), "marker");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_after_the_deadline_is_dropped_and_counted() {
    let app = spawn_app().await;
    let release = Arc::new(Notify::new());
    let entered = Arc::new(Notify::new());
    let options = ConsumerOptions {
        // One request at a time: the late reply is sent before the next request is handled.
        prefetch: 1,
        ..ConsumerOptions::default()
    };
    let queue = app.topology.tools_queue();
    let _server = within("start slow server", {
        let release = release.clone();
        let entered = entered.clone();
        app.broker.serve_rpc(&queue, options, move |request| {
            let release = release.clone();
            let entered = entered.clone();
            Some(async move {
                if request.body == b"slow" {
                    entered.notify_one();
                    release.notified().await;
                }
                request.body
            })
        })
    })
    .await
    .expect("serves");
    let client = app.broker.rpc_client(RpcOptions {
        attempt_timeout: Duration::from_millis(300),
        attempts: 1,
    });
    let exchange = app.topology.tools_exchange();

    let result = within(
        "slow call",
        client.call(&exchange, "slow", "call-late", b"slow".to_vec()),
    )
    .await;
    assert!(
        matches!(result, Err(RpcError::DeadlineExceeded { .. })),
        "{result:?}"
    );
    within("server saw the slow request", entered.notified()).await;
    assert_eq!(client.late_replies(), 0);

    release.notify_one();
    let reply = within(
        "next call",
        client.call(&exchange, "fast", "call-next", b"fast".to_vec()),
    )
    .await
    .expect("replies");
    assert_eq!(reply, b"fast");
    assert_eq!(client.late_replies(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_that_cannot_be_routed_fails_at_once() {
    let app = spawn_app().await;
    let client = app.broker.rpc_client(RpcOptions {
        attempt_timeout: Duration::from_secs(5),
        attempts: 3,
    });
    let started = Instant::now();
    let result = within(
        "unroutable call",
        client.call(
            &app.topology.turns_exchange(),
            "no-such-key",
            "call-x",
            b"{}".to_vec(),
        ),
    )
    .await;
    assert!(
        matches!(
            result,
            Err(RpcError::Publish(
                rover_messaging::PublishError::Unroutable { .. }
            ))
        ),
        "{result:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_that_kills_its_handler_runs_once_per_attempt_and_never_loops() {
    let app = spawn_app().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let queue = app.topology.tools_queue();
    let _server = within("start server", {
        let runs = runs.clone();
        app.broker
            .serve_rpc(&queue, ConsumerOptions::default(), move |request| {
                let runs = runs.clone();
                Some(async move {
                    if request.body == b"poison" {
                        runs.fetch_add(1, Ordering::SeqCst);
                        panic!("the poison request kills its handler");
                    }
                    request.body
                })
            })
    })
    .await
    .expect("serves");
    let client = app.broker.rpc_client(RpcOptions {
        attempt_timeout: Duration::from_millis(400),
        attempts: 3,
    });
    let exchange = app.topology.tools_exchange();

    let result = within(
        "poison call",
        client.call(&exchange, "poison", "call-poison", b"poison".to_vec()),
    )
    .await;
    assert!(
        matches!(result, Err(RpcError::DeadlineExceeded { attempts: 3, .. })),
        "{result:?}"
    );
    // Settled before it ran, each delivery ran once: the bound is the caller's attempts, not a
    // queue that hands the request to the next handler, forever.
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    let reply = within(
        "good call",
        client.call(&exchange, "echo", "call-good", b"good".to_vec()),
    )
    .await
    .expect("the server still answers");
    assert_eq!(reply, b"good");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        3,
        "the poison request did not come back"
    );
    let depths = app.vhost.list("list_queues", &["name", "messages"]);
    let tools = depths
        .iter()
        .find(|row| row["name"] == "rover.tools")
        .expect("the tools queue");
    assert_eq!(tools["messages"], 0, "{depths:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_the_server_cannot_read_is_dead_lettered_unrun() {
    let app = spawn_app().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let queue = app.topology.tools_queue();
    let _server = within("start server", {
        let runs = runs.clone();
        app.broker
            .serve_rpc(&queue, ConsumerOptions::default(), move |request| {
                let runs = runs.clone();
                (request.body != b"unreadable").then_some(async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    request.body
                })
            })
    })
    .await
    .expect("serves");
    let (_dead_collector, mut dead) =
        collect(&app.broker, &app.topology.tools_dead_queue(), 10).await;
    let client = app.broker.rpc_client(RpcOptions {
        attempt_timeout: Duration::from_millis(300),
        attempts: 1,
    });
    let exchange = app.topology.tools_exchange();

    let result = within(
        "unreadable call",
        client.call(&exchange, "x", "call-unreadable", b"unreadable".to_vec()),
    )
    .await;
    assert!(
        matches!(result, Err(RpcError::DeadlineExceeded { .. })),
        "{result:?}"
    );
    let dead_letter = next(&mut dead).await;
    assert_eq!(body(&dead_letter), "unreadable");
    assert_eq!(
        dead_letter
            .headers
            .get("x-first-death-reason")
            .map(String::as_str),
        Some("rejected")
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

/// `count` concurrent calls `call-<i>` with the body `[i]`, running in a task of their own.
fn spawn_calls(
    client: &rover_messaging::RpcClient,
    exchange: &str,
    count: u8,
) -> tokio::task::JoinHandle<Vec<Result<Vec<u8>, RpcError>>> {
    let calls = (0..count).map(|i| {
        let (client, exchange) = (client.clone(), exchange.to_owned());
        async move {
            client
                .call(&exchange, "echo", &format!("call-{i}"), vec![i])
                .await
        }
    });
    tokio::spawn(join_all(calls))
}

#[tokio::test(flavor = "multi_thread")]
async fn at_most_prefetch_requests_run_at_once_though_each_is_settled_before_it_runs() {
    let app = spawn_app().await;
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let release = Arc::new(Notify::new());
    let options = ConsumerOptions {
        prefetch: 2,
        ..ConsumerOptions::default()
    };
    let queue = app.topology.tools_queue();
    let _server = within("start server", {
        let (running, most, release) = (running.clone(), most.clone(), release.clone());
        app.broker.serve_rpc(&queue, options, move |request| {
            let (running, most, release) = (running.clone(), most.clone(), release.clone());
            Some(async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                release.notified().await;
                running.fetch_sub(1, Ordering::SeqCst);
                request.body
            })
        })
    })
    .await
    .expect("serves");
    let client = app.broker.rpc_client(RpcOptions {
        attempt_timeout: Duration::from_secs(10),
        attempts: 1,
    });
    let calls = spawn_calls(&client, &app.topology.tools_exchange(), 6);
    // Release one handler at a time until every call has its reply.
    while !calls.is_finished() {
        tokio::time::sleep(Duration::from_millis(50)).await;
        release.notify_one();
    }
    for reply in within("six calls", calls).await.expect("joined") {
        reply.expect("replies");
    }
    assert_eq!(most.load(Ordering::SeqCst), 2, "two handlers at most");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_caller_whose_connection_dies_while_it_waits_sends_again_at_once_on_a_new_one() {
    // The tool server stays up; the caller's connection (through a proxy) dies while the
    // request is being served, as when the broker node it was connected to goes down. Its reply
    // can never arrive: the caller must not wait out its attempt deadline before asking again.
    let app = spawn_app().await;
    let started = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let _server = within(
        "start server",
        app.broker
            .serve_rpc(&app.topology.tools_queue(), ConsumerOptions::default(), {
                let (started, release, runs) = (started.clone(), release.clone(), runs.clone());
                move |request| {
                    let (started, release) = (started.clone(), release.clone());
                    let first = runs.fetch_add(1, Ordering::SeqCst) == 0;
                    Some(async move {
                        if first {
                            started.notify_one();
                            release.notified().await;
                        }
                        request.body
                    })
                }
            }),
    )
    .await
    .expect("serves");
    let proxy = crate::helpers::Proxy::start().await;
    let caller = within(
        "connect the caller",
        rover_messaging::Broker::connect(crate::helpers::options(app.vhost.url_via(proxy.addr))),
    )
    .await
    .expect("connects");
    let deadline = Duration::from_secs(60);
    let client = caller.rpc_client(RpcOptions {
        attempt_timeout: deadline,
        attempts: 2,
    });
    let exchange = app.topology.tools_exchange();
    let call = tokio::spawn(async move {
        let began = Instant::now();
        let reply = client
            .call(&exchange, "echo", "call-moved", b"pong".to_vec())
            .await;
        (reply, began.elapsed())
    });
    within("the request is running", started.notified()).await;
    let mut refused = proxy.refused();
    proxy.cut();
    // Cut for sure (the caller's reconnect was refused) before the way back opens.
    within("the caller is cut off", refused.wait_for(|n| *n >= 1))
        .await
        .expect("proxy alive");
    proxy.restore();
    let (reply, took) = within("the call is answered", call).await.expect("task");
    assert_eq!(reply.expect("replies"), b"pong");
    assert!(
        took < deadline / 4,
        "asked again at once, not after {deadline:?}: {took:?}"
    );
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "sent again under the same call id"
    );
    release.notify_one();
}

/// Fills the turns queue of `app` (its `x-max-length` 1): a quorum queue takes one message beyond
/// its limit, then nacks every publish. Nobody serves them yet.
async fn fill(app: &crate::helpers::TestApp) {
    for _ in 0..2 {
        within(
            "fill the queue",
            app.broker.publisher().publish(
                &app.topology.turns_exchange(),
                TURN_ROUTING_KEY,
                OutgoingMessage::new("filler"),
            ),
        )
        .await
        .expect("published");
    }
}

/// A request the broker nacks (here a full queue with `reject-publish`; after a broker node's
/// kill -9, a channel that keeps the dead leader) was not enqueued: the client sends it again on
/// a new reply channel, after a pause, and the call is answered once the queue takes it.
#[tokio::test(flavor = "multi_thread")]
async fn a_nacked_request_is_sent_again_on_a_new_channel_and_answered() {
    let app = spawn_app_with(rover_messaging::Topology::default().with_turns_max_length(1)).await;
    let (exchange, queue) = (app.topology.turns_exchange(), app.topology.turns_queue());
    fill(&app).await;
    // A caller whose pause before sending again is long enough for the test to make room.
    let caller = within(
        "connect the caller",
        rover_messaging::Broker::connect(rover_messaging::BrokerOptions {
            reconnect_backoff_min: Duration::from_secs(2),
            ..crate::helpers::options(app.vhost.url())
        }),
    )
    .await
    .expect("connects");
    let client = caller.rpc_client(RpcOptions {
        attempt_timeout: Duration::from_secs(60),
        attempts: 1,
    });
    let mut nacks = client.nacks();
    let call = tokio::spawn({
        let (client, exchange) = (client.clone(), exchange.clone());
        async move {
            client
                .call(&exchange, TURN_ROUTING_KEY, "call-nacked", b"pong".to_vec())
                .await
        }
    });
    within("the request is nacked", nacks.wait_for(|n| *n >= 1))
        .await
        .expect("client alive");
    // Room: the server takes the fillers (no reply_to: dead-lettered unrun), then the request.
    let _server = within(
        "start server",
        app.broker
            .serve_rpc(&queue, ConsumerOptions::default(), |request| {
                Some(async move { request.body })
            }),
    )
    .await
    .expect("serves");
    let reply = within("the call is answered", call).await.expect("task");
    assert_eq!(reply.expect("replies"), b"pong");
    assert_eq!(*client.nacks().borrow(), 1, "sent again once");
}

/// A queue that keeps nacking (really full) fails the call with the nack after a few re-sends,
/// within a second or so, not at its deadline.
#[tokio::test(flavor = "multi_thread")]
async fn a_request_nacked_every_time_fails_with_the_nack_well_before_its_deadline() {
    let app = spawn_app_with(rover_messaging::Topology::default().with_turns_max_length(1)).await;
    let exchange = app.topology.turns_exchange();
    fill(&app).await;
    let deadline = Duration::from_secs(60);
    let client = app.broker.rpc_client(RpcOptions {
        attempt_timeout: deadline,
        attempts: 1,
    });
    let began = Instant::now();
    let error = within(
        "the call fails",
        client.call(&exchange, TURN_ROUTING_KEY, "call-full", b"x".to_vec()),
    )
    .await
    .expect_err("nacked");
    assert!(
        matches!(
            error,
            RpcError::Publish(rover_messaging::PublishError::Nacked { .. })
        ),
        "{error:?}"
    );
    assert_eq!(*client.nacks().borrow(), 3, "three re-sends, then the nack");
    assert!(began.elapsed() < deadline / 10, "{:?}", began.elapsed());
}

/// Requests that waited in the queue for a server reach it in the same read as its
/// `basic.consume-ok`: the server takes them from what that read brought, not only from the
/// reads after it (which, with the prefetch window full, would not come until a heartbeat).
#[tokio::test(flavor = "multi_thread")]
async fn requests_that_waited_for_the_server_are_answered_as_soon_as_it_consumes() {
    let app = spawn_app().await;
    let client = app.broker.rpc_client(RpcOptions {
        attempt_timeout: Duration::from_secs(10),
        attempts: 1,
    });
    let calls = spawn_calls(&client, &app.topology.tools_exchange(), 5);
    let queue = app.topology.tools_queue();
    while within("inspect", app.broker.inspect_queue(&queue))
        .await
        .expect("inspects")
        .messages
        < 5
    {
        tokio::task::yield_now().await;
    }
    let options = ConsumerOptions {
        prefetch: 5,
        ..ConsumerOptions::default()
    };
    let _server = within(
        "start server",
        app.broker
            .serve_rpc(&queue, options, |request| Some(async move { request.body })),
    )
    .await
    .expect("serves");
    for (i, reply) in within("five calls", calls)
        .await
        .expect("joined")
        .into_iter()
        .enumerate()
    {
        // Within the attempt's 10 s, so not after the broker's next heartbeat (60 s).
        assert_eq!(reply.expect("replies"), vec![u8::try_from(i).unwrap()]);
    }
}
