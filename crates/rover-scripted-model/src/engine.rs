//! The stateless engine: given one request's conversation, pick the rule and the next response.
//!
//! Nothing is remembered between requests. The trigger is the last user message; progress is the
//! number of tool results after it; the step to emit is found by counting the results earlier
//! call steps consumed.

use serde_json::{Map, Value};

use crate::rules::{Args, Call, Each, Fail, Rule, Rules, Step};
use crate::template::{Missing, Scope, Template, text_of};

/// The conversation as the engine sees it, taken from one Chat Completions request.
#[derive(Debug, Clone, Default)]
pub(crate) struct Conversation {
    /// The text of the last `user` message.
    pub(crate) trigger: String,
    /// The `tool` messages after the trigger, parsed as JSON (text that is not JSON stays text).
    pub(crate) results: Vec<Value>,
    /// The `<runtime_context>` JSON from the system prompt, or null.
    pub(crate) context: Value,
    /// The tool names the request offered.
    pub(crate) offered: Vec<String>,
    /// How many messages the request held (makes tool-call ids unique within a conversation).
    pub(crate) message_count: usize,
}

/// One tool call to emit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolCall {
    pub(crate) id: String,
    pub(crate) name: String,
    /// The arguments as a JSON string, exactly as sent.
    pub(crate) arguments: String,
}

/// What the model answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    Say(String),
    Calls(Vec<ToolCall>),
    Fail(Fail, String),
}

/// The reply and the rule that produced it (for the log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) rule: String,
    pub(crate) reply: Reply,
}

/// Said when no rule's `when` matches (a rules file without a catch-all).
const NO_RULE: &str = "I'm the scripted test model and I have no rule for that message.";

/// What a gullible model does with text planted in data: the newest tool result's first
/// `!call <tool> {json}` becomes that call — whoever wrote it, whatever the staff member asked.
/// Only the newest result is read, so an obeyed call's own result ends the obedience.
pub(crate) fn obey_planted(conversation: &Conversation) -> Option<Decision> {
    static PLANTED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r#"!call ([a-z_]+) (\{[^{}]*\})"#).expect("a valid pattern")
    });
    let newest = conversation.results.last()?;
    let text = match newest {
        Value::String(text) => text.clone(),
        other => other.to_string().replace("\\\"", "\""),
    };
    let found = PLANTED.captures(&text)?;
    let arguments: Value = serde_json::from_str(&found[2]).ok()?;
    Some(Decision {
        rule: "obey-planted".to_owned(),
        reply: Reply::Calls(vec![ToolCall {
            id: format!("planted-{}", conversation.message_count),
            name: found[1].to_owned(),
            arguments: arguments.to_string(),
        }]),
    })
}

/// `calls` as the note of what was done that Rover shows the model for earlier turns (its
/// `messages::earlier_as_text`), followed by the claim a model adds.
fn noted(calls: &[ToolCall]) -> String {
    let calls: Vec<String> = calls
        .iter()
        .map(|c| format!("{} {} → done", c.name, c.arguments))
        .collect();
    format!("(What I did: {})\nDone.", calls.join("; "))
}

/// Picks the rule for `conversation` and renders its next response.
pub(crate) fn decide(rules: &Rules, conversation: &Conversation) -> Decision {
    let trigger = conversation.trigger.trim();
    let trigger_value = Value::String(trigger.to_owned());
    let results = Value::Array(conversation.results.clone());
    for rule in &rules.rules {
        let Some(captures) = rule.when.captures(trigger) else {
            continue;
        };
        if !rule
            .offered
            .iter()
            .all(|t| conversation.offered.contains(t))
            || rule
                .not_offered
                .iter()
                .any(|t| conversation.offered.contains(t))
        {
            continue;
        }
        let captures = Value::Array(
            captures
                .iter()
                .map(|m| m.map_or(Value::Null, |m| Value::String(m.as_str().to_owned())))
                .collect(),
        );
        let scope = Scope {
            captures: &captures,
            trigger: &trigger_value,
            context: &conversation.context,
            results: &results,
            item: &Value::Null,
            error: &Value::Null,
        };
        return Decision {
            rule: rule.name.clone(),
            reply: run(rule, &scope, conversation),
        };
    }
    Decision {
        rule: "(none)".to_owned(),
        reply: Reply::Say(NO_RULE.to_owned()),
    }
}

