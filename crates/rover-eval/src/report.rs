//! The eval's table (printed) and JSON (written under `target/eval/`); read back from that JSON,
//! the same table for `docs/eval.md` (`rover-eval --markdown-from`, `make docs`).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::cases::Case;
use crate::score::{Observed, Score};

/// One case's outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseResult {
    pub case: Case,
    /// Every turn's scores: each passes when it passes in every turn.
    pub score: Score,
    pub passed: bool,
    /// The first turn (the case's `text` and its answers).
    pub observed: Observed,
    /// Each followup's turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub followups: Vec<FollowupResult>,
}

/// A followup's turn: its message, its own scores, and what was seen.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FollowupResult {
    pub text: String,
    pub score: Score,
    pub observed: Observed,
}

impl CaseResult {
    /// The case's turns, in order.
    pub fn turns(&self) -> impl Iterator<Item = &Observed> {
        std::iter::once(&self.observed).chain(self.followups.iter().map(|f| &f.observed))
    }

    /// The seconds of all its turns.
    pub fn millis(&self) -> u64 {
        self.turns().map(|o| o.millis).sum()
    }

    /// The model requests of all its turns.
    pub fn model_calls(&self) -> u32 {
        self.turns().map(|o| o.model_calls).sum()
    }
}

/// A whole run.
#[derive(Debug, Clone, Serialize, Deserialize)]
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

/// How many cases passed each score, of how many; times and model requests per turn (a staff
/// message with the continuations its answers drove).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Totals {
    pub cases: usize,
    pub tool: usize,
    pub args: usize,
    pub writes: usize,
    pub answer: usize,
    pub claims: usize,
    pub done: usize,
    pub passed: usize,
    /// Turns, over every case.
    pub turns: usize,
    /// Turns whose reply said something was done while nothing was written.
    pub false_claims: usize,
    /// Turn time percentiles, in seconds.
    pub p50_secs: f64,
    pub p90_secs: f64,
    /// Model requests per turn, percentiles.
    pub p50_model_calls: u32,
    pub p90_model_calls: u32,
}

impl Totals {
    pub fn of(results: &[CaseResult]) -> Totals {
        let count = |f: &dyn Fn(&CaseResult) -> bool| results.iter().filter(|r| f(r)).count();
        let turns: Vec<&Observed> = results.iter().flat_map(CaseResult::turns).collect();
        let turn_scores = results
            .iter()
            .flat_map(|r| r.followups.iter().map(|f| &f.score))
            .filter(|s| !s.claims)
            .count();
        let first_claims = results
            .iter()
            .filter(|r| r.score.notes.iter().any(|n| n.starts_with("false claim")))
            .count();
        let secs: Vec<f64> = turns.iter().map(|o| o.millis as f64 / 1000.0).collect();
        let calls: Vec<f64> = turns.iter().map(|o| f64::from(o.model_calls)).collect();
        Totals {
            cases: results.len(),
            tool: count(&|r| r.score.tool),
            args: count(&|r| r.score.args),
            writes: count(&|r| r.score.writes),
            answer: count(&|r| r.score.answer),
            claims: count(&|r| r.score.claims),
            done: count(&|r| r.score.done),
            passed: count(&|r| r.passed),
            turns: turns.len(),
            false_claims: first_claims + turn_scores,
            p50_secs: percentile(&secs, 0.5),
            p90_secs: percentile(&secs, 0.9),
            p50_model_calls: percentile(&calls, 0.5) as u32,
            p90_model_calls: percentile(&calls, 0.9) as u32,
        }
    }
}

/// The nearest-rank percentile `q` of `values`.
fn percentile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A turn's calls as the table shows them: `agent:tool` for a subagent's, `⏸` when held for
/// approval, `(worker)` when the worker made it.
fn calls_of(observed: &Observed) -> String {
    let calls: Vec<String> = observed
        .calls
        .iter()
        .map(|c| {
            let approval = if c.approval_requested { "⏸" } else { "" };
            let worker = if c.by_worker { "(worker)" } else { "" };
            if c.agent == "rover" {
                format!("{}{approval}{worker}", c.name)
            } else {
                format!("{}:{}{approval}{worker}", c.agent, c.name)
            }
        })
        .collect();
    if calls.is_empty() {
        "–".to_owned()
    } else {
        calls.join(", ")
    }
}

fn mark(ok: bool) -> &'static str {
    if ok { "ok" } else { "FAIL" }
}

