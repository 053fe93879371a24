//! `rover-bench` (`make bench`): RabbitMQ's own RPC round trip (the floor) and Rover side by side,
//! measured in one run on one machine — the tool hop, the per-turn agent build, whole turns through
//! the gateway, and 1,000 open streams — printed as a table and written as JSON.
//!
//! Layout: `world` (the run's own vhost, database and keys: `rover_stack::World`, and the demo
//! callers on it), `procs` (the release binaries under `rover_stack`'s launcher: profiling and
//! memory), `stats` (the load driver and percentiles), `floor`, `toolhop`, `turns` (the cases),
//! `report` (table and JSON).

mod approval;
mod cluster;
mod cpu;
mod floor;
mod procs;
mod report;
mod soak;
mod sqlonly;
mod stages;
mod stats;
mod toolhop;
mod turns;
mod world;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use rover_agent::skills::SkillLibrary;
use rover_agent::{Mounts, build_agent};
use serde_json::json;

use crate::floor::{Floor, QueueKind};
use crate::report::{Report, Row};
use crate::stats::{Sorted, Timing, drive, drive_metered};
use crate::toolhop::ToolHop;
use crate::turns::{Stack, StackOptions};
use rover_domain::seed::DEMO_USERS;

use crate::world::{World, WorldExt as _};

/// Benchmarks Rover against RabbitMQ's own RPC round trip, in one run on this machine.
///
/// Needs the release binaries next to it (`make bench` builds them), a local RabbitMQ
/// (`rabbitmqctl` on PATH) and Postgres with superuser access (`ROVER_TEST_ADMIN_URL`, default
/// postgres://postgres@127.0.0.1:5432/postgres). Each run creates its own vhost, database and keys
/// and removes them afterwards, so it never collides with tests or `make run`.
#[derive(Debug, Parser)]
#[command(name = "rover-bench", version)]
struct Cli {
    /// Run only these sections (comma-separated). The tool hop always measures the floor too,
    /// since its goals are ratios to it.
    #[arg(long, value_delimiter = ',', value_enum)]
    only: Vec<Section>,
    /// Seconds each load case is measured for.
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Seconds of warm-up (discarded) before each load case.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Agent builds timed per demo user.
    #[arg(long, default_value_t = 20_000)]
    iterations: usize,
    /// Concurrent turns held open in the many-streams section.
    #[arg(long, default_value_t = 1000)]
    streams: u16,
    /// The slow model's delay before its first chunk in the many-streams section, in ms.
    #[arg(long, default_value_t = 8000)]
    stream_first_token_ms: u64,
    /// The slow model's delay between chunks in the many-streams section, in ms.
    #[arg(long, default_value_t = 100)]
    stream_chunk_ms: u64,
    /// The many-streams turns are started evenly over this many ms (1,000 people do not press
    /// send in the same millisecond). Every turn stays open for its model's 8 s and more, so all
    /// are still open together; 5 s (200 new turns/s) was past what a slower two-core machine
    /// admits — the gateway's pool waits ran out and it answered 503, which is the turns row's
    /// measurement (admission), not this row's (holding streams open).
    #[arg(long, default_value_t = 15000)]
    stream_ramp_ms: u64,
    /// Minutes the soak runs (mixed whole turns; RSS and turns/s per minute). A long soak:
    /// `--only soak --soak-minutes 30`.
    #[arg(long, default_value_t = 3)]
    soak_minutes: u32,
    /// Turns in flight at once in the soak.
    #[arg(long, default_value_t = 32)]
    soak_concurrency: usize,
    /// The soak's sampling interval in seconds (a minute; shorter only to try the section out).
    #[arg(long, default_value_t = 60.0, hide = true)]
    soak_interval_s: f64,
    /// Where the JSON goes (`bench-<timestamp>.json` and `latest.json`).
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
    /// Run nothing: print the table of a run's JSON (as written to --out) in Markdown, as
    /// `docs/benchmarks.md` shows it (`make docs`). Needs no broker, database or service.
    #[arg(long, value_name = "FILE")]
    markdown_from: Option<PathBuf>,
}

