//! The SSE response of a chat: recorded events first, then live ones, in `seq` order without
//! repeats, as UI message chunks; `[DONE]` after `finish`.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::http::HeaderValue;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use rover_contracts::ids::TurnId;
use rover_contracts::wire::{TurnEvent, TurnEventKind};
use rover_telemetry::metrics::{Gauge, Histogram};
use serde_json::json;
use tokio::sync::mpsc;
use tracing::Instrument as _;

use crate::events::Following;
use crate::limits::StreamSlot;
use crate::observe::TRACE_HEADER;
use crate::state::AppState;
use crate::ui_chunks::ChunkMapper;

/// The SSE response: recorded events first, then live ones, in `seq` order without repeats, as UI
/// message chunks; `[DONE]` after `finish`. `slot`, the caller's resumed-stream slot, is released when
/// the stream ends or is dropped.
#[allow(clippy::too_many_arguments)]
pub(super) fn stream_response(
    state: &AppState,
    turn: TurnId,
    trace: String,
    recorded: Vec<TurnEvent>,
    following: Option<Following>,
    live: mpsc::UnboundedReceiver<TurnEvent>,
    requested: Option<Instant>,
    slot: Option<StreamSlot>,
) -> Response {
    let settings = &state.settings.chat;
    let idle = Duration::from_millis(settings.idle_timeout_ms);
    let order = Ordering {
        next: 0,
        pending: BTreeMap::new(),
    };
    let mapper = ChunkMapper {
        turn,
        trace: trace.clone(),
        subagent_text: HashMap::new(),
    };
    // The stream outlives the request's span: its own span ends when the stream does.
    let span = tracing::info_span!(
        "rover.gateway.stream",
        turn_id = %turn,
        replayed = recorded.len(),
        rover.turn.finish_reason = tracing::field::Empty,
    );
    let first_token = requested.map(|at| (at, state.metrics.time_to_first_token.clone()));
    let state = StreamState {
        recorded: recorded.into_iter(),
        live,
        order,
        mapper,
        _following: following,
        idle,
        done: false,
        span,
        first_token,
        _open: OpenStream::new(&state.metrics.streams_open),
        _slot: slot,
    };
    let events = futures::stream::unfold(state, |state| {
        let span = state.span.clone();
        next_events(state).instrument(span)
    })
    .flat_map(futures::stream::iter);
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_millis(settings.keepalive_ms)))
        .into_response();
    let headers = response.headers_mut();
    headers.insert(
        "x-vercel-ai-ui-message-stream",
        HeaderValue::from_static("v1"),
    );
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    if let Ok(value) = HeaderValue::from_str(&trace) {
        headers.insert(TRACE_HEADER, value);
    }
    response
}

pub(super) struct StreamState {
    recorded: std::vec::IntoIter<TurnEvent>,
    live: mpsc::UnboundedReceiver<TurnEvent>,
    order: Ordering,
    mapper: ChunkMapper,
    /// Held so the turn is followed exactly as long as the stream lives (dropped on disconnect).
    _following: Option<Following>,
    idle: Duration,
    done: bool,
    span: tracing::Span,
    /// When the chat request arrived, until the first text is sent (time to first token).
    first_token: Option<(Instant, Histogram)>,
    _open: OpenStream,
    /// The caller's resumed-stream slot (resumes only), held for as long as the stream lives.
    _slot: Option<StreamSlot>,
}

/// Counts a stream in the open-streams gauge for as long as it lives.
pub(super) struct OpenStream(Gauge);

impl OpenStream {
    fn new(gauge: &Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Puts events back in `seq` order and drops repeats.
pub(super) struct Ordering {
    next: u64,
    pending: BTreeMap<u64, TurnEvent>,
}

impl Ordering {
    fn push(&mut self, event: TurnEvent) -> Vec<TurnEvent> {
        if event.seq >= self.next {
            self.pending.insert(event.seq, event);
        }
        let mut ready = Vec::new();
        while let Some(event) = self.pending.remove(&self.next) {
            self.next += 1;
            ready.push(event);
        }
        ready
    }
}

pub(super) async fn next_events(
    mut state: StreamState,
) -> Option<(Vec<Result<Event, Infallible>>, StreamState)> {
    if state.done {
        return None;
    }
    let ready = match state.recorded.next() {
        Some(event) => state.order.push(event),
        None => match tokio::time::timeout(state.idle, state.live.recv()).await {
            Ok(Some(event)) => state.order.push(event),
            // The subscription ended (a finished turn being replayed has none): end the stream.
            Ok(None) => {
                state.done = true;
                return Some((vec![Ok(Event::default().data("[DONE]"))], state));
            }
            Err(_) => {
                state.done = true;
                let chunks = [
                    json!({ "type": "error", "errorText": "The assistant stopped responding." }),
                    json!({ "type": "finish", "finishReason": "error" }),
                ];
                let mut events: Vec<_> = chunks
                    .iter()
                    .map(|c| Ok(Event::default().data(c.to_string())))
                    .collect();
                events.push(Ok(Event::default().data("[DONE]")));
                return Some((events, state));
            }
        },
    };
    let mut out = Vec::new();
    for event in ready {
        if let TurnEventKind::Finish { reason, .. } = &event.event {
            state
                .span
                .record("rover.turn.finish_reason", tracing::field::debug(reason));
        }
        if matches!(event.event, TurnEventKind::TextDelta { .. })
            && event.subagent.is_none()
            && let Some((requested, histogram)) = state.first_token.take()
        {
            histogram.observe(requested.elapsed().as_secs_f64());
        }
        let finished = matches!(event.event, TurnEventKind::Finish { .. });
        out.extend(
            state
                .mapper
                .chunks(event)
                .into_iter()
                .map(|chunk| Ok(Event::default().data(chunk.to_string()))),
        );
        if finished {
            state.done = true;
            out.push(Ok(Event::default().data("[DONE]")));
            break;
        }
    }
    Some((out, state))
}
