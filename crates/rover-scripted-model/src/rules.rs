//! The rules file: its TOML shape, and the checked form the engine runs (regexes compiled,
//! templates parsed), so a broken rule fails when the file loads, never mid-conversation.

use std::fmt;

use regex::{Regex, RegexBuilder};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::template::{Path, Root, SyntaxError, Template};

/// The rules that ship with the crate, used when no `--rules` file is given.
pub const DEFAULT_RULES: &str = include_str!("../rules.toml");

/// What `unavailable` says when a rule does not set it.
const DEFAULT_UNAVAILABLE: &str =
    "I can't do that for you: your access in this school doesn't include it.";
/// What `on_error` says when a rule does not set it.
const DEFAULT_ON_ERROR: &str = "I couldn't do that: {{error}}";

/// A rules file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// The text is not valid TOML, or its top level is not `[[rule]]` tables.
    #[error("the rules file is not valid: {0}")]
    File(String),
    /// One rule is wrong; `rule` is its `name` (or its position when it has none).
    #[error("rule `{rule}`: {problem}")]
    Rule {
        /// The rule's name, or `#N` (1-based) when it has none.
        rule: String,
        /// What is wrong.
        problem: RuleProblem,
    },
}

/// What is wrong with one rule. Each message starts with the place in the rule (`when`,
/// `step 2: call `x`: args.name`, …) where there is one.
#[derive(Debug, thiserror::Error)]
pub enum RuleProblem {
    /// The rule's table does not have the rule's shape (an unknown or mistyped field).
    #[error("{}", .0.message())]
    Shape(toml::de::Error),
    /// A template or path does not parse.
    #[error("{place}: {source}")]
    Syntax {
        /// Where it is.
        place: String,
        /// Why it does not parse.
        source: SyntaxError,
    },
    /// A path uses `item` outside an `each` item.
    #[error("{place}: `{path}` uses `item`, which exists only inside an `each` item")]
    ItemOutsideEach {
        /// Where it is.
        place: String,
        /// The path as written.
        path: String,
    },
    /// A path uses `error` outside `on_error`.
    #[error("{place}: `{path}` uses `error`, which exists only in `on_error`")]
    ErrorOutsideOnError {
        /// Where it is.
        place: String,
        /// The path as written.
        path: String,
    },
    /// A path names a capture group `when` does not have.
    #[error(
        "{place}: `{path}` refers to capture {index}, but `when` has only {groups} capture group(s)"
    )]
    NoSuchCapture {
        /// Where it is.
        place: String,
        /// The path as written.
        path: String,
        /// The capture it names.
        index: usize,
        /// How many capture groups `when` has (`match.0` not counted).
        groups: usize,
    },
    /// A regular expression does not compile.
    #[error("{place}: bad regex `{pattern}`: {source}")]
    Regex {
        /// Where it is.
        place: String,
        /// The pattern as written.
        pattern: String,
        /// Why it does not compile.
        source: regex::Error,
    },
    /// An `each` table has a key it does not know.
    #[error("{place}: unknown key `{key}` (expected each, split, pattern, item)")]
    UnknownEachKey {
        /// Where it is.
        place: String,
        /// The key.
        key: String,
    },
    /// An `each` key that must be text is not.
    #[error("{place}: `{key}` must be text")]
    NotText {
        /// Where it is.
        place: String,
        /// The key.
        key: String,
    },
    /// An `each` table has no `item`.
    #[error("{place}: `item` is missing")]
    MissingItem {
        /// Where it is.
        place: String,
    },
    /// The rule has no steps.
    #[error("has no `steps`")]
    NoSteps,
    /// A call step's `written` is not a known way of writing calls.
    #[error("{place}: unknown `written = \"{written}\"` (expected \"note\")")]
    UnknownWritten {
        /// Where it is.
        place: String,
        /// The value as written.
        written: String,
    },
    /// A step's `fail` is not one of the known failures.
    #[error("{place}: unknown `fail = \"{fail}\"` (expected \"mid-stream\" or \"http-500\")")]
    UnknownFail {
        /// Where it is.
        place: String,
        /// The value as written.
        fail: String,
    },
    /// A `call` step also has `fail`.
    #[error("{place}: `fail` goes on a `say` step (or alone), not on a `call` step")]
    FailOnCall {
        /// Where it is.
        place: String,
    },
    /// A step both calls and says.
    #[error("{place}: a step either calls tools or says something, not both")]
    CallAndSay {
        /// Where it is.
        place: String,
    },
    /// A step's `call` lists no calls.
    #[error("{place}: `call` is empty")]
    EmptyCall {
        /// Where it is.
        place: String,
    },
    /// A step has none of `call`, `say`, `fail`.
    #[error("{place}: needs `call`, `say` or `fail`")]
    EmptyStep {
        /// Where it is.
        place: String,
    },
    /// A call names no tool.
    #[error("{place}: `tool` is empty")]
    NoTool {
        /// Where it is.
        place: String,
    },
    /// A call's `args` is text that is not JSON.
    #[error("{place}: `args` is text but not a JSON object: {source}")]
    ArgsNotJson {
        /// Where it is.
        place: String,
        /// Why it does not parse.
        source: serde_json::Error,
    },
    /// A call's `args` is not a table.
    #[error("{place}: `args` must be a table (tool arguments are a JSON object)")]
    ArgsNotObject {
        /// Where it is.
        place: String,
    },
}