fn run(rule: &Rule, scope: &Scope<'_>, conversation: &Conversation) -> Reply {
    let offered = |tool: &str| conversation.offered.iter().any(|t| t == tool);
    let unavailable = || say(&rule.unavailable, scope);

    if !rule.requires_tools.iter().all(|t| offered(t)) {
        return unavailable();
    }
    let holds = |path: &crate::template::Path| {
        path.resolve(scope)
            .is_ok_and(|v| crate::template::truthy(&v))
    };
    if !rule.requires.iter().all(holds) {
        return unavailable();
    }
    if let Some(error) = conversation
        .results
        .iter()
        .find_map(error_of)
        .filter(|_| !rule.continue_on_error)
    {
        let error = Value::String(error);
        return say(
            &rule.on_error,
            &Scope {
                error: &error,
                ..*scope
            },
        );
    }

    let progress = conversation.results.len();
    let mut consumed = 0;
    for step in &rule.steps {
        match step {
            // A call step is done once its results have come back.
            Step::Call(calls) | Step::Note(calls) if progress > consumed => {
                consumed += calls.len();
            }
            Step::Note(calls) => {
                let rendered: Result<Vec<_>, _> = calls
                    .iter()
                    .enumerate()
                    .map(|(i, call)| render_call(call, i, scope, conversation))
                    .collect();
                return match rendered {
                    Ok(calls) => Reply::Say(noted(&calls)),
                    Err(missing) => couldnt_find(&missing),
                };
            }
            Step::Call(calls) => {
                if !calls.iter().all(|c| offered(&c.tool)) {
                    return unavailable();
                }
                return calls
                    .iter()
                    .enumerate()
                    .map(|(i, call)| render_call(call, i, scope, conversation))
                    .collect::<Result<Vec<_>, _>>()
                    .map_or_else(|missing| couldnt_find(&missing), Reply::Calls);
            }
            Step::Say(text) => return say(text, scope),
            Step::Fail(fail, text) => {
                let text = match text {
                    Some(t) => t.render_text(scope).unwrap_or_default(),
                    None => String::new(),
                };
                return Reply::Fail(*fail, text);
            }
        }
    }
    // Every call is done: say the last `say` again rather than call tools in a loop.
    match rule.steps.iter().rev().find_map(|s| match s {
        Step::Say(text) => Some(text),
        _ => None,
    }) {
        Some(text) => say(text, scope),
        None => Reply::Say("Done.".to_owned()),
    }
}

/// The error text of an error envelope `{"error": …}`.
fn error_of(result: &Value) -> Option<String> {
    let object = result.as_object()?;
    object.get("error").filter(|e| !e.is_null()).map(text_of)
}

fn say(template: &Template, scope: &Scope<'_>) -> Reply {
    template
        .render_text(scope)
        .map_or_else(|missing| couldnt_find(&missing), Reply::Say)
}

fn couldnt_find(missing: &Missing) -> Reply {
    Reply::Say(format!(
        "I couldn't find {} in what I was given, so I stopped there.",
        missing.0
    ))
}

fn render_call(
    call: &Call,
    index: usize,
    scope: &Scope<'_>,
    conversation: &Conversation,
) -> Result<ToolCall, Missing> {
    let mut arguments = match render_args(&call.args, scope)? {
        Value::Object(map) => map,
        // The rules loader only accepts tables for `args`.
        _ => Map::new(),
    };
    for (key, value) in &call.inject {
        arguments.insert(key.clone(), render_args(value, scope)?);
    }
    Ok(ToolCall {
        id: format!(
            "call_{:08x}_{}_{index}",
            fnv(&conversation.trigger),
            conversation.message_count
        ),
        name: call.tool.clone(),
        arguments: Value::Object(arguments).to_string(),
    })
}

fn render_args(args: &Args, scope: &Scope<'_>) -> Result<Value, Missing> {
    Ok(match args {
        Args::Literal(value) => value.clone(),
        Args::Text(template) => template.render_value(scope)?,
        Args::Array(items) => Value::Array(
            items
                .iter()
                .map(|a| render_args(a, scope))
                .collect::<Result<_, _>>()?,
        ),
        Args::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, a)| Ok((k.clone(), render_args(a, scope)?)))
                .collect::<Result<_, Missing>>()?,
        ),
        Args::Each(each) => render_each(each, scope)?,
    })
}

