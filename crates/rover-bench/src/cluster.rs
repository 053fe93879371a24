//! The cluster rows: RabbitMQ's own round trip, the tool hop and whole turns on the three-node
//! RabbitMQ cluster of `scripts/rabbitmq-cluster.sh` (quorum turns and tools queues, replicated on
//! every node), on a world of their own, beside the same rows on the single node. The cluster is
//! started if it is not up, and left running.

use std::sync::Arc;

use rover_testkit::{LocalCluster, TestVhost};

use crate::floor::{Floor, QueueKind};
use crate::report::Row;
use crate::stats::{Sorted, Timing, drive};
use crate::toolhop::ToolHop;
use crate::turns::{Stack, StackOptions};
use crate::world::World;
use crate::{HOP_CASES, measured};

/// Every cluster row, in the order the report shows them.
pub(crate) async fn rows(timing: Timing, payload: usize) -> anyhow::Result<Vec<Row>> {
    eprintln!("rover-bench: cluster: starting the three-node RabbitMQ cluster (if it is not up)…");
    let cluster = tokio::task::spawn_blocking(LocalCluster::start).await?;
    let world =
        World::on(tokio::task::spawn_blocking(move || TestVhost::create_on(cluster)).await?).await;
    let mut rows = floor_rows(&world, timing, payload).await?;
    rows.extend(hop_rows(&world, timing).await?);
    rows.extend(turn_rows(&world, timing).await?);
    Ok(rows)
}

/// RabbitMQ's own round trip on the cluster, on a queue of each kind.
async fn floor_rows(world: &World, timing: Timing, payload: usize) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for (kind, label) in [
        (QueueKind::Classic, "echo, classic queue (one node's)"),
        (QueueKind::Quorum, "echo, quorum queue (three replicas)"),
    ] {
        let floor = Arc::new(Floor::start(&world.vhost.url(), kind, payload).await?);
        for c in [1, 64] {
            eprintln!("rover-bench: cluster: floor ({label}) at c={c}…");
            let f = floor.clone();
            let run = drive(c, timing, move |_| {
                let f = f.clone();
                async move { f.call().await }
            })
            .await;
            rows.push(measured(
                Row::new("cluster: floor", label, c),
                &run,
                &run.latencies(),
            ));
        }
        if let Ok(floor) = Arc::try_unwrap(floor) {
            floor.stop().await;
        }
    }

    Ok(rows)
}

/// The tool hop on the cluster, with the quorum tools queue the world's settings give it.
async fn hop_rows(world: &World, timing: Timing) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    let hop = Arc::new(ToolHop::start(world).await?);
    for (write, c) in HOP_CASES {
        let label = if write {
            "create_department (write), quorum tools queue"
        } else {
            "list_departments (read), quorum tools queue"
        };
        eprintln!("rover-bench: cluster: tool hop {label} at c={c}…");
        let h = hop.clone();
        let run = drive(c, timing, move |n| {
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
        rows.push(measured(
            Row::new("cluster: tool hop", label, c),
            &run,
            &run.latencies(),
        ));
    }
    if let Ok(hop) = Arc::try_unwrap(hop) {
        hop.stop().await;
    }
    Ok(rows)
}

/// Whole turns through the gateway on the cluster: how many a second.
async fn turn_rows(world: &World, timing: Timing) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    let options = StackOptions {
        model_flags: Vec::new(),
        worker_prefetch: 64,
    };
    let stack = Arc::new(Stack::start(world, &options)?);
    for c in [1, 64] {
        eprintln!("rover-bench: cluster: whole turns at c={c}…");
        let s = stack.clone();
        let run = drive(c, timing, move |_| {
            let s = s.clone();
            async move { s.turn(|| {}).await }
        })
        .await;
        let finish = Sorted::new(run.samples.iter().map(|(_, t)| t.finish).collect());
        let mut row = Row::new("cluster: turns", "finish (turns/s)", c);
        row.n = finish.len();
        row.errors = run.errors;
        row.rate_per_s = Some(run.rate());
        row.p50_ms = finish.ms(0.5);
        row.p99_ms = finish.ms(0.99);
        if let Some(error) = &run.first_error {
            row = row.note(format!("first error: {error}"));
        }
        rows.push(row);
    }
    drop(stack);
    Ok(rows)
}
