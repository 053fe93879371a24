//! The report: one row per measured case, printed as a table and written as JSON
//! (`<out>/bench-<timestamp>.json` and `<out>/latest.json`) with the machine it ran on; read back
//! from that JSON, it prints the same table for `docs/benchmarks.md` (`--markdown-from`,
//! `make docs`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::cpu::ProcessCpu;
use crate::world::Machine;

/// One measured case.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Row {
    pub(crate) section: String,
    pub(crate) case: String,
    pub(crate) concurrency: usize,
    /// Successful operations measured.
    pub(crate) n: usize,
    pub(crate) errors: u64,
    /// Operations per second (none where a rate means nothing, as for the in-process agent build).
    pub(crate) rate_per_s: Option<f64>,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    /// This row's p50 over the floor's p50 at the same concurrency.
    pub(crate) p50_vs_floor: Option<f64>,
    /// This row's rate over the floor's rate at the same concurrency.
    pub(crate) rate_vs_floor: Option<f64>,
    /// This row's rate over the same work's SQL alone at the same concurrency.
    pub(crate) rate_vs_sql: Option<f64>,
    /// The goal this row is held to, as a sentence.
    pub(crate) goal: Option<String>,
    pub(crate) pass: Option<bool>,
    /// Anything else worth reading (the first error, memory, open streams).
    pub(crate) note: Option<String>,
    /// Each Rover process's own CPU over the row, per operation (tool call, turn): `/proc`'s
    /// user + system time (`cpu.rs`). Empty where no Rover process does the row's work.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) cpu: Vec<ProcessCpu>,
}

impl Row {
    pub(crate) fn new(section: &'static str, case: impl Into<String>, concurrency: usize) -> Row {
        Row {
            section: section.to_owned(),
            case: case.into(),
            concurrency,
            n: 0,
            errors: 0,
            rate_per_s: None,
            p50_ms: 0.0,
            p99_ms: 0.0,
            p50_vs_floor: None,
            rate_vs_floor: None,
            rate_vs_sql: None,
            goal: None,
            pass: None,
            note: None,
            cpu: Vec::new(),
        }
    }

    /// Sets the goal and whether it was reached.
    pub(crate) fn goal(mut self, goal: impl Into<String>, pass: bool) -> Row {
        self.goal = Some(goal.into());
        self.pass = Some(pass);
        self
    }

    pub(crate) fn note(mut self, note: impl Into<String>) -> Row {
        self.note = Some(note.into());
        self
    }
}

/// Everything one run produced.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Report {
    pub(crate) started_at: String,
    pub(crate) git_commit: Option<String>,
    pub(crate) machine: Machine,
    /// The settings that differ from the services' defaults, and the run's knobs.
    pub(crate) settings: serde_json::Value,
    /// The tool-call frame size the floor's echo body is padded to, in bytes.
    pub(crate) payload_bytes: Option<usize>,
    pub(crate) rows: Vec<Row>,
}

