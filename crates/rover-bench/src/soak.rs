//! The soak: minutes of whole turns through the release stack, several kinds mixed, with each
//! service's resident memory and the turns/s of every minute — does a long run stay flat? RSS
//! growth is reported per 10,000 turns after the first minute (warm-up: pools, caches and
//! allocator arenas fill); the goal is the last minute's turns/s at least 90% of the first's.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::report::Row;
use crate::stats::Sorted;
use crate::turns::{Stack, StackOptions};
use crate::world::World;

/// What the soak's users say, in turn: reads through the tool server (one of them a name
/// search), a local tool and a turn with no tool at all. No writes: a read's answer must not
/// grow with the run, or the run would measure its own data.
const UTTERANCES: [&str; 5] = [
    "List the departments",
    "How many students are there?",
    "Find the student called Nakato",
    "What's the date today?",
    "What can you do?",
];

/// The last minute's turns/s must be at least this share of the first's.
const RATE_KEPT: f64 = 0.9;

/// How long and how hard the soak runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Soak {
    /// Intervals (minutes, by default) of load.
    pub(crate) intervals: u32,
    /// The length of one interval.
    pub(crate) interval: Duration,
    /// Turns in flight at once.
    pub(crate) concurrency: usize,
}

/// What was sampled at an interval's end: when, each service's RSS (MB) and CPU time in it.
type Snapshot = (Instant, Vec<(String, f64)>, Vec<(String, Duration)>);

/// One interval's measurements.
struct Interval {
    finishes: Vec<Duration>,
    errors: u64,
    elapsed: Duration,
    rss: Vec<(String, f64)>,
    cpu: Vec<(String, Duration)>,
}

/// Runs the soak on a fresh stack; one row per interval, then the verdict.
pub(crate) async fn soak(world: &World, soak: Soak) -> anyhow::Result<Vec<Row>> {
    let options = StackOptions {
        model_flags: Vec::new(),
        worker_prefetch: 64,
    };
    let stack = Arc::new(Stack::start(world, &options)?);
    let analysing = stand_in_for_autovacuum(world).await?;
    let meter = stack.meter();
    let started = Instant::now();
    let deadline = started + soak.interval * soak.intervals;
    let counter = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..soak.concurrency.max(1))
        .map(|_| {
            let (stack, counter) = (stack.clone(), counter.clone());
            tokio::spawn(async move {
                let mut done = Vec::new();
                let mut failed = Vec::new();
                while Instant::now() < deadline {
                    let n = counter.fetch_add(1, Ordering::Relaxed) as usize;
                    let said = UTTERANCES[n % UTTERANCES.len()];
                    match stack.turn_saying(said, || {}).await {
                        Ok(timings) => done.push((Instant::now(), timings.finish)),
                        Err(error) => failed.push((Instant::now(), error.to_string())),
                    }
                }
                (done, failed)
            })
        })
        .collect();

    let mut snapshots = Vec::new();
    let mut cpu_before = meter.sample();
    for k in 1..=soak.intervals {
        tokio::time::sleep_until((started + soak.interval * k).into()).await;
        let cpu_now = meter.sample();
        let rss: Vec<(String, f64)> = stack
            .rss()
            .into_iter()
            .map(|(name, mb)| (name.to_owned(), mb))
            .collect();
        eprintln!(
            "rover-bench: soak, {k} of {} done; {} turns so far",
            soak.intervals,
            counter.load(Ordering::Relaxed)
        );
        snapshots.push((Instant::now(), rss, cpu_before.until(&cpu_now)));
        cpu_before = cpu_now;
    }
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    let mut first_error = None;
    for worker in workers {
        let (d, f) = worker.await?;
        done.extend(d);
        for (at, error) in f {
            first_error.get_or_insert_with(|| error.clone());
            failed.push(at);
        }
    }
    drop(stack);
    let analysed = analysing.is_some();
    if let Some(analysing) = analysing {
        analysing.abort();
    }

    let intervals = split(started, snapshots, &done, &failed);
    let mut rows = rows(soak, &intervals, first_error);
    if analysed && let Some(note) = rows.last_mut().and_then(|v| v.note.as_mut()) {
        note.push_str(&format!(
            "; this server runs with autovacuum off, so the soak ran ANALYZE every {} s as \
             autovacuum would (without it, plans cached while the tables were empty scan every \
             school's rows and the rate falls)",
            ANALYZE_EVERY.as_secs()
        ));
    }
    Ok(rows)
}

