//! Running a turn's request: the agent built from the runtime context, the window of the thread it
//! is sent, and the outcome kept in the thread's history.

use futures::FutureExt as _;
use rover_agent::compact::{self, Budget, Summary, Window};
use rover_agent::sandbox::{Sandbox, SandboxOwner};
use rover_agent::{
    Agent, Journal, Mounts, NewArtifact, StepPart, TurnDeps, build_agent, continue_turn, run_turn,
};
use rover_contracts::ErrorCode;
use rover_contracts::wire::{FinishReason, TurnInput, TurnRequest};
use serde_json::Value;

use crate::Shared;

pub(crate) async fn run_request(
    shared: &Shared,
    request: &TurnRequest,
    events: &rover_agent::Events,
    journal: &Journal,
    budget: &rover_agent::budget::TurnBudget,
    stop: &rover_agent::Stop,
) -> Result<FinishReason, Failure> {
    let context = &request.context;
    let school = context.user_details.school.id;
    let internal = |what: &str| {
        let what = what.to_owned();
        move |error: rover_domain::DomainError| {
            tracing::error!(%error, "{what}");
            Failure {
                code: error.code(),
                message: "The conversation could not be loaded. Please try again.".to_owned(),
            }
        }
    };
    let mut tx = rover_domain::begin_tenant(&shared.pool, school)
        .await
        .map_err(internal("begin"))?;

    // A continuation starts again from its chain's first message, after the thread before it.
    let (history, first) = match &request.input {
        TurnInput::Continue { chain } => {
            let root = chain.first().copied().unwrap_or(request.turn_id);
            let (history, first) =
                rover_domain::approvals::history_before(&mut tx, request.thread_id, root)
                    .await
                    .map_err(internal("history"))?;
            let first = first.ok_or_else(|| Failure {
                code: ErrorCode::InvalidRequest,
                message: "The request this approval continues is no longer in the chat.".to_owned(),
            })?;
            (history, first)
        }
        input => (
            rover_domain::conversation::history(&mut tx, request.thread_id)
                .await
                .map_err(internal("history"))?,
            rover_agent::run::input_message(input, context),
        ),
    };
    let summary = rover_domain::conversation::summary(&mut tx, request.thread_id)
        .await
        .map_err(internal("summary"))?;
    tx.commit().await.map_err(internal("commit"))?;
    if let TurnInput::AskUserAnswer { tool_call_id, .. } = &request.input
        && rover_agent::pending_question(&history) != Some(tool_call_id.as_str())
    {
        return Err(Failure {
            code: ErrorCode::InvalidRequest,
            message: "That question is no longer waiting for an answer.".to_owned(),
        });
    }

    let sandbox = match &shared.settings.agent.sandbox_dir {
        Some(dir) => Some(
            // Per school (and user): a thread is keyed by (school, id), so the same id in two
            // schools is two threads, and must be two file areas.
            Sandbox::open(
                dir,
                SandboxOwner {
                    school,
                    user: context.user_details.user_id,
                    thread: request.thread_id,
                },
                shared.settings.agent.sandbox_limits(),
            )
            .map_err(|e| Failure {
                code: ErrorCode::Internal,
                message: format!("The chat's files are unavailable: {e}"),
            })?,
        ),
        None => None,
    };
    let artifacts = {
        let (pool, thread, user) = (
            shared.pool.clone(),
            request.thread_id,
            context.user_details.user_id,
        );
        move |artifact: NewArtifact| {
            let pool = pool.clone();
            async move {
                let mut tx = rover_domain::begin_tenant(&pool, school)
                    .await
                    .map_err(|e| e.to_string())?;
                let id = rover_domain::conversation::save_artifact(
                    &mut tx,
                    thread,
                    user,
                    &artifact.title,
                    &artifact.media_type,
                    &artifact.content,
                )
                .await
                .map_err(|e| e.to_string())?;
                tx.commit().await.map_err(|e| e.to_string())?;
                Ok(id)
            }
            .boxed()
        }
    };
    // Each recorded part also asks whether the turn was asked to stop: a stop whose word was lost
    // still stops the turn at its next step. A part is recorded after what it records happened
    // (a write committed by the tool server), so a failed record is tried again for a few seconds
    // — a Postgres restart or failover — before the turn gives up (recording is idempotent: the
    // first record wins).
    let recorder = {
        let (pool, thread, turn) = (shared.pool.clone(), request.thread_id, request.turn_id);
        let stop = stop.clone();
        move |part: StepPart| {
            let (pool, stop) = (pool.clone(), stop.clone());
            let part = rover_domain::conversation::StepPart {
                agent: part.agent,
                step: part.step,
                part: part.part,
                record: part.record,
            };
            async move {
                let mut pause = rover_settings::Backoff::new(RECORD_FIRST_PAUSE, RECORD_MAX_PAUSE);
                let mut attempt = 1;
                let stopped = loop {
                    match record_part(&pool, school, thread, turn, &part).await {
                        Ok(stopped) => break stopped,
                        Err(error) if attempt < RECORD_ATTEMPTS => {
                            tracing::warn!(%error, attempt, "could not record the turn's progress; trying again");
                            tokio::time::sleep(pause.next_delay()).await;
                            attempt += 1;
                        }
                        Err(error) => return Err(error.to_string()),
                    }
                };
                if stopped {
                    stop.request();
                }
                Ok(())
            }
            .boxed()
        }
    };
    // Built fresh for every turn from this turn's context: a role change shows on the next turn.
    let agent = build_agent(
        context,
        &shared.skills,
        Mounts {
            sandbox: sandbox.is_some(),
        },
    );
    let history = window(shared, request, &agent, &first, history, summary, budget).await?;
    let gate = crate::approvals::gate(shared, request);
    let deps = TurnDeps {
        model: &shared.model,
        tools: &shared.tools,
        identity: &request.identity,
        context,
        skills: &shared.skills,
        sandbox: sandbox.as_ref(),
        turn_id: request.turn_id,
        thread_id: request.thread_id,
        step_limit: shared.settings.agent.step_limit,
        events,
        artifacts: Some(&artifacts),
        metrics: Some(&shared.agent_metrics),
        capture_content: shared.settings.telemetry.capture_content,
        journal,
        record: Some(&recorder),
        budget,
        approvals: Some(&gate),
        stop,
    };
    let result = match &request.input {
        TurnInput::Continue { .. } => continue_turn(&agent, history, first, deps).await,
        input => run_turn(&agent, history, input, deps).await,
    }
    .map_err(|e| match e {
        rover_agent::model::ModelError::Budget(spent) => spent_budget(shared, &spent),
        rover_agent::model::ModelError::Journal(error) => {
            tracing::error!(%error, "could not record the turn's progress");
            Failure {
                code: ErrorCode::Unavailable,
                message: "The assistant could not save its progress. Please try again.".to_owned(),
            }
        }
        e => Failure {
            code: ErrorCode::ModelError,
            message: format!("The assistant's model failed: {e}"),
        },
    })?;

    let mut tx = rover_domain::begin_tenant(&shared.pool, school)
        .await
        .map_err(internal("begin"))?;
    rover_domain::conversation::append(
        &mut tx,
        request.thread_id,
        request.turn_id,
        &result.messages,
    )
    .await
    .map_err(internal("append"))?;
    tx.commit().await.map_err(internal("commit"))?;
    Ok(result.finish)
}

