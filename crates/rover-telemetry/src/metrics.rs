//! Prometheus metrics: each service registers the families it moves into its own [`Registry`]
//! and serves [`Metrics::render`] at `/metrics` (OpenMetrics text, which Prometheus scrapes).
//!
//! Families are grouped by who moves them: [`TurnMetrics`] and [`ModelMetrics`] (worker),
//! [`ToolMetrics`] (worker, as the agent saw each call, and tool server, as the pipeline decided
//! it), [`GatewayMetrics`], and the process-wide [`dead_lettered`] counter that the messaging
//! layer moves whenever a consumer dead-letters a message.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::histogram::exponential_buckets;

pub use prometheus_client::metrics::{counter::Counter, gauge::Gauge, histogram::Histogram};
pub use prometheus_client::registry::Registry;

/// The `Content-Type` of [`Metrics::render`].
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A service's finished registry, cheap to clone into a handler.
#[derive(Clone)]
pub struct Metrics(Arc<Registry>);

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Metrics {
    /// Freezes `registry`, adding the process-wide families every service shares.
    pub fn new(mut registry: Registry) -> Self {
        registry.register(
            "rover_messages_dead_lettered",
            "Messages this service's consumers rejected to the dead-letter exchange, by queue",
            dead_lettered().clone(),
        );
        Self(Arc::new(registry))
    }

    /// The registry as OpenMetrics text.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing into a `String` cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.0);
        text
    }

    /// `(headers, body)` for an HTTP handler: `axum` turns it into a response as it is.
    pub fn response(&self) -> ([(&'static str, &'static str); 1], String) {
        ([("content-type", CONTENT_TYPE)], self.render())
    }
}

/// Labels naming a queue.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    /// The queue's name.
    pub queue: String,
}

static DEAD_LETTERED: LazyLock<Family<QueueLabels, Counter>> = LazyLock::new(Family::default);

/// Messages dead-lettered by this process's consumers, by queue.
pub fn dead_lettered() -> &'static Family<QueueLabels, Counter> {
    &DEAD_LETTERED
}

/// Histogram buckets from 1 ms to about 65 s, doubling.
#[derive(Debug, Clone, Copy)]
pub struct LatencyBuckets;

impl MetricConstructor<Histogram> for LatencyBuckets {
    fn new_metric(&self) -> Histogram {
        latency_histogram()
    }
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// Labels of a tool call: the tool's RPC event and how it ended.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolLabels {
    /// The tool's RPC event (`departments.create`), or the local tool's name.
    pub event: String,
    /// `ok`, `denied`, `invalid` or `error`.
    pub outcome: &'static str,
}

/// Tool calls by event and outcome, and how long they took.
#[derive(Debug, Clone)]
pub struct ToolMetrics {
    calls: Family<ToolLabels, Counter>,
    duration: Family<ToolLabels, Histogram, LatencyBuckets>,
}

impl ToolMetrics {
    /// Registers the tool families; `duration_help` says whose latency it is (the RPC round trip
    /// for the worker, `execute()` for the tool server).
    pub fn register(registry: &mut Registry, duration_name: &str, duration_help: &str) -> Self {
        let metrics = Self {
            calls: Family::default(),
            duration: Family::new_with_constructor(LatencyBuckets),
        };
        registry.register(
            "rover_tool_calls",
            "Tool calls by RPC event and outcome (ok, denied, invalid, error)",
            metrics.calls.clone(),
        );
        registry.register(duration_name, duration_help, metrics.duration.clone());
        metrics
    }

    /// Counts one call and its latency.
    pub fn observe(&self, event: &str, outcome: &'static str, took: Duration) {
        let labels = ToolLabels {
            event: event.to_owned(),
            outcome,
        };
        self.calls.get_or_create(&labels).inc();
        self.duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }
}

/// Turns as the worker runs them.
#[derive(Debug, Clone)]
pub struct TurnMetrics {
    /// Turns the worker started.
    pub started: Counter,
    /// Turns that finished with an answer.
    pub completed: Counter,
    /// Turns that finished with an error event.
    pub failed: Counter,
    /// Turns the staff member stopped (they end with `abort`).
    pub stopped: Counter,
    /// From the turn's start to its `finish`, in seconds.
    pub duration: Histogram,
    /// From the turn's start to its first text, in seconds.
    pub time_to_first_token: Histogram,
    /// Turns ended because a budget was spent, by limit.
    pub budget_exceeded: Family<LimitLabels, Counter>,
}

