//! The gateway's audit rows keep one rule for their trace id, whichever route writes them — a REST
//! write, a chat deleted, a staff member's chats erased: the current trace's id when a trace is
//! being recorded, NULL when none is (never a made-up id an auditor would look for in vain). These
//! tests install no telemetry, as every gateway test, so tracing is off — except where one installs
//! an OpenTelemetry layer for its own thread.

use axum::body::Body;
use axum::http::{Method, StatusCode, header};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt as _;

use crate::rest::{ADMIN, Rest, spawn_rest};

const TEACHER: &str = "amina@hill.school";

/// One audit row of each kind the gateway writes, each by its own request: a department created
/// over REST, a chat deleted by its owner, the teacher's chats erased by an admin. Returns, by
/// audit event, the `x-rover-trace-id` each response carried.
async fn one_row_of_each(rest: &Rest) -> Vec<(&'static str, Option<String>)> {
    let (status, _, body) = rest.start_turn(TEACHER, "audited").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    rest.finish_turns_of(TEACHER).await;
    let teacher = rest.db.ids.user(TEACHER);
    let requests = [
        (
            "create.department",
            rest.request(Method::POST, "/api/departments", Some(ADMIN))
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(json!({ "name": "Sciences" }).to_string())),
            StatusCode::CREATED,
        ),
        (
            "delete.chat",
            rest.request(Method::DELETE, "/api/chats/audited", Some(TEACHER))
                .body(Body::empty()),
            StatusCode::NO_CONTENT,
        ),
        (
            "erase.chats",
            rest.request(
                Method::DELETE,
                &format!("/api/staff/{teacher}/chats"),
                Some(ADMIN),
            )
            .body(Body::empty()),
            StatusCode::OK,
        ),
    ];
    let mut traces = Vec::new();
    for (event, request, expected) in requests {
        let (status, headers) = rest.send_raw(request.unwrap()).await;
        assert_eq!(status, expected, "{event}");
        let trace = headers
            .get("x-rover-trace-id")
            .map(|v| v.to_str().unwrap().to_owned());
        traces.push((event, trace));
    }
    traces
}

/// The trace id of the one audit row of `event`.
async fn audited_trace(rest: &Rest, event: &str) -> Option<String> {
    sqlx::query_scalar("SELECT trace_id FROM audit_log WHERE event = $1")
        .bind(event)
        .fetch_one(&rest.owner)
        .await
        .unwrap_or_else(|e| panic!("one audit row of {event}: {e}"))
}

#[tokio::test]
async fn with_tracing_off_every_gateway_audit_row_has_a_null_trace_id() {
    let rest = spawn_rest().await;
    for (event, _) in one_row_of_each(&rest).await {
        assert_eq!(
            audited_trace(&rest, event).await,
            None,
            "{event}: no trace is recorded, so the row names none"
        );
    }
}

// current_thread: the subscriber is set for this thread only, and every task runs on it.
#[tokio::test(flavor = "current_thread")]
async fn with_a_trace_every_gateway_audit_row_carries_the_requests_trace_id() {
    let provider = SdkTracerProvider::builder().build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("rover-gateway-test")));
    let _default = tracing::subscriber::set_default(subscriber);
    let rest = spawn_rest().await;
    for (event, trace) in one_row_of_each(&rest).await {
        let trace = trace.unwrap_or_else(|| panic!("{event}: the response names its trace"));
        assert_eq!(trace.len(), 32, "{event}: a W3C trace id");
        assert_eq!(
            audited_trace(&rest, event).await.as_deref(),
            Some(trace.as_str()),
            "{event}: the row names the trace of the request that wrote it"
        );
    }
}
