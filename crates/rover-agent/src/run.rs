//! The agent loop: call the model (streaming), emit text as it arrives, collect tool calls, run
//! them (concurrently within a step), feed the envelopes back, until the model answers without
//! tool calls, asks the user a question, or the step limit is reached.

use std::collections::HashSet;
use std::time::Instant;

use rover_contracts::AgentToolResult;
use rover_contracts::tools::{Effect, ToolKind};
use rover_contracts::wire::{FinishReason, TurnEventKind, TurnInput};
use serde_json::{Value, json};
use tracing::Instrument as _;

use crate::agent::{Agent, AgentTool};
use crate::approval::{self, Gate};
use crate::deps::{Emitted, TurnDeps, record};
use crate::journal::MODEL_PART;
use crate::local;
use crate::messages::complete_tool_results;
pub use crate::messages::{input_message, pending_question};
use crate::model::ModelError;
use crate::rpc::call_rpc;
use crate::step::{Call, assistant_message, parse_arguments, replay_model, stream_step};

/// How a turn ended, and what it added to the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnResult {
    /// The messages this turn added (user, assistant and tool messages, OpenAI format), to store.
    pub messages: Vec<Value>,
    /// Why it ended.
    pub finish: FinishReason,
}

/// What a finished loop produced.
struct Outcome {
    /// The messages it added (those an earlier turn of a paused chain stored are left out).
    messages: Vec<Value>,
    text: String,
    finish: FinishReason,
    /// It ended waiting for the staff member's approval of a write.
    paused: bool,
}

/// What one call of a step came to.
enum Settled {
    /// Its result: replayed (`prior` = recorded by an earlier turn of the chain) or made now.
    Done {
        envelope: AgentToolResult<Value>,
        denied: bool,
        prior: bool,
    },
    /// A write waiting for approval (with the id the client answers), or a `task` whose
    /// subagent waits on one (its own request was sent).
    Pending { approval_id: Option<String> },
}

/// A call as `Agent::check_call` found it: the tool and the arguments, or why it cannot run (the
/// arguments are not JSON, no such tool, arguments its schema refuses). Every call is checked
/// once, in the loop, before anything else looks at it.
type Checked<'a> = Result<(&'a AgentTool, Value), String>;

/// Checks `call` (its arguments already parsed, or why not).
fn check<'a>(agent: &'a Agent, call: &Call, input: &Result<Value, String>) -> Checked<'a> {
    let args = input.clone()?;
    let tool = agent.check_call(&call.name, &args)?;
    Ok((tool, args))
}

/// Runs one call of a step, or replays its recorded result; a write asks the approval gate
/// first. Every result is recorded before the loop moves on.
async fn settle(
    agent: &Agent,
    key: &str,
    step: u32,
    call: &Call,
    checked: Checked<'_>,
    repeat: bool,
    deps: TurnDeps<'_>,
) -> Result<Settled, ModelError> {
    if let Some((envelope, denied)) = deps
        .journal
        .get(key, step, &call.id)
        .and_then(approval::from_journal)
    {
        return Ok(Settled::Done {
            envelope,
            denied,
            prior: deps.journal.is_prior(key, step, &call.id),
        });
    }
    // Stopped: nothing new starts; a write that already ran in this reply does not run again.
    // The call gets a result the model (and the Hub) reads.
    if deps.stop.is_requested() || repeat {
        let envelope = AgentToolResult::error(if repeat {
            format!(
                "Not run again: {} already ran with these arguments in this reply, and its \
                 result is above. If the request is done, answer the staff member.",
                call.name
            )
        } else {
            crate::stop::NOT_RUN.to_owned()
        });
        record(
            deps,
            key,
            step,
            &call.id,
            serde_json::to_value(&envelope).unwrap_or_default(),
        )
        .await?;
        return Ok(Settled::Done {
            envelope,
            denied: false,
            prior: false,
        });
    }
    let gated = match (&checked, deps.approvals) {
        (Ok((tool, args)), Some(gate))
            if tool.contract.effect == Effect::Write
                && matches!(tool.contract.kind, ToolKind::Rpc { .. }) =>
        {
            let query = approval::GateQuery {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                input: args.clone(),
            };
            gate(query).await.map_err(ModelError::Journal)?
        }
        _ => Gate::Run,
    };
    let (envelope, denied) = match gated {
        Gate::Pending { approval_id } => {
            return Ok(Settled::Pending {
                approval_id: Some(approval_id),
            });
        }
        Gate::Denied { reason } => (approval::denial(reason.as_deref()), true),
        Gate::Refused(error) => (AgentToolResult::error(error), false),
        Gate::Run => match execute(agent, call, checked, deps).await {
            Some(envelope) => (envelope, false),
            None => return Ok(Settled::Pending { approval_id: None }),
        },
    };
    let stored = if denied {
        approval::journal_denied(&envelope)
    } else {
        serde_json::to_value(&envelope).unwrap_or_default()
    };
    record(deps, key, step, &call.id, stored).await?;
    Ok(Settled::Done {
        envelope,
        denied,
        prior: false,
    })
}

