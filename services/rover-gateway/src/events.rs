//! Turn events for the streams of this replica: one broker subscription per gateway, bound to
//! every turn's events (`turn.*`), fanned out in process by turn id.
//!
//! A stream [`TurnEvents::follow`]s its turn: a map entry, no AMQP channel, queue or consumer of
//! its own, so a thousand open streams cost this replica one consumer, and starting to follow
//! never waits on the broker. Any replica can serve any turn because every replica receives
//! every turn's events; one that follows none of a turn's streams drops them by routing key,
//! without decoding. Events published while the broker connection is down are lost to the live
//! streams, as they would be with a queue per stream; the worker records every event before it
//! publishes it, so a client that resumes reads them from Postgres.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rover_contracts::ids::TurnId;
use rover_contracts::wire::{self, TurnEvent};
use rover_messaging::{Broker, ConsumerHandle, ConsumerOptions, MessagingError, Outcome, Topology};
use tokio::sync::mpsc;

/// Unacknowledged events the broker hands this replica at once.
const PREFETCH: u16 = 256;

/// The streams following each turn: a sender per stream, keyed by a registration number.
type Followers = HashMap<TurnId, Vec<(u64, mpsc::UnboundedSender<TurnEvent>)>>;

/// This replica's one subscription to turn events, and the streams that follow them.
#[derive(Debug)]
pub struct TurnEvents {
    followers: Arc<Mutex<Followers>>,
    next: AtomicU64,
    /// Held so the subscription lives as long as the gateway.
    _subscription: ConsumerHandle,
}

impl TurnEvents {
    /// Subscribes to every turn's events on `topology`'s turn-events exchange.
    pub async fn start(broker: &Broker, topology: &Topology) -> Result<Self, MessagingError> {
        let followers: Arc<Mutex<Followers>> = Arc::default();
        let all_turns = rover_messaging::turn_event_routing_key("*");
        let fan_out = Arc::clone(&followers);
        let subscription = broker
            .subscribe(
                &topology.turn_events_exchange(),
                &[&all_turns],
                ConsumerOptions {
                    prefetch: PREFETCH,
                    consumer_tag: String::new(),
                },
                move |delivery| {
                    deliver(&fan_out, &delivery.routing_key, &delivery.body);
                    async { Outcome::Ack }
                },
            )
            .await?;
        Ok(Self {
            followers,
            next: AtomicU64::new(0),
            _subscription: subscription,
        })
    }

    /// Follows `turn`'s live events from now on, until the [`Following`] is dropped.
    pub fn follow(&self, turn: TurnId) -> (Following, mpsc::UnboundedReceiver<TurnEvent>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.followers)
            .entry(turn)
            .or_default()
            .push((id, sender));
        let following = Following {
            followers: Arc::clone(&self.followers),
            turn,
            id,
        };
        (following, receiver)
    }

    /// How many turns this replica follows (for tests and metrics).
    pub fn turns_followed(&self) -> usize {
        lock(&self.followers).len()
    }
}

/// Hands one delivery to the streams following its turn; drops it if there are none.
fn deliver(followers: &Mutex<Followers>, routing_key: &str, body: &[u8]) {
    let Some(turn) = routing_key
        .strip_prefix("turn.")
        .and_then(|id| TurnId::parse(id).ok())
    else {
        return;
    };
    if !lock(followers).contains_key(&turn) {
        return;
    }
    // Decoded outside the lock; the map is looked up again to send.
    let Ok(event) = wire::decode::<TurnEvent>(body) else {
        return;
    };
    if event.turn_id != turn {
        return;
    }
    if let Some(streams) = lock(followers).get(&turn) {
        for (_, sender) in streams {
            let _ = sender.send(event.clone());
        }
    }
}

fn lock(followers: &Mutex<Followers>) -> std::sync::MutexGuard<'_, Followers> {
    followers.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One stream following one turn; dropping it stops the stream's live events (its receiver
/// ends) and forgets the turn once nobody follows it.
#[derive(Debug)]
pub struct Following {
    followers: Arc<Mutex<Followers>>,
    turn: TurnId,
    id: u64,
}

impl Drop for Following {
    fn drop(&mut self) {
        let mut followers = lock(&self.followers);
        if let Some(streams) = followers.get_mut(&self.turn) {
            streams.retain(|(id, _)| *id != self.id);
            if streams.is_empty() {
                followers.remove(&self.turn);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rover_contracts::wire::TurnEventKind;

    use super::*;

    fn event(turn: TurnId, seq: u64) -> Vec<u8> {
        wire::encode(&TurnEvent {
            turn_id: turn,
            seq,
            subagent: None,
            event: TurnEventKind::StartStep,
        })
    }

    #[test]
    fn events_reach_the_followers_of_their_turn_only() {
        let followers: Mutex<Followers> = Mutex::default();
        let (a, b) = (TurnId::new(), TurnId::new());
        let (first, mut first_rx) = mpsc::unbounded_channel();
        let (second, mut second_rx) = mpsc::unbounded_channel();
        lock(&followers).insert(a, vec![(0, first), (1, second)]);
        deliver(&followers, &format!("turn.{a}"), &event(a, 0));
        deliver(&followers, &format!("turn.{b}"), &event(b, 0));
        // A body that claims another turn than its routing key is dropped.
        deliver(&followers, &format!("turn.{a}"), &event(b, 1));
        deliver(&followers, "turn.not-a-uuid", &event(a, 2));
        assert_eq!(first_rx.try_recv().unwrap().seq, 0);
        assert_eq!(second_rx.try_recv().unwrap().seq, 0);
        assert!(first_rx.try_recv().is_err());
        assert!(second_rx.try_recv().is_err());
    }
}
