//! One turn, from its delivery to its settled message: identity check, what earlier deliveries
//! left behind, the run under its deadline and budget, and the `finish` that always ends it.

use std::time::{Duration, Instant};

use rover_agent::budget::Carried;
use rover_agent::{Emitted, Journal};
use rover_contracts::ErrorCode;
use rover_contracts::identity::TurnVerifier;
use rover_contracts::ids::TurnId;
use rover_contracts::wire::{FinishReason, TurnEvent, TurnEventKind, TurnInput, TurnRequest};
use rover_messaging::{Delivery, Outcome};
use tracing::Instrument as _;

use rover_domain::DomainError;
use rover_turnstore::{conversation_log, journal, open_turns, threads};

use crate::events::forward_events;
use crate::request::{Failure, Running, run_request};
use crate::resume::Continuation;
use crate::{Shared, budget};

/// Runs one turn and settles its message. Every turn ends visibly: `finish`, or `error` then
/// `finish`; the message is acked once the outcome is recorded.
pub(crate) async fn handle_turn(
    shared: &Shared,
    request: TurnRequest,
    delivery: Delivery,
) -> Outcome {
    let span = turn_span(&request, &delivery);
    let turn = request.turn_id;
    // The runtime context travels unsigned beside the signed identity; it must say the same, or
    // the message was not minted by a gateway and is dead-lettered without running anything.
    if let Err(error) = check_identity(&shared.verifier, &request) {
        tracing::warn!(turn_id = %turn, %error, "refusing a turn whose identity does not verify");
        return Outcome::Reject;
    }
    if shared.settings.telemetry.capture_content
        && let TurnInput::Message { text } = &request.input
    {
        span.record("rover.input.text", text.as_str());
    }
    // Registered before anything is read, so a stop sent from now on reaches this turn.
    let (stop, _running) = shared.control.running(turn);
    // What an earlier delivery of this turn did, if a worker died running it; a turn queued
    // behind another of its thread waits for it first.
    let prior = match prepare(shared, &request).instrument(span.clone()).await {
        Ok(prior) => prior,
        Err(error) => {
            tracing::warn!(parent: &span, %error, "could not read the turn's journal or its thread's open turns; retrying the turn");
            return Outcome::Retry;
        }
    };
    if prior.continuation.finished() || prior.completed.is_some() {
        finish_again(shared, &request, prior).instrument(span).await;
        return Outcome::Ack;
    }
    if prior.stopped {
        stop.request();
    }
    // A turn that keeps failing its workers is stopped while a worker can still tell the client:
    // on its last delivery it answers with an error, unrun, and goes to the dead-letter queue.
    let give_up =
        delivery.delivery_count + 1 >= u64::from(shared.settings.amqp.delivery_limit.max(1));
    let fresh = !prior.own_parts && prior.continuation.next_seq() == 0;
    if fresh {
        shared.turns.started.inc();
    } else {
        tracing::info!(
            parent: &span,
            parts = prior.journal.len(),
            events = prior.continuation.next_seq(),
            delivery_count = delivery.delivery_count,
            give_up,
            "resuming a turn from its journal"
        );
    }
    let turn = Turn {
        shared,
        request: &request,
        span: &span,
        started: Instant::now(),
        give_up,
    };
    turn.run(prior, &stop, fresh).await;
    if give_up {
        Outcome::Reject
    } else {
        Outcome::Ack
    }
}

/// The span of a turn's delivery.
fn turn_span(request: &TurnRequest, delivery: &Delivery) -> tracing::Span {
    tracing::info_span!(
        "rover.worker.turn",
        turn_id = %request.turn_id,
        thread_id = %request.thread_id,
        redelivered = delivery.redelivered,
        delivery_count = delivery.delivery_count,
        rover.input.text = tracing::field::Empty,
        rover.turn.finish_reason = tracing::field::Empty,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
    )
}

/// What earlier deliveries left behind, once the turns ahead of it on its thread have ended: a
/// turn queued behind another (the enqueue and interrupt policies) reads the history they leave
/// (and a stop sent meanwhile).
async fn prepare(shared: &Shared, request: &TurnRequest) -> Result<Prior, DomainError> {
    let prior = load_prior(shared, request).await?;
    if !prior.behind {
        return Ok(prior);
    }
    shared
        .control
        .wait_turn(
            request.thread_id,
            Duration::from_millis(shared.settings.agent.turn_timeout_ms),
            || ready_to_run(shared, request),
        )
        .await?;
    expire_approvals_left_behind(shared, request).await?;
    load_prior(shared, request).await
}

/// A turn that had already finished (its worker may have died between recording the last events
/// and publishing them), or that was done but never said so (its worker died after saving the
/// turn, before sending `finish`): its end is sent (again).
async fn finish_again(shared: &Shared, request: &TurnRequest, prior: Prior) {
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel::<Emitted>();
    if prior.continuation.finished() {
        tracing::info!("the turn had already finished; sending its end again");
    } else if let Some(finish) = prior.completed {
        tracing::info!("the turn was done but never said so; finishing it");
        let _ = sender.send(Emitted {
            subagent: None,
            event: TurnEventKind::Finish {
                reason: finish,
                usage: None,
                model: None,
            },
        });
    }
    drop(sender);
    forward_events(shared, request, prior.continuation, receiver, None).await;
}