/// Runs one turn of `agent` after `history` (OpenAI-format messages; a leading summary of the
/// thread is an `assistant` message of data, `compact::summary_message`, never part of the system
/// prompt).
pub async fn run_turn(
    agent: &Agent,
    history: Vec<Value>,
    input: &TurnInput,
    deps: TurnDeps<'_>,
) -> Result<TurnResult, ModelError> {
    let first = input_message(input, deps.context);
    let outcome = run_after(agent, history, first.clone(), deps).await?;
    let mut messages = vec![first];
    messages.extend(outcome.messages);
    Ok(TurnResult {
        messages,
        finish: outcome.finish,
    })
}

/// Continues a turn chain that paused for approval: the loop runs again from the chain's first
/// message (`first`, after `history`, the thread before it) with the chain's journal
/// ([`crate::Journal::continuing`]), so what the earlier turns did is replayed silently and the
/// answered calls run (or are declined) where they paused — inside a subagent too. Only what this
/// turn adds is returned to be stored.
pub async fn continue_turn(
    agent: &Agent,
    history: Vec<Value>,
    first: Value,
    deps: TurnDeps<'_>,
) -> Result<TurnResult, ModelError> {
    let outcome = run_after(agent, history, first, deps).await?;
    Ok(TurnResult {
        messages: outcome.messages,
        finish: outcome.finish,
    })
}

/// Rover's loop on `first` after `history`.
async fn run_after(
    agent: &Agent,
    history: Vec<Value>,
    first: Value,
    deps: TurnDeps<'_>,
) -> Result<Outcome, ModelError> {
    let mut conversation = Vec::with_capacity(history.len() + 2);
    conversation.push(json!({ "role": "system", "content": agent.system_prompt }));
    conversation.extend(history);
    conversation.push(first);
    run_loop(agent, "", complete_tool_results(conversation), deps)
        .instrument(invoke_agent_span(agent, deps))
        .await
}

/// The span of one agent's run (Rover's, or a subagent's under its `task` call), as the
/// OpenTelemetry GenAI conventions name it.
fn invoke_agent_span(agent: &Agent, deps: TurnDeps<'_>) -> tracing::Span {
    tracing::info_span!(
        "gen_ai.invoke_agent",
        otel.name = format!("invoke_agent {}", agent.name()),
        gen_ai.operation.name = "invoke_agent",
        gen_ai.provider.name = deps.model.provider(),
        gen_ai.conversation.id = %deps.thread_id,
        gen_ai.agent.name = agent.name(),
        gen_ai.request.model = deps.model.model(),
    )
}

