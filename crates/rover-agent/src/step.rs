//! One model step: the streamed answer read into text and tool calls (or replayed from the
//! journal), and the assistant message it leaves in the conversation.

use std::collections::BTreeMap;
use std::time::Instant;

use futures::StreamExt as _;
use rover_contracts::wire::{TokenUsage, TurnEventKind};
use serde_json::{Value, json};

use crate::agent::InvalidCall;
use crate::deps::TurnDeps;
use crate::error::TurnError;
use crate::local;
use crate::model::ModelError;
use crate::textcalls::{self, Holdback};

/// A tool call the model made, as assembled from the stream.
#[derive(Debug, Default, Clone)]
pub(crate) struct Call {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) arguments: String,
}

impl Call {
    /// Written as text and cut off before its arguments ended (`textcalls::cut_off_call`): it is
    /// refused. Told by its id, so a replayed step knows it too.
    pub(crate) fn is_cut_off(&self) -> bool {
        textcalls::is_cut_off_id(&self.id)
    }
}

/// Emits a recorded model answer as it was streamed and returns its text and calls.
pub(crate) fn replay_model(
    assistant: &Value,
    step: &str,
    emit: &impl Fn(TurnEventKind),
) -> (String, Vec<Call>) {
    let text = assistant["content"].as_str().unwrap_or_default().to_owned();
    if !text.is_empty() {
        let id = format!("{step}-text");
        emit(TurnEventKind::TextStart { id: id.clone() });
        emit(TurnEventKind::TextDelta {
            id: id.clone(),
            delta: text.clone(),
        });
        emit(TurnEventKind::TextEnd { id });
    }
    let calls: Vec<Call> = assistant["tool_calls"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|call| Call {
            id: call["id"].as_str().unwrap_or_default().to_owned(),
            name: call["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            arguments: call["function"]["arguments"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        })
        .collect();
    for call in &calls {
        emit(TurnEventKind::ToolInputStart {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            label: local::label(&call.name),
        });
    }
    (text, calls)
}

/// What one model call answered: its text and tool calls, or — `cut` — the text it had streamed
/// when the turn was stopped (its calls, unfinished, are dropped).
#[derive(Debug, Default)]
pub(crate) struct Answer {
    pub(crate) text: String,
    pub(crate) calls: Vec<Call>,
    pub(crate) cut: bool,
}

/// Streams one model call: emits text as it arrives and tool-input starts as calls appear. A
/// stop cuts the call where it is (the HTTP stream is dropped, so the server stops generating).
pub(crate) async fn stream_step(
    deps: TurnDeps<'_>,
    conversation: &[Value],
    tools: &[&Value],
    step: &str,
    emit: &impl Fn(TurnEventKind),
) -> Result<Answer, TurnError> {
    let prompt: usize = conversation
        .iter()
        .chain(tools.iter().copied())
        .map(crate::compact::estimate)
        .sum();
    let prompt = u64::try_from(prompt).unwrap_or(u64::MAX);
    let reservation = deps.budget.before_model_call(deps.store, prompt).await?;
    let started = Instant::now();
    let mut usage = None;
    let mut model = deps.model().model().to_owned();
    let mut partial = Partial::default();
    let streamed = tokio::select! {
        biased;
        () = deps.stop.requested() => Ok(true),
        read = async {
            let mut stream = deps.model().stream(conversation, tools).await?;
            if stream.fallback
                && let Some(metrics) = deps.runtime.metrics.as_ref()
            {
                metrics.model.fell_back();
            }
            let span = tracing::Span::current();
            span.record("gen_ai.response.model", stream.model.as_str());
            span.record("gen_ai.provider.name", stream.provider.as_str());
            deps.budget.answered_by(&stream.model);
            model = stream.model;
            partial.holdback = Holdback::new(stream.text_tool_calls);
            read_step(&mut stream.chunks, step, emit, &mut usage, &mut partial).await
        } => read.map(|()| false),
    };
    let streamed = streamed.and_then(|cut| partial.end(step, cut, emit));
    if let Some(metrics) = deps.runtime.metrics.as_ref() {
        metrics
            .model
            .observe(&model, streamed.is_ok(), started.elapsed(), usage);
    }
    let used = charged(prompt, usage, &streamed);
    deps.budget
        .after_model_call(deps.store, reservation, used)
        .await;
    if deps.runtime.capture_content
        && let Ok(answer) = &streamed
    {
        tracing::Span::current().record("gen_ai.output.text", answer.text.as_str());
    }
    Ok(streamed?)
}

/// What a model call is charged: what the model reported; a server that reports nothing (or a
/// call cut short) is charged the estimate.
fn charged(
    prompt: u64,
    reported: Option<(u32, u32)>,
    streamed: &Result<Answer, ModelError>,
) -> TokenUsage {
    match (reported, streamed) {
        (Some((input, output)), _) => TokenUsage {
            input_tokens: input.into(),
            output_tokens: output.into(),
        },
        (None, Ok(answer)) => {
            let arguments: usize = answer.calls.iter().map(|c| c.arguments.len()).sum();
            TokenUsage {
                input_tokens: prompt,
                output_tokens: u64::try_from((answer.text.len() + arguments).div_ceil(4))
                    .unwrap_or(u64::MAX),
            }
        }
        (None, Err(_)) => TokenUsage {
            input_tokens: prompt,
            output_tokens: 0,
        },
    }
}

/// A model call's answer as far as it has streamed: the text shown, the text kept back as a
/// possible call, the native calls.
#[derive(Debug, Default)]
struct Partial {
    text: String,
    holdback: Holdback,
    calls: BTreeMap<u32, Call>,
    finish_reason: Option<String>,
}

impl Partial {
    /// Ends the call's text: released (or, `cut` by a stop, what was kept back as a possible call
    /// dropped, never shown and never run), and the answer it makes.
    fn end(
        &mut self,
        step: &str,
        cut: bool,
        emit: &impl Fn(TurnEventKind),
    ) -> Result<Answer, ModelError> {
        if cut {
            self.holdback.take();
        } else {
            self.release(step, emit);
        }
        if !self.text.is_empty() {
            emit(TurnEventKind::TextEnd {
                id: format!("{step}-text"),
            });
        }
        if !cut {
            return self.finish();
        }
        tracing::info!(chars = self.text.len(), "the model call was cut by a stop");
        Ok(Answer {
            text: std::mem::take(&mut self.text),
            cut: true,
            ..Answer::default()
        })
    }

    /// Once the stream has ended: the text kept back is the step's calls when it is wholly
    /// calls and the model made none natively; otherwise it is text after all, and shown.
    fn release(&mut self, step: &str, emit: &impl Fn(TurnEventKind)) {
        let held = self.holdback.take();
        if held.is_empty() {
            return;
        }
        let recovered = if self.calls.is_empty() {
            textcalls::parse(&held).or_else(|| textcalls::note(&held))
        } else {
            None
        };
        let cut_off = self
            .calls
            .is_empty()
            .then(|| textcalls::cut_off_call(&held))
            .flatten();
        if recovered.is_none()
            && let Some(name) = cut_off
        {
            tracing::warn!(tool = %name, "a tool call the model wrote as text was cut off; refused");
            let id = textcalls::cut_off_id(step);
            emit(TurnEventKind::ToolInputStart {
                tool_call_id: id.clone(),
                tool_name: name.clone(),
                label: local::label(&name),
            });
            self.calls.insert(
                0,
                Call {
                    id,
                    name,
                    arguments: "{}".to_owned(),
                },
            );
            return;
        }
        let Some(recovered) = recovered else {
            if self.text.is_empty() {
                emit(TurnEventKind::TextStart {
                    id: format!("{step}-text"),
                });
            }
            self.text.push_str(&held);
            emit(TurnEventKind::TextDelta {
                id: format!("{step}-text"),
                delta: held,
            });
            return;
        };
        tracing::info!(
            calls = recovered.len(),
            "tool calls the model wrote as text were recovered"
        );
        tracing::Span::current().record("rover.model.text_tool_calls", recovered.len());
        for (index, call) in (0u32..).zip(recovered) {
            let id = textcalls::recovered_id(step, index);
            emit(TurnEventKind::ToolInputStart {
                tool_call_id: id.clone(),
                tool_name: call.name.clone(),
                label: local::label(&call.name),
            });
            self.calls.insert(
                index,
                Call {
                    id,
                    name: call.name,
                    arguments: call.arguments.to_string(),
                },
            );
        }
    }

    /// The complete answer, once the stream has ended.
    fn finish(&mut self) -> Result<Answer, ModelError> {
        if let Some(reason) = &self.finish_reason {
            tracing::Span::current().record("gen_ai.response.finish_reasons", reason.as_str());
        }
        let calls: Vec<Call> = std::mem::take(&mut self.calls)
            .into_values()
            .filter(|c| !c.name.is_empty())
            .collect();
        if self.finish_reason.is_none() && calls.is_empty() && self.text.is_empty() {
            return Err(ModelError::Malformed(
                "the stream ended without a response".to_owned(),
            ));
        }
        Ok(Answer {
            text: std::mem::take(&mut self.text),
            calls,
            cut: false,
        })
    }
}

/// Reads one model call's stream to its end into `partial` (text closes in the caller).
async fn read_step(
    stream: &mut crate::model::ChunkStream,
    step: &str,
    emit: &impl Fn(TurnEventKind),
    usage_seen: &mut Option<(u32, u32)>,
    partial: &mut Partial,
) -> Result<(), ModelError> {
    let text_id = format!("{step}-text");
    let Partial {
        text,
        holdback,
        calls,
        finish_reason,
    } = partial;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if let Some(usage) = &chunk.usage {
            *usage_seen = Some((usage.prompt_tokens, usage.completion_tokens));
            tracing::Span::current().record("gen_ai.usage.input_tokens", usage.prompt_tokens);
            tracing::Span::current().record("gen_ai.usage.output_tokens", usage.completion_tokens);
        }
        for choice in chunk.choices {
            let shown = choice
                .delta
                .content
                .filter(|d| !d.is_empty())
                .and_then(|d| holdback.push(&d));
            if let Some(delta) = shown {
                if text.is_empty() {
                    emit(TurnEventKind::TextStart {
                        id: text_id.clone(),
                    });
                }
                text.push_str(&delta);
                emit(TurnEventKind::TextDelta {
                    id: text_id.clone(),
                    delta,
                });
            }
            for piece in choice.delta.tool_calls.unwrap_or_default() {
                let call = calls.entry(piece.index).or_default();
                if let Some(id) = piece.id.filter(|id| !id.is_empty()) {
                    // Scope the model's id to the agent and step, so ids never repeat in a turn.
                    // '#' marks a cut-off call written as text (`textcalls::cut_off_id`), so a
                    // native id never carries it.
                    let id: String = id
                        .chars()
                        .take(64)
                        .map(|c| if c == '#' { '_' } else { c })
                        .collect();
                    call.id = format!("{step}-{id}");
                }
                if let Some(function) = piece.function {
                    if let Some(name) = function.name.filter(|n| !n.is_empty()) {
                        call.name = name;
                        let label = local::label(&call.name);
                        let id = if call.id.is_empty() {
                            format!("{step}-{}", piece.index)
                        } else {
                            call.id.clone()
                        };
                        call.id = id.clone();
                        emit(TurnEventKind::ToolInputStart {
                            tool_call_id: id,
                            tool_name: call.name.clone(),
                            label,
                        });
                    }
                    if let Some(arguments) = function.arguments {
                        call.arguments.push_str(&arguments);
                    }
                }
            }
            if let Some(reason) = choice.finish_reason {
                *finish_reason = Some(format!("{reason:?}").to_lowercase());
            }
        }
    }
    Ok(())
}

/// The assistant message of a step, as the conversation (and the journal) keep it.
pub(crate) fn assistant_message(text: &str, calls: &[Call]) -> Value {
    let mut assistant = json!({ "role": "assistant", "content": if text.is_empty() { Value::Null } else { Value::String(text.to_owned()) } });
    if !calls.is_empty() {
        assistant["tool_calls"] = calls
            .iter()
            .map(|c| json!({ "id": c.id, "type": "function", "function": { "name": c.name, "arguments": c.arguments } }))
            .collect();
    }
    assistant
}

pub(crate) fn parse_arguments(arguments: &str) -> Result<Value, InvalidCall> {
    if arguments.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str(arguments)
        .map_err(|e| InvalidCall(format!("The arguments are not valid JSON: {e}.")))
}