/// A turn about to run on this delivery.
struct Turn<'a> {
    shared: &'a Shared,
    request: &'a TurnRequest,
    span: &'a tracing::Span,
    started: Instant,
    /// This is its last delivery: it ends with an error, unrun.
    give_up: bool,
}

impl Turn<'_> {
    /// Runs the turn while its events are forwarded, in the turn's span, so each event carries
    /// the turn's trace context.
    async fn run(&self, prior: Prior, stop: &rover_agent::Stop, fresh: bool) {
        let (shared, request) = (self.shared, self.request);
        // The thread must exist (and be the caller's) before any event is recorded against it.
        let owned = ensure_thread(shared, request).await;
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel::<Emitted>();
        let forwarder = forward_events(
            shared,
            request,
            prior.continuation,
            receiver,
            fresh.then_some(self.started),
        )
        .instrument(self.span.clone());
        let producer = async {
            let _ = sender.send(Emitted {
                subagent: None,
                event: TurnEventKind::Start {
                    message_id: request.message_id.clone(),
                    trace_id: rover_telemetry::trace_id(self.span),
                },
            });
            let budget = budget::turn_budget(&shared.settings.budget).carrying(prior.carried);
            let running = Running {
                events: &sender,
                journal: &prior.journal,
                budget: &budget,
                stop,
            };
            let outcome = async { self.outcome(owned, running).await }
                .instrument(self.span.clone())
                .await;
            self.conclude(outcome, &budget, &sender).await;
            drop(sender);
        };
        tokio::join!(producer, forwarder);
    }

    /// How the turn ends: run under its deadline, or — on its last delivery — refused unrun.
    async fn outcome(
        &self,
        owned: Result<(), Failure>,
        running: Running<'_>,
    ) -> Result<FinishReason, Failure> {
        if self.give_up {
            return Err(Failure {
                code: ErrorCode::Internal,
                message: "This request failed repeatedly and was stopped. Please try again, or \
                      rephrase it."
                    .to_owned(),
            });
        }
        rover_settings::fault::point("worker.turn");
        owned?;
        let deadline = Duration::from_millis(self.shared.settings.agent.turn_timeout_ms);
        tokio::time::timeout(deadline, run_request(self.shared, self.request, running))
            .await
            .map_err(|_| Failure {
                code: ErrorCode::DeadlineExceeded,
                message: "This took too long and was stopped. Please try again.".to_owned(),
            })?
    }

    /// Tells the client how the turn ended (an error first, if it failed), counted and logged
    /// before `finish` is sent: a client that saw the end sees it in the metrics too.
    async fn conclude(
        &self,
        outcome: Result<FinishReason, Failure>,
        budget: &rover_agent::budget::TurnBudget,
        sender: &tokio::sync::mpsc::UnboundedSender<Emitted>,
    ) {
        let (shared, span) = (self.shared, self.span);
        let finish = outcome.unwrap_or_else(|failure| {
            tracing::warn!(parent: span, error = %failure.message, give_up = self.give_up, "turn failed");
            let _ = sender.send(Emitted {
                subagent: None,
                event: TurnEventKind::Error {
                    code: failure.code,
                    message: failure.message,
                },
            });
            FinishReason::Error
        });
        let took = self.started.elapsed();
        span.record("rover.turn.finish_reason", tracing::field::debug(finish));
        tracing::info!(
            parent: span,
            turn_id = %self.request.turn_id,
            ?finish,
            took_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            "turn finished"
        );
        shared.turns.duration.observe(took.as_secs_f64());
        match finish {
            FinishReason::Error => shared.turns.failed.inc(),
            FinishReason::Abort => shared.turns.stopped.inc(),
            _ => shared.turns.completed.inc(),
        };
        // The ledger has every delivery's calls; this one's are the fallback.
        let school = school_of(self.request);
        let usage = budget::settled_usage(&shared.pool, school, self.request.turn_id)
            .await
            .unwrap_or_else(|error| {
                tracing::warn!(parent: span, %error, "could not read the turn's token usage");
                budget.usage()
            });
        span.record("gen_ai.usage.input_tokens", usage.input_tokens);
        span.record("gen_ai.usage.output_tokens", usage.output_tokens);
        let _ = sender.send(Emitted {
            subagent: None,
            event: TurnEventKind::Finish {
                reason: finish,
                usage: Some(usage),
                model: budget.model(),
            },
        });
    }
}

/// What earlier deliveries of a turn left behind.
pub(crate) struct Prior {
    /// The turn's messages are in the thread's history: it did its work, and ended so.
    completed: Option<FinishReason>,
    /// The events already sent, to continue after.
    continuation: Continuation,
    /// The parts already done, to replay (for a continuation, with its chain's, silently).
    journal: Journal,
    /// This turn recorded parts before (a redelivery).
    own_parts: bool,
    /// The turn was asked to stop.
    stopped: bool,
    /// An earlier turn of its thread is still open: it must wait.
    behind: bool,
    /// What the turn already spent: earlier deliveries, and the earlier turns of its chain.
    carried: Carried,
}