impl Report {
    /// The Markdown table (one row per case, then the totals), with each failure's notes below.
    /// A chat's turns are separated by ` ⏵ ` in its calls; its seconds, prompt tokens and model
    /// calls are its turns' sums.
    pub fn table(&self) -> String {
        let mut out = String::from(
            "| case | kind | user | tools called | tool | args | writes | answer | claims | done | first s | prompt tok | calls | s |\n|---|---|---|---|---|---|---|---|---|---|--:|--:|--:|--:|\n",
        );
        for r in &self.results {
            let calls: Vec<String> = r.turns().map(calls_of).collect();
            let tokens: Option<u64> = r
                .turns()
                .filter_map(|o| o.input_tokens)
                .reduce(|a, b| a + b);
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} |\n",
                r.case.id,
                r.case.kind.as_str(),
                r.case.user,
                calls.join(" ⏵ "),
                mark(r.score.tool),
                mark(r.score.args),
                mark(r.score.writes),
                mark(r.score.answer),
                mark(r.score.claims),
                mark(r.score.done),
                r.observed
                    .first_output_millis
                    .map_or("–".to_owned(), |ms| format!("{:.1}", ms as f64 / 1000.0)),
                tokens.map_or("–".to_owned(), |t| t.to_string()),
                r.model_calls(),
                r.millis() as f64 / 1000.0,
            ));
        }
        let t = &self.totals;
        out.push_str(&format!(
            "| **total** | | | **{}/{} passed** | {}/{} | {}/{} | {}/{} | {}/{} | {}/{} | {}/{} | | | p50 {}, p90 {} | p50 {:.1}, p90 {:.1} |\n",
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
            t.claims,
            t.cases,
            t.done,
            t.cases,
            t.p50_model_calls,
            t.p90_model_calls,
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
                .filter(|n| n.contains("unintended write"));
            for note in unintended {
                problems.push(format!("{}: {note}", r.case.id));
            }
            for (i, turn) in r.turns().enumerate() {
                let at = if i == 0 {
                    r.case.id.clone()
                } else {
                    format!("{} (followup {i})", r.case.id)
                };
                for error in &turn.harness_errors {
                    problems.push(format!("{at}: harness error: {error}"));
                }
                if turn.finish.is_none() && turn.harness_errors.is_empty() {
                    problems.push(format!("{at}: the turn never reached `finish`"));
                }
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

    /// A run written by [`Report::write`], read back.
    pub fn read(path: &Path) -> anyhow::Result<Report> {
        let json = std::fs::read_to_string(path)
            .with_context(|| format!("Failed to read {}", path.display()))?;
        serde_json::from_str(&json)
            .with_context(|| format!("{} is not a rover-eval report", path.display()))
    }

    /// What `docs/eval.md` shows of a run (`--markdown-from`, `make docs`): which model, when,
    /// and the headline, then [`Report::table`].
    pub fn markdown(&self) -> String {
        let t = &self.totals;
        let served = match &self.model_served {
            Some(served) if *served != self.model_name => format!(" (served as `{served}`)"),
            _ => String::new(),
        };
        let subset = self
            .subset
            .as_deref()
            .map_or(String::new(), |s| format!(", subset `{s}`"));
        format!(
            "Run of {}, model `{}`{served}{subset}: **{}/{} cases passed**, {} turns, {} false \
             claims; turn seconds p50 {:.1}, p90 {:.1}.\n\n{}",
            self.started_at,
            self.model_name,
            t.passed,
            t.cases,
            t.turns,
            t.false_claims,
            t.p50_secs,
            t.p90_secs,
            self.table()
        )
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
    impl crate::names::Resolve for Plain {
        fn resolve(
            &self,
            value: &serde_json::Value,
        ) -> Result<crate::names::Want, crate::names::ResolveError> {
            Ok(crate::names::Want::Value(value.clone()))
        }
    }

    fn result(case: &str, observed: Observed) -> CaseResult {
        let case = crate::cases::parse(&format!(
            "[[case]]\nid = \"{case}\"\nuser = \"admin@hill.school\"\ntext = \"x\"\nkind = \"read\"\n"
        ))
        .unwrap()
        .remove(0);
        let score = score(&case.turns()[0], &observed, &Plain);
        CaseResult {
            passed: score.passed(),
            case,
            score,
            observed,
            followups: Vec::new(),
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
            ..Write::default()
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

    /// `make docs` prints a committed run's table from its JSON: what is read back prints what
    /// was written.
    #[test]
    fn a_report_read_back_from_its_json_prints_the_same_markdown() {
        let mut failing = finished();
        failing.errors.push("the model failed".to_owned());
        let written = report(vec![result("a", finished()), result("b", failing)]);
        let json = serde_json::to_string_pretty(&written).unwrap();
        let read: Report = serde_json::from_str(&json).unwrap();
        assert_eq!(read.markdown(), written.markdown());
        assert!(
            written.markdown().contains("**1/2 cases passed**"),
            "{}",
            written.markdown()
        );
    }

    #[test]
    fn a_chat_is_one_row_its_turns_count_apart_and_a_followup_can_fail_the_gate() {
        let mut first = finished();
        first.model_calls = 2;
        first.millis = 1_000;
        first.calls.push(crate::score::ToolCall {
            id: "ask-0".to_owned(),
            name: "ask_user".to_owned(),
            input: serde_json::Value::Null,
            agent: "rover".to_owned(),
            approval_requested: false,
            by_worker: true,
            settled: true,
            error: None,
        });
        let mut chat = result("chat", first);
        let mut later = Observed {
            model_calls: 6,
            millis: 3_000,
            ..Observed::default()
        };
        later
            .harness_errors
            .push("reading the stream: reset".to_owned());
        chat.followups.push(FollowupResult {
            text: "And another".to_owned(),
            score: score(&chat.case.turns()[0], &later, &Plain),
            observed: later,
        });
        chat.score = crate::score::Score::of_turns([&chat.score, &chat.followups[0].score]);
        chat.passed = chat.score.passed();
        let mut other = finished();
        other.model_calls = 4;
        other.millis = 2_000;
        let report = report(vec![chat, result("other", other)]);
        let t = &report.totals;
        assert_eq!((t.cases, t.turns, t.passed), (2, 3, 1));
        assert_eq!((t.p50_model_calls, t.p90_model_calls), (4, 6));
        assert!((t.p50_secs - 2.0).abs() < 1e-9 && (t.p90_secs - 3.0).abs() < 1e-9);
        let table = report.table();
        assert!(
            table.contains("| chat | read | admin@hill.school | ask_user(worker) ⏵ – |"),
            "{table}"
        );
        assert!(
            table.contains("| 8 | 4.0 |"),
            "the chat's calls and seconds: {table}"
        );
        assert!(
            table.contains("| p50 4, p90 6 | p50 2.0, p90 3.0 |"),
            "{table}"
        );
        let problems = report.gate(0.0).unwrap_err().problems;
        assert_eq!(
            problems,
            ["chat (followup 1): harness error: reading the stream: reset"]
        );
    }
}