/// A parsed, checked rules file: the script the test double follows.
#[derive(Debug, Clone)]
pub struct Rules {
    pub(crate) rules: Vec<Rule>,
}

/// How a step fails on purpose, to test the client's error handling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fail {
    /// Stream a few content chunks, then drop the connection without `[DONE]`.
    MidStream,
    /// Answer HTTP 500 with an OpenAI-style error body.
    Http500,
}

#[derive(Debug, Clone)]
pub(crate) struct Rule {
    pub(crate) name: String,
    pub(crate) when: Regex,
    /// Tools that must be offered for the rule to apply at all (which agent is asking).
    pub(crate) offered: Vec<String>,
    /// Tools that must not be offered for the rule to apply (a subagent's rule names `task`, so
    /// Rover — offered its specialists' tools too — does not take it for its own).
    pub(crate) not_offered: Vec<String>,
    /// Runtime-context conditions; when one fails the rule answers `unavailable`.
    pub(crate) requires: Vec<Path>,
    /// Tools that must be offered; when one is not the rule answers `unavailable`.
    pub(crate) requires_tools: Vec<String>,
    pub(crate) unavailable: Template,
    pub(crate) on_error: Template,
    /// An error result does not divert to `on_error`: the steps go on (a model that errs on).
    pub(crate) continue_on_error: bool,
    pub(crate) steps: Vec<Step>,
}

#[derive(Debug, Clone)]
pub(crate) enum Step {
    /// Call these tools together, in one response.
    Call(Vec<Call>),
    /// Make these calls by writing them as a note of what was done, the way Rover shows the
    /// model its earlier turns — `(What I did: tool {…} → done)` — and as a model shown such
    /// notes makes a call (`written = "note"`).
    Note(Vec<Call>),
    /// Say this and end the turn.
    Say(Template),
    /// Fail on purpose, optionally after some text.
    Fail(Fail, Option<Template>),
}

#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub(crate) tool: String,
    pub(crate) args: Args,
    /// Extra fields added to the arguments verbatim (to test that smuggled identity is refused).
    pub(crate) inject: Vec<(String, Args)>,
}

/// A JSON value whose strings are templates, and which may hold `each` expansions.
#[derive(Debug, Clone)]
pub(crate) enum Args {
    Object(Vec<(String, Args)>),
    Array(Vec<Args>),
    Text(Template),
    Literal(Value),
    Each(Box<Each>),
}

/// `{ each = "match.3", split = ",\\s*", pattern = "(\\w+)\\s+(\\d+)", item = … }`.
#[derive(Debug, Clone)]
pub(crate) struct Each {
    pub(crate) source: Path,
    pub(crate) split: Regex,
    pub(crate) pattern: Option<Regex>,
    pub(crate) item: Args,
}

