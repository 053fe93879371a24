//! Measuring: a closed-loop load driver (`drive`: N workers, each sending its next request when the
//! last one answered, for a fixed time after a warm-up) and the percentiles of what it recorded,
//! over a sorted vector — no histogram crate needed at these sample counts.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::cpu::Meter;

/// What one measured run recorded.
#[derive(Debug)]
pub(crate) struct Run<T> {
    /// One entry per successful request: its latency and whatever the operation returned.
    pub(crate) samples: Vec<(Duration, T)>,
    /// Requests that failed.
    pub(crate) errors: u64,
    /// The first failure's text, to show why.
    pub(crate) first_error: Option<String>,
    /// Wall time of the measured part.
    pub(crate) elapsed: Duration,
    /// The CPU each metered process used over the measured part (empty when nothing is metered).
    pub(crate) cpu: Vec<(String, Duration)>,
    /// The instructions the profiled process ran over the measured part (under callgrind).
    pub(crate) instructions: Option<(String, u64)>,
}

impl<T> Run<T> {
    /// Successful requests per second.
    pub(crate) fn rate(&self) -> f64 {
        self.samples.len() as f64 / self.elapsed.as_secs_f64().max(f64::EPSILON)
    }

    /// The latencies, sorted.
    pub(crate) fn latencies(&self) -> Sorted {
        Sorted::new(self.samples.iter().map(|(d, _)| *d).collect())
    }

    /// Each metered process's CPU per successful request.
    pub(crate) fn cpu_per_op(&self) -> Vec<crate::cpu::ProcessCpu> {
        crate::cpu::per_op(&self.cpu, self.instructions.as_ref(), self.samples.len())
    }
}

/// Durations in ascending order, for percentiles.
#[derive(Debug, Clone)]
pub(crate) struct Sorted(Vec<Duration>);

impl Sorted {
    pub(crate) fn new(mut durations: Vec<Duration>) -> Self {
        durations.sort_unstable();
        Self(durations)
    }

    /// The `q`-quantile (0.5 = median) by the nearest-rank method, in milliseconds; 0 if empty.
    pub(crate) fn ms(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        let rank = (q * self.0.len() as f64).ceil() as usize;
        let index = rank.clamp(1, self.0.len()) - 1;
        self.0[index].as_secs_f64() * 1e3
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// How long to warm up and how long to measure.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub(crate) warmup: Duration,
    pub(crate) duration: Duration,
}

/// Runs `op` from `concurrency` workers in a closed loop: first for `timing.warmup` (discarded),
/// then for `timing.duration` (recorded). `op` gets a number unique across the whole run, for
/// call ids and names that must not repeat; its errors are counted, and the first kept as text
/// for the report.
pub(crate) async fn drive<T, E, F, Fut>(concurrency: usize, timing: Timing, op: F) -> Run<T>
where
    T: Send + 'static,
    E: std::fmt::Display + Send + 'static,
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
{
    drive_metered(concurrency, timing, &Meter::none(), op).await
}

/// [`drive`], reading each of `meter`'s processes' CPU time as the measured part starts and
/// ends ([`Run::cpu`]).
pub(crate) async fn drive_metered<T, E, F, Fut>(
    concurrency: usize,
    timing: Timing,
    meter: &Meter,
    op: F,
) -> Run<T>
where
    T: Send + 'static,
    E: std::fmt::Display + Send + 'static,
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
{
    let op = Arc::new(op);
    let counter = Arc::new(AtomicU64::new(0));
    if !timing.warmup.is_zero() {
        let _ = phase(concurrency, timing.warmup, op.clone(), counter.clone()).await;
    }
    meter.start_counting();
    let before = meter.sample();
    let mut run = phase(concurrency, timing.duration, op, counter).await;
    run.cpu = before.until(&meter.sample());
    run.instructions = meter.instructions();
    run
}

async fn phase<T, E, F, Fut>(
    concurrency: usize,
    duration: Duration,
    op: Arc<F>,
    counter: Arc<AtomicU64>,
) -> Run<T>
where
    T: Send + 'static,
    E: std::fmt::Display + Send + 'static,
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
{
    let started = Instant::now();
    let deadline = started + duration;
    let workers: Vec<_> = (0..concurrency.max(1))
        .map(|_| {
            let (op, counter) = (op.clone(), counter.clone());
            tokio::spawn(async move {
                let mut samples = Vec::with_capacity(4096);
                let (mut errors, mut first_error) = (0u64, None);
                while Instant::now() < deadline {
                    let n = counter.fetch_add(1, Ordering::Relaxed);
                    let sent = Instant::now();
                    match op(n).await {
                        Ok(value) => samples.push((sent.elapsed(), value)),
                        Err(error) => {
                            errors += 1;
                            first_error.get_or_insert_with(|| error.to_string());
                        }
                    }
                }
                (samples, errors, first_error)
            })
        })
        .collect();
    let mut run = Run {
        samples: Vec::new(),
        errors: 0,
        first_error: None,
        elapsed: Duration::ZERO,
        cpu: Vec::new(),
        instructions: None,
    };
    for worker in workers {
        match worker.await {
            Ok((samples, errors, first_error)) => {
                run.samples.extend(samples);
                run.errors += errors;
                if run.first_error.is_none() {
                    run.first_error = first_error;
                }
            }
            Err(error) => {
                run.errors += 1;
                run.first_error
                    .get_or_insert_with(|| format!("a load worker failed: {error}"));
            }
        }
    }
    // Requests in flight at the deadline finish after it; count the time they took.
    run.elapsed = started.elapsed();
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let sorted = Sorted::new((1..=100).rev().map(Duration::from_millis).collect());
        assert_eq!(sorted.ms(0.5), 50.0);
        assert_eq!(sorted.ms(0.99), 99.0);
        assert_eq!(sorted.ms(1.0), 100.0);
        assert_eq!(Sorted::new(vec![]).ms(0.5), 0.0);
        assert_eq!(Sorted::new(vec![Duration::from_millis(7)]).ms(0.99), 7.0);
    }
}
