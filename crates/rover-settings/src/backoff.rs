//! The one retry delay Rover's loops share: exponential, from a first delay, doubling, capped.

use std::time::Duration;

/// Exponential backoff: `first`, then twice as long each time, never above `max`; `reset` starts
/// over (after a success).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// Delays from `first` doubling up to `max` (`max` below `first` is `first`).
    pub fn new(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max: max.max(first),
            next: first,
        }
    }

    /// The delay to wait now; the next one doubles.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        delay
    }

    /// The delay [`Backoff::next_delay`] will give next.
    pub fn peek(&self) -> Duration {
        self.next
    }

    /// Starts over from the first delay.
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_and_reset_starts_over() {
        let ms = Duration::from_millis;
        let mut backoff = Backoff::new(ms(100), ms(450));
        let delays: Vec<_> = (0..5).map(|_| backoff.next_delay()).collect();
        assert_eq!(delays, [ms(100), ms(200), ms(400), ms(450), ms(450)]);
        backoff.reset();
        assert_eq!(backoff.peek(), ms(100));
        assert_eq!(Backoff::new(ms(50), ms(10)).next_delay(), ms(50));
    }
}