impl Rules {
    /// Parses and checks a rules file. Errors name the rule and say what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, RulesError> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| RulesError::File(e.to_string().trim_end().to_owned()))?;
        if let Some(key) = table.keys().find(|k| k.as_str() != "rule") {
            return Err(RulesError::File(format!(
                "unknown top-level key `{key}`; rules are `[[rule]]` tables"
            )));
        }
        let raw_rules = match table.get("rule") {
            None => Vec::new(),
            Some(toml::Value::Array(items)) => items.clone(),
            Some(_) => {
                return Err(RulesError::File(
                    "`rule` must be an array of tables (`[[rule]]`)".to_owned(),
                ));
            }
        };
        let rules = raw_rules
            .into_iter()
            .enumerate()
            .map(|(i, raw)| {
                let label = raw
                    .get("name")
                    .and_then(toml::Value::as_str)
                    .map_or_else(|| format!("#{}", i + 1), str::to_owned);
                compile_rule(raw, &label).map_err(|problem| RulesError::Rule {
                    rule: label,
                    problem,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { rules })
    }

    /// The rules embedded in the binary (`rules.toml` of this crate).
    pub fn builtin() -> Self {
        // A unit test parses the embedded file, so this cannot fail in a built binary.
        Self::parse(DEFAULT_RULES).expect("the embedded rules.toml is valid")
    }

    /// The rules' names, in file order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|r| r.name.as_str())
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    name: Option<String>,
    when: String,
    #[serde(default)]
    offered: Vec<String>,
    #[serde(default)]
    not_offered: Vec<String>,
    #[serde(default)]
    requires: Vec<String>,
    #[serde(default)]
    requires_tools: Vec<String>,
    unavailable: Option<String>,
    on_error: Option<String>,
    #[serde(default)]
    continue_on_error: bool,
    #[serde(default)]
    steps: Vec<RawStep>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    call: Option<OneOrMany>,
    written: Option<String>,
    say: Option<String>,
    fail: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(RawCall),
    Many(Vec<RawCall>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCall {
    tool: String,
    args: Option<Value>,
    inject: Option<Map<String, Value>>,
}

/// Which template roots a place may use.
#[derive(Debug, Clone, Copy)]
struct Allowed {
    item: bool,
    error: bool,
}

/// What every template of one rule is checked against.
#[derive(Debug)]
struct Checker {
    /// Capture groups of `when`, `match.0` included.
    groups: usize,
}

impl Checker {
    fn template(&self, text: &str, place: &str, allowed: Allowed) -> Result<Template, RuleProblem> {
        let template = Template::parse(text).map_err(|source| RuleProblem::Syntax {
            place: place.to_owned(),
            source,
        })?;
        for path in template.paths() {
            self.path_root(path, place, allowed)?;
        }
        Ok(template)
    }

    fn path(&self, text: &str, place: &str, allowed: Allowed) -> Result<Path, RuleProblem> {
        let text = text
            .trim()
            .strip_prefix("{{")
            .and_then(|t| t.strip_suffix("}}"))
            .unwrap_or(text);
        let path = Path::parse(text).map_err(|source| RuleProblem::Syntax {
            place: place.to_owned(),
            source,
        })?;
        let mut all = Vec::new();
        path.walk(&mut all);
        for p in all {
            self.path_root(p, place, allowed)?;
        }
        Ok(path)
    }

    fn path_root(&self, path: &Path, place: &str, allowed: Allowed) -> Result<(), RuleProblem> {
        match path.root() {
            Root::Item if !allowed.item => Err(RuleProblem::ItemOutsideEach {
                place: place.to_owned(),
                path: path.source().to_owned(),
            }),
            Root::Error if !allowed.error => Err(RuleProblem::ErrorOutsideOnError {
                place: place.to_owned(),
                path: path.source().to_owned(),
            }),
            Root::Match => match path.first_index() {
                Some(n) if n >= self.groups => Err(RuleProblem::NoSuchCapture {
                    place: place.to_owned(),
                    path: path.source().to_owned(),
                    index: n,
                    groups: self.groups - 1,
                }),
                _ => Ok(()),
            },
            _ => Ok(()),
        }
    }

    fn args(&self, value: &Value, place: &str, allowed: Allowed) -> Result<Args, RuleProblem> {
        Ok(match value {
            Value::String(text) => Args::Text(self.template(text, place, allowed)?),
            Value::Array(items) => Args::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| self.args(v, &format!("{place}[{i}]"), allowed))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) if map.contains_key("each") => {
                Args::Each(Box::new(self.each(map, place, allowed)?))
            }
            Value::Object(map) => Args::Object(
                map.iter()
                    .map(|(k, v)| Ok((k.clone(), self.args(v, &format!("{place}.{k}"), allowed)?)))
                    .collect::<Result<_, RuleProblem>>()?,
            ),
            other => Args::Literal(other.clone()),
        })
    }

    fn each(
        &self,
        map: &Map<String, Value>,
        place: &str,
        allowed: Allowed,
    ) -> Result<Each, RuleProblem> {
        let place = format!("{place} (each)");
        if let Some(key) = map
            .keys()
            .find(|k| !matches!(k.as_str(), "each" | "split" | "pattern" | "item"))
        {
            return Err(RuleProblem::UnknownEachKey {
                place,
                key: key.clone(),
            });
        }
        let text = |key: &str| -> Result<Option<&str>, RuleProblem> {
            match map.get(key) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.as_str())),
                Some(_) => Err(RuleProblem::NotText {
                    place: place.clone(),
                    key: key.to_owned(),
                }),
            }
        };
        let source = text("each")?.unwrap_or_default();
        let source = self.path(source, &place, allowed)?;
        let split = regex(
            text("split")?.unwrap_or(r"\s*,\s*"),
            &format!("{place}: split"),
        )?;
        let pattern = text("pattern")?
            .map(|p| regex(p, &format!("{place}: pattern")))
            .transpose()?;
        let item = map.get("item").ok_or_else(|| RuleProblem::MissingItem {
            place: place.clone(),
        })?;
        let item = self.args(
            item,
            &format!("{place}.item"),
            Allowed {
                item: true,
                ..allowed
            },
        )?;
        Ok(Each {
            source,
            split,
            pattern,
            item,
        })
    }
}

