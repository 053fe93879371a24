//! The eval's table (printed) and JSON (written under `target/eval/`).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::Serialize;

use crate::cases::Case;
use crate::score::{Observed, Score};

/// One case's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub case: Case,
    pub score: Score,
    pub passed: bool,
    pub observed: Observed,
}

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// RFC 3339, UTC.
    pub started_at: String,
    /// `scripted` or the model's base URL.
    pub model: String,
    /// The model name sent, and what `/v1/models` said it serves (when it answered).
    pub model_name: String,
    pub model_served: Option<String>,
    pub subset: Option<String>,
    pub results: Vec<CaseResult>,
    pub totals: Totals,
}

/// How many cases passed each score, of how many.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    pub cases: usize,
    pub tool: usize,
    pub args: usize,
    pub writes: usize,
    pub answer: usize,
    pub done: usize,
    pub passed: usize,
    /// Turn time percentiles over the cases, in seconds.
    pub p50_secs: f64,
    pub p90_secs: f64,
}

impl Totals {
    pub fn of(results: &[CaseResult]) -> Totals {
        let count = |f: &dyn Fn(&CaseResult) -> bool| results.iter().filter(|r| f(r)).count();
        Totals {
            cases: results.len(),
            tool: count(&|r| r.score.tool),
            args: count(&|r| r.score.args),
            writes: count(&|r| r.score.writes),
            answer: count(&|r| r.score.answer),
            done: count(&|r| r.score.done),
            passed: count(&|r| r.passed),
            p50_secs: percentile(results, 0.5),
            p90_secs: percentile(results, 0.9),
        }
    }
}

/// The nearest-rank percentile `q` of the cases' turn times, in seconds.
fn percentile(results: &[CaseResult], q: f64) -> f64 {
    let mut secs: Vec<f64> = results
        .iter()
        .map(|r| r.observed.millis as f64 / 1000.0)
        .collect();
    if secs.is_empty() {
        return 0.0;
    }
    secs.sort_by(f64::total_cmp);
    let rank = (q * secs.len() as f64).ceil() as usize;
    secs[rank.clamp(1, secs.len()) - 1]
}

fn mark(ok: bool) -> &'static str {
    if ok { "ok" } else { "FAIL" }
}

impl Report {
    /// The Markdown table (one row per case, then the totals), with each failure's notes below.
    pub fn table(&self) -> String {
        let mut out = String::from(
            "| case | kind | user | tools called | tool | args | writes | answer | done | first s | prompt tok | s |\n|---|---|---|---|---|---|---|---|---|--:|--:|--:|\n",
        );
        for r in &self.results {
            let calls: Vec<String> = r
                .observed
                .calls
                .iter()
                .map(|c| {
                    let approval = if c.approval_requested { "⏸" } else { "" };
                    if c.agent == "rover" {
                        format!("{}{approval}", c.name)
                    } else {
                        format!("{}:{}{approval}", c.agent, c.name)
                    }
                })
                .collect();
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} |\n",
                r.case.id,
                r.case.kind.as_str(),
                r.case.user,
                if calls.is_empty() {
                    "–".to_owned()
                } else {
                    calls.join(", ")
                },
                mark(r.score.tool),
                mark(r.score.args),
                mark(r.score.writes),
                mark(r.score.answer),
                mark(r.score.done),
                r.observed
                    .first_output_millis
                    .map_or("–".to_owned(), |ms| format!("{:.1}", ms as f64 / 1000.0)),
                r.observed
                    .input_tokens
                    .map_or("–".to_owned(), |t| t.to_string()),
                r.observed.millis as f64 / 1000.0,
            ));
        }
        let t = &self.totals;
        out.push_str(&format!(
            "| **total** | | | **{}/{} passed** | {}/{} | {}/{} | {}/{} | {}/{} | {}/{} | | | p50 {:.1}, p90 {:.1} |\n",
            t.passed,
            t.cases,
            t.tool,
            t.cases,
            t.args,
            t.cases,
            t.writes,
            t.cases,
            t.answer,
            t.cases,
            t.done,
            t.cases,
            t.p50_secs,
            t.p90_secs
        ));
        for r in self.results.iter().filter(|r| !r.passed) {
            out.push_str(&format!("- {}: {}\n", r.case.id, r.score.notes.join("; ")));
        }
        out
    }

    /// Whether the run may pass a gate (CI's): no unintended write, no harness error, no turn
    /// without `finish`, and at least `min_pass` of the cases passed. `Err` lists what failed.
    pub fn gate(&self, min_pass: f64) -> Result<(), GateFailure> {
        let mut problems = Vec::new();
        for r in &self.results {
            let unintended = r
                .score
                .notes
                .iter()
                .filter(|n| n.starts_with("unintended write"));
            for note in unintended {
                problems.push(format!("{}: {note}", r.case.id));
            }
            for error in &r.observed.harness_errors {
                problems.push(format!("{}: harness error: {error}", r.case.id));
            }
            if r.observed.finish.is_none() && r.observed.harness_errors.is_empty() {
                problems.push(format!("{}: the turn never reached `finish`", r.case.id));
            }
        }
        let t = &self.totals;
        let rate = t.passed as f64 / t.cases.max(1) as f64;
        if rate < min_pass {
            problems.push(format!(
                "{}/{} cases passed ({:.0}%), below --min-pass {:.0}%",
                t.passed,
                t.cases,
                rate * 100.0,
                min_pass * 100.0
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(GateFailure { problems })
        }
    }

    /// Writes `eval-<timestamp>.json` and `latest.json` into `dir`; returns the first path.
    pub fn write(&self, dir: &Path) -> anyhow::Result<PathBuf> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("Failed to create {}", dir.display()))?;
        let json = serde_json::to_string_pretty(self)?;
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
        let path = dir.join(format!("eval-{stamp}.json"));
        std::fs::write(&path, &json)?;
        std::fs::write(dir.join("latest.json"), &json)?;
        Ok(path)
    }
}