/// Labels of a spent budget.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabels {
    /// Which limit (`turn_tokens`, `user_daily_tokens`, …): a fixed set, never a caller's text.
    pub limit: &'static str,
}

impl TurnMetrics {
    /// Registers the turn families, with `rover_budget_exceeded_total` at 0 for each of `limits`
    /// (so the first time one is spent is an increase, not a new series an alert cannot see
    /// grow).
    pub fn register(registry: &mut Registry, limits: &[&'static str]) -> Self {
        let metrics = Self {
            started: Counter::default(),
            completed: Counter::default(),
            failed: Counter::default(),
            stopped: Counter::default(),
            duration: latency_histogram(),
            time_to_first_token: latency_histogram(),
            budget_exceeded: Family::default(),
        };
        registry.register(
            "rover_turns_started",
            "Turns the worker started",
            metrics.started.clone(),
        );
        registry.register(
            "rover_turns_completed",
            "Turns that finished with an answer",
            metrics.completed.clone(),
        );
        registry.register(
            "rover_turns_failed",
            "Turns that finished with an error event",
            metrics.failed.clone(),
        );
        registry.register(
            "rover_turns_stopped",
            "Turns the staff member stopped (ended with abort)",
            metrics.stopped.clone(),
        );
        registry.register(
            "rover_turn_duration_seconds",
            "From a turn's start to its finish",
            metrics.duration.clone(),
        );
        registry.register(
            "rover_turn_time_to_first_token_seconds",
            "From a turn's start to its first streamed text",
            metrics.time_to_first_token.clone(),
        );
        registry.register(
            "rover_budget_exceeded",
            "Turns ended because a token, model-call or tool-call budget was spent",
            metrics.budget_exceeded.clone(),
        );
        for limit in limits {
            drop(
                metrics
                    .budget_exceeded
                    .get_or_create(&LimitLabels { limit }),
            );
        }
        metrics
    }
}

/// Labels of a model call.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabels {
    /// The requested model.
    pub model: String,
    /// `ok` or `error`.
    pub outcome: &'static str,
}

/// Labels of a token count.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    /// The requested model.
    pub model: String,
    /// `input` or `output`.
    pub r#type: &'static str,
}

/// Model calls: latency and tokens.
#[derive(Debug, Clone)]
pub struct ModelMetrics {
    duration: Family<ModelLabels, Histogram, LatencyBuckets>,
    tokens: Family<TokenLabels, Counter>,
    fallbacks: Counter,
}

impl ModelMetrics {
    /// Registers the model families.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            duration: Family::new_with_constructor(LatencyBuckets),
            tokens: Family::default(),
            fallbacks: Counter::default(),
        };
        registry.register(
            "rover_model_fallbacks",
            "Model calls a fallback endpoint answered because the primary failed",
            metrics.fallbacks.clone(),
        );
        registry.register(
            "rover_model_request_duration_seconds",
            "One streamed model call, from request to its last chunk",
            metrics.duration.clone(),
        );
        registry.register(
            "rover_model_tokens",
            "Tokens the model reported, by type (input, output)",
            metrics.tokens.clone(),
        );
        metrics
    }

    /// Counts one model call a fallback answered (the primary having failed); which model is in
    /// the call's `rover.model.attempt` spans and the worker's log.
    pub fn fell_back(&self) {
        self.fallbacks.inc();
    }

    /// Records one model call.
    pub fn observe(&self, model: &str, ok: bool, took: Duration, usage: Option<(u32, u32)>) {
        self.duration
            .get_or_create(&ModelLabels {
                model: model.to_owned(),
                outcome: if ok { "ok" } else { "error" },
            })
            .observe(took.as_secs_f64());
        if let Some((input, output)) = usage {
            for (kind, count) in [("input", input), ("output", output)] {
                self.tokens
                    .get_or_create(&TokenLabels {
                        model: model.to_owned(),
                        r#type: kind,
                    })
                    .inc_by(u64::from(count));
            }
        }
    }
}