/// The report's sections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Section {
    /// RabbitMQ's own RPC round trip (bare lapin echo over Direct Reply-to).
    Floor,
    /// Rover's RPC client → rover-toolserver → Postgres → reply; then the read's stages (back to
    /// back, and paced as the hop paces the tool server) and the messaging halves (Rover's RPC
    /// client and server each against the floor's bare ones).
    ToolHop,
    /// Building a turn's agent from its runtime context, in process.
    AgentBuild,
    /// The approval gate an approved write passes before its RPC (beside the tool hop's write).
    Approval,
    /// Whole turns through the gateway with the scripted model at zero latency.
    Turns,
    /// Many concurrent turns held open by a slow scripted model.
    Streams,
    /// Minutes of mixed whole turns: each service's RSS and the turns/s of every minute.
    Soak,
    /// The floor, the tool hop and whole turns again on a three-node RabbitMQ cluster
    /// (`scripts/rabbitmq-cluster.sh`, started if it is not up), beside the single node's rows.
    Cluster,
}

/// The exit status of a run stopped by SIGINT or SIGTERM (128 + SIGINT, as a shell reports it).
const INTERRUPTED: i32 = 130;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(path) = &cli.markdown_from {
        print!("{}", Report::read(path)?.markdown());
        return Ok(());
    }
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    // Listening before anything is created: a Ctrl-C at any point after this removes what the run
    // made (its vhost, database, roles and keys are dropped with `world`, and its services are
    // stopped as the run's future is dropped) instead of leaving them behind.
    let interrupted = rover_service::shutdown_signal();

    eprintln!("rover-bench: creating this run's vhost, database and keys…");
    let world = World::create().await;
    eprintln!(
        "rover-bench: this run's vhost {}, database {}",
        world.vhost.name,
        world.db.provision().database
    );
    let outcome = tokio::select! {
        outcome = bench(&cli, &world) => Some(outcome),
        () = interrupted => None,
    };
    drop(world);
    match outcome {
        Some(outcome) => outcome,
        None => {
            eprintln!(
                "rover-bench: interrupted; this run's vhost, database and keys are removed, \
                 nothing was written"
            );
            std::process::exit(INTERRUPTED);
        }
    }
}

