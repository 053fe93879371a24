//! `rover-eval` (`make eval`): fixed staff utterances (`utterances.toml`) through a Rover of its
//! own — the real gateway, worker and tool server on a fresh vhost and seeded database — against
//! a model, scored on tool choice, arguments, unintended writes and finished turns.
//!
//! Layout: `cases` (the file and its checks), `prompts` (`--prompts`), `stack` (the processes), `turn` (one case over HTTP
//! and SSE, and its audit rows), `score` (pure scoring), `report` (table and JSON).

pub mod cases;
pub mod feedback;
pub mod prompts;
pub mod report;
pub mod score;
pub mod stack;
pub mod turn;

use std::path::PathBuf;
use std::time::Duration;

use rover_domain::seed::DemoIds;
use serde_json::Value;

use crate::cases::Case;
use crate::report::{CaseResult, Report, Totals};
use crate::score::{Resolve, ResolveError};
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
        let observed = turn::run(&stack, &http, &case, options.turn_timeout).await;
        let score = score::score(&case, &observed, &DemoResolver(&stack.db.ids));
        let result = CaseResult {
            passed: score.passed(),
            case,
            score,
            observed,
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

/// `@kind:name` → the demo data's id.
struct DemoResolver<'a>(&'a DemoIds);

impl Resolve for DemoResolver<'_> {
    fn resolve(&self, value: &Value) -> Result<Value, ResolveError> {
        let Some(reference) = value.as_str().and_then(|s| s.strip_prefix('@')) else {
            return Ok(value.clone());
        };
        let (kind, name) = reference
            .split_once(':')
            .ok_or_else(|| ResolveError::Malformed(reference.to_owned()))?;
        let ids = self.0;
        let id = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match kind {
            "department" => Some(ids.department(name).to_string()),
            "subject" => Some(ids.subject(name).to_string()),
            "class" => Some(ids.class(name).to_string()),
            "student" => Some(ids.student(name).to_string()),
            "user" => Some(ids.user(name).to_string()),
            "profile" => Some(ids.profile(name).to_string()),
            "campus" => Some(ids.campus(name).to_string()),
            _ => None,
        }))
        .map_err(|_| ResolveError::Unknown {
            kind: kind.to_owned(),
            name: name.to_owned(),
        })?
        .ok_or_else(|| ResolveError::UnknownKind {
            kind: kind.to_owned(),
            reference: reference.to_owned(),
        })?;
        Ok(Value::String(id))
    }
}
