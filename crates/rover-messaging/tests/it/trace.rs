//! Trace context crosses a hop: the consumer's span continues the publisher's trace.

use opentelemetry::trace::{SpanId, TraceContextExt, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use rover_messaging::{
    ConsumerOptions, Headers, Outcome, OutgoingMessage, TURN_ROUTING_KEY, extract, inject,
};
use tokio::sync::mpsc;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;

use crate::helpers::{spawn_app, within};

fn span_named<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    spans
        .iter()
        .find(|span| span.name == name)
        .unwrap_or_else(|| {
            panic!(
                "no span {name} among {:?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        })
}

// current_thread: the subscriber is set for this thread only, and every task runs on it.
#[tokio::test(flavor = "current_thread")]
async fn the_consumer_span_continues_the_publishers_trace() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("rover-messaging-test")));
    let _default = tracing::subscriber::set_default(subscriber);

    let app = spawn_app().await;
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let worker = within(
        "start worker",
        app.broker.consume(
            &app.topology.turns_queue(),
            ConsumerOptions::default(),
            move |delivery| {
                // What the handler sees as its current trace.
                let context = tracing::Span::current().context();
                let span_context = context.span().span_context().clone();
                let _ = seen_tx.send((span_context, delivery.headers));
                async { Outcome::Ack }
            },
        ),
    )
    .await
    .expect("consumes");

    let request = tracing::info_span!("test.request");
    let request_context = request.context().span().span_context().clone();
    assert!(request_context.is_valid());
    within(
        "publish",
        app.broker
            .publisher()
            .publish(
                &app.topology.turns_exchange(),
                TURN_ROUTING_KEY,
                OutgoingMessage::new("traced"),
            )
            .instrument(request.clone()),
    )
    .await
    .expect("publishes");

    let (handler_context, headers) = within("delivery", seen.recv()).await.expect("worker");
    assert_eq!(handler_context.trace_id(), request_context.trace_id());
    assert!(headers.contains_key("traceparent"), "{headers:?}");

    // Let the consume span end, then look at what was exported.
    within("shutdown", worker.shutdown()).await;
    drop(request);
    provider.force_flush().expect("flushes");
    let spans = exporter.get_finished_spans().expect("spans");
    let request_span = span_named(&spans, "test.request");
    let publish = span_named(&spans, "rover.messaging.publish");
    let consume = span_named(&spans, "rover.messaging.consume");

    assert_eq!(publish.span_context.trace_id(), request_context.trace_id());
    assert_eq!(publish.parent_span_id, request_span.span_context.span_id());
    assert_eq!(consume.span_context.trace_id(), request_context.trace_id());
    assert_eq!(consume.parent_span_id, publish.span_context.span_id());
    assert!(consume.parent_span_is_remote);
    assert_eq!(handler_context.span_id(), consume.span_context.span_id());
    let attribute = |key: &str| {
        consume
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.to_string())
    };
    assert_eq!(attribute("messaging.system").as_deref(), Some("rabbitmq"));
    assert_eq!(
        attribute("messaging.destination.name"),
        Some(app.topology.turns_queue())
    );
}

#[test]
fn inject_and_extract_round_trip_a_remote_parent() {
    let provider = SdkTracerProvider::builder().build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("rover-messaging-test")));
    tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!("outgoing");
        let mut headers = Headers::new();
        inject(&span.context(), &mut headers);
        let extracted = extract(&headers);
        let remote = extracted.span().span_context().clone();
        let local = span.context().span().span_context().clone();
        assert!(remote.is_remote());
        assert_eq!(remote.trace_id(), local.trace_id());
        assert_eq!(remote.span_id(), local.span_id());
    });

    // Nothing to inject without a span; nothing to extract from empty headers.
    let mut headers = Headers::new();
    inject(&opentelemetry::Context::new(), &mut headers);
    assert!(headers.is_empty());
    let empty = extract(&headers);
    assert_eq!(empty.span().span_context().trace_id(), TraceId::INVALID);
    assert_eq!(empty.span().span_context().span_id(), SpanId::INVALID);
}