/// Every section asked for, in the order the report shows them, then the table and the JSON.
#[expect(
    clippy::too_many_lines,
    reason = "the bench's sections in the order the report shows them"
)]
async fn bench(cli: &Cli, world: &World) -> anyhow::Result<()> {
    let wants = |s: Section| cli.only.is_empty() || cli.only.contains(&s);
    let timing = Timing {
        warmup: Duration::from_secs_f64(cli.warmup),
        duration: Duration::from_secs_f64(cli.duration),
    };
    let started_at = chrono::Utc::now();
    let machine = world.machine().await;
    let payload = toolhop::read_frame_len(world).await?;
    let mut rows = Vec::new();

    let mut floors = Vec::new();
    if wants(Section::Floor) || wants(Section::ToolHop) {
        for (kind, label) in [
            (QueueKind::Classic, "echo, classic queue"),
            (QueueKind::Quorum, "echo, quorum queue"),
        ] {
            let floor = Arc::new(Floor::start(&world.vhost.url(), kind, payload).await?);
            for c in [1, 64] {
                eprintln!("rover-bench: floor ({label}) at c={c}…");
                let f = floor.clone();
                let run = drive(c, timing, move |_| {
                    let f = f.clone();
                    async move { f.call().await }
                })
                .await;
                let latencies = run.latencies();
                let mut row = measured(Row::new("floor", label, c), &run, &latencies);
                if kind == QueueKind::Quorum && c == 1 {
                    row = row.note(
                        "informational: the kind of queue the tools queue was (the turns queue is); not a goal",
                    );
                } else if kind == QueueKind::Classic {
                    floors.push((c, latencies.ms(0.5), run.rate()));
                }
                rows.push(row);
            }
            if let Ok(floor) = Arc::try_unwrap(floor) {
                floor.stop().await;
            }
        }
    }

    if wants(Section::ToolHop) {
        rows.extend(tool_hop(world, timing, &floors).await?);
        rows.extend(messaging_halves(world, timing, payload).await?);
    }

    if wants(Section::Approval) {
        rows.extend(approval_gate(world, timing, &rows).await?);
    }

    if wants(Section::AgentBuild) {
        eprintln!(
            "rover-bench: agent build, {} per demo user…",
            cli.iterations
        );
        let skills = SkillLibrary::load(&rover_stack::skills_dir())?;
        let mounts = Mounts { sandbox: true };
        for email in DEMO_USERS {
            let context = world.context(email).await?;
            let mut times = Vec::with_capacity(cli.iterations);
            // One untimed build first: the process-wide tool definitions are made then.
            std::hint::black_box(build_agent(&context, &skills, mounts));
            for _ in 0..cli.iterations {
                let started = Instant::now();
                let agent = build_agent(std::hint::black_box(&context), &skills, mounts);
                times.push(started.elapsed());
                std::hint::black_box(agent);
            }
            let sorted = Sorted::new(times);
            let (p50, p99) = (sorted.ms(0.5), sorted.ms(0.99));
            let mut row = Row::new("agent build", email, 1)
                .goal("p50 ≤ 0.1 ms, p99 ≤ 0.25 ms", p50 <= 0.1 && p99 <= 0.25);
            row.n = sorted.len();
            row.p50_ms = p50;
            row.p99_ms = p99;
            rows.push(row);
        }
    }

    if wants(Section::Turns) {
        let options = StackOptions {
            model_flags: Vec::new(),
            worker_prefetch: 64,
        };
        let stack = Arc::new(Stack::start(world, &options)?);
        for c in [1, 64] {
            eprintln!("rover-bench: whole turns at c={c}…");
            let s = stack.clone();
            let run = drive_metered(c, timing, &stack.meter(), move |_| {
                let s = s.clone();
                async move { s.turn(|| {}).await }
            })
            .await;
            let first = Sorted::new(run.samples.iter().map(|(_, t)| t.first).collect());
            let finish = Sorted::new(run.samples.iter().map(|(_, t)| t.finish).collect());
            let mut row = Row::new("turns", "first SSE chunk", c);
            row.n = first.len();
            row.errors = run.errors;
            row.p50_ms = first.ms(0.5);
            row.p99_ms = first.ms(0.99);
            rows.push(row);
            let mut row = Row::new("turns", "finish (turns/s)", c);
            row.n = finish.len();
            row.errors = run.errors;
            row.rate_per_s = Some(run.rate());
            row.p50_ms = finish.ms(0.5);
            row.p99_ms = finish.ms(0.99);
            row.cpu = run.cpu_per_op();
            if let Some(error) = &run.first_error {
                row = row.note(format!("first error: {error}"));
            }
            rows.push(row);
        }
        drop(stack);
    }

    if wants(Section::Soak) {
        eprintln!(
            "rover-bench: soak, {} × {:.0} s of mixed turns at c={}…",
            cli.soak_minutes, cli.soak_interval_s, cli.soak_concurrency
        );
        rows.extend(
            soak::soak(
                world,
                soak::Soak {
                    intervals: cli.soak_minutes,
                    interval: Duration::from_secs_f64(cli.soak_interval_s),
                    concurrency: cli.soak_concurrency,
                },
            )
            .await?,
        );
    }

    if wants(Section::Streams) {
        rows.push(many_streams(world, cli).await?);
    }

    if wants(Section::Cluster) {
        rows.extend(cluster::rows(timing, payload).await?);
    }

    let report = Report {
        started_at: started_at.to_rfc3339(),
        git_commit: git_commit(),
        machine,
        settings: json!({
            "duration_s": cli.duration,
            "warmup_s": cli.warmup,
            "agent_build_iterations": cli.iterations,
            "toolserver_prefetch": toolhop::TOOLSERVER_PREFETCH,
            "db_pool_per_service": toolhop::POOL_SIZE,
            "worker_prefetch": { "turns": 64, "streams": cli.streams },
            "streams": {
                "count": cli.streams,
                "first_token_delay_ms": cli.stream_first_token_ms,
                "chunk_delay_ms": cli.stream_chunk_ms,
                "ramp_ms": cli.stream_ramp_ms,
            },
            "soak": {
                "intervals": cli.soak_minutes,
                "interval_s": cli.soak_interval_s,
                "concurrency": cli.soak_concurrency,
            },
            "log_format": "json, filter info (the services' defaults)",
        }),
        payload_bytes: Some(payload),
        rows,
    };
    println!("\nRover benchmarks — {}\n", report.machine_line());
    println!("{}", report.table());
    let path = report.write(&cli.out, &started_at.format("%Y%m%dT%H%M%SZ").to_string())?;
    println!("written: {} (and latest.json)", path.display());
    Ok(())
}