impl Report {
    /// The table, as Markdown: readable in a terminal, and what `--markdown-from` prints for
    /// `docs/benchmarks.md`.
    pub(crate) fn table(&self) -> String {
        let mut out = String::new();
        out.push_str(
            "| section | case | c | n | req/s | p50 ms | p99 ms | CPU µs per op | vs floor | goal | result |\n\
             |---|---|--:|--:|--:|--:|--:|---|---|---|---|\n",
        );
        for row in &self.rows {
            let rate = row.rate_per_s.map_or("–".to_owned(), |r| format!("{r:.0}"));
            let mut vs = match (row.p50_vs_floor, row.rate_vs_floor) {
                (Some(p), Some(r)) => format!("p50 {p:.2}×, rate {r:.2}×"),
                (Some(p), None) => format!("p50 {p:.2}×"),
                (None, Some(r)) => format!("rate {r:.2}×"),
                (None, None) => String::new(),
            };
            if let Some(sql) = row.rate_vs_sql {
                let _ = write!(vs, "; rate {sql:.2}× SQL alone");
            }
            let result = match row.pass {
                Some(true) => "pass",
                Some(false) => "**miss**",
                None => "",
            };
            let errors = if row.errors > 0 {
                format!(" ({} errors)", row.errors)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {}{errors} | {rate} | {} | {} | {} | {vs} | {} | {result} |",
                row.section,
                row.case,
                row.concurrency,
                row.n,
                ms(row.p50_ms),
                // A derived row (a difference of two p50s) has no p99.
                if row.n == 0 {
                    "–".to_owned()
                } else {
                    ms(row.p99_ms)
                },
                cpu_cell(&row.cpu),
                row.goal.as_deref().unwrap_or(""),
            );
        }
        let notes: Vec<String> = self
            .rows
            .iter()
            .filter_map(|r| {
                Some(format!(
                    "- {} / {}: {}",
                    r.section,
                    r.case,
                    r.note.as_ref()?
                ))
            })
            .collect();
        if !notes.is_empty() {
            out.push('\n');
            out.push_str(&notes.join("\n"));
            out.push('\n');
        }
        out
    }

    /// A run written by [`Report::write`], read back.
    pub(crate) fn read(path: &Path) -> anyhow::Result<Report> {
        let json = std::fs::read_to_string(path)
            .with_context(|| format!("Failed to read {}", path.display()))?;
        serde_json::from_str(&json)
            .with_context(|| format!("{} is not a rover-bench report", path.display()))
    }

    /// What `docs/benchmarks.md` shows of a run (`--markdown-from`, `make docs`): where and when
    /// it ran, then [`Report::table`].
    pub(crate) fn markdown(&self) -> String {
        let commit = self.git_commit.as_deref().map_or(String::new(), |c| {
            format!(", commit `{}`", &c[..c.len().min(7)])
        });
        format!(
            "Run of {}{commit}, on {}.\n\n{}",
            self.started_at,
            self.machine_line(),
            self.table()
        )
    }

    /// Machine facts as one line.
    pub(crate) fn machine_line(&self) -> String {
        let m = &self.machine;
        format!(
            "{} cores, {}, {} GiB RAM, Linux {}, RabbitMQ {}, Postgres {}",
            m.nproc,
            m.cpu.as_deref().unwrap_or("unknown CPU"),
            m.memory_gib.map_or("?".to_owned(), |g| g.to_string()),
            m.kernel.as_deref().unwrap_or("?"),
            m.rabbitmq.as_deref().unwrap_or("?"),
            m.postgres.as_deref().unwrap_or("?"),
        )
    }

    /// Writes `bench-<timestamp>.json` and `latest.json` under `dir`; returns the first path.
    pub(crate) fn write(&self, dir: &Path, stamp: &str) -> anyhow::Result<PathBuf> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("Failed to create {}", dir.display()))?;
        let json = serde_json::to_string_pretty(self)?;
        let path = dir.join(format!("bench-{stamp}.json"));
        std::fs::write(&path, &json)
            .with_context(|| format!("Failed to write {}", path.display()))?;
        std::fs::write(dir.join("latest.json"), &json)
            .with_context(|| format!("Failed to write {}", dir.join("latest.json").display()))?;
        Ok(path)
    }
}

/// A row's CPU per operation, each process by its short name (`toolserver 61`).
fn cpu_cell(cpu: &[ProcessCpu]) -> String {
    cpu.iter()
        .map(|p| {
            let name = p.process.trim_start_matches("rover-");
            let name = name.strip_suffix("-model").unwrap_or(name);
            match p.instructions_per_op {
                Some(instructions) => format!("{name} {:.0}k instr", instructions / 1e3),
                None => format!("{name} {:.0}", p.per_op_us),
            }
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

/// Milliseconds with precision that suits their size.
fn ms(value: f64) -> String {
    if value < 0.1 {
        format!("{value:.4}")
    } else if value < 10.0 {
        format!("{value:.3}")
    } else {
        format!("{value:.1}")
    }
}