fn regex(pattern: &str, place: &str) -> Result<Regex, RuleProblem> {
    RegexBuilder::new(pattern)
        .case_insensitive(true)
        .build()
        .map_err(|source| RuleProblem::Regex {
            place: place.to_owned(),
            pattern: pattern.to_owned(),
            source,
        })
}

fn compile_rule(raw: toml::Value, label: &str) -> Result<Rule, RuleProblem> {
    let raw = RawRule::deserialize(raw).map_err(RuleProblem::Shape)?;
    let when = regex(&raw.when, "when")?;
    let checker = Checker {
        groups: when.captures_len(),
    };
    let plain = Allowed {
        item: false,
        error: false,
    };
    let requires = raw
        .requires
        .iter()
        .map(|p| checker.path(p, "requires", plain))
        .collect::<Result<_, _>>()?;
    let unavailable = checker.template(
        raw.unavailable.as_deref().unwrap_or(DEFAULT_UNAVAILABLE),
        "unavailable",
        plain,
    )?;
    let on_error = checker.template(
        raw.on_error.as_deref().unwrap_or(DEFAULT_ON_ERROR),
        "on_error",
        Allowed {
            item: false,
            error: true,
        },
    )?;
    if raw.steps.is_empty() {
        return Err(RuleProblem::NoSteps);
    }
    let steps = raw
        .steps
        .into_iter()
        .enumerate()
        .map(|(i, step)| compile_step(step, &checker, &format!("step {}", i + 1)))
        .collect::<Result<_, _>>()?;
    Ok(Rule {
        name: raw.name.unwrap_or_else(|| label.to_owned()),
        when,
        offered: raw.offered,
        not_offered: raw.not_offered,
        requires,
        requires_tools: raw.requires_tools,
        unavailable,
        on_error,
        continue_on_error: raw.continue_on_error,
        steps,
    })
}

fn compile_step(step: RawStep, checker: &Checker, place: &str) -> Result<Step, RuleProblem> {
    let plain = Allowed {
        item: false,
        error: false,
    };
    let fail = step
        .fail
        .as_deref()
        .map(|f| match f {
            "mid-stream" => Ok(Fail::MidStream),
            "http-500" => Ok(Fail::Http500),
            other => Err(RuleProblem::UnknownFail {
                place: place.to_owned(),
                fail: other.to_owned(),
            }),
        })
        .transpose()?;
    let say = step
        .say
        .as_deref()
        .map(|s| checker.template(s, &format!("{place}: say"), plain))
        .transpose()?;
    match (step.call, say, fail) {
        (Some(_), _, Some(_)) => Err(RuleProblem::FailOnCall {
            place: place.to_owned(),
        }),
        (Some(_), Some(_), None) => Err(RuleProblem::CallAndSay {
            place: place.to_owned(),
        }),
        (Some(calls), None, None) => {
            let calls = match calls {
                OneOrMany::One(call) => vec![call],
                OneOrMany::Many(calls) => calls,
            };
            if calls.is_empty() {
                return Err(RuleProblem::EmptyCall {
                    place: place.to_owned(),
                });
            }
            calls
                .into_iter()
                .map(|call| compile_call(call, checker, place))
                .collect::<Result<_, _>>()
                .and_then(|calls| match step.written.as_deref() {
                    None => Ok(Step::Call(calls)),
                    Some("note") => Ok(Step::Note(calls)),
                    Some(other) => Err(RuleProblem::UnknownWritten {
                        place: place.to_owned(),
                        written: other.to_owned(),
                    }),
                })
        }
        (None, Some(say), None) => Ok(Step::Say(say)),
        (None, say, Some(fail)) => Ok(Step::Fail(fail, say)),
        (None, None, None) => Err(RuleProblem::EmptyStep {
            place: place.to_owned(),
        }),
    }
}

