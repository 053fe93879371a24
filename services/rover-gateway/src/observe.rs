//! The root of every trace: one server span per HTTP request, and the trace id handed back in
//! `x-rover-trace-id` so a support ticket can quote it.
//!
//! The trace id is always the gateway's own. A caller's W3C `traceparent` is kept as a *link* of
//! the request's span, not as its parent: the trace id ends up in audit rows, so a client must not
//! be able to choose it (and file its writes under another turn's trace).

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::propagation::Extractor;
use opentelemetry::trace::TraceContextExt as _;
use rover_telemetry::metrics::{GatewayMetrics, Metrics};
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The gateway's metric families, and the registry `/metrics` renders them from.
pub fn metrics() -> (GatewayMetrics, Metrics) {
    let mut registry = rover_telemetry::metrics::Registry::default();
    let gateway = GatewayMetrics::register(&mut registry);
    (gateway, Metrics::new(registry))
}

/// The response header carrying the request's trace id.
pub(crate) const TRACE_HEADER: &str = "x-rover-trace-id";

struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(axum::http::HeaderName::as_str).collect()
    }
}

/// Middleware: runs the request inside `rover.gateway.http` (OpenTelemetry HTTP server
/// conventions; the path template, never the query) and adds the trace id header.
pub(crate) async fn http_span(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |path| path.as_str())
        .to_owned();
    // A root: never the child of a client-chosen trace (see the module docs).
    let span = tracing::info_span!(
        parent: None,
        "rover.gateway.http",
        otel.name = %format!("{} {route}", request.method()),
        otel.kind = "server",
        http.request.method = %request.method(),
        http.route = %route,
        http.response.status_code = tracing::field::Empty,
        request_id = request
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok()),
    );
    // The caller's trace, if it sent one, is linked: followable from either side, never ours.
    let caller = rover_messaging::extract(&HeaderExtractor(request.headers()));
    let caller = caller.span().span_context().clone();
    if caller.is_valid() {
        span.add_link(caller);
    }
    let trace = rover_telemetry::trace_id(&span);
    let mut response = next.run(request).instrument(span.clone()).await;
    span.record("http.response.status_code", response.status().as_u16());
    if let Some(trace) = trace
        && !response.headers().contains_key(TRACE_HEADER)
        && let Ok(value) = HeaderValue::from_str(&trace)
    {
        response.headers_mut().insert(TRACE_HEADER, value);
    }
    response
}

/// The trace id to give the client for work done in the current span: the recorded trace's when
/// traces are on, else a fresh one (still worth quoting: it is in the gateway's logs). Never one
/// the client chose.
pub(crate) fn current_trace_id() -> String {
    rover_telemetry::trace_id(&tracing::Span::current())
        .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string())
}

/// The current trace's id when a trace is being recorded, else `None` (never a made-up one): what
/// an audit row keeps.
pub(crate) fn recorded_trace_id() -> Option<String> {
    rover_telemetry::trace_id(&tracing::Span::current())
}