/// Which ends of a *messaging* row are Rover's.
#[derive(Debug, Clone, Copy)]
enum Ends {
    RoverClient,
    RoverServer,
    Both,
}

/// Where the hop's messaging time goes: the floor's echo with Rover's RPC client on the calling
/// side, with Rover's RPC server (`serve_rpc`, an empty handler) on the answering side, and with
/// both — the same queue kind and body as the floor, no tool work. Informational rows.
async fn messaging_halves(
    world: &World,
    timing: Timing,
    payload: usize,
) -> anyhow::Result<Vec<Row>> {
    use rover_messaging::{Broker, BrokerOptions, ConsumerOptions, RpcOptions};
    let url = world.vhost.url();
    let broker = Broker::connect(BrokerOptions::new(url.clone())).await?;
    let rpc = broker.rpc_client(RpcOptions {
        attempt_timeout: Duration::from_secs(30),
        attempts: 1,
    });
    let bare = Floor::start(&url, QueueKind::Classic, payload).await?;
    let unserved = Floor::unserved(&url, payload).await?;
    let server = Broker::connect(BrokerOptions::new(url.clone())).await?;
    let serving = server
        .serve_rpc(
            unserved.queue(),
            ConsumerOptions {
                prefetch: toolhop::TOOLSERVER_PREFETCH.parse()?,
                consumer_tag: String::new(),
            },
            |request| Some(async move { request.body }),
        )
        .await?;
    let bare = Arc::new(bare);
    let unserved = Arc::new(unserved);
    let mut rows = Vec::new();
    for c in [1, 64] {
        let cases = [
            ("Rover's RPC client → bare echo server", Ends::RoverClient),
            ("bare client → Rover's RPC server (echo)", Ends::RoverServer),
            ("Rover's RPC client → Rover's RPC server (echo)", Ends::Both),
        ];
        for (label, ends) in cases {
            eprintln!("rover-bench: messaging, {label} at c={c}…");
            let (rpc, bare, unserved) = (rpc.clone(), bare.clone(), unserved.clone());
            let run = drive(c, timing, move |n| {
                let (rpc, bare, unserved) = (rpc.clone(), bare.clone(), unserved.clone());
                async move {
                    let call = |queue: String, body: Vec<u8>| async move {
                        let id = format!("bench-{n}-{}", uuid::Uuid::new_v4().simple());
                        rpc.call("", &queue, &id, body)
                            .await
                            .map(drop)
                            .map_err(|e| e.to_string())
                    };
                    match ends {
                        Ends::RoverClient => call(bare.queue().to_owned(), bare.body()).await,
                        Ends::RoverServer => unserved.call().await.map_err(|e| e.to_string()),
                        Ends::Both => call(unserved.queue().to_owned(), unserved.body()).await,
                    }
                }
            })
            .await;
            let latencies = run.latencies();
            rows.push(measured(Row::new("messaging", label, c), &run, &latencies));
        }
    }
    serving.shutdown().await;
    server.close().await;
    broker.close().await;
    for floor in [bare, unserved] {
        if let Ok(floor) = Arc::try_unwrap(floor) {
            floor.stop().await;
        }
    }
    Ok(rows)
}

