//! The control exchange, as a worker follows it: requests to stop a turn (`stop.<turn_id>`, from
//! a gateway) reach the worker running it, and word that a thread's turn ended
//! (`ended.<thread_id>`, from a worker) wakes the turns of that thread queued behind it.
//!
//! Every worker binds a server-named queue of its own with both patterns: a stop reaches
//! whichever worker holds the turn without anyone knowing which. The messages are hints that
//! make things prompt, never the only record: the stop is in `open_turns` before it is
//! published (a turn sees it at its next recorded step, or at its start when redelivered), and
//! a queued turn looks at `open_turns` again now and then while it waits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rover_agent::Stop;
use rover_contracts::ids::{ThreadId, TurnId};
use rover_messaging::{Broker, ConsumerHandle, ConsumerOptions, MessagingError, Outcome, Topology};
use tokio::sync::Notify;

/// How long a queued turn waits for word that its thread's turn ended before it looks at
/// `open_turns` again (the word may be lost while a broker connection is down).
const RECHECK: Duration = Duration::from_secs(2);

/// The turns this worker runs (to stop them) and the threads whose turns wait here.
#[derive(Debug, Default)]
pub(crate) struct Control {
    running: Mutex<HashMap<TurnId, Stop>>,
    waiting: Mutex<HashMap<ThreadId, Arc<Notify>>>,
}

impl Control {
    /// Follows the control exchange; the subscription lives as long as the handle.
    pub(crate) async fn follow(
        self: &Arc<Self>,
        broker: &Broker,
        topology: &Topology,
    ) -> Result<ConsumerHandle, MessagingError> {
        let control = Arc::clone(self);
        let (stops, ended) = (
            rover_messaging::stop_routing_key("*"),
            rover_messaging::ended_routing_key("*"),
        );
        broker
            .subscribe(
                &topology.control_exchange(),
                &[&stops, &ended],
                ConsumerOptions {
                    prefetch: 64,
                    consumer_tag: String::new(),
                },
                move |delivery| {
                    control.receive(&delivery.routing_key);
                    async { Outcome::Ack }
                },
            )
            .await
    }

    fn receive(&self, routing_key: &str) {
        if let Some(turn) = routing_key
            .strip_prefix("stop.")
            .and_then(|id| TurnId::parse(id).ok())
        {
            if let Some(stop) = lock(&self.running).get(&turn) {
                tracing::info!(turn_id = %turn, "asked to stop the turn");
                stop.request();
            }
        } else if let Some(thread) = routing_key
            .strip_prefix("ended.")
            .and_then(|id| ThreadId::parse(id).ok())
            && let Some(waiting) = lock(&self.waiting).get(&thread)
        {
            waiting.notify_waiters();
        }
    }

    /// Registers `turn` as running here until the guard is dropped; its stop signal.
    pub(crate) fn running(self: &Arc<Self>, turn: TurnId) -> (Stop, Running) {
        let stop = Stop::new();
        lock(&self.running).insert(turn, stop.clone());
        let guard = Running {
            control: Arc::clone(self),
            turn,
        };
        (stop, guard)
    }

    /// Waits until `ready` says the turn may run, asking again whenever a turn of `thread` ends
    /// (and every few seconds). `ready` is asked after the worker listens, so no word is missed.
    /// After `limit` the turn runs anyway: a turn ahead that runs ends within its own deadline,
    /// so one that has not is not running (say, queued behind this one on a worker whose every
    /// prefetched turn waits), and waiting longer would only hold both.
    pub(crate) async fn wait_turn<F, Fut, E>(
        &self,
        thread: ThreadId,
        limit: Duration,
        mut ready: F,
    ) -> Result<(), E>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<bool, E>>,
    {
        let notify = Arc::clone(lock(&self.waiting).entry(thread).or_default());
        let waiting = async {
            loop {
                let ended = notify.notified();
                tokio::pin!(ended);
                ended.as_mut().enable();
                match ready().await {
                    Ok(true) => break Ok(()),
                    Ok(false) => {}
                    Err(error) => break Err(error),
                }
                let _ = tokio::time::timeout(RECHECK, ended).await;
            }
        };
        let result = tokio::time::timeout(limit, waiting).await.unwrap_or_else(|_| {
            tracing::warn!(thread_id = %thread, "an earlier turn of the thread has not ended; running anyway");
            Ok(())
        });
        let mut waiting = lock(&self.waiting);
        // The last waiter of the thread removes its entry (the map holds one reference).
        if Arc::strong_count(&notify) == 2 {
            waiting.remove(&thread);
        }
        result
    }
}

/// A turn registered as running on this worker; dropping it forgets the turn.
#[derive(Debug)]
pub(crate) struct Running {
    control: Arc<Control>,
    turn: TurnId,
}

impl Drop for Running {
    fn drop(&mut self) {
        lock(&self.control.running).remove(&self.turn);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rover_contracts::ids::TurnId;

    use super::Control;

    #[test]
    fn a_stop_reaches_the_turn_it_names_while_it_runs_here() {
        let control = Arc::new(Control::default());
        let (turn, other) = (TurnId::new(), TurnId::new());
        let (stop, running) = control.running(turn);
        let (other_stop, _other_running) = control.running(other);
        control.receive("stop.not-a-turn");
        control.receive(&format!("ended.{turn}"));
        assert!(!stop.is_requested() && !other_stop.is_requested());
        control.receive(&format!("stop.{turn}"));
        assert!(stop.is_requested());
        assert!(!other_stop.is_requested(), "only the turn named");
        // Once the turn has ended here, a late stop finds nothing to stop.
        drop(running);
        assert!(!control.running.lock().unwrap().contains_key(&turn));
        control.receive(&format!("stop.{turn}"));
    }
}