/// The turns that finished and failed, by the interval they ended in.
fn split(
    started: Instant,
    snapshots: Vec<Snapshot>,
    done: &[(Instant, Duration)],
    failed: &[Instant],
) -> Vec<Interval> {
    let mut intervals = Vec::new();
    let mut from = started;
    for (until, rss, cpu) in snapshots {
        let within = |at: &Instant| *at >= from && *at < until;
        intervals.push(Interval {
            finishes: done
                .iter()
                .filter(|(at, _)| within(at))
                .map(|(_, t)| *t)
                .collect(),
            errors: failed.iter().filter(|at| within(at)).count() as u64,
            elapsed: until - from,
            rss,
            cpu,
        });
        from = until;
    }
    intervals
}

/// How often the soak analyses its database on a server without autovacuum.
const ANALYZE_EVERY: Duration = Duration::from_secs(30);

/// On a server with autovacuum off (this machine's), a task that runs `ANALYZE` on the soak's
/// database every [`ANALYZE_EVERY`], as autovacuum does in production: it refreshes the planner's
/// statistics, and with them every plan cached while the tables were small. `None` when the
/// server runs autovacuum itself.
async fn stand_in_for_autovacuum(
    world: &World,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    let owner = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(world.db.owner_url())
        .await?;
    let autovacuum: String = sqlx::query_scalar("SHOW autovacuum")
        .fetch_one(&owner)
        .await?;
    if autovacuum == "on" {
        return Ok(None);
    }
    Ok(Some(tokio::spawn(async move {
        let mut every = tokio::time::interval(ANALYZE_EVERY);
        every.tick().await;
        loop {
            every.tick().await;
            if let Err(error) = sqlx::query("ANALYZE").execute(&owner).await {
                eprintln!("rover-bench: soak: ANALYZE failed: {error}");
            }
        }
    })))
}

/// One row per interval (turns/s, finish p50/p99, RSS, CPU per turn), then the verdict row: RSS
/// growth per 10,000 turns after the first interval, and the last interval's rate against the
/// first's.
fn rows(soak: Soak, intervals: &[Interval], first_error: Option<String>) -> Vec<Row> {
    let mut rows = Vec::new();
    let minutes = soak.interval.as_secs_f64() / 60.0;
    for (k, interval) in intervals.iter().enumerate() {
        let finish = Sorted::new(interval.finishes.clone());
        let label = if (minutes - 1.0).abs() < f64::EPSILON {
            format!("minute {}", k + 1)
        } else {
            format!("interval {} ({:.0} s)", k + 1, soak.interval.as_secs_f64())
        };
        let mut row = Row::new("soak", label, soak.concurrency);
        row.n = finish.len();
        row.errors = interval.errors;
        row.rate_per_s = Some(finish.len() as f64 / interval.elapsed.as_secs_f64());
        row.p50_ms = finish.ms(0.5);
        row.p99_ms = finish.ms(0.99);
        row.cpu = crate::cpu::per_op(&interval.cpu, None, finish.len());
        rows.push(row.note(format!("RSS: {}", rss_line(&interval.rss))));
    }
    let (Some(first), Some(last)) = (intervals.first(), intervals.last()) else {
        return rows;
    };
    let rate = |i: &Interval| i.finishes.len() as f64 / i.elapsed.as_secs_f64();
    let kept = rate(last) / rate(first).max(f64::EPSILON);
    let after_first: usize = intervals[1..].iter().map(|i| i.finishes.len()).sum();
    let growth: Vec<String> = last
        .rss
        .iter()
        .filter_map(|(name, mb)| {
            let (_, warm) = first.rss.iter().find(|(n, _)| n == name)?;
            let per_10k = (mb - warm) / after_first.max(1) as f64 * 10_000.0;
            Some(format!(
                "{} {per_10k:+.1} MB",
                name.trim_start_matches("rover-")
            ))
        })
        .collect();
    let total: usize = intervals.iter().map(|i| i.finishes.len()).sum();
    let errors: u64 = intervals.iter().map(|i| i.errors).sum();
    let mut verdict = Row::new("soak", "whole soak", soak.concurrency).goal(
        format!(
            "last turns/s ≥ {RATE_KEPT}× the first's (is {kept:.2}×); RSS growth per 10,000 \
             turns after the first reported"
        ),
        kept >= RATE_KEPT && errors == 0,
    );
    verdict.n = total;
    verdict.errors = errors;
    let mut note = format!(
        "RSS growth per 10,000 turns after the first interval ({after_first} turns): {}",
        growth.join(", ")
    );
    if let Some(error) = first_error {
        note.push_str(&format!("; first error: {error}"));
    }
    rows.push(verdict.note(note));
    rows
}

fn rss_line(rss: &[(String, f64)]) -> String {
    rss.iter()
        .map(|(name, mb)| format!("{} {mb:.1} MB", name.trim_start_matches("rover-")))
        .collect::<Vec<_>>()
        .join(", ")
}