/// The approved write's gate at c=1 and c=64; at c=1 its goal is to cost no more than the one
/// write RPC it guards (the tool hop's write row at c=1, when measured in this run).
async fn approval_gate(
    world: &World,
    timing: Timing,
    measured_rows: &[Row],
) -> anyhow::Result<Vec<Row>> {
    let write_rpc = measured_rows
        .iter()
        .find(|r| {
            r.section == "tool hop" && r.case == "create_department (write)" && r.concurrency == 1
        })
        .map(|r| r.p50_ms);
    let gate = approval::Gate::start(world).await?;
    let mut rows = Vec::new();
    for c in [1, 64] {
        eprintln!("rover-bench: approval gate of an approved write at c={c}…");
        let g = gate.clone();
        let run = drive(c, timing, move |_| {
            let g = g.clone();
            async move { g.decide().await }
        })
        .await;
        let latencies = run.latencies();
        let mut row = measured(
            Row::new("approval", "gate of an approved write", c),
            &run,
            &latencies,
        );
        if c == 1 {
            row = match write_rpc {
                Some(rpc) => row
                    .goal("p50 ≤ 1× the write RPC", latencies.ms(0.5) <= rpc)
                    .note(format!("write RPC p50 {rpc:.2} ms")),
                None => row.note("run with the tool-hop section for its goal"),
            };
            if run.errors > 0 {
                row.pass = Some(false);
            }
        }
        rows.push(row);
    }
    if let Ok(gate) = Arc::try_unwrap(gate) {
        gate.stop().await;
    }
    Ok(rows)
}

/// Fills a row's counts, rate and percentiles from a run.
fn measured<T>(mut row: Row, run: &stats::Run<T>, latencies: &Sorted) -> Row {
    row.n = latencies.len();
    row.errors = run.errors;
    row.rate_per_s = Some(run.rate());
    row.p50_ms = latencies.ms(0.5);
    row.p99_ms = latencies.ms(0.99);
    row.cpu = run.cpu_per_op();
    if let Some(error) = &run.first_error {
        row = row.note(format!("first error: {error}"));
    }
    row
}

/// `cli.streams` turns at once, held open by a slow model; every one must reach `finish`.
#[expect(
    clippy::too_many_lines,
    reason = "one measurement: ramp, hold, drain and count, in order"
)]
async fn many_streams(world: &World, cli: &Cli) -> anyhow::Result<Row> {
    let count = usize::from(cli.streams);
    eprintln!(
        "rover-bench: {count} open streams (first token after {} ms, then a chunk every {} ms)…",
        cli.stream_first_token_ms, cli.stream_chunk_ms
    );
    let options = StackOptions {
        model_flags: vec![
            "--first-token-delay-ms".into(),
            cli.stream_first_token_ms.to_string(),
            "--chunk-delay-ms".into(),
            cli.stream_chunk_ms.to_string(),
        ],
        worker_prefetch: cli.streams,
    };
    let stack = Arc::new(Stack::start(world, &options)?);
    let open = Arc::new(AtomicUsize::new(0));
    let peak_open = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let gap = Duration::from_millis(cli.stream_ramp_ms) / u32::from(cli.streams.max(1));
    let tasks: Vec<_> = (0..count)
        .map(|i| {
            let (stack, open, peak_open) = (stack.clone(), open.clone(), peak_open.clone());
            let start_at = tokio::time::Instant::from_std(started) + gap * i as u32;
            tokio::spawn(async move {
                tokio::time::sleep_until(start_at).await;
                let opened = AtomicBool::new(false);
                let result = stack
                    .turn(|| {
                        opened.store(true, Ordering::Relaxed);
                        let now = open.fetch_add(1, Ordering::Relaxed) + 1;
                        peak_open.fetch_max(now, Ordering::Relaxed);
                    })
                    .await;
                if opened.load(Ordering::Relaxed) {
                    open.fetch_sub(1, Ordering::Relaxed);
                }
                result
            })
        })
        .collect();
    let (mut finishes, mut errors, mut first_error) = (Vec::new(), 0u64, None);
    for task in tasks {
        match task.await {
            Ok(Ok(timings)) => finishes.push(timings.finish),
            Ok(Err(error)) => {
                errors += 1;
                first_error.get_or_insert(error.to_string());
            }
            Err(error) => {
                errors += 1;
                first_error.get_or_insert(error.to_string());
            }
        }
    }
    let elapsed = started.elapsed();
    let rss = stack.peak_rss();
    let gateway_mb = rss
        .iter()
        .find(|(name, _)| *name == "rover-gateway")
        .map_or(f64::INFINITY, |(_, mb)| *mb);
    let finish = Sorted::new(finishes);
    let mut row = Row::new("streams", format!("{count} open turns, slow model"), count).goal(
        "no errors; gateway peak RSS < 150 MB",
        errors == 0 && finish.len() == count && gateway_mb < 150.0,
    );
    row.n = finish.len();
    row.errors = errors;
    row.rate_per_s = Some(finish.len() as f64 / elapsed.as_secs_f64());
    row.p50_ms = finish.ms(0.5);
    row.p99_ms = finish.ms(0.99);
    let memory: Vec<String> = rss
        .iter()
        .map(|(name, mb)| format!("{} {mb:.0} MB", name.trim_start_matches("rover-")))
        .collect();
    let mut note = format!(
        "peak open streams {}; peak RSS: {}",
        peak_open.load(Ordering::Relaxed),
        memory.join(", ")
    );
    if let Some(error) = first_error {
        note.push_str(&format!("; first error: {error}"));
    }
    Ok(row.note(note))
}