/// The agent loop of `agent`, journalled under `key` (`""` for Rover, the `task` call id for a
/// subagent).
async fn run_loop(
    agent: &Agent,
    key: &str,
    mut conversation: Vec<Value>,
    deps: TurnDeps<'_>,
) -> Result<Outcome, ModelError> {
    let emit = |event| {
        let _ = deps.events.send(Emitted {
            subagent: agent.subagent,
            event,
        });
    };
    let tools = agent.tool_definitions();
    // Call ids are unique in the turn: a subagent's carry the `task` call that started it.
    let prefix = agent
        .subagent
        .map_or(String::new(), |s| format!("{key}/{}-", s.name()));
    let mut added = Vec::new();
    // Steps in a row whose every call was refused by `Agent::check_call` (no such tool, or
    // arguments its schema refuses): the model reads the error and may correct itself once.
    let mut refused_steps = 0;
    // Writes that succeeded in this loop, by tool and arguments.
    let mut done_writes: HashSet<(String, String)> = HashSet::new();
    for step in 0..deps.step_limit {
        // A step an earlier turn of a paused chain recorded was sent to the client then: it is
        // replayed without events, and not stored again.
        let prior = deps.journal.is_prior(key, step, MODEL_PART);
        let recorded = deps.journal.get(key, step, MODEL_PART);
        // Stopped: no model call starts (what the journal holds is still replayed).
        if recorded.is_none() && deps.stop.is_requested() {
            return Ok(stopped(added, String::new()));
        }
        let emit_step = |event| {
            if !prior {
                emit(event);
            }
        };
        emit_step(TurnEventKind::StartStep);
        let span = tracing::info_span!(
            "gen_ai.chat",
            otel.name = format!("chat {}", deps.model.model()),
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = deps.model.provider(),
            gen_ai.conversation.id = %deps.thread_id,
            gen_ai.request.model = deps.model.model(),
            gen_ai.response.model = tracing::field::Empty,
            gen_ai.agent.name = agent.name(),
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            gen_ai.response.finish_reasons = tracing::field::Empty,
            gen_ai.output.text = tracing::field::Empty,
            rover.model.text_tool_calls = tracing::field::Empty,
        );
        let step_name = format!("{prefix}{step}");
        let (text, calls) = match recorded {
            Some(assistant) => replay_model(assistant, &step_name, &emit_step),
            None => {
                let answer = stream_step(deps, &conversation, &tools, &step_name, &emit)
                    .instrument(span)
                    .await?;
                // Cut by a stop: the text streamed so far is kept; its unfinished calls never
                // start. It is not journalled: a redelivered stopped turn ends before this step.
                if answer.cut {
                    emit(TurnEventKind::FinishStep);
                    if !answer.text.is_empty() {
                        added.push(assistant_message(&answer.text, &[]));
                    }
                    return Ok(stopped(added, answer.text));
                }
                let (text, calls) = (answer.text, answer.calls);
                record(
                    deps,
                    key,
                    step,
                    MODEL_PART,
                    assistant_message(&text, &calls),
                )
                .await?;
                (text, calls)
            }
        };
        let assistant = assistant_message(&text, &calls);
        conversation.push(assistant.clone());
        if !prior {
            added.push(assistant);
        }
        if calls.is_empty() {
            emit_step(TurnEventKind::FinishStep);
            return Ok(Outcome {
                messages: added,
                text,
                finish: FinishReason::Stop,
                paused: false,
            });
        }
        let inputs: Vec<Result<Value, String>> = calls
            .iter()
            .map(|c| parse_arguments(&c.arguments))
            .collect();
        let checked: Vec<Checked<'_>> = calls
            .iter()
            .zip(&inputs)
            .map(|(call, input)| check(agent, call, input))
            .collect();
        let refused = checked.iter().all(Result::is_err);
        refused_steps = if refused { refused_steps + 1 } else { 0 };
        for (call, input) in calls.iter().zip(&inputs) {
            let input = input
                .clone()
                .unwrap_or_else(|_| Value::String(call.arguments.clone()));
            emit_step(TurnEventKind::ToolInputAvailable {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                input,
            });
        }
        // `ask_user` alone ends the turn waiting: its answer arrives as the next message, the one
        // result the step lacks. Beside other calls it is refused with an error result (below),
        // so every call of a step always has its result and the thread stays valid.
        if asks_alone(&calls, &checked) && !deps.stop.is_requested() {
            emit_step(TurnEventKind::FinishStep);
            return Ok(Outcome {
                messages: added,
                text,
                finish: FinishReason::ToolCalls,
                paused: false,
            });
        }
        // The step's calls fit the turn's budget together, or none of them starts.
        let fresh = calls
            .iter()
            .filter(|c| deps.journal.get(key, step, &c.id).is_none())
            .count();
        deps.budget.before_tool_calls(fresh)?;
        let repeats = repeated_writes(&calls, &checked, &done_writes);
        // Each result is recorded as it arrives; a resumed step runs only the calls it lacks. A
        // write waiting for approval (or a subagent paused on one) has no result yet.
        let results = futures::future::join_all(calls.iter().zip(&checked).zip(&repeats).map(
            |((call, checked), repeat)| {
                settle(agent, key, step, call, checked.clone(), *repeat, deps)
            },
        ))
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
        // A subagent that spent the turn's budget failed its `task`; the turn stops here too.
        if let Some(spent) = deps.budget.exhausted() {
            return Err(spent.into());
        }
        let mut paused = false;
        let mut live = !prior;
        for ((call, settled), checked) in calls.iter().zip(results).zip(&checked) {
            if let Settled::Done {
                envelope,
                denied: false,
                ..
            } = &settled
                && !envelope.is_error()
                && let Some(key) = write_key(call, checked)
            {
                done_writes.insert(key);
            }
            let (envelope, denied) = match settled {
                Settled::Pending { approval_id } => {
                    paused = true;
                    live = true;
                    if let Some(approval_id) = approval_id {
                        emit(TurnEventKind::ToolApprovalRequest {
                            approval_id,
                            tool_call_id: call.id.clone(),
                        });
                    }
                    continue;
                }
                Settled::Done {
                    envelope,
                    prior: true,
                    ..
                } => {
                    conversation.push(crate::messages::tool_message(
                        &call.id, &call.name, &envelope,
                    ));
                    continue;
                }
                Settled::Done {
                    envelope, denied, ..
                } => (envelope, denied),
            };
            live = true;
            match &envelope {
                _ if denied => emit(TurnEventKind::ToolOutputDenied {
                    tool_call_id: call.id.clone(),
                }),
                AgentToolResult::Data { .. } => emit(TurnEventKind::ToolOutputAvailable {
                    tool_call_id: call.id.clone(),
                    output: serde_json::to_value(&envelope).unwrap_or_default(),
                }),
                AgentToolResult::Error { error } => emit(TurnEventKind::ToolOutputError {
                    tool_call_id: call.id.clone(),
                    error_text: error.clone(),
                }),
            }
            let message = crate::messages::tool_message(&call.id, &call.name, &envelope);
            conversation.push(message.clone());
            added.push(message);
        }
        if live {
            emit(TurnEventKind::FinishStep);
        }
        if refused_steps >= 2 {
            // Corrected once and still no call that can run: say so rather than loop.
            return Ok(say(
                &emit,
                &mut added,
                &format!("{prefix}refused"),
                CANNOT_CALL,
                FinishReason::Stop,
            ));
        }
        if paused {
            // The turn ends here; the staff member's answer continues it (`TurnInput::Continue`).
            return Ok(Outcome {
                messages: added,
                text,
                finish: FinishReason::ToolCalls,
                paused: true,
            });
        }
        // Stopped while the step's calls ran: they finished and are kept; nothing follows.
        if deps.stop.is_requested() {
            return Ok(stopped(added, text));
        }
    }
    // Out of steps: end with a clear sentence, not silence.
    let notice = format!(
        "I stopped because this needed more than {} steps. Please narrow the request or ask again.",
        deps.step_limit
    );
    Ok(say(
        &emit,
        &mut added,
        &format!("{prefix}limit"),
        &notice,
        FinishReason::Length,
    ))
}

