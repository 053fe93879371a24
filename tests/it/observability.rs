//! One turn, one trace: the three binaries export OTLP to a receiver in this test, and the trace
//! is checked for its shape, its GenAI attributes and the absence of message text and argument
//! values. And `/metrics` on each service moves as a turn runs.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use prost::Message as _;
use serde_json::Value;
use tokio::sync::watch;

use crate::stack::Stack;

/// A span as received, flattened.
#[derive(Debug, Clone)]
struct Received {
    service: String,
    trace_id: String,
    span_id: String,
    parent_id: String,
    name: String,
    attributes: HashMap<String, String>,
    /// Every attribute value of the span's events (logs recorded inside it).
    event_values: Vec<String>,
    /// The trace ids of the span's links.
    linked_traces: Vec<String>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(value: Option<&AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(any_value::Value::ArrayValue(array)) => array
            .values
            .iter()
            .map(|v| text(Some(v)))
            .collect::<Vec<_>>()
            .join(","),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

/// An OTLP/HTTP (protobuf) trace receiver on a free port.
struct Receiver {
    addr: SocketAddr,
    spans: Arc<Mutex<Vec<Received>>>,
    batches: watch::Receiver<usize>,
}

type ReceiverState = (Arc<Mutex<Vec<Received>>>, Arc<watch::Sender<usize>>);

async fn export(
    State((spans, batches)): State<ReceiverState>,
    body: Bytes,
) -> impl axum::response::IntoResponse {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP trace export");
    let mut received = Vec::new();
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .map(|kv| text(kv.value.as_ref()))
            .unwrap_or_default();
        for span in resource_spans.scope_spans.into_iter().flat_map(|s| s.spans) {
            received.push(Received {
                service: service.clone(),
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent_id: hex(&span.parent_span_id),
                name: span.name,
                attributes: span
                    .attributes
                    .iter()
                    .map(|kv| (kv.key.clone(), text(kv.value.as_ref())))
                    .collect(),
                event_values: span
                    .events
                    .iter()
                    .flat_map(|e| e.attributes.iter().map(|kv| text(kv.value.as_ref())))
                    .collect(),
                linked_traces: span.links.iter().map(|l| hex(&l.trace_id)).collect(),
            });
        }
    }
    spans.lock().unwrap().extend(received);
    batches.send_modify(|n| *n += 1);
    (
        [("content-type", "application/x-protobuf")],
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
}

impl Receiver {
    async fn start() -> Receiver {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let (sender, batches) = watch::channel(0usize);
        let router = axum::Router::new()
            .route("/v1/traces", axum::routing::post(export))
            .with_state((spans.clone(), Arc::new(sender)));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await });
        Receiver {
            addr,
            spans,
            batches,
        }
    }

    /// Waits (on each export, not on a clock) until `done` holds for the spans of `trace`.
    async fn until(&mut self, trace: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let wait = async {
            loop {
                let spans: Vec<Received> = self
                    .spans
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|s| s.trace_id == trace)
                    .cloned()
                    .collect();
                if done(&spans) {
                    return spans;
                }
                self.batches.changed().await.unwrap();
            }
        };
        match tokio::time::timeout(Duration::from_secs(60), wait).await {
            Ok(spans) => spans,
            Err(_) => {
                let names: Vec<String> = self
                    .spans
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|s| format!("{} {} {}", s.service, s.trace_id, s.name))
                    .collect();
                panic!("the trace never completed; received: {names:#?}")
            }
        }
    }
}

/// `span` and its ancestors among `spans`, nearest first, as far as the parents are there.
fn chain<'a>(spans: &'a [Received], span: &'a Received) -> Vec<&'a Received> {
    let by_id: HashMap<&str, &Received> = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let mut chain = vec![span];
    while let Some(parent) = by_id.get(chain.last().unwrap().parent_id.as_str()) {
        chain.push(parent);
    }
    chain
}

/// Every leaf string of a JSON value.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