/// Attempts at recording a part of a turn, and the pauses between them (doubling, capped): about
/// 4.5 s in all, longer than a local Postgres restart.
const RECORD_ATTEMPTS: u32 = 8;
const RECORD_FIRST_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);
const RECORD_MAX_PAUSE: std::time::Duration = std::time::Duration::from_secs(1);

/// Records `part` of `turn` and reads whether the turn was asked to stop, in one transaction.
async fn record_part(
    pool: &sqlx::PgPool,
    school: rover_contracts::ids::SchoolId,
    thread: rover_contracts::ids::ThreadId,
    turn: rover_contracts::ids::TurnId,
    part: &rover_domain::conversation::StepPart,
) -> Result<bool, rover_domain::DomainError> {
    let mut tx = rover_domain::begin_tenant(pool, school).await?;
    rover_domain::conversation::record_step(&mut tx, thread, turn, part).await?;
    let stopped = rover_domain::conversation::stop_requested(&mut tx, turn).await?;
    tx.commit().await?;
    Ok(stopped)
}

/// The part of the thread's history this turn sends, under the context budget
/// (`rover_agent::compact`). When it does not fit, the model first folds the oldest turns into
/// the thread's stored summary.
#[tracing::instrument(skip_all, fields(history = history.len(), summarised = tracing::field::Empty))]
pub(crate) async fn window(
    shared: &Shared,
    request: &TurnRequest,
    agent: &Agent,
    input: &Value,
    history: Vec<Value>,
    stored: Option<(usize, String)>,
    spend: &rover_agent::budget::TurnBudget,
) -> Result<Vec<Value>, Failure> {
    let budget = Budget {
        max_tokens: shared.settings.agent.context_budget_tokens,
        tool_result_max_tokens: shared.settings.agent.tool_result_max_tokens,
    };
    let fixed = compact::fixed_cost(&agent.system_prompt, &agent.tool_definitions(), input);
    let mut summary = stored.map(|(covers, text)| Summary { covers, text });
    // One summarising pass always fits (see `compact::fit`); the bound is a guard.
    for _ in 0..3 {
        let (from, to) = match compact::fit(&history, summary.as_ref(), fixed, budget) {
            Window::Fits(messages) => return Ok(messages),
            Window::TooLarge { fixed } => {
                return Err(Failure {
                    code: ErrorCode::InvalidRequest,
                    message: format!(
                        "This message, with Rover's instructions and tools (about {fixed} \
                         tokens), is too long for the model's context. Please shorten it."
                    ),
                });
            }
            Window::Summarise { from, to } => (from, to),
        };
        tracing::Span::current().record("summarised", to);
        let previous = summary.as_ref().map(|s| s.text.as_str());
        let text = compact::summarise(&shared.model, spend, previous, &history[from..to], budget)
            .await
            .map_err(|e| match e {
                rover_agent::model::ModelError::Budget(spent) => spent_budget(shared, &spent),
                e => Failure {
                    code: ErrorCode::ModelError,
                    message: format!(
                        "The assistant's model failed while summarising the thread: {e}"
                    ),
                },
            })?;
        let saved = async {
            let mut tx =
                rover_domain::begin_tenant(&shared.pool, request.context.user_details.school.id)
                    .await?;
            rover_domain::conversation::save_summary(&mut tx, request.thread_id, to, &text).await?;
            tx.commit().await
        };
        saved.await.map_err(|error| {
            tracing::error!(%error, "could not store the thread's summary");
            Failure {
                code: error.code(),
                message: "The conversation could not be saved. Please try again.".to_owned(),
            }
        })?;
        tracing::info!(covers = to, "the thread's oldest turns were summarised");
        summary = Some(Summary { covers: to, text });
    }
    Err(Failure {
        code: ErrorCode::Internal,
        message: "The conversation could not be fitted to the model's context.".to_owned(),
    })
}

/// Why a turn failed, for the client.
pub(crate) struct Failure {
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
}

/// A turn stopped by a spent budget: counted by limit, and told to the client in one sentence.
pub(crate) fn spent_budget(shared: &Shared, spent: &rover_agent::budget::BudgetError) -> Failure {
    shared
        .turns
        .budget_exceeded
        .get_or_create(&rover_telemetry::metrics::LimitLabels {
            limit: spent.limit(),
        })
        .inc();
    Failure {
        code: ErrorCode::BudgetExceeded,
        message: spent.to_string(),
    }
}