/// A write call's tool and arguments (canonical JSON), the key under which it runs once per loop;
/// `None` for anything but a write the agent has.
fn write_key(call: &Call, checked: &Checked<'_>) -> Option<(String, String)> {
    let (tool, args) = checked.as_ref().ok()?;
    (tool.contract.effect == Effect::Write).then(|| (call.name.clone(), args.to_string()))
}

/// Which of a step's calls repeat a write already done in this reply, or earlier in the step
/// (same tool, same arguments): those are not done again, since a small model that loops would
/// otherwise write twice under new call ids.
fn repeated_writes(
    calls: &[Call],
    checked: &[Checked<'_>],
    done: &HashSet<(String, String)>,
) -> Vec<bool> {
    let keys: Vec<Option<(String, String)>> = calls
        .iter()
        .zip(checked)
        .map(|(call, checked)| write_key(call, checked))
        .collect();
    keys.iter()
        .enumerate()
        .map(|(at, key)| {
            key.as_ref()
                .is_some_and(|key| done.contains(key) || keys[..at].contains(&Some(key.clone())))
        })
        .collect()
}

/// What the loop says when the model twice made only calls that cannot run.
const CANNOT_CALL: &str = "I could not do that: I did not manage to make a valid request with \
     the tools I have. Please rephrase it, or say exactly what you need.";

/// Ends a loop with a sentence of Rover's own (not the model's), shown as text and kept.
fn say(
    emit: &impl Fn(TurnEventKind),
    added: &mut Vec<Value>,
    id: &str,
    text: &str,
    finish: FinishReason,
) -> Outcome {
    emit(TurnEventKind::TextStart { id: id.to_owned() });
    emit(TurnEventKind::TextDelta {
        id: id.to_owned(),
        delta: text.to_owned(),
    });
    emit(TurnEventKind::TextEnd { id: id.to_owned() });
    added.push(json!({ "role": "assistant", "content": text }));
    Outcome {
        messages: std::mem::take(added),
        text: text.to_owned(),
        finish,
        paused: false,
    }
}

/// How a stopped loop ends: with what it added, and the text it had said.
fn stopped(messages: Vec<Value>, text: String) -> Outcome {
    Outcome {
        messages,
        text,
        finish: FinishReason::Abort,
        paused: false,
    }
}

/// The tool that pauses the turn for the staff member's answer.
const ASK_USER: &str = "ask_user";

/// The result of an `ask_user` call made beside other calls.
const ASK_ALONE: &str = "The question was not asked: ask_user must be the only tool call in its \
     step. Wait for the other calls' results, then call ask_user on its own if you still need \
     the answer.";

/// Whether the step is one valid `ask_user` call and nothing else: only then does the turn end
/// waiting for the answer.
fn asks_alone(calls: &[Call], checked: &[Checked<'_>]) -> bool {
    matches!((calls, checked), ([call], [Ok(_)]) if call.name == ASK_USER)
}

/// Runs one tool call and returns the envelope the model reads. Never fails: every failure is an
/// error envelope the model can explain. `None`: a `task` whose subagent paused for approval.
async fn execute(
    agent: &Agent,
    call: &Call,
    checked: Checked<'_>,
    deps: TurnDeps<'_>,
) -> Option<AgentToolResult<Value>> {
    let span = tracing::info_span!(
        "gen_ai.execute_tool",
        otel.name = format!("execute_tool {}", call.name),
        gen_ai.operation.name = "execute_tool",
        gen_ai.conversation.id = %deps.thread_id,
        gen_ai.tool.type = "function",
        gen_ai.tool.name = %call.name,
        gen_ai.tool.call.id = %call.id,
        gen_ai.tool.call.arguments = tracing::field::Empty,
        rover.tool.outcome = tracing::field::Empty,
    );
    if deps.capture_content {
        span.record("gen_ai.tool.call.arguments", call.arguments.as_str());
    }
    let started = Instant::now();
    let (event, outcome, result) = run_tool(agent, call, checked, deps)
        .instrument(span.clone())
        .await;
    span.record("rover.tool.outcome", outcome);
    if let Some(metrics) = deps.metrics {
        metrics.tools.observe(event, outcome, started.elapsed());
    }
    result
}

/// Runs the call: returns the tool's event (its name for local tools), the outcome label and the
/// envelope (`None`: a subagent paused).
async fn run_tool<'c>(
    agent: &Agent,
    call: &'c Call,
    checked: Checked<'_>,
    deps: TurnDeps<'_>,
) -> (&'c str, &'static str, Option<AgentToolResult<Value>>) {
    let (tool, args) = match checked {
        Ok(checked) => checked,
        Err(error) => {
            return (
                event_of(agent, &call.name),
                "invalid",
                Some(AgentToolResult::error(error)),
            );
        }
    };
    if call.name == ASK_USER {
        // Only reached when the question was not asked alone.
        return (
            &call.name,
            "invalid",
            Some(AgentToolResult::error(ASK_ALONE)),
        );
    }
    match tool.contract.kind {
        ToolKind::Rpc { event, .. } => {
            let (outcome, result) = call_rpc(event, &call.id, args, deps).await;
            (event, outcome, Some(result))
        }
        ToolKind::Local { .. } => {
            let result = if call.name == "task" {
                delegate(agent, &call.id, args, deps).await
            } else {
                Some(local::run(agent, &call.name, args, deps).await)
            };
            let outcome = match &result {
                None => "paused",
                Some(result) if result.is_error() => "error",
                Some(_) => "ok",
            };
            (&call.name, outcome, result)
        }
    }
}

/// The label a call is counted under: the tool's event (its name for local tools), or `unknown`.
fn event_of<'c>(agent: &Agent, name: &'c str) -> &'c str {
    match agent.tool(name).map(|t| t.contract) {
        Some(contract) => match contract.kind {
            ToolKind::Rpc { event, .. } => event,
            ToolKind::Local { .. } => contract.name,
        },
        None => "unknown",
    }
}