/// What one SQL-alone or tool-hop case measured: (p50 ms, rate /s) by (write, concurrency).
type Measured = Vec<((bool, usize), (f64, f64))>;

/// The tool hop's goals (issue "Tool hop well ahead of the seed's stack"), as ratios to the
/// floor and to the same work's SQL alone, in one run.
const READ_P50_MARGIN_MS: f64 = 0.3;
const READ_RATE_VS_FLOOR: f64 = 0.28;
const READ_RATE_VS_SQL: f64 = 0.9;
const WRITE_RATE_VS_FLOOR: f64 = 0.07;

/// The tool hop's cases: (write, concurrency).
const HOP_CASES: [(bool, usize); 4] = [(false, 1), (false, 64), (true, 1), (true, 64)];

/// The tool hop's SQL alone, in process, for each case: its rows and what each measured.
async fn sql_alone(
    world: &World,
    timing: Timing,
    floors: &[(usize, f64, f64)],
) -> anyhow::Result<(Vec<Row>, Measured)> {
    let floor = |c: usize| floors.iter().find(|f| f.0 == c).map(|f| (f.1, f.2));
    let mut rows = Vec::new();
    let sql = sqlonly::SqlOnly::start(world).await?;
    let mut sql_measured: Measured = Vec::new();
    for (write, c) in HOP_CASES {
        let label = if write {
            "create_department SQL alone"
        } else {
            "list_departments SQL alone"
        };
        eprintln!("rover-bench: {label} at c={c}…");
        let q = sql.clone();
        let run = drive(c, timing, move |n| {
            let q = q.clone();
            async move {
                if write {
                    q.write(n).await
                } else {
                    q.read().await
                }
            }
        })
        .await;
        let latencies = run.latencies();
        sql_measured.push(((write, c), (latencies.ms(0.5), run.rate())));
        let mut row = measured(Row::new("sql alone", label, c), &run, &latencies);
        if let Some((floor_p50, floor_rate)) = floor(c) {
            row.p50_vs_floor = Some(latencies.ms(0.5) / floor_p50);
            row.rate_vs_floor = Some(run.rate() / floor_rate);
        }
        rows.push(row);
    }
    Ok((rows, sql_measured))
}