/// What kept a run from passing its gate, one line each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the eval failed its gate:\n- {}", problems.join("\n- "))]
pub struct GateFailure {
    /// Each problem, prefixed with its case id where it has one.
    pub problems: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::{Observed, Write, score};

    struct Plain;
    impl crate::score::Resolve for Plain {
        fn resolve(
            &self,
            value: &serde_json::Value,
        ) -> Result<serde_json::Value, crate::score::ResolveError> {
            Ok(value.clone())
        }
    }

    fn result(case: &str, observed: Observed) -> CaseResult {
        let case = crate::cases::parse(&format!(
            "[[case]]\nid = \"{case}\"\nuser = \"admin@hill.school\"\ntext = \"x\"\nkind = \"read\"\n"
        ))
        .unwrap()
        .remove(0);
        let score = score(&case, &observed, &Plain);
        CaseResult {
            passed: score.passed(),
            case,
            score,
            observed,
        }
    }

    fn report(results: Vec<CaseResult>) -> Report {
        Report {
            started_at: String::new(),
            model: String::new(),
            model_name: String::new(),
            model_served: None,
            subset: None,
            totals: Totals::of(&results),
            results,
        }
    }

    fn finished() -> Observed {
        Observed {
            finish: Some("stop".to_owned()),
            ..Observed::default()
        }
    }

    #[test]
    fn the_gate_fails_on_an_unintended_write_a_harness_error_no_finish_or_too_few_passes() {
        assert_eq!(report(vec![result("a", finished())]).gate(1.0), Ok(()));
        let mut wrote = finished();
        wrote.writes.push(Write {
            event: "create.department".to_owned(),
            campus: None,
        });
        let mut broken = finished();
        broken.harness_errors.push("POST /api/chat: 503".to_owned());
        let problems = report(vec![
            result("wrote", wrote),
            result("broken", broken),
            result("unfinished", Observed::default()),
            result("fine", finished()),
        ])
        .gate(0.0)
        .unwrap_err()
        .problems;
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].starts_with("wrote: unintended write"));
        assert!(problems[1].starts_with("broken: harness error"));
        assert!(problems[2].starts_with("unfinished: the turn never reached"));
        // Only the pass rate.
        let mut failing = finished();
        failing.errors.push("the model failed".to_owned());
        let problems = report(vec![result("a", finished()), result("b", failing)])
            .gate(0.75)
            .unwrap_err()
            .problems;
        assert_eq!(problems, ["1/2 cases passed (50%), below --min-pass 75%"]);
    }
}
