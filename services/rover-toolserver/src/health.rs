//! Liveness, readiness and metrics over HTTP, for Kubernetes probes and Prometheus.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

/// What readiness checks.
#[derive(Debug, Clone)]
pub(crate) struct Probes {
    pub(crate) broker: rover_messaging::Broker,
    pub(crate) pool: rover_domain::pool::CallPool,
    pub(crate) metrics: rover_telemetry::metrics::Metrics,
}

/// `/healthz`: the process is alive. `/readyz`: the broker is connected and the database answers.
/// `/metrics`: Prometheus text.
pub(crate) fn router(probes: Probes) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .route(
            "/metrics",
            get(|State(probes): State<Arc<Probes>>| async move { probes.metrics.response() }),
        )
        .with_state(Arc::new(probes))
}

async fn ready(State(probes): State<Arc<Probes>>) -> (StatusCode, &'static str) {
    if !probes.broker.is_ready() {
        return (StatusCode::SERVICE_UNAVAILABLE, "broker unreachable");
    }
    let answered = match probes.pool.acquire().await {
        Ok(mut conn) => {
            let answered = sqlx::query("SELECT 1").execute(&mut *conn).await;
            if answered.is_err() {
                conn.close_on_drop();
                probes.pool.discard_idle();
            }
            answered.map(|_| ())
        }
        Err(error) => Err(error),
    };
    match answered {
        Ok(()) => (StatusCode::OK, "ready"),
        Err(error) => {
            tracing::warn!(%error, "readiness: database unreachable");
            (StatusCode::SERVICE_UNAVAILABLE, "database unreachable")
        }
    }
}