/// The gateway's chat traffic.
#[derive(Debug, Clone)]
pub struct GatewayMetrics {
    /// Turns accepted and published.
    pub turns_published: Counter,
    /// SSE streams open now.
    pub streams_open: Gauge,
    /// From the chat request to the first text chunk written to the client, in seconds.
    pub time_to_first_token: Histogram,
    /// The turns and tools queues, read from the broker when scraped.
    pub queues: QueueMetrics,
}

impl GatewayMetrics {
    /// Registers the gateway families.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            turns_published: Counter::default(),
            streams_open: Gauge::default(),
            time_to_first_token: latency_histogram(),
            queues: QueueMetrics::register(registry),
        };
        registry.register(
            "rover_gateway_turns_published",
            "Chat turns the gateway accepted and published",
            metrics.turns_published.clone(),
        );
        registry.register(
            "rover_gateway_sse_streams_open",
            "SSE chat streams open now",
            metrics.streams_open.clone(),
        );
        registry.register(
            "rover_gateway_time_to_first_token_seconds",
            "From a chat request to the first text chunk sent to the client",
            metrics.time_to_first_token.clone(),
        );
        metrics
    }
}

/// The broker's queues as a service sees them when scraped: a queue that grows while nothing
/// consumes it is a service that is down.
#[derive(Debug, Clone, Default)]
pub struct QueueMetrics {
    /// Messages ready in the queue.
    pub messages: Family<QueueLabels, Gauge>,
    /// Consumers subscribed to the queue.
    pub consumers: Family<QueueLabels, Gauge>,
}

impl QueueMetrics {
    /// Registers the queue families.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "rover_queue_messages",
            "Messages ready in a Rover queue, as the broker reported when scraped",
            metrics.messages.clone(),
        );
        registry.register(
            "rover_queue_consumers",
            "Consumers of a Rover queue, as the broker reported when scraped",
            metrics.consumers.clone(),
        );
        metrics
    }

    /// Sets `queue`'s depth.
    pub fn set(&self, queue: &str, messages: u32, consumers: u32) {
        let labels = QueueLabels {
            queue: queue.to_owned(),
        };
        self.messages
            .get_or_create(&labels)
            .set(i64::from(messages));
        self.consumers
            .get_or_create(&labels)
            .set(i64::from(consumers));
    }
}

/// Approvals staff have not answered yet, across every school (no school label: per-school
/// detail is in the database).
#[derive(Debug, Clone, Default)]
pub struct ApprovalMetrics {
    /// Approvals pending now.
    pub waiting: Gauge,
    /// How long the oldest pending approval has waited, in seconds (0 when none).
    pub oldest_wait_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
}

impl ApprovalMetrics {
    /// Registers the approval families.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "rover_approvals_waiting",
            "Approvals pending an answer from staff, across every school, when scraped",
            metrics.waiting.clone(),
        );
        registry.register(
            "rover_approval_oldest_wait_seconds",
            "How long the oldest pending approval has waited, when scraped (0: none pending)",
            metrics.oldest_wait_seconds.clone(),
        );
        metrics
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_render_with_their_labels_and_the_shared_dead_letter_counter() {
        let mut registry = Registry::default();
        let tools = ToolMetrics::register(
            &mut registry,
            "rover_rpc_duration_seconds",
            "Tool RPC round trips",
        );
        let turns = TurnMetrics::register(&mut registry, &["turn_tokens"]);
        let metrics = Metrics::new(registry);
        tools.observe("departments.create", "denied", Duration::from_millis(3));
        turns.started.inc();
        dead_lettered()
            .get_or_create(&QueueLabels {
                queue: "test.turns".to_owned(),
            })
            .inc();
        let text = metrics.render();
        assert!(
            text.contains(
                r#"rover_tool_calls_total{event="departments.create",outcome="denied"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains("rover_turns_started_total 1"), "{text}");
        assert!(
            text.contains(r#"rover_messages_dead_lettered_total{queue="test.turns"}"#),
            "{text}"
        );
        assert!(text.contains("rover_rpc_duration_seconds_bucket"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