/// The tool hop's section: the same work's SQL alone first (in process: Postgres's own limit),
/// then the hop through the release tool server, each row held to its goal; then where a read's
/// time goes at c=1 (the stages, in process, from the tool server's own spans).
async fn tool_hop(
    world: &World,
    timing: Timing,
    floors: &[(usize, f64, f64)],
) -> anyhow::Result<Vec<Row>> {
    let floor = |c: usize| floors.iter().find(|f| f.0 == c).map(|f| (f.1, f.2));
    let (mut rows, sql_measured) = sql_alone(world, timing, floors).await?;
    let sql_of = |key: (bool, usize)| sql_measured.iter().find(|m| m.0 == key).map(|m| m.1);

    let hop = Arc::new(ToolHop::start(world).await?);
    let mut read_p50 = None;
    for (write, c) in HOP_CASES {
        let label = if write {
            "create_department (write)"
        } else {
            "list_departments (read)"
        };
        eprintln!("rover-bench: tool hop {label} at c={c}…");
        let h = hop.clone();
        let run = drive_metered(c, timing, &hop.meter(), move |n| {
            let h = h.clone();
            async move {
                if write {
                    h.write(n).await
                } else {
                    h.read().await
                }
            }
        })
        .await;
        let latencies = run.latencies();
        let mut row = measured(Row::new("tool hop", label, c), &run, &latencies);
        let (p50, rate) = (latencies.ms(0.5), run.rate());
        if (write, c) == (false, 1) {
            read_p50 = Some(p50);
        }
        if let (Some((floor_p50, floor_rate)), Some((sql_p50, sql_rate))) =
            (floor(c), sql_of((write, c)))
        {
            row.p50_vs_floor = Some(p50 / floor_p50);
            row.rate_vs_floor = Some(rate / floor_rate);
            row.rate_vs_sql = Some(rate / sql_rate);
            row = hop_goal(row, write, c, (floor_p50, floor_rate), (sql_p50, sql_rate));
        }
        if run.errors > 0 && row.pass.is_some() {
            row.pass = Some(false);
        }
        rows.push(row);
    }
    rows.extend(idle_rows(&hop, timing).await);
    if let Ok(hop) = Arc::try_unwrap(hop) {
        hop.stop().await;
    }
    rows.extend(read_stage_rows(world, timing, read_p50).await?);
    Ok(rows)
}

/// The pause after each call of the *idle between calls* row: long enough for every thread of
/// the tool server to go to sleep before the next call wakes it.
const IDLE_GAP: Duration = Duration::from_millis(10);

/// The tool server's CPU when it idles: with no calls at all (per second), and per read at c=1
/// when it has gone idle before each one (a pause of [`IDLE_GAP`] after every call) — what a
/// call costs that has to wake the server, against the back-to-back c=1 row.
async fn idle_rows(hop: &Arc<ToolHop>, timing: Timing) -> Vec<Row> {
    eprintln!("rover-bench: the tool server idle, no calls…");
    let meter = hop.meter();
    let before = meter.sample();
    tokio::time::sleep(timing.duration).await;
    let idle = before.until(&meter.sample());
    let seconds = timing.duration.as_secs_f64();
    let mut quiet = Row::new("tool hop", "idle: no calls (CPU per second)", 0);
    quiet.cpu = cpu::per_op(&idle, None, 1)
        .into_iter()
        .map(|mut p| {
            p.per_op_us /= seconds;
            p
        })
        .collect();
    let quiet = quiet.note(format!(
        "the tool server's own CPU over {seconds:.0} s with no calls, per second"
    ));

    eprintln!(
        "rover-bench: tool hop list_departments (read) at c=1, idle {} ms between calls…",
        IDLE_GAP.as_millis()
    );
    let h = hop.clone();
    let run = drive_metered(1, timing, &meter, move |_| {
        let h = h.clone();
        async move {
            let sent = Instant::now();
            h.read().await?;
            let took = sent.elapsed();
            tokio::time::sleep(IDLE_GAP).await;
            Ok::<_, toolhop::HopError>(took)
        }
    })
    .await;
    // The call's own latency, without the pause after it.
    let latencies = Sorted::new(run.samples.iter().map(|(_, took)| *took).collect());
    let mut paced = measured(
        Row::new("tool hop", "list_departments (read), idle between calls", 1),
        &run,
        &latencies,
    );
    if paced.note.is_none() {
        paced = paced.note(format!(
            "a {} ms pause after each call (not in its latency), so the tool server sleeps \
             before every call wakes it",
            IDLE_GAP.as_millis()
        ));
    }
    vec![paced, quiet]
}

