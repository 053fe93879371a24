//! Stopping a turn: the staff member's Stop (or a newer message that interrupts the turn) reaches
//! the agent loop as a [`Stop`]. From then on nothing new starts — no model call, no tool call —
//! a model stream in progress is cut where it is, and calls already running finish (a tool
//! server's write commits or not, atomically) and are kept. What was said and done stays in the
//! thread's history.

use std::sync::Arc;

use tokio::sync::watch;

/// The stop signal of one turn, shared by everything that runs in it (a subagent's loop too).
/// Cloning shares the signal; requesting is idempotent.
#[derive(Debug, Clone)]
pub struct Stop(Arc<watch::Sender<bool>>);

impl Default for Stop {
    fn default() -> Self {
        Self::new()
    }
}

impl Stop {
    /// A signal not yet requested.
    pub fn new() -> Self {
        Self(Arc::new(watch::channel(false).0))
    }

    /// Asks the turn to stop.
    pub fn request(&self) {
        self.0.send_replace(true);
    }

    /// Whether the turn was asked to stop.
    pub fn is_requested(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the turn is asked to stop (at once if it was).
    pub async fn requested(&self) {
        let mut receiver = self.0.subscribe();
        // The sender lives as long as `self`, so waiting ends only with a request.
        let _ = receiver.wait_for(|stopped| *stopped).await;
    }
}

/// The result a call gets when the turn stopped before it ran: the model reads it on the next
/// turn, and the Hub shows the call as not done.
pub(crate) const NOT_RUN: &str =
    "Not done: the staff member stopped the reply before this call ran.";

#[cfg(test)]
mod tests {
    use super::Stop;

    #[tokio::test]
    async fn a_request_wakes_every_waiter_and_stays() {
        let stop = Stop::new();
        assert!(!stop.is_requested());
        let waiter = tokio::spawn({
            let stop = stop.clone();
            async move { stop.requested().await }
        });
        stop.request();
        waiter.await.unwrap();
        assert!(stop.is_requested());
        // Asked again, and waited on after the fact: both at once.
        stop.request();
        stop.requested().await;
    }
}