/// `task`: runs a role subagent on the description and returns its final answer; `None` when
/// the subagent paused for an approval (the `task` call then waits too).
async fn delegate(
    agent: &Agent,
    call_id: &str,
    args: Value,
    deps: TurnDeps<'_>,
) -> Option<AgentToolResult<Value>> {
    let args: rover_contracts::tools::TaskArgs = match serde_json::from_value(args) {
        Ok(args) => args,
        Err(error) => {
            return Some(AgentToolResult::error(format!(
                "Invalid arguments for task: {error}."
            )));
        }
    };
    let Some(subagent) = agent.delegate(args.subagent) else {
        return Some(AgentToolResult::error(format!(
            "There is no {} specialist for you this turn.",
            args.subagent.name()
        )));
    };
    let conversation = vec![
        json!({ "role": "system", "content": subagent.system_prompt }),
        json!({ "role": "user", "content": args.description }),
    ];
    match Box::pin(run_loop(subagent, call_id, conversation, deps))
        .instrument(invoke_agent_span(subagent, deps))
        .await
    {
        Ok(outcome) if outcome.paused => None,
        Ok(outcome) if outcome.finish == FinishReason::Abort => {
            Some(AgentToolResult::error(format!(
                "The {} specialist was stopped by the staff member before it finished.",
                args.subagent.name()
            )))
        }
        Ok(outcome) => Some(AgentToolResult::data(
            Value::String(outcome.text),
            deps.context.call_scope().describe(),
        )),
        Err(error) => Some(AgentToolResult::error(format!(
            "The {} specialist failed: {error}.",
            args.subagent.name()
        ))),
    }
}
