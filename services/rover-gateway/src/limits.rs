//! In-process limits of one gateway replica: open streams per user ([`StreamSlots`]) and bearer-token
//! failures per client address ([`FailureLimiter`]), and who that client is ([`TrustedProxies`]).
//! Both limits are small maps behind a mutex that is never held across an `.await`; both are per
//! replica, so N replicas allow up to N times as much.

use std::collections::HashMap;
use std::net::IpAddr;
use std::str::FromStr as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rover_contracts::ids::UserId;

/// How many streams (resumed turns) each user has open on this replica, bounded by `max` per user.
#[derive(Debug)]
pub struct StreamSlots {
    max: usize,
    /// Users with at least one open stream; an entry goes when its count reaches zero.
    open: Mutex<HashMap<UserId, usize>>,
}

impl StreamSlots {
    /// At most `max` open streams per user; `0` means no limit.
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max,
            open: Mutex::default(),
        })
    }

    /// A slot for one more stream of `user`, or `None` when they already have `max` open. The
    /// stream counts until the slot is dropped.
    pub fn try_acquire(self: &Arc<Self>, user: UserId) -> Option<StreamSlot> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(user).or_default();
        if self.max > 0 && *count >= self.max {
            if *count == 0 {
                open.remove(&user);
            }
            return None;
        }
        *count += 1;
        Some(StreamSlot {
            slots: Arc::clone(self),
            user,
        })
    }

    /// How many streams `user` has open on this replica.
    pub fn open(&self, user: UserId) -> usize {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(&user).copied().unwrap_or(0)
    }
}

/// One open stream; releases itself when dropped (the stream ended or the client went away).
#[derive(Debug)]
pub struct StreamSlot {
    slots: Arc<StreamSlots>,
    user: UserId,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self
            .slots
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.user) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.user);
            }
        }
    }
}

/// An `http.trusted_proxies` entry that is neither an address nor a CIDR range (the entry, trimmed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("http.trusted_proxies: `{0}` is not an address or CIDR range")]
pub struct BadTrustedProxy(pub String);

/// The reverse proxies whose `X-Forwarded-For` header names the client (`http.trusted_proxies`).
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<ipnet::IpNet>);

impl TrustedProxies {
    /// Parses addresses (`10.1.2.3`) and CIDR ranges (`10.0.0.0/8`); anything else is an error
    /// naming the entry.
    pub fn parse(entries: &[String]) -> Result<Self, BadTrustedProxy> {
        entries
            .iter()
            .map(|entry| {
                let entry = entry.trim();
                ipnet::IpNet::from_str(entry)
                    .or_else(|_| IpAddr::from_str(entry).map(ipnet::IpNet::from))
                    .map_err(|_| BadTrustedProxy(entry.to_owned()))
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Whether `address` is one of the trusted proxies.
    pub(crate) fn trusts(&self, address: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&address))
    }

    /// The client a request came from: the peer, unless the peer is a trusted proxy; then the
    /// last `X-Forwarded-For` address (every proxy appends the address it was called from) that
    /// is not a trusted proxy itself. Only the trusted part of the header is believed: what a
    /// client wrote in front of it is never reached.
    pub fn client(&self, peer: IpAddr, forwarded_for: Option<&str>) -> IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        let mut client = peer;
        for hop in forwarded_for.unwrap_or_default().rsplit(',') {
            match IpAddr::from_str(hop.trim()) {
                Ok(address) => {
                    client = address;
                    if !self.trusts(address) {
                        break;
                    }
                }
                // A hop that is no address: the proxy that wrote it is the last one believed.
                Err(_) => break,
            }
        }
        client
    }
}

/// Counts failed bearer tokens per client address in fixed windows; a client over the limit gets
/// 429 instead of 401 for its failures until its window ends.
///
/// Tokens are verified before the limit is consulted, so a valid token is never refused by it:
/// behind a NAT or an ingress, one client's bad tokens cannot lock the others out. Keyed by the
/// client address (see [`TrustedProxies`]), not by the token's (unverified) subject: anyone can
/// write any subject into a forged token. Successful requests neither count nor reset the count. The map holds at most `capacity`
/// clients; when it is full of live windows, a new client is not tracked (it fails open) rather
/// than evicting one that is being limited.
#[derive(Debug)]
pub(crate) struct FailureLimiter {
    max_failures: u32,
    window: Duration,
    capacity: usize,
    clients: Mutex<HashMap<IpAddr, Window>>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    failures: u32,
}

impl FailureLimiter {
    /// `max_failures` per `window` per client (`0` turns the limiter off), tracking at most
    /// `capacity` clients.
    pub(crate) fn new(max_failures: u32, window: Duration, capacity: usize) -> Self {
        Self {
            max_failures,
            window,
            capacity,
            clients: Mutex::default(),
        }
    }

    /// `Err(seconds until the window ends)` when `client` is over the limit.
    pub(crate) fn check(&self, client: IpAddr, now: Instant) -> Result<(), u64> {
        if self.max_failures == 0 {
            return Ok(());
        }
        let clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        match clients.get(&client) {
            Some(w) if w.failures >= self.max_failures && now < w.started + self.window => {
                let left = (w.started + self.window).saturating_duration_since(now);
                Err(left.as_secs() + u64::from(left.subsec_nanos() > 0))
            }
            _ => Ok(()),
        }
    }