/// Splits the source text into parts, matches each with `pattern`, renders `item` per part.
fn render_each(each: &Each, scope: &Scope<'_>) -> Result<Value, Missing> {
    let source = each.source.resolve(scope)?;
    let parts: Vec<String> = match &source {
        Value::Array(items) => items.iter().map(text_of).collect(),
        other => each
            .split
            .split(&text_of(other))
            .map(str::to_owned)
            .collect(),
    };
    parts
        .iter()
        .map(|part| part.trim())
        .filter(|part| !part.is_empty())
        .map(|part| {
            let captures = match &each.pattern {
                None => Value::Array(vec![Value::String(part.to_owned())]),
                Some(pattern) => {
                    let captures = pattern.captures(part).ok_or_else(|| {
                        Missing(format!("a match for `{}` in \"{part}\"", pattern.as_str()))
                    })?;
                    Value::Array(
                        captures
                            .iter()
                            .map(|m| {
                                m.map_or(Value::Null, |m| Value::String(m.as_str().to_owned()))
                            })
                            .collect(),
                    )
                }
            };
            render_args(
                &each.item,
                &Scope {
                    item: &captures,
                    ..*scope
                },
            )
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Value::Array)
}

/// A small stable hash (FNV-1a), so call ids are deterministic across runs.
fn fnv(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn conversation(trigger: &str, offered: &[&str], results: Vec<Value>) -> Conversation {
        Conversation {
            trigger: trigger.to_owned(),
            results,
            context: Value::Null,
            offered: offered.iter().map(|s| (*s).to_owned()).collect(),
            message_count: 2,
        }
    }

    fn calls(reply: &Reply) -> Vec<(String, Value)> {
        match reply {
            Reply::Calls(calls) => calls
                .iter()
                .map(|c| {
                    (
                        c.name.clone(),
                        serde_json::from_str(&c.arguments).expect("arguments are JSON"),
                    )
                })
                .collect(),
            other => panic!("expected tool calls, got {other:?}"),
        }
    }

    #[test]
    fn steps_advance_with_results_and_the_last_say_repeats() {
        let rules = Rules::parse(
            r#"
            [[rule]]
            name = "two-calls"
            when = "go (\\w+)"
            steps = [
              { call = [{ tool = "a", args = { x = "{{match.1}}" } }, { tool = "b" }] },
              { call = { tool = "c", args = { n = "{{result.1.data.n}}" } } },
              { say = "n is {{result.2.data}}" },
            ]
            "#,
        )
        .expect("parses");
        let offered = ["a", "b", "c"];
        let first = decide(&rules, &conversation("Go far", &offered, vec![]));
        assert_eq!(
            calls(&first.reply),
            vec![("a".into(), json!({"x": "far"})), ("b".into(), json!({}))]
        );
        let results = vec![json!({"data": 1}), json!({"data": {"n": 7}})];
        let second = decide(&rules, &conversation("go far", &offered, results.clone()));
        assert_eq!(calls(&second.reply), vec![("c".into(), json!({"n": 7}))]);
        let mut all = results;
        all.push(json!({"data": "seven"}));
        let third = decide(&rules, &conversation("go far", &offered, all.clone()));
        assert_eq!(third.reply, Reply::Say("n is seven".into()));
        all.push(json!({"data": "extra"}));
        let again = decide(&rules, &conversation("go far", &offered, all));
        assert_eq!(again.reply, Reply::Say("n is seven".into()));
    }

    #[test]
    fn each_expands_parts_into_an_array() {
        let rules = Rules::parse(
            r#"
            [[rule]]
            name = "marks"
            when = "marks: (.+)"
            [[rule.steps]]
            call = [{ tool = "m", args = { marks = { each = "match.1", split = ",\\s*|\\s+and\\s+", pattern = "(\\w+)\\s+(\\d+)", item = { who = "{{item.1}}", score = "{{item.2|number}}" } } } }]
            "#,
        )
        .expect("parses");
        let reply = decide(
            &rules,
            &conversation("marks: Nakato 78, Mugisha 64 and Opio 50", &["m"], vec![]),
        )
        .reply;
        assert_eq!(
            calls(&reply),
            vec![(
                "m".into(),
                json!({"marks": [
                    {"who": "Nakato", "score": 78},
                    {"who": "Mugisha", "score": 64},
                    {"who": "Opio", "score": 50}
                ]})
            )]
        );
    }

    #[test]
    fn offered_selects_the_rule_and_a_missing_path_is_said_plainly() {
        let rules = Rules::parse(
            r#"
            [[rule]]
            name = "sub"
            when = "do (\\w+)"
            offered = ["x"]
            steps = [{ call = { tool = "x", args = { id = "{{context.things[name=match.1].id}}" } } }]
            [[rule]]
            name = "top"
            when = "do"
            steps = [{ say = "top" }]
            "#,
        )
        .expect("parses");
        let top = decide(&rules, &conversation("do it", &["y"], vec![]));
        assert_eq!(top.rule, "top");
        let sub = decide(&rules, &conversation("do it", &["x"], vec![]));
        assert_eq!(sub.rule, "sub");
        assert_eq!(
            sub.reply,
            Reply::Say(
                "I couldn't find context.things[name=match.1].id in what I was given, so I stopped there."
                    .into()
            )
        );
    }
}