#[tokio::test]
async fn one_turn_is_one_trace_across_the_three_services() {
    let mut receiver = Receiver::start().await;
    let endpoint = format!("http://{}", receiver.addr);
    let stack = Stack::start_with(
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ],
    )
    .await;
    // The Hub sends its own trace context; Rover links to it but runs the turn in a trace of its
    // own, because the trace id is written into audit rows and must not be the client's choice.
    let hub_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let message = "Assign Okello to teach Physics in S1 Blue";
    // A UUID chat id is the thread's id, which the GenAI spans carry as the conversation.
    let chat_id = uuid::Uuid::new_v4().to_string();
    let response = stack
        .http
        .post(format!("http://{}/api/chat", stack.gateway))
        .bearer_auth(stack.token("dos@hill.school"))
        .header("traceparent", format!("00-{hub_trace}-00f067aa0ba902b7-01"))
        .json(&serde_json::json!({
            "id": chat_id,
            "trigger": "submit-message",
            "messages": [{ "id": "u1", "role": "user", "parts": [{ "type": "text", "text": message }] }],
        }))
        .send()
        .await
        .unwrap();
    let turn = crate::stack::read_stream(response).await;
    assert_eq!(turn.finish_reason(), Some("stop"), "{:#?}", turn.chunks);
    assert_eq!(turn.tools(), ["task", "assign_subject_teacher"]);
    // The client can quote the trace: in a header and in the stream's metadata.
    let trace = turn.headers["x-rover-trace-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(trace.len(), 32, "{trace}");
    assert_ne!(
        trace, hub_trace,
        "the trace id is the gateway's, not the client's"
    );
    assert_eq!(
        turn.of_type("start")[0]["messageMetadata"]["traceId"],
        trace.as_str()
    );
    let trace = trace.as_str();

    let wanted = [
        ("rover-gateway", "POST /api/chat"),
        ("rover-gateway", "rover.gateway.chat"),
        ("rover-gateway", "rover.gateway.stream"),
        ("rover-worker", "rover.worker.turn"),
        ("rover-worker", "invoke_agent director_of_studies"),
        ("rover-toolserver", "rover.toolserver.permission"),
        ("rover-toolserver", "assign_subject_teacher"),
    ];
    let spans = receiver
        .until(trace, |spans| {
            // Spans end (and are exported) in their own time: a parent that outlives its child
            // (the consumer span outlives the turn) may arrive in a later export. Wait for the
            // whole chain; a chain that never closes fails the wait.
            wanted.iter().all(|(service, name)| {
                spans
                    .iter()
                    .any(|s| s.service == *service && s.name == *name)
            }) && spans.iter().any(|s| {
                s.service == "rover-toolserver"
                    && s.name == "assign_subject_teacher"
                    && chain(spans, s).last().map(|top| top.name.as_str()) == Some("POST /api/chat")
            })
        })
        .await;

    // One trace id across the three services, and nothing of this turn outside it.
    let services: HashSet<&str> = spans.iter().map(|s| s.service.as_str()).collect();
    assert_eq!(
        services,
        HashSet::from(["rover-gateway", "rover-worker", "rover-toolserver"])
    );
    let all = receiver.spans.lock().unwrap().clone();
    for name in ["rover.worker.turn", "rover.toolserver.execute", "chat "] {
        assert!(
            all.iter()
                .filter(|s| s.name == name || (name.ends_with(' ') && s.name.starts_with(name)))
                .all(|s| s.trace_id == trace),
            "a {name} span is outside the turn's trace"
        );
    }

    // The parent chain from the tool server's SQL span up to the HTTP request is unbroken.
    let sql = spans
        .iter()
        .find(|s| {
            s.service == "rover-toolserver"
                && s.name == "assign_subject_teacher"
                && s.attributes.get("db.system.name").map(String::as_str) == Some("postgresql")
        })
        .expect("the tool server's SQL span for the write");
    let chain = chain(&spans, sql);
    let top = chain.last().unwrap();
    assert_eq!(top.name, "POST /api/chat", "the chain broke at {top:#?}");
    assert_eq!(top.attributes["http.route"], "/api/chat");
    assert_eq!(top.attributes["http.response.status_code"], "200");
    assert!(
        top.parent_id.is_empty(),
        "the HTTP span is a root: {top:#?}"
    );
    assert_eq!(
        top.linked_traces,
        [hub_trace],
        "the HTTP span links to the Hub's trace"
    );
    // The write's audit row quotes the turn's trace, never the client-chosen one.
    for (id, rows) in [(trace, 1), (hub_trace, 0)] {
        let sql = format!("SELECT count(*) FROM audit_log WHERE trace_id = '{id}'");
        assert_eq!(stack.count(&sql).await, rows, "audit rows with trace {id}");
    }
    let path: Vec<(&str, &str)> = chain
        .iter()
        .rev()
        .map(|s| (s.service.as_str(), s.name.as_str()))
        .collect();
    let expected_in_order = [
        ("rover-gateway", "POST /api/chat"),
        ("rover-gateway", "rover.gateway.chat"),
        ("rover-worker", "rover.worker.turn"),
        ("rover-worker", "invoke_agent rover"),
        ("rover-worker", "execute_tool task"),
        ("rover-worker", "invoke_agent director_of_studies"),
        ("rover-worker", "execute_tool assign_subject_teacher"),
        ("rover-worker", "rover.messaging.rpc"),
        ("rover-toolserver", "rover.toolserver.execute"),
        ("rover-toolserver", "rover.toolserver.posture"),
        ("rover-toolserver", "assign_subject_teacher"),
    ];
    let mut at = 0;
    for step in &path {
        if at < expected_in_order.len() && *step == expected_in_order[at] {
            at += 1;
        }
    }
    assert_eq!(
        at,
        expected_in_order.len(),
        "the chain {path:#?} misses a hop of {expected_in_order:#?}"
    );
    // The subagent's tool call hangs under its `task` call.
    let task = chain
        .iter()
        .find(|s| s.attributes.get("gen_ai.tool.name").map(String::as_str) == Some("task"))
        .expect("the task call is on the chain");
    assert!(task.attributes.contains_key("gen_ai.tool.call.id"));

    // GenAI semantic conventions: every model call is `chat {model}`, every tool call
    // `execute_tool {tool}`, every agent run `invoke_agent {agent}`, each naming the provider
    // (where it calls a model) and the conversation — the chat.
    let chats: Vec<&Received> = spans
        .iter()
        .filter(|s| s.name.starts_with("chat "))
        .collect();
    assert!(
        chats.len() >= 4,
        "two steps for Rover, two for the specialist"
    );
    for chat in &chats {
        assert_eq!(
            chat.name,
            format!("chat {}", chat.attributes["gen_ai.request.model"])
        );
        for key in [
            "gen_ai.operation.name",
            "gen_ai.provider.name",
            "gen_ai.request.model",
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens",
            "gen_ai.response.finish_reasons",
        ] {
            assert!(
                chat.attributes.contains_key(key),
                "{key} missing on {chat:#?}"
            );
        }
        assert_eq!(chat.attributes["gen_ai.operation.name"], "chat");
        assert_eq!(chat.attributes["gen_ai.provider.name"], "openai");
    }
    let genai: Vec<&Received> = spans
        .iter()
        .filter(|s| {
            s.service == "rover-worker" && s.attributes.contains_key("gen_ai.operation.name")
        })
        .collect();
    for (operation, subject) in [
        ("invoke_agent", "gen_ai.agent.name"),
        ("execute_tool", "gen_ai.tool.name"),
        ("chat", "gen_ai.request.model"),
    ] {
        let of: Vec<&&Received> = genai
            .iter()
            .filter(|s| s.attributes["gen_ai.operation.name"] == operation)
            .collect();
        assert!(!of.is_empty(), "no {operation} span");
        for span in of {
            assert_eq!(
                span.name,
                format!("{operation} {}", span.attributes[subject])
            );
        }
    }
    // The chat's thread: keyed by (school, user, chat id), so not the chat id itself.
    let thread: String = sqlx::query_scalar("SELECT id::text FROM threads")
        .fetch_one(&stack.owner)
        .await
        .unwrap();
    assert_ne!(thread, chat_id);
    for span in &genai {
        assert_eq!(
            span.attributes.get("gen_ai.conversation.id"),
            Some(&thread),
            "{span:#?} names the chat's thread"
        );
    }
    let permission = spans
        .iter()
        .find(|s| s.name == "rover.toolserver.permission")
        .unwrap();
    assert!(!permission.attributes["rover.permission.rule"].is_empty());
    assert_eq!(permission.attributes["rover.permission.allowed"], "true");

    // No message text, model output or argument value anywhere in the trace.
    let mut secrets = vec![message.to_owned(), "Okello".to_owned(), turn.text()];
    for chunk in turn
        .of_type("tool-input-available")
        .into_iter()
        .chain(turn.of_type("tool-output-available"))
        .chain(turn.of_type("data-subagent"))
    {
        let mut values = Vec::new();
        strings(&chunk["input"], &mut values);
        strings(&chunk["output"]["data"], &mut values);
        strings(&chunk["data"]["text"], &mut values);
        // Enum-like identifiers (`director_of_studies`) are names, not values worth hiding.
        secrets.extend(
            values
                .into_iter()
                .filter(|v| v.len() >= 6 && !v.chars().all(|c| c.is_ascii_lowercase() || c == '_')),
        );
    }
    for span in &all {
        for value in span.attributes.values().chain(&span.event_values) {
            for secret in &secrets {
                assert!(
                    !value.contains(secret.as_str()),
                    "{:?} leaked into span {} ({})",
                    secret,
                    span.name,
                    span.service
                );
            }
        }
    }
}

