//! The agent loop: call the model (streaming), emit text as it arrives, collect tool calls, run
//! them (concurrently within a step), feed the envelopes back, until the model answers without
//! tool calls, asks the user a question, or the step limit is reached.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use rover_contracts::tools::{Effect, ToolKind};
use rover_contracts::wire::{FinishReason, TurnEventKind, TurnInput};
use rover_contracts::{AgentToolResult, Ask};
use serde_json::{Value, json};
use tracing::Instrument as _;

use crate::agent::{Agent, AgentTool, InvalidCall};
use crate::approval::{self, Gate};
use crate::deps::{Emitted, TurnDeps, record};
use crate::error::TurnError;
use crate::journal::MODEL_PART;
use crate::local;
use crate::messages::{complete_tool_results, tool_message};
pub use crate::messages::{input_message, pending_question};
use crate::rpc::call_rpc;
use crate::said::Said;
use crate::step::{Call, assistant_message, parse_arguments, replay_model, stream_step};
use crate::store::StoreError;

/// What a finished loop produced.
struct Outcome {
    /// The messages it added (those an earlier turn of a paused chain stored are left out).
    messages: Vec<Value>,
    text: String,
    finish: FinishReason,
    /// It ended waiting for the staff member's approval of a write.
    paused: bool,
    /// A subagent's loop ended on a call that could not tell what the staff member meant: the
    /// question Rover asks them (see [`Loop::ask`]).
    ask: Option<Ask>,
    /// A subagent's answer claimed a change though its loop wrote nothing (see
    /// [`Loop::unfounded`]); its text was not shown.
    unfounded: bool,
    /// A subagent's loop that made one call Rover handed it ([`Routes`]): that call's result,
    /// which is the `task`'s.
    passed: Option<AgentToolResult<Value>>,
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
type Checked<'a> = Result<(&'a AgentTool, Value), InvalidCall>;

/// Checks `call` (its arguments already parsed, or why not), and holds a write's arguments to what
/// the staff member said (`Said::hold`).
fn check<'a>(
    agent: &'a Agent,
    call: &Call,
    input: &Result<Value, InvalidCall>,
    said: &Said,
) -> Checked<'a> {
    if call.is_cut_off() {
        return Err(InvalidCall(format!(
            "Your call to {} was cut off before its arguments ended; nothing was run. Make the \
             call again with only what the staff member said, or answer in plain words.",
            call.name.chars().take(64).collect::<String>()
        )));
    }
    let args = input.clone()?;
    let tool = agent.check_call(&call.name, &args)?;
    Ok((tool, said.hold(tool, args)))
}

