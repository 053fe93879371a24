//! Where a read's time goes at c=1: the tool server's own `Pipeline` run in process on this
//! run's database, each stage timed from the span the tool server opens for it (identity check,
//! schema, the permission decision, the opening query with the domain query), with the call's
//! decode and the reply's encode timed around it.
//!
//! Run twice: back to back, and *paced* — with a pause after each call as long as the rest of
//! the hop, so the threads and the Postgres backend go idle between calls as the tool server's
//! do at c=1. On a virtual machine whose idle CPUs halt, the paced round trip is the one the hop
//! pays. What the hop takes beyond the paced `execute` (the tool-hop row's p50 less it) is the
//! broker and the two ends' messaging.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rover_contracts::wire::{self, ToolCall, ToolOutcome};
use rover_settings::{DatabaseSettings, Secret};
use tracing::instrument::WithSubscriber as _;
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;

use crate::stats::{Sorted, Timing};
use crate::world::World;

/// The tool server's spans this breakdown reads, in pipeline order, with the stage they time. A
/// read with a one-trip form (`list_departments` is one) runs its opening query and its query in
/// one round trip once its school's policy rows are known, as in every steady-state call here.
pub(crate) const STAGES: [(&str, &str); 4] = [
    ("rover.toolserver.identity", "verify the turn identity"),
    ("rover.toolserver.schema", "check the arguments' schema"),
    ("rover.toolserver.permission", "authorise (casbin, cached)"),
    (
        "rover.toolserver.one_trip",
        "one round trip: opening query and domain query",
    ),
];

/// The stage that is `execute()` whole, the one the hop is compared with.
pub(crate) const EXECUTE: &str = "execute() whole";

/// The paced run's idle time after each call (not part of the call).
pub(crate) const PAUSE: &str = "idle between calls (not a stage)";

/// Every closed span's wall time, by name.
#[derive(Clone, Default)]
struct SpanTimes(Arc<Mutex<HashMap<&'static str, Vec<Duration>>>>);

impl<S> tracing_subscriber::Layer<S> for SpanTimes
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, _attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Instant::now());
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(opened) = span.extensions().get::<Instant>().copied() else {
            return;
        };
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(span.name())
            .or_default()
            .push(opened.elapsed());
    }
}

/// One stage's times.
pub(crate) struct Stage {
    pub(crate) name: String,
    pub(crate) times: Sorted,
}

/// Runs `make_call`'s reads through an in-process `Pipeline` for `timing` (one at a time, with
/// `pause` after each) and returns each stage's times: decode, the spans in [`STAGES`], encode,
/// and `execute` whole.
pub(crate) async fn read_stages(
    world: &World,
    timing: Timing,
    pause: Duration,
    make_call: impl Fn() -> ToolCall,
) -> anyhow::Result<Vec<Stage>> {
    let pool = rover_domain::call_pool(&DatabaseSettings {
        url: Secret::new(world.db.app_url().to_owned()),
        max_connections: crate::toolhop::POOL_SIZE.parse()?,
        ..DatabaseSettings::default()
    })?;
    let pipeline = rover_toolserver::Pipeline::new(world.keys.verifier(), pool);
    let spans = SpanTimes::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    let dispatch = tracing::Dispatch::new(subscriber);
    let mut times = Times::default();
    let run = async {
        let warm_until = Instant::now() + timing.warmup;
        let until = warm_until + timing.duration;
        let mut measuring = false;
        while Instant::now() < until {
            if !measuring && Instant::now() >= warm_until {
                measuring = true;
                spans
                    .0
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clear();
                times = Times::default();
            }
            let body = wire::encode(&make_call());
            let started = Instant::now();
            let call: ToolCall = wire::decode(&body)?;
            times.decode.push(started.elapsed());
            let started = Instant::now();
            let reply = pipeline.execute(call, None).await;
            times.execute.push(started.elapsed());
            anyhow::ensure!(
                reply.outcome == ToolOutcome::Ok,
                "the read failed: {:?}",
                reply.result
            );
            let started = Instant::now();
            std::hint::black_box(wire::encode(&reply));
            times.encode.push(started.elapsed());
            if !pause.is_zero() {
                // A thread sleep, not tokio's timer (which rounds up to its millisecond tick):
                // the runtime's thread idles for the pause, as the tool server's do in the hop.
                let started = Instant::now();
                std::thread::sleep(pause);
                times.paused.push(started.elapsed());
            }
        }
        Ok::<_, anyhow::Error>(())
    };
    run.with_subscriber(dispatch).await?;
    let by_span = std::mem::take(
        &mut *spans
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    Ok(times.into_stages(by_span))
}

/// What the loop times around the spans.
#[derive(Default)]
struct Times {
    decode: Vec<Duration>,
    encode: Vec<Duration>,
    execute: Vec<Duration>,
    paused: Vec<Duration>,
}

impl Times {
    /// The stages in pipeline order: decode, the spans in [`STAGES`], encode, `execute` whole,
    /// and the pause when there was one.
    fn into_stages(self, mut by_span: HashMap<&'static str, Vec<Duration>>) -> Vec<Stage> {
        let stage = |name: &str, times: Vec<Duration>| Stage {
            name: name.to_owned(),
            times: Sorted::new(times),
        };
        let mut stages = vec![stage("decode the call", self.decode)];
        for (span, name) in STAGES {
            stages.push(stage(name, by_span.remove(span).unwrap_or_default()));
        }
        stages.push(stage("encode the reply", self.encode));
        stages.push(stage(EXECUTE, self.execute));
        if !self.paused.is_empty() {
            // The pause as slept (a thread sleep overshoots by the kernel's timer slack).
            stages.push(stage(PAUSE, self.paused));
        }
        stages
    }
}