pub(crate) async fn load_prior(
    shared: &Shared,
    request: &TurnRequest,
) -> Result<Prior, DomainError> {
    let mut tx =
        rover_domain::begin_tenant(&shared.pool, request.context.user_details.school.id).await?;
    // A turn whose messages are in the history completed; it ended waiting on `ask_user` when its
    // last message asks.
    let completed =
        conversation_log::turn_last_message(&mut tx, request.thread_id, request.turn_id)
            .await?
            .map(|last| {
                if rover_agent::pending_question(std::slice::from_ref(&last)).is_some() {
                    FinishReason::ToolCalls
                } else {
                    FinishReason::Stop
                }
            });
    let events: Vec<TurnEvent> = rover_turnstore::events::events(&mut tx, request.turn_id)
        .await?
        .into_iter()
        .filter_map(|payload| serde_json::from_value(payload).ok())
        .collect();
    let parts = journal::steps(&mut tx, &[request.turn_id]).await?;
    let stopped = open_turns::stop_requested(&mut tx, request.turn_id).await?;
    let behind = open_turns::waits_behind(&mut tx, request.turn_id).await?;
    let chain_turns: &[TurnId] = match &request.input {
        TurnInput::Continue { chain } => chain,
        _ => &[],
    };
    let chain = journal::steps(&mut tx, chain_turns).await?;
    let mut spent_by: Vec<TurnId> = chain_turns.to_vec();
    spent_by.push(request.turn_id);
    let usage = rover_turnstore::usage::chain_usage(&mut tx, &spent_by).await?;
    tx.commit().await?;
    let own_parts = !parts.is_empty();
    let journal = Journal::continuing(chain, parts);
    let carried = Carried {
        tokens: u64::try_from(usage.input_tokens + usage.output_tokens).unwrap_or_default(),
        model_calls: u32::try_from(usage.model_calls).unwrap_or_default(),
        tool_calls: u32::try_from(journal.tool_results()).unwrap_or(u32::MAX),
    };
    Ok(Prior {
        completed,
        continuation: Continuation::after(events),
        own_parts,
        stopped,
        behind,
        journal,
        carried,
    })
}

/// A queued turn starts after the replies it waited for: what they asked approval for after its
/// message arrived is past, as at any new message (the gateway expires what was pending then).
async fn expire_approvals_left_behind(
    shared: &Shared,
    request: &TurnRequest,
) -> Result<(), rover_domain::DomainError> {
    let mut tx = rover_domain::begin_tenant(&shared.pool, school_of(request)).await?;
    let expired = rover_turnstore::approvals::expire_pending_before(
        &mut tx,
        request.thread_id,
        request.turn_id,
    )
    .await?;
    tx.commit().await?;
    if expired > 0 {
        tracing::info!(
            expired,
            "approvals asked for after this message arrived expired"
        );
    }
    Ok(())
}

/// Whether no turn opened before this one on its thread is still open.
async fn ready_to_run(
    shared: &Shared,
    request: &TurnRequest,
) -> Result<bool, rover_domain::DomainError> {
    let mut tx = rover_domain::begin_tenant(&shared.pool, school_of(request)).await?;
    let behind = open_turns::waits_behind(&mut tx, request.turn_id).await?;
    tx.commit().await?;
    if behind {
        tracing::info!(turn_id = %request.turn_id, "waiting for the thread's earlier turn to end");
    }
    Ok(!behind)
}

/// Why a turn's identity was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum IdentityRefused {
    /// The signature, issuer, audience or expiry is wrong.
    #[error(transparent)]
    Invalid(#[from] rover_contracts::identity::IdentityError),
    /// It verifies, but the unsigned context beside it says something else.
    #[error("the runtime context does not match its signed identity")]
    Mismatch,
}

/// The turn's signed identity verifies, and the runtime context, turn and thread match it.
pub(crate) fn check_identity(
    verifier: &TurnVerifier,
    request: &TurnRequest,
) -> Result<(), IdentityRefused> {
    let verified = verifier.verify(&request.identity)?;
    let context = &request.context;
    let matches = verified.turn_id() == request.turn_id
        && verified.thread_id() == request.thread_id
        && verified.identity() == &context.identity()
        && verified.scope() == &context.call_scope();
    if matches {
        Ok(())
    } else {
        Err(IdentityRefused::Mismatch)
    }
}

pub(crate) async fn ensure_thread(shared: &Shared, request: &TurnRequest) -> Result<(), Failure> {
    let user = request.context.user_details.user_id;
    let attempt = async {
        let mut tx =
            rover_domain::begin_tenant(&shared.pool, request.context.user_details.school.id)
                .await?;
        threads::ensure_thread(&mut tx, request.thread_id, user).await?;
        tx.commit().await
    };
    attempt.await.map_err(|e| Failure {
        code: e.code(),
        message: e.to_string(),
    })
}

pub(crate) fn school_of(request: &TurnRequest) -> rover_contracts::ids::SchoolId {
    request.context.user_details.school.id
}