/// Runs one call of `run`'s step, or replays its recorded result; a write asks the approval gate
/// first. Every result is recorded before the loop moves on.
async fn settle(
    run: &Loop<'_, '_>,
    step: u32,
    call: &Call,
    checked: Checked<'_>,
    repeat: bool,
) -> Result<Settled, TurnError> {
    let (agent, key, deps, said) = (run.agent, run.key, run.deps, run.said);
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
    let (envelope, denied) = if deps.stop.is_requested() || repeat {
        let name = run
            .routes
            .get(&call.id)
            .map_or(&call.name, |carried| &carried.name);
        (not_run(name, repeat), false)
    } else {
        match gate(call, &checked, deps).await? {
            Gate::Pending { approval_id } => {
                return Ok(Settled::Pending {
                    approval_id: Some(approval_id),
                });
            }
            Gate::Denied { reason } => (approval::denial(reason.as_deref()), true),
            Gate::Refused(error) => (AgentToolResult::error(error), false),
            Gate::Run => {
                match execute(agent, call, checked, deps, said, run.routes.get(&call.id)).await {
                    Some(envelope) => (envelope, false),
                    None => return Ok(Settled::Pending { approval_id: None }),
                }
            }
            Gate::RunEdited { input } => match run_edited(run, call, &checked, input).await {
                Some(envelope) => (envelope, false),
                None => return Ok(Settled::Pending { approval_id: None }),
            },
        }
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

/// Runs a write the staff member edited as they approved it: their input is checked against the
/// tool's schema again (what the gateway checked when they answered), runs as they left it (not
/// held to what was said: the staff member said it), and the model is told what they changed.
async fn run_edited(
    run: &Loop<'_, '_>,
    call: &Call,
    checked: &Checked<'_>,
    input: Value,
) -> Option<AgentToolResult<Value>> {
    let proposed = match checked {
        Ok((_, args)) => args.clone(),
        Err(_) => Value::Null,
    };
    let tool = match run.agent.check_call(&call.name, &input) {
        Ok(tool) => tool,
        Err(error) => return Some(approval::edit_refused(&error.to_string())),
    };
    let note = approval::edits(&proposed, &input);
    let carried = run.routes.get(&call.id);
    let ran = execute(
        run.agent,
        call,
        Ok((tool, input)),
        run.deps,
        run.said,
        carried,
    )
    .await;
    ran.map(|envelope| envelope.with_staff_edits(note))
}

/// The step's calls and their inputs as they will run: a call whose arguments `Said::hold`
/// changed carries the held ones, so the thread keeps — and the client is shown — what runs, and
/// an approval binds to it.
fn as_held(
    calls: Vec<Call>,
    checked: &[Checked<'_>],
    inputs: Vec<Result<Value, InvalidCall>>,
) -> (Vec<Call>, Vec<Result<Value, InvalidCall>>) {
    calls
        .into_iter()
        .zip(checked)
        .zip(inputs)
        .map(|((call, checked), input)| match (checked, input) {
            (Ok((_, held)), Ok(input)) if *held != input => (
                Call {
                    arguments: held.to_string(),
                    ..call
                },
                Ok(held.clone()),
            ),
            (_, input) => (call, input),
        })
        .unzip()
}

/// What the store's approval gate says of a write to the tool server; anything else runs.
async fn gate(call: &Call, checked: &Checked<'_>, deps: TurnDeps<'_>) -> Result<Gate, TurnError> {
    match checked {
        Ok((tool, args))
            if tool.contract.effect == Effect::Write
                && matches!(tool.contract.kind, ToolKind::Rpc { .. }) =>
        {
            let query = approval::GateQuery {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                input: args.clone(),
            };
            Ok(deps.store.gate(query).await?)
        }
        _ => Ok(Gate::Run),
    }
}

/// The result of a call (to the tool `name`) that does not run: the turn was stopped, or it
/// `repeat`s a write this reply already made.
fn not_run(name: &str, repeat: bool) -> AgentToolResult<Value> {
    AgentToolResult::error(if repeat {
        format!(
            "Not run again: {name} already ran with these arguments in this reply, and its result \
             is above. If the request is done, answer the staff member."
        )
    } else {
        crate::stop::NOT_RUN.to_owned()
    })
}

/// Runs the turn of `deps.turn` with `agent`: loads the thread from the store, fits it into the
/// model's context (summarising the oldest turns when it must), runs the loop, and appends what
/// the turn added to the thread. A continuation (after an approval) starts again from its
/// chain's first message with the chain's journal ([`crate::Journal::continuing`]), so what the
/// earlier turns did is replayed silently and the answered calls run (or are declined) where
/// they paused — inside a subagent too; only what this turn adds is appended.
pub async fn run(agent: &Agent, deps: TurnDeps<'_>) -> Result<FinishReason, TurnError> {
    let loaded = deps.store.load().await?;
    let input = &deps.turn.input;
    let continues = matches!(input, TurnInput::Continue { .. });
    let first = match (input, loaded.first) {
        (TurnInput::Continue { .. }, Some(first)) => first,
        (TurnInput::Continue { .. }, None) => {
            return Err(StoreError::Gone(
                "The request this approval continues is no longer in the chat.",
            )
            .into());
        }
        (input, _) => input_message(input, deps.context()),
    };
    if let TurnInput::AskUserAnswer { tool_call_id, .. } = input
        && pending_question(&loaded.history) != Some(tool_call_id.as_str())
    {
        return Err(TurnError::NoQuestion);
    }
    let said = Said::of(&loaded.history, &first);
    // Fitted first: the stored summary covers a count of the thread's stored messages.
    let history =
        crate::window::window(deps, agent, &first, loaded.history, loaded.summary).await?;
    let history = crate::messages::earlier_as_text(history, &first);
    let outcome = run_after(agent, history, first.clone(), deps, &said).await?;
    let mut messages = Vec::with_capacity(outcome.messages.len() + 1);
    if !continues {
        messages.push(first);
    }
    messages.extend(outcome.messages);
    deps.store.append(messages).await?;
    Ok(outcome.finish)
}

/// Rover's loop on `first` after `history` (OpenAI-format messages; a leading summary of the
/// thread is an `assistant` message of data, `compact::summary_message`, never part of the system
/// prompt).
async fn run_after(
    agent: &Agent,
    history: Vec<Value>,
    first: Value,
    deps: TurnDeps<'_>,
    said: &Said,
) -> Result<Outcome, TurnError> {
    let mut conversation = Vec::with_capacity(history.len() + 2);
    conversation.push(json!({ "role": "system", "content": agent.system_prompt }));
    conversation.extend(history);
    conversation.push(first);
    run_loop(
        agent,
        "",
        complete_tool_results(conversation),
        deps,
        said,
        None,
    )
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
        gen_ai.provider.name = deps.model().provider(),
        gen_ai.conversation.id = %deps.turn.thread_id,
        gen_ai.agent.name = agent.name(),
        gen_ai.request.model = deps.model().model(),
    )
}

/// The agent loop of `agent`, journalled under `key` (`""` for Rover, the `task` call id for a
/// subagent); its writes are held to what the staff member `said`. A subagent handed a call of
/// Rover's (`carried`, see [`Routes`]) makes that call as its one step and passes its result on.
async fn run_loop(
    agent: &Agent,
    key: &str,
    conversation: Vec<Value>,
    deps: TurnDeps<'_>,
    said: &Said,
    carried: Option<Call>,
) -> Result<Outcome, TurnError> {
    let mut run = Loop {
        agent,
        key,
        said,
        carried,
        routes: Routes::default(),
        passed: None,
        // Call ids are unique in the turn: a subagent's carry the `task` call that started it.
        prefix: agent
            .subagent
            .map_or(String::new(), |s| format!("{key}/{}-", s.name())),
        deps,
        conversation,
        added: Vec::new(),
        refused_steps: 0,
        done_writes: HashSet::new(),
        answered_calls: 0,
        calls_made: 0,
        nudged: false,
        tried_write: false,
        held_text: std::sync::Mutex::new(Vec::new()),
    };
    for step in 0..deps.runtime.step_limit {
        if let Some(outcome) = run.step(step).await? {
            return Ok(outcome);
        }
    }
    // Out of steps: end with a clear sentence, not silence.
    let notice = format!(
        "I stopped because this needed more than {} steps. Please narrow the request or ask again.",
        deps.runtime.step_limit
    );
    Ok(run.say("limit", &notice, FinishReason::Length))
}

/// One agent's loop as it runs: the conversation so far and what the loop added to it.
struct Loop<'a, 'd> {
    agent: &'a Agent,
    key: &'a str,
    /// What the staff member said, which a write's arguments are held to.
    said: &'a Said,
    /// A subagent's: the call of Rover's it was handed, made as its one step.
    carried: Option<Call>,
    /// Rover's: the step's calls to tools it holds from a specialist, each now a `task`.
    routes: Routes,
    /// A carried call's result, once it has one.
    passed: Option<AgentToolResult<Value>>,
    prefix: String,
    deps: TurnDeps<'d>,
    conversation: Vec<Value>,
    /// The messages added (those an earlier turn of a paused chain stored are left out).
    added: Vec<Value>,
    /// Steps in a row whose every call was refused by `Agent::check_call` (no such tool, or
    /// arguments its schema refuses): the model reads the error and may correct itself once.
    refused_steps: u32,
    /// Writes that succeeded in this loop, by tool and arguments.
    done_writes: HashSet<(String, String)>,
    /// Calls of this loop that gave a result (not an error, not declined).
    answered_calls: usize,
    /// This loop made a write call (run, failed, declined or refused).
    tried_write: bool,
    /// Calls the model made in this loop, of any kind.
    calls_made: usize,
    /// Rover was told once that its answer did nothing ([`Loop::stalled`]).
    nudged: bool,
    /// A subagent's text events of the step being answered, held until the step's answer is
    /// whole: an answer that claims a change its loop never made is not shown.
    held_text: std::sync::Mutex<Vec<TurnEventKind>>,
}

/// A step's model answer: its text and calls, and whether an earlier turn of the chain recorded
/// it (then it is replayed without events, and not stored again).
struct Answered {
    text: String,
    calls: Vec<Call>,
    prior: bool,
}

impl Loop<'_, '_> {
    fn emit(&self, event: TurnEventKind) {
        if self.agent.subagent.is_some()
            && matches!(
                event,
                TurnEventKind::TextStart { .. }
                    | TurnEventKind::TextDelta { .. }
                    | TurnEventKind::TextEnd { .. }
            )
        {
            self.held().push(event);
            return;
        }
        self.send(event);
    }

    /// `event` as the client sees it: Rover's call to a tool it holds from a specialist starts as
    /// the `task` it becomes ([`Loop::route`]).
    fn routed(&self, event: TurnEventKind) -> TurnEventKind {
        match event {
            TurnEventKind::ToolInputStart {
                tool_call_id,
                tool_name,
                ..
            } if self.agent.tool(&tool_name).is_some_and(|t| t.via.is_some())
                && !crate::textcalls::is_cut_off_id(&tool_call_id) =>
            {
                TurnEventKind::ToolInputStart {
                    tool_call_id,
                    tool_name: TASK.to_owned(),
                    label: local::label(TASK),
                }
            }
            event => event,
        }
    }

    fn send(&self, event: TurnEventKind) {
        let _ = self.deps.events.send(Emitted {
            subagent: self.agent.subagent,
            event,
        });
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Vec<TurnEventKind>> {
        self.held_text
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Shows the text held back (a subagent's), in order.
    fn release_text(&self) {
        let held = std::mem::take(&mut *self.held());
        for event in held {
            self.send(event);
        }
    }

    /// Whether a subagent's final answer claims a change though its loop wrote nothing: a small
    /// model that could not make the call (it wrote it into a sentence instead), or made one that
    /// failed, writes "I recorded …" anyway. Its text is dropped unshown, and its `task` fails
    /// saying nothing was changed. A loop that only read (and answered from what it read) is
    /// left alone: "I've added up the marks" after a read is no claim of a write.
    fn unfounded(&self, text: &str) -> bool {
        self.agent.subagent.is_some()
            && self.done_writes.is_empty()
            && (self.tried_write || self.answered_calls == 0)
            && crate::claims::claim(text).is_some()
    }

    /// Whether Rover's answer announces or claims work though no call was made in this reply: a
    /// small model writes "I'll ask the class teacher" or "I recorded it" and stops. Once per
    /// reply it is told nothing was done and gets another step.
    fn stalled(&self, text: &str) -> bool {
        self.agent.subagent.is_none()
            && !self.nudged
            && self.calls_made == 0
            && (crate::claims::promise(text) || crate::claims::claim(text).is_some())
    }

    /// What the model is told after an answer that announced work and called nothing: that
    /// nothing was done, and which of its reads the request's words name, if any.
    fn nothing_done(&self) -> String {
        let reads = self
            .said
            .request()
            .map(|r| self.agent.reads_named_in(r))
            .unwrap_or_default();
        if reads.is_empty() {
            return NOTHING_DONE.to_owned();
        }
        format!(
            "{NOTHING_DONE} The request's words name your tool {}.",
            reads.join(", ")
        )
    }

    /// Emits `event` unless the step is an earlier turn's, replayed silently.
    fn emit_unless(&self, prior: bool, event: TurnEventKind) {
        if !prior {
            self.emit(event);
        }
    }

    /// One step: the model's answer, then its calls. `Some` when the loop ends here.
    async fn step(&mut self, step: u32) -> Result<Option<Outcome>, TurnError> {
        let Some(Answered { text, calls, prior }) = self.answer(step).await? else {
            return Ok(Some(self.stopped_with(String::new())));
        };
        let calls = self.route(calls);
        let inputs: Vec<Result<Value, InvalidCall>> = calls
            .iter()
            .map(|c| parse_arguments(&c.arguments))
            .collect();
        let checked: Vec<Checked<'_>> = calls
            .iter()
            .zip(&inputs)
            .map(|(call, input)| check(self.agent, call, input, self.said))
            .collect();
        let (calls, inputs) = as_held(calls, &checked, inputs);
        let assistant = assistant_message(&text, &self.routes.as_made(&calls));
        self.conversation.push(assistant.clone());
        if !prior {
            self.added.push(assistant);
        }
        self.calls_made += calls.len();
        if calls.is_empty() {
            if self.stalled(&text) {
                // Told once, in the conversation only (never the thread): the next step is its
                // second chance, and what it said stays shown and kept.
                self.nudged = true;
                self.release_text();
                self.emit_unless(prior, TurnEventKind::FinishStep);
                let told = self.nothing_done();
                self.conversation
                    .push(json!({ "role": "system", "content": told }));
                return Ok(None);
            }
            if self.unfounded(&text) {
                self.held().clear();
                self.emit_unless(prior, TurnEventKind::FinishStep);
                tracing::warn!(
                    agent = self.agent.name(),
                    "a specialist's answer claimed a change it never made; not shown"
                );
                return Ok(Some(Outcome {
                    unfounded: true,
                    ..self.end(text, FinishReason::Stop, false)
                }));
            }
            self.release_text();
            self.emit_unless(prior, TurnEventKind::FinishStep);
            return Ok(Some(self.end(text, FinishReason::Stop, false)));
        }
        self.release_text();
        let refused = checked.iter().all(Result::is_err);
        self.refused_steps = if refused { self.refused_steps + 1 } else { 0 };
        for (call, input) in calls.iter().zip(&inputs) {
            let input = input
                .clone()
                .unwrap_or_else(|_| Value::String(call.arguments.clone()));
            self.emit_unless(
                prior,
                TurnEventKind::ToolInputAvailable {
                    tool_call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    input,
                },
            );
        }
        // `ask_user` alone ends the turn waiting: its answer arrives as the next message, the one
        // result the step lacks. Beside other calls it is refused with an error result (below),
        // so every call of a step always has its result and the thread stays valid.
        if asks_alone(&calls, &checked) && !self.deps.stop.is_requested() {
            self.emit_unless(prior, TurnEventKind::FinishStep);
            return Ok(Some(self.end(text, FinishReason::ToolCalls, false)));
        }
        let results = self.settle_all(step, &calls, &checked).await?;
        let (paused, live, ask) = self.take_results(&calls, &checked, results, prior);
        if live {
            self.emit(TurnEventKind::FinishStep);
        }
        Ok(self.after(step, text, &calls, refused, paused, ask))
    }

    /// Whether the loop ends after a step whose calls have their results (`paused`: one waits
    /// for approval; `ask`: one raised a question), and how.
    fn after(
        &mut self,
        step: u32,
        text: String,
        calls: &[Call],
        refused: bool,
        paused: bool,
        ask: Option<Ask>,
    ) -> Option<Outcome> {
        // Every call reached for a write the caller was not given (each got its refusal): Rover
        // answers plainly from what the turn's context says they may do, instead of showing the
        // model a refusal it would repeat or work around.
        if refused && let Some(answer) = calls.iter().find_map(|c| self.agent.cannot_do(&c.name)) {
            return Some(self.say("cannot", &answer, FinishReason::Stop));
        }
        if self.refused_steps >= 2 {
            // Corrected once and still no call that can run: say so rather than loop.
            return Some(self.say("refused", CANNOT_CALL, FinishReason::Stop));
        }
        if paused {
            // The turn ends here; the staff member's answer continues it (`TurnInput::Continue`).
            return Some(self.end(text, FinishReason::ToolCalls, true));
        }
        if let Some(ask) = ask
            && !self.deps.stop.is_requested()
        {
            return Some(self.ask(step, text, ask));
        }
        // Stopped while the step's calls ran: they finished and are kept; nothing follows.
        if self.deps.stop.is_requested() {
            return Some(self.stopped_with(text));
        }
        // A carried call made: its result is the `task`'s, for Rover's model to read.
        if self.carried.is_some() {
            return Some(Outcome {
                passed: self.passed.take(),
                ..self.end(text, FinishReason::Stop, false)
            });
        }
        None
    }

    /// Rover's calls as they run: a call to a tool it holds from a specialist becomes a `task`
    /// for that specialist (same id), carrying the call; `self.routes` keeps what each carries.
    /// The rewrite is a function of the model's answer, so a replayed step routes the same way.
    fn route(&mut self, calls: Vec<Call>) -> Vec<Call> {
        self.routes = Routes::default();
        calls
            .into_iter()
            .map(|call| {
                let via = self.agent.tool(&call.name).and_then(|t| t.via);
                let Some(role) = via.filter(|_| !call.is_cut_off()) else {
                    return call;
                };
                let description = self.said.request().map_or_else(
                    || format!("Make this {} call for the staff member.", call.name),
                    |request| request.chars().take(4000).collect(),
                );
                let task = Call {
                    id: call.id.clone(),
                    name: TASK.to_owned(),
                    arguments: json!({ "subagent": role.name(), "description": description })
                        .to_string(),
                };
                let carried = Call {
                    id: format!("{}/{}-0-routed", call.id, role.name()),
                    arguments: self.held_arguments(&call),
                    ..call
                };
                self.routes.0.insert(task.id.clone(), carried);
                task
            })
            .collect()
    }

    /// A call's arguments as they will run (`Said::hold`), or as the model wrote them when they
    /// cannot be read.
    fn held_arguments(&self, call: &Call) -> String {
        match (
            self.agent.tool(&call.name),
            parse_arguments(&call.arguments),
        ) {
            (Some(tool), Ok(args)) => self.said.hold(tool, args).to_string(),
            _ => call.arguments.clone(),
        }
    }

    /// A call's write key ([`write_key`]); a `task` carrying a write has that write's.
    fn write_key(&self, call: &Call, checked: &Checked<'_>) -> Option<(String, String)> {
        let Some(carried) = self.routes.get(&call.id) else {
            return write_key(call, checked);
        };
        // Its arguments were held when it was routed (`held_arguments`): canonical JSON.
        let tool = self.agent.tool(&carried.name)?;
        parse_arguments(&carried.arguments).ok()?;
        (tool.contract.effect == Effect::Write)
            .then(|| (carried.name.clone(), carried.arguments.clone()))
    }

    /// The step's model answer: replayed from the journal, or streamed now and recorded. `None`:
    /// stopped before the model was called, or cut while it streamed (what it said is kept).
    async fn answer(&mut self, step: u32) -> Result<Option<Answered>, TurnError> {
        let deps = self.deps;
        let prior = deps.journal.is_prior(self.key, step, MODEL_PART);
        let recorded = deps.journal.get(self.key, step, MODEL_PART);
        // Stopped: no model call starts (what the journal holds is still replayed).
        if recorded.is_none() && deps.stop.is_requested() {
            return Ok(None);
        }
        let emit_step = |event| self.emit_unless(prior, self.routed(event));
        emit_step(TurnEventKind::StartStep);
        let step_name = format!("{}{step}", self.prefix);
        if let Some(assistant) = recorded {
            let (text, calls) = replay_model(assistant, &step_name, &emit_step);
            return Ok(Some(Answered { text, calls, prior }));
        }
        // A carried call is this loop's first step, as if its model had made it.
        if let Some(carried) = self.carried.as_ref().filter(|_| step == 0) {
            let assistant = assistant_message("", std::slice::from_ref(carried));
            record(deps, self.key, step, MODEL_PART, assistant.clone()).await?;
            let (text, calls) = replay_model(&assistant, &step_name, &emit_step);
            return Ok(Some(Answered { text, calls, prior }));
        }
        let tools = self.agent.tool_definitions();
        let emit = |event| self.emit(self.routed(event));
        let answer = stream_step(deps, &self.conversation, &tools, &step_name, &emit)
            .instrument(chat_span(self.agent, deps))
            .await?;
        // Cut by a stop: the text streamed so far is kept; its unfinished calls never start. It
        // is not journalled: a redelivered stopped turn ends before this step.
        if answer.cut {
            self.emit(TurnEventKind::FinishStep);
            if !answer.text.is_empty() {
                self.added.push(assistant_message(&answer.text, &[]));
            }
            return Ok(None);
        }
        let assistant = assistant_message(&answer.text, &answer.calls);
        record(deps, self.key, step, MODEL_PART, assistant).await?;
        Ok(Some(Answered {
            text: answer.text,
            calls: answer.calls,
            prior,
        }))
    }
    /// Runs the step's calls (or replays their recorded results), once the turn's budget has
    /// room for them all: none of them starts otherwise. Each result is recorded as it arrives;
    /// a resumed step runs only the calls it lacks.
    async fn settle_all(
        &self,
        step: u32,
        calls: &[Call],
        checked: &[Checked<'_>],
    ) -> Result<Vec<Settled>, TurnError> {
        let deps = self.deps;
        let fresh = calls
            .iter()
            .filter(|c| deps.journal.get(self.key, step, &c.id).is_none())
            .count();
        deps.budget.before_tool_calls(fresh)?;
        let keys = calls
            .iter()
            .zip(checked)
            .map(|(call, checked)| self.write_key(call, checked))
            .collect();
        let repeats = repeated_writes(keys, &self.done_writes);
        let results =
            futures::future::join_all(calls.iter().zip(checked).zip(&repeats).map(
                |((call, checked), repeat)| settle(self, step, call, checked.clone(), *repeat),
            ))
            .await
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?;
        // A subagent that spent the turn's budget failed its `task`; the turn stops here too.
        if let Some(spent) = deps.budget.exhausted() {
            return Err(spent.into());
        }
        Ok(results)
    }

    /// Puts the step's results into the conversation and tells the client each one. Returns
    /// whether a call waits for approval (the turn pauses), whether the step said anything
    /// new (else it is an earlier turn's, replayed silently), and the first question a failed
    /// call raised for the staff member.
    fn take_results(
        &mut self,
        calls: &[Call],
        checked: &[Checked<'_>],
        results: Vec<Settled>,
        prior: bool,
    ) -> (bool, bool, Option<Ask>) {
        let (mut paused, mut live, mut ask) = (false, !prior, None);
        for ((call, settled), checked) in calls.iter().zip(results).zip(checked) {
            let (envelope, denied) = match settled {
                Settled::Pending { approval_id } => {
                    (paused, live) = (true, true);
                    if let Some(approval_id) = approval_id {
                        self.emit(TurnEventKind::ToolApprovalRequest {
                            approval_id,
                            tool_call_id: call.id.clone(),
                        });
                    }
                    continue;
                }
                Settled::Done {
                    envelope,
                    denied,
                    prior,
                } => {
                    let key = self.write_key(call, checked);
                    self.tried_write |= key.is_some() || denied;
                    if !denied && !envelope.is_error() {
                        self.answered_calls += 1;
                        if let Some(key) = key {
                            self.done_writes.insert(key);
                        }
                    }
                    if ask.is_none() {
                        ask = envelope.ask().cloned();
                    }
                    if self.carried.is_some() {
                        self.passed = Some(envelope.clone());
                    }
                    let name = self.routes.get(&call.id).map_or(&call.name, |c| &c.name);
                    let message = tool_message(&call.id, name, &envelope);
                    self.conversation.push(message.clone());
                    if prior {
                        continue;
                    }
                    self.added.push(message);
                    (envelope, denied)
                }
            };
            live = true;
            self.emit(result_event(call, &envelope, denied));
        }
        (paused, live, ask)
    }

    /// Ends the loop on a question a call raised — a name that fits two students, or none but
    /// near ones: nothing was done, and a write must never run on a guess. A subagent hands the
    /// question up to Rover (its `task` fails with it); Rover asks the staff member itself, as an
    /// `ask_user` call with the candidates as choices, so even a small model that would not turn
    /// the error into a question asks it. The turn ends waiting; the answer arrives as that
    /// call's result, and the model makes the call again with it.
    fn ask(&mut self, step: u32, text: String, ask: Ask) -> Outcome {
        if self.agent.subagent.is_some() {
            return Outcome {
                ask: Some(ask),
                ..self.end(text, FinishReason::ToolCalls, false)
            };
        }
        let call = Call {
            id: format!("{}ask-{step}", self.prefix),
            name: ASK_USER.to_owned(),
            arguments: json!({ "question": ask.question, "choices": ask.choices }).to_string(),
        };
        self.emit(TurnEventKind::StartStep);
        self.emit(TurnEventKind::ToolInputAvailable {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            input: json!({ "question": ask.question, "choices": ask.choices }),
        });
        self.emit(TurnEventKind::FinishStep);
        self.added
            .push(assistant_message("", std::slice::from_ref(&call)));
        self.end(text, FinishReason::ToolCalls, false)
    }

    /// Ends the loop after the model's `text`.
    fn end(&mut self, text: String, finish: FinishReason, paused: bool) -> Outcome {
        self.release_text();
        Outcome {
            messages: std::mem::take(&mut self.added),
            text,
            finish,
            paused,
            ask: None,
            unfounded: false,
            passed: None,
        }
    }

    /// Ends a stopped loop: with what it added.
    fn stopped_with(&mut self, text: String) -> Outcome {
        self.end(text, FinishReason::Abort, false)
    }

    /// Ends the loop with a sentence of Rover's own (not the model's), shown as text and kept.
    fn say(&mut self, id: &str, text: &str, finish: FinishReason) -> Outcome {
        let id = format!("{}{id}", self.prefix);
        self.emit(TurnEventKind::TextStart { id: id.clone() });
        self.emit(TurnEventKind::TextDelta {
            id: id.clone(),
            delta: text.to_owned(),
        });
        self.emit(TurnEventKind::TextEnd { id });
        self.added
            .push(json!({ "role": "assistant", "content": text }));
        self.end(text.to_owned(), finish, false)
    }
}

/// The event that tells the client a call's result.
fn result_event(call: &Call, envelope: &AgentToolResult<Value>, denied: bool) -> TurnEventKind {
    let tool_call_id = call.id.clone();
    match envelope {
        _ if denied => TurnEventKind::ToolOutputDenied { tool_call_id },
        AgentToolResult::Data { .. } => TurnEventKind::ToolOutputAvailable {
            tool_call_id,
            output: serde_json::to_value(envelope).unwrap_or_default(),
        },
        AgentToolResult::Error { error, .. } => TurnEventKind::ToolOutputError {
            tool_call_id,
            error_text: error.clone(),
        },
    }
}

/// The span of one model call.
fn chat_span(agent: &Agent, deps: TurnDeps<'_>) -> tracing::Span {
    tracing::info_span!(
        "gen_ai.chat",
        otel.name = format!("chat {}", deps.model().model()),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = deps.model().provider(),
        gen_ai.conversation.id = %deps.turn.thread_id,
        gen_ai.request.model = deps.model().model(),
        gen_ai.response.model = tracing::field::Empty,
        gen_ai.agent.name = agent.name(),
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        gen_ai.response.finish_reasons = tracing::field::Empty,
        gen_ai.output.text = tracing::field::Empty,
        rover.model.text_tool_calls = tracing::field::Empty,
    )
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
    keys: Vec<Option<(String, String)>>,
    done: &HashSet<(String, String)>,
) -> Vec<bool> {
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

/// The tool that pauses the turn for the staff member's answer.
const ASK_USER: &str = "ask_user";

/// What Rover's model reads after an answer that announced or claimed work with no call made.
const NOTHING_DONE: &str = "No tool was called in this reply, so nothing has been done or looked \
     up yet. If the staff member's request needs one of your tools, call it now; otherwise answer \
     them plainly.";

/// The tool that hands work to a specialist.
const TASK: &str = "task";

/// Rover's calls of one step to tools it holds from a specialist (`AgentTool::via`), by the id
/// of the `task` each became: the call that specialist makes as its one step. The model makes
/// the call the staff member asked for; the specialist that owns the tool makes it, so the tool
/// runs where it always ran (its journal, approvals and questions included), and the `task`'s
/// result is the call's own, with no model call of the specialist's on either side.
#[derive(Debug, Default)]
struct Routes(HashMap<String, Call>);

impl Routes {
    fn get(&self, task: &str) -> Option<&Call> {
        self.0.get(task)
    }

    /// The step's calls as the model made them, for the thread: a routed call is kept as Rover's
    /// own call (held), its result under its own name, so in later turns the model reads the
    /// call it made — what it should make again — and not a `task` it never wrote. (Clients see
    /// the `task`: the history they read back is rebuilt from the turn's events.)
    fn as_made(&self, calls: &[Call]) -> Vec<Call> {
        calls
            .iter()
            .map(|call| match self.get(&call.id) {
                Some(carried) => Call {
                    id: call.id.clone(),
                    ..carried.clone()
                },
                None => call.clone(),
            })
            .collect()
    }
}

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
    said: &Said,
    carried: Option<&Call>,
) -> Option<AgentToolResult<Value>> {
    let span = tracing::info_span!(
        "gen_ai.execute_tool",
        otel.name = format!("execute_tool {}", call.name),
        gen_ai.operation.name = "execute_tool",
        gen_ai.conversation.id = %deps.turn.thread_id,
        gen_ai.tool.type = "function",
        gen_ai.tool.name = %call.name,
        gen_ai.tool.call.id = %call.id,
        gen_ai.tool.call.arguments = tracing::field::Empty,
        rover.tool.outcome = tracing::field::Empty,
    );
    if deps.runtime.capture_content {
        span.record("gen_ai.tool.call.arguments", call.arguments.as_str());
    }
    let started = Instant::now();
    let (event, outcome, result) = run_tool(agent, call, checked, deps, said, carried)
        .instrument(span.clone())
        .await;
    span.record("rover.tool.outcome", outcome);
    if let Some(metrics) = deps.runtime.metrics.as_ref() {
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
    said: &Said,
    carried: Option<&Call>,
) -> (&'c str, &'static str, Option<AgentToolResult<Value>>) {
    let (tool, args) = match checked {
        Ok(checked) => checked,
        Err(error) => {
            return (
                event_of(agent, &call.name),
                "invalid",
                Some(AgentToolResult::error(error.to_string())),
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
            let result = if call.name == TASK {
                delegate(agent, &call.id, args, deps, said, carried).await
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

/// `task`: runs a role subagent on the description and returns its final answer — or, when it
/// carries a call of Rover's ([`Routes`]), that call's result; `None` when the subagent paused
/// for an approval (the `task` call then waits too).
async fn delegate(
    agent: &Agent,
    call_id: &str,
    args: Value,
    deps: TurnDeps<'_>,
    said: &Said,
    carried: Option<&Call>,
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
    let carried = carried.cloned();
    match Box::pin(run_loop(
        subagent,
        call_id,
        conversation,
        deps,
        said,
        carried,
    ))
    .instrument(invoke_agent_span(subagent, deps))
    .await
    {
        Ok(outcome) if outcome.paused => None,
        Ok(outcome) if outcome.unfounded => Some(AgentToolResult::error(format!(
            "Not done: the {} specialist changed nothing (no write ran), though its answer said \
             it had. Tell the staff member plainly that it was not done.",
            args.subagent.name()
        ))),
        Ok(Outcome { ask: Some(ask), .. }) => Some(AgentToolResult::error_asking(
            format!(
                "Not done: the {} specialist could not tell what the staff member meant, and \
                 changed nothing. They are asked: {}",
                args.subagent.name(),
                ask.question
            ),
            ask,
        )),
        Ok(Outcome {
            passed: Some(result),
            ..
        }) => Some(result),
        Ok(outcome) if outcome.finish == FinishReason::Abort => {
            Some(AgentToolResult::error(format!(
                "The {} specialist was stopped by the staff member before it finished.",
                args.subagent.name()
            )))
        }
        Ok(outcome) => Some(AgentToolResult::data(
            Value::String(outcome.text),
            deps.context().call_scope().describe(),
        )),
        Err(error) => Some(AgentToolResult::error(format!(
            "The {} specialist failed: {error}.",
            args.subagent.name()
        ))),
    }
}