    /// Records one failed token from `client`.
    pub(crate) fn record_failure(&self, client: IpAddr, now: Instant) {
        if self.max_failures == 0 {
            return;
        }
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if !clients.contains_key(&client) && clients.len() >= self.capacity {
            let window = self.window;
            clients.retain(|_, w| now < w.started + window);
            if clients.len() >= self.capacity {
                tracing::warn!(
                    capacity = self.capacity,
                    "too many clients failing authentication to track; not limiting a new one"
                );
                return;
            }
        }
        let entry = clients.entry(client).or_insert(Window {
            started: now,
            failures: 0,
        });
        if now >= entry.started + self.window {
            *entry = Window {
                started: now,
                failures: 0,
            };
        }
        entry.failures = entry.failures.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn a_user_gets_max_slots_and_a_dropped_slot_frees_one() {
        let slots = StreamSlots::new(2);
        let user = UserId::new();
        let a = slots.try_acquire(user).expect("first");
        let _b = slots.try_acquire(user).expect("second");
        assert!(slots.try_acquire(user).is_none());
        assert!(
            slots.try_acquire(UserId::new()).is_some(),
            "others unaffected"
        );
        drop(a);
        assert_eq!(slots.open(user), 1);
        assert!(slots.try_acquire(user).is_some());
    }

    #[test]
    fn released_users_leave_the_map() {
        let slots = StreamSlots::new(1);
        let user = UserId::new();
        drop(slots.try_acquire(user));
        assert!(slots.open.lock().unwrap().is_empty());
    }

    #[test]
    fn failures_over_the_limit_block_until_the_window_ends() {
        let limiter = FailureLimiter::new(3, Duration::from_secs(60), 100);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(limiter.check(ip(1), t0).is_ok());
            limiter.record_failure(ip(1), t0);
        }
        assert_eq!(limiter.check(ip(1), t0), Err(60));
        assert_eq!(
            limiter.check(ip(1), t0 + Duration::from_millis(59_500)),
            Err(1)
        );
        assert!(limiter.check(ip(2), t0).is_ok(), "other clients unaffected");
        assert!(limiter.check(ip(1), t0 + Duration::from_secs(60)).is_ok());
        limiter.record_failure(ip(1), t0 + Duration::from_secs(60));
        assert!(limiter.check(ip(1), t0 + Duration::from_secs(60)).is_ok());
    }

    #[test]
    fn the_map_is_bounded_and_expired_windows_make_room() {
        let limiter = FailureLimiter::new(1, Duration::from_secs(60), 2);
        let t0 = Instant::now();
        limiter.record_failure(ip(1), t0);
        limiter.record_failure(ip(2), t0);
        limiter.record_failure(ip(3), t0);
        assert!(limiter.check(ip(3), t0).is_ok(), "not tracked when full");
        assert!(
            limiter.check(ip(1), t0).is_err(),
            "tracked ones stay limited"
        );
        let later = t0 + Duration::from_secs(61);
        limiter.record_failure(ip(3), later);
        assert!(limiter.check(ip(3), later).is_err());
        assert_eq!(limiter.clients.lock().unwrap().len(), 1);
    }

    #[test]
    fn forwarded_for_is_believed_only_from_trusted_proxies() {
        let proxies =
            TrustedProxies::parse(&["10.0.0.0/8".to_owned(), "192.168.1.1".to_owned()]).unwrap();
        let client = IpAddr::from([203, 0, 113, 7]);
        let outsider = IpAddr::from([198, 51, 100, 1]);
        // From a trusted proxy: the last untrusted hop, whatever the client put in front of it.
        assert_eq!(
            proxies.client(ip(9), Some("1.2.3.4, 203.0.113.7, 10.0.0.5")),
            client
        );
        assert_eq!(
            proxies.client(IpAddr::from([192, 168, 1, 1]), Some("203.0.113.7")),
            client
        );
        // From anyone else the header is ignored.
        assert_eq!(proxies.client(outsider, Some("203.0.113.7")), outsider);
        // A trusted proxy without the header, or with garbage, is the client itself.
        assert_eq!(proxies.client(ip(9), None), ip(9));
        assert_eq!(proxies.client(ip(9), Some("not-an-ip")), ip(9));
        // No trusted proxies (the default): always the peer.
        assert_eq!(
            TrustedProxies::default().client(ip(9), Some("203.0.113.7")),
            ip(9)
        );
        let error = TrustedProxies::parse(&[" 10.0.0.0/33 ".to_owned()]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "http.trusted_proxies: `10.0.0.0/33` is not an address or CIDR range"
        );
    }

    #[test]
    fn zero_turns_the_limiter_off() {
        let limiter = FailureLimiter::new(0, Duration::from_secs(60), 2);
        let t0 = Instant::now();
        for _ in 0..100 {
            limiter.record_failure(ip(1), t0);
        }
        assert!(limiter.check(ip(1), t0).is_ok());
    }
}
