//! `rover-eval` (`make eval`): fixed staff chats (`utterances.toml`) through a Rover of its own —
//! the real gateway, worker and tool server on a fresh vhost and seeded database — against a
//! model, scored on tool choice, arguments, unintended writes, false claims and finished turns.
//!
//! Layout: `cases` (the file and its checks), `prompts` (`--prompts`), `stack` (the processes),
//! `turn` (one turn over HTTP and SSE, its questions answered, and its audit rows), `names` (the
//! rows `@kind:name` checks name), `claims` (what a reply says was done), `score` (pure
//! scoring), `report` (table and JSON).

pub mod cases;
pub use rover_agent::claims;
pub mod feedback;
pub mod names;
pub mod prompts;
pub mod report;
pub mod score;
pub mod stack;
pub mod turn;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::cases::Case;
use crate::names::{Directory, Names};
use crate::report::{CaseResult, FollowupResult, Report, Totals};
use crate::score::{Observed, Score};
use crate::stack::{ModelChoice, Stack};

/// What one run needs.
#[derive(Debug, Clone)]
pub struct Options {
    pub model: ModelChoice,
    pub cases: Vec<Case>,
    pub subset: Option<String>,
    /// Longest a turn may take to reach `finish`.
    pub turn_timeout: Duration,
    /// The worker's deadline for one model request.
    pub model_timeout_ms: u64,
    /// Where the services' logs go (none when `None`).
    pub log_dir: Option<PathBuf>,
    /// Called with each result as it comes (progress).
    pub on_result: Option<fn(&CaseResult)>,
}

/// Starts the stack, runs every case in order, scores them, and stops the stack.
pub async fn run(options: Options) -> anyhow::Result<Report> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let started_at = chrono::Utc::now().to_rfc3339();
    let stack = Stack::start(
        &options.model,
        options.model_timeout_ms,
        options.log_dir.as_deref(),
    )
    .await?;
    let http = reqwest::Client::builder()
        .timeout(options.turn_timeout + Duration::from_secs(5))
        .build()?;
    let (model, model_name) = match &options.model {
        ModelChoice::Scripted { .. } => ("scripted".to_owned(), "rover-scripted".to_owned()),
        ModelChoice::Url { base_url, name } => (base_url.clone(), name.clone()),
    };
    let model_served = served_model(&http, &stack.model_url).await;
    let mut results = Vec::new();
    for case in options.cases {
        let mut turns = run_case(&stack, &http, &case, options.turn_timeout).await;
        let score = Score::of_turns(turns.iter().map(|(_, s)| s));
        let (observed, _) = turns.remove(0);
        let followups = turns
            .into_iter()
            .zip(&case.followups)
            .map(|((observed, score), followup)| FollowupResult {
                text: followup.text.clone(),
                score,
                observed,
            })
            .collect();
        let result = CaseResult {
            passed: score.passed(),
            case,
            score,
            observed,
            followups,
        };
        if let Some(f) = options.on_result {
            f(&result);
        }
        results.push(result);
    }
    let totals = Totals::of(&results);
    Ok(Report {
        started_at,
        model,
        model_name,
        model_served,
        subset: options.subset,
        results,
        totals,
    })
}

/// The first model id `GET /v1/models` lists, if the server answers it.
async fn served_model(http: &reqwest::Client, base_url: &str) -> Option<String> {
    let body: Value = http
        .get(format!("{}/models", base_url.trim_end_matches('/')))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    body["data"][0]["id"].as_str().map(str::to_owned)
}

/// Runs a case's turns in one chat, each scored against the rows as they were just before it
/// (a department the first turn creates is named by the next).
async fn run_case(
    stack: &Stack,
    http: &reqwest::Client,
    case: &Case,
    timeout: Duration,
) -> Vec<(Observed, Score)> {
    let mut chat = turn::Chat::new(stack, &case.user);
    let mut turns = Vec::new();
    for expect in case.turns() {
        let directory = Directory::load(&stack.owner).await;
        let mut observed =
            turn::run(stack, http, &mut chat, expect.text, expect.answers, timeout).await;
        let directory = directory.unwrap_or_else(|e| {
            observed
                .harness_errors
                .push(format!("reading the rows checks name: {e}"));
            Directory::default()
        });
        let names = Names {
            school: directory.school_of(&case.user),
            directory: &directory,
            ids: &stack.db.ids,
        };
        let score = score::score(&expect, &observed, &names);
        turns.push((observed, score));
    }
    turns
}