/// The tool-hop row's goal, with the ratios it was judged by in the sentence.
fn hop_goal(row: Row, write: bool, c: usize, floor: (f64, f64), sql: (f64, f64)) -> Row {
    let (p50, rate) = (row.p50_ms, row.rate_per_s.unwrap_or_default());
    match (write, c) {
        (false, 1) => {
            let bound = floor.0 + sql.0 + READ_P50_MARGIN_MS;
            row.goal(
                format!(
                    "p50 ≤ floor + SQL alone + {READ_P50_MARGIN_MS} ms = {bound:.3} ms \
                     (is {p50:.3} ms, {:+.3} ms over floor + SQL)",
                    p50 - floor.0 - sql.0
                ),
                p50 <= bound,
            )
        }
        (false, _) => {
            let (vs_floor, vs_sql) = (rate / floor.1, rate / sql.1);
            row.goal(
                format!(
                    "rate ≥ {READ_RATE_VS_FLOOR}× floor and ≥ {READ_RATE_VS_SQL}× SQL alone \
                     (is {vs_floor:.3}× and {vs_sql:.2}×)"
                ),
                vs_floor >= READ_RATE_VS_FLOOR && vs_sql >= READ_RATE_VS_SQL,
            )
        }
        (true, 64) => {
            let vs_floor = rate / floor.1;
            row.goal(
                format!("rate ≥ {WRITE_RATE_VS_FLOOR}× floor (is {vs_floor:.3}×)"),
                vs_floor >= WRITE_RATE_VS_FLOOR,
            )
        }
        (true, _) => row,
    }
}

/// Where a read's time goes at c=1: each stage's p50/p99 in process, back to back and paced
/// as the hop paces the tool server (a pause after each call as long as the hop's read p50 less
/// the back-to-back `execute()`), and what the hop adds beyond the paced `execute()` (the broker
/// and both ends' messaging).
async fn read_stage_rows(
    world: &World,
    timing: Timing,
    hop_read_p50: Option<f64>,
) -> anyhow::Result<Vec<Row>> {
    eprintln!("rover-bench: a read's stages, in process at c=1…");
    let calls = toolhop::read_calls(world).await?;
    let stages = stages::read_stages(world, timing, Duration::ZERO, calls).await?;
    let (mut rows, execute_p50) = stage_rows("read stages", stages);
    let (Some(hop), Some(execute)) = (hop_read_p50, execute_p50) else {
        return Ok(rows);
    };
    let pause = Duration::from_secs_f64((hop - execute).max(0.0) / 1e3);
    eprintln!(
        "rover-bench: a read's stages, in process at c=1, paced (≥ {:.3} ms idle after each call)…",
        pause.as_secs_f64() * 1e3
    );
    let calls = toolhop::read_calls(world).await?;
    let stages = stages::read_stages(world, timing, pause, calls).await?;
    let (paced, paced_execute) = stage_rows("read stages, paced", stages);
    rows.extend(paced);
    if let Some(paced_execute) = paced_execute {
        let mut row = Row::new(
            "read stages",
            "broker and messaging (hop p50 − paced execute p50)",
            1,
        );
        row.p50_ms = hop - paced_execute;
        rows.push(row.note(format!(
            "the tool-hop read row's p50 less execute()'s when paced as in the hop (back to back, \
             execute() p50 is {execute:.3} ms): consume, acknowledgement, reply publish, the caller's wake"
        )));
    }
    Ok(rows)
}

/// A stage breakdown as rows of `section`, with `execute()`'s p50.
fn stage_rows(section: &'static str, stages: Vec<stages::Stage>) -> (Vec<Row>, Option<f64>) {
    let mut rows = Vec::new();
    let mut execute_p50 = None;
    for stage in stages {
        let mut row = Row::new(section, stage.name.clone(), 1);
        row.n = stage.times.len();
        row.p50_ms = stage.times.ms(0.5);
        row.p99_ms = stage.times.ms(0.99);
        if stage.name == stages::EXECUTE {
            execute_p50 = Some(row.p50_ms);
        }
        if stage.name == stages::PAUSE {
            row = row.note("the paced run's pause after each call, as slept");
        }
        rows.push(row);
    }
    (rows, execute_p50)
}

fn git_commit() -> Option<String> {
    let output = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}
