//! A turn's events: numbered, recorded before they are published, and published for whichever
//! gateway follows the turn.

use std::time::Instant;

use rover_agent::Emitted;
use rover_contracts::wire::{self, TurnEvent, TurnEventKind, TurnRequest};
use rover_messaging::{OutgoingMessage, Publisher};

use crate::Shared;
use crate::resume::Continuation;

/// Numbers, records and publishes a turn's events, in batches: each batch is recorded (for replay
/// and resume) before it is published, so a client that reconnects never misses an event it could
/// not have seen live. Events a client saw before a worker died are held back.
pub(crate) async fn forward_events(
    shared: &Shared,
    request: &TurnRequest,
    mut continuation: Continuation,
    mut receiver: tokio::sync::mpsc::UnboundedReceiver<Emitted>,
    first_token_from: Option<Instant>,
) {
    let turn = request.turn_id;
    let (school, thread) = (request.context.user_details.school.id, request.thread_id);
    let exchange = shared.topology.turn_events_exchange();
    let mut first_token_from = first_token_from;
    // A worker may have died between recording events and publishing them: publish what was
    // recorded again (gateways drop the `seq`s they have), so no client waits for a lost one.
    publish_events(&shared.publisher, &exchange, continuation.recorded()).await;
    let mut batch = Vec::new();
    while receiver.recv_many(&mut batch, 256).await > 0 {
        let events: Vec<TurnEvent> = batch
            .drain(..)
            .filter_map(|emitted| {
                continuation.admit(TurnEvent {
                    turn_id: turn,
                    seq: 0,
                    subagent: emitted.subagent,
                    event: emitted.event,
                })
            })
            .collect();
        if events.is_empty() {
            continue;
        }
        if let Some(from) = first_token_from
            && events
                .iter()
                .any(|e| e.subagent.is_none() && matches!(e.event, TurnEventKind::TextDelta { .. }))
        {
            first_token_from = None;
            shared
                .turns
                .time_to_first_token
                .observe(from.elapsed().as_secs_f64());
        }
        let waiting = match record_events(&shared.pool, school, thread, turn, &events).await {
            Ok(waiting) => waiting,
            Err(error) => {
                tracing::warn!(turn_id = %turn, %error, "could not record turn events");
                None
            }
        };
        if events
            .iter()
            .any(|e| matches!(e.event, TurnEventKind::Finish { .. }))
        {
            rover_settings::fault::point("worker.finish-recorded");
        }
        publish_events(&shared.publisher, &exchange, &events).await;
        if let Some(thread) = waiting {
            tell_waiting(shared, thread).await;
        }
    }
}

/// Tells the workers that a turn of `thread` ended, so a turn queued behind it runs now. Lost
/// word only delays it: a queued turn looks at `open_turns` again every few seconds.
async fn tell_waiting(shared: &Shared, thread: rover_contracts::ids::ThreadId) {
    let key = rover_messaging::ended_routing_key(&thread.to_string());
    let message = OutgoingMessage::new(Vec::new()).transient();
    let exchange = shared.topology.control_exchange();
    if let Err(error) = shared.publisher.publish(&exchange, &key, message).await {
        tracing::warn!(%error, thread_id = %thread, "could not tell the workers a turn ended");
    }
}

/// Publishes a batch of one turn's events, pipelined: every one is sent before the broker's
/// confirms are awaited. They share the turn's routing key, so when one finds no gateway
/// following the turn, none did when it was sent — and one that starts following reads the
/// batch from the record, written before any of it was sent.
pub(crate) async fn publish_events(publisher: &Publisher, exchange: &str, events: &[TurnEvent]) {
    let Some(first) = events.first() else {
        return;
    };
    let key = rover_messaging::turn_event_routing_key(&first.turn_id.to_string());
    let messages = events.iter().map(|event| {
        let message = OutgoingMessage::new(wire::encode(event))
            .with_message_id(format!("{}/{}", event.turn_id, event.seq))
            .transient();
        (key.clone(), message)
    });
    let seqs = || events.iter().map(|e| e.seq).collect::<Vec<_>>();
    match publisher.publish_all(exchange, messages).await {
        Ok(()) => {}
        // Nobody is streaming this turn right now; the recorded events serve a later resume.
        Err(rover_messaging::PublishError::Unroutable { .. }) => {
            tracing::debug!(seqs = ?seqs(), "no gateway is following this turn");
        }
        Err(error) => tracing::warn!(%error, seqs = ?seqs(), "could not publish turn events"),
    }
}

pub(crate) async fn record_events(
    pool: &sqlx::PgPool,
    school: rover_contracts::ids::SchoolId,
    thread: rover_contracts::ids::ThreadId,
    turn: rover_contracts::ids::TurnId,
    events: &[TurnEvent],
) -> Result<Option<rover_contracts::ids::ThreadId>, rover_domain::DomainError> {
    let rows: Vec<(i32, &TurnEvent)> = events
        .iter()
        .map(|e| (i32::try_from(e.seq).unwrap_or(i32::MAX), e))
        .collect();
    let mut tx = rover_domain::begin_tenant(pool, school).await?;
    rover_turnstore::events::record_events(&mut tx, thread, turn, &rows).await?;
    // The turn ends with its `finish`, recorded here before it is published: from then on it no
    // longer counts against its user, school or thread, so a client that saw the end can send
    // the next message at once. A redelivered turn closes again, harmlessly. The thread comes
    // back when turns of it wait behind this one.
    let mut waiting = None;
    if events
        .iter()
        .any(|e| matches!(e.event, TurnEventKind::Finish { .. }))
    {
        waiting = rover_turnstore::open_turns::close_turn(&mut tx, turn).await?;
    }
    tx.commit().await?;
    Ok(waiting)
}