/// The value of the sample `name` (with its labels, as rendered), or 0 when absent.
pub(crate) fn sample(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|line| {
            let (key, value) = line.rsplit_once(' ')?;
            (key == name).then(|| value.parse().ok()).flatten()
        })
        .unwrap_or(0.0)
}

pub(crate) async fn scrape(stack: &Stack, addr: SocketAddr) -> String {
    let response = stack
        .http
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    response.text().await.unwrap()
}

#[tokio::test]
async fn metrics_move_as_a_turn_runs_on_each_service() {
    let stack = Stack::start().await;
    // The gateway's metrics are on a listener of their own, not on the public port.
    let public = stack
        .http
        .get(format!("http://{}/metrics", stack.gateway))
        .send()
        .await
        .unwrap();
    assert_eq!(public.status(), 404);
    let services = [
        stack.gateway_metrics,
        stack.worker_http,
        stack.toolserver_http,
    ];
    let mut before = Vec::new();
    for addr in services {
        before.push(scrape(&stack, addr).await);
    }
    let turn = stack
        .say(
            "amina@hill.school",
            "chat-metrics",
            "Record attendance for S1 Blue: everyone present except Nakato",
        )
        .await;
    assert_eq!(turn.finish_reason(), Some("stop"));
    let mut after = Vec::new();
    for addr in services {
        after.push(scrape(&stack, addr).await);
    }
    let moved =
        |service: usize, name: &str| sample(&after[service], name) - sample(&before[service], name);

    // Gateway: one turn published, its stream closed again, one time to first token.
    assert_eq!(moved(0, "rover_gateway_turns_published_total"), 1.0);
    assert_eq!(sample(&after[0], "rover_gateway_sse_streams_open"), 0.0);
    assert_eq!(
        moved(0, "rover_gateway_time_to_first_token_seconds_count"),
        1.0
    );

    // Worker: the turn, its model calls and tokens, its tool calls by event and outcome.
    assert_eq!(moved(1, "rover_turns_started_total"), 1.0);
    assert_eq!(moved(1, "rover_turns_completed_total"), 1.0);
    assert_eq!(moved(1, "rover_turns_failed_total"), 0.0);
    assert_eq!(moved(1, "rover_turn_duration_seconds_count"), 1.0);
    assert_eq!(
        moved(1, "rover_turn_time_to_first_token_seconds_count"),
        1.0
    );
    assert_eq!(
        moved(
            1,
            r#"rover_tool_calls_total{event="record.attendance",outcome="ok"}"#
        ),
        1.0,
        "{}",
        after[1]
    );
    assert_eq!(
        moved(
            1,
            r#"rover_rpc_duration_seconds_count{event="record.attendance",outcome="ok"}"#
        ),
        1.0
    );
    // Rover's two steps and the specialist's own.
    assert!(
        moved(
            1,
            r#"rover_model_request_duration_seconds_count{model="rover-scripted",outcome="ok"}"#
        ) > 2.0
    );
    assert!(
        moved(
            1,
            r#"rover_model_tokens_total{model="rover-scripted",type="input"}"#
        ) > 0.0
    );

    // Tool server: the same calls as the pipeline decided them.
    assert_eq!(
        moved(
            2,
            r#"rover_tool_calls_total{event="record.attendance",outcome="ok"}"#
        ),
        1.0,
        "{}",
        after[2]
    );
    assert_eq!(
        moved(
            2,
            r#"rover_tool_execute_duration_seconds_count{event="record.attendance",outcome="ok"}"#
        ),
        1.0
    );
}