fn compile_call(call: RawCall, checker: &Checker, place: &str) -> Result<Call, RuleProblem> {
    let place = format!("{place}: call `{}`", call.tool);
    if call.tool.trim().is_empty() {
        return Err(RuleProblem::NoTool { place });
    }
    let plain = Allowed {
        item: false,
        error: false,
    };
    let args = match call.args {
        None => Value::Object(Map::new()),
        // Arguments may also be written as a JSON string.
        Some(Value::String(json)) => {
            serde_json::from_str(&json).map_err(|source| RuleProblem::ArgsNotJson {
                place: place.clone(),
                source,
            })?
        }
        Some(value) => value,
    };
    if !args.is_object() {
        return Err(RuleProblem::ArgsNotObject { place });
    }
    let args = checker.args(&args, &format!("{place}: args"), plain)?;
    let inject = call
        .inject
        .unwrap_or_default()
        .iter()
        .map(|(k, v)| {
            Ok((
                k.clone(),
                checker.args(v, &format!("{place}: inject.{k}"), plain)?,
            ))
        })
        .collect::<Result<_, RuleProblem>>()?;
    Ok(Call {
        tool: call.tool,
        args,
        inject,
    })
}

impl fmt::Display for Fail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Fail::MidStream => "mid-stream",
            Fail::Http500 => "http-500",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_rules_parse() {
        let rules = Rules::parse(DEFAULT_RULES).expect("rules.toml parses");
        assert!(rules.names().count() > 10);
        assert_eq!(rules.rules.last().map(|r| r.when.as_str()), Some(".*"));
    }

    #[test]
    fn problems_name_the_rule() {
        let unknown_field = Rules::parse(
            "[[rule]]\nname = \"x\"\nwhen = \"a\"\nsteps = [{ say = \"hi\" }]\nbogus = 1\n",
        )
        .expect_err("unknown field");
        assert!(
            unknown_field
                .to_string()
                .starts_with("rule `x`: unknown field `bogus`"),
            "{unknown_field}"
        );
        let no_steps = Rules::parse("[[rule]]\nwhen = \"a\"\n").expect_err("a rule needs steps");
        assert_eq!(no_steps.to_string(), "rule `#1`: has no `steps`");
        assert!(matches!(
            no_steps,
            RulesError::Rule {
                problem: RuleProblem::NoSteps,
                ..
            }
        ));
        let capture = Rules::parse(
            "[[rule]]\nname = \"y\"\nwhen = \"(a)\"\nsteps = [{ say = \"{{match.2}}\" }]\n",
        )
        .expect_err("no such group");
        assert!(
            capture.to_string().contains("only 1 capture group"),
            "{capture}"
        );
        let item = Rules::parse(
            "[[rule]]\nname = \"z\"\nwhen = \"a\"\nsteps = [{ say = \"{{item.1}}\" }]\n",
        )
        .expect_err("item outside each");
        assert!(item.to_string().contains("only inside an `each`"), "{item}");
        let fail = Rules::parse(
            "[[rule]]\nname = \"f\"\nwhen = \"a\"\nsteps = [{ fail = \"sometimes\" }]\n",
        )
        .expect_err("bad fail");
        assert_eq!(
            fail.to_string(),
            "rule `f`: step 1: unknown `fail = \"sometimes\"` (expected \"mid-stream\" or \"http-500\")"
        );
        let args = Rules::parse(
            "[[rule]]\nname = \"g\"\nwhen = \"a\"\nsteps = [{ call = { tool = \"t\", args = \"[1\" } }]\n",
        )
        .expect_err("args that are not JSON");
        assert!(
            matches!(
                &args,
                RulesError::Rule {
                    problem: RuleProblem::ArgsNotJson { place, .. },
                    ..
                } if place == "step 1: call `t`"
            ),
            "{args}"
        );
        assert!(
            args.to_string()
                .starts_with("rule `g`: step 1: call `t`: `args` is text but not a JSON object: "),
            "{args}"
        );
    }
}
