//! What an agent of a turn is: its tools (contract and model-facing definition), skills and
//! subagents, and the checks of a call's arguments against a tool's schema. `build` assembles
//! one from the runtime context; `prompt` words it — from the same arrays, so the prompt's tool
//! inventory and delegate roster cannot drift from what the model is actually given.
//!
//! *Architecture Invariant*: nothing here is cached per caller. The only process-wide cache is the
//! tool *definitions* (name, description, JSON schema), which are static data of the contracts.

use std::collections::HashMap;
use std::sync::OnceLock;

use rover_contracts::context::Subagent;
use rover_contracts::tools::{Effect, REGISTRY, ToolContract};
use serde_json::{Value, json};

use crate::skills::Skill;

/// A tool as one agent holds it: its contract and the definition sent to the model.
#[derive(Debug, Clone, Copy)]
pub struct AgentTool {
    /// Everything Rover knows about the tool.
    pub contract: &'static ToolContract,
    /// `{"type":"function","function":{"name","description","parameters"}}`, as the model sees it.
    pub definition: &'static Value,
    /// Checks arguments against exactly that definition's schema.
    validator: Option<&'static jsonschema::Validator>,
    /// For a tool Rover holds from one of its specialists: that specialist, who makes the call
    /// (`run::Routes`). `None` for an agent's own tool.
    pub via: Option<Subagent>,
}

impl AgentTool {
    /// The tool of `contract`, as `definition` shows it.
    pub(crate) fn new(contract: &'static ToolContract, definition: &'static Definition) -> Self {
        Self {
            contract,
            definition: &definition.value,
            validator: definition.validator.as_ref(),
            via: None,
        }
    }

    /// The same tool, held by Rover from the specialist `role` that makes its calls.
    pub(crate) fn via(self, role: Subagent) -> Self {
        Self {
            via: Some(role),
            ..self
        }
    }
}

/// One agent of a turn: Rover, or a role subagent.
#[derive(Debug, Clone)]
pub struct Agent {
    /// `None` for Rover; the role for a subagent.
    pub subagent: Option<Subagent>,
    /// The tools the model is given, in catalogue order.
    pub tools: Vec<AgentTool>,
    /// The specialists Rover may delegate to (always empty for a subagent).
    pub subagents: Vec<Agent>,
    /// The skills listed in the prompt.
    pub skills: Vec<SkillRef>,
    /// The assembled system prompt.
    pub system_prompt: String,
}

/// A skill as the prompt lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillRef {
    /// Its name.
    pub name: String,
    /// One sentence about it.
    pub description: String,
    /// Where `read_file` finds its body (`/skills/…/SKILL.md`).
    pub path: String,
}

impl From<&Skill> for SkillRef {
    fn from(skill: &Skill) -> Self {
        Self {
            name: skill.name.clone(),
            description: skill.description.clone(),
            path: skill.path.clone(),
        }
    }
}

impl Agent {
    /// The name the agent goes by (`rover`, `class_teacher`, …).
    pub fn name(&self) -> &'static str {
        self.subagent.map_or("rover", Subagent::name)
    }

    /// The tool definitions to send to the model: exactly `self.tools`, in order. They are the
    /// contracts' static data, serialised from there into every model call, never copied.
    pub fn tool_definitions(&self) -> Vec<&'static Value> {
        self.tools.iter().map(|t| t.definition).collect()
    }

    /// The tool with this name, if the agent holds it.
    pub fn tool(&self, name: &str) -> Option<&AgentTool> {
        self.tools.iter().find(|t| t.contract.name == name)
    }

    /// Rover's plain answer when the model reaches for a write this agent (with its specialists)
    /// was not given: what the staff member cannot do and who can, in their words. `None` for any
    /// other tool — a name the model made up, a read, or a tool some specialist of it has.
    pub fn cannot_do(&self, name: &str) -> Option<String> {
        let contract = rover_contracts::tools::by_name(name)?;
        let given =
            self.tool(name).is_some() || self.subagents.iter().any(|s| s.tool(name).is_some());
        (contract.effect == Effect::Write && contract.event().is_some() && !given).then(|| {
            format!(
                "I can't do that for you: {} is not part of your access here ({}).",
                crate::cannot::doing(contract),
                crate::cannot::who_may_you(contract)
            )
        })
    }

    /// The agent's read tools whose name shares a word with `request` ("Who teaches in S1 Blue?"
    /// → `list_teaching_assignments`): what a model that announced work and called nothing is
    /// pointed to. Words of five letters or more match on their first five ("teaches",
    /// "teaching"); a write is never pointed to.
    pub(crate) fn reads_named_in(&self, request: &str) -> Vec<&'static str> {
        fn stems(text: &str) -> Vec<String> {
            text.split(|c: char| !c.is_alphabetic())
                .filter(|w| w.chars().count() >= 5)
                .map(|w| w.to_lowercase().chars().take(5).collect())
                .collect()
        }
        let said = stems(request);
        self.tools
            .iter()
            .filter(|t| t.contract.effect == Effect::Read)
            .filter(|t| stems(t.contract.name).iter().any(|s| said.contains(s)))
            .map(|t| t.contract.name)
            .collect()
    }

    /// The subagent with this role, if it exists this turn.
    pub fn delegate(&self, subagent: Subagent) -> Option<&Agent> {
        self.subagents.iter().find(|a| a.subagent == Some(subagent))
    }

    /// The tool a call names, its arguments checked against the very schema the model was shown.
    /// Every call passes here before it may run or wait for approval, whether the model made it
    /// natively or wrote it as text; `Err` is the result the model reads instead, saying what it
    /// may call.
    pub(crate) fn check_call(&self, name: &str, args: &Value) -> Result<&AgentTool, InvalidCall> {
        let tool = self
            .tool(name)
            .ok_or_else(|| InvalidCall(self.unknown_tool(name)))?;
        if let Some(argument) = unknown_argument(tool, args) {
            return Err(InvalidCall(self.no_such_argument(tool, argument)));
        }
        validate_arguments(tool, args)?;
        Ok(tool)
    }

    /// What the model reads when it gives a tool an argument the tool does not take (a small
    /// model reaches for the read it has with the argument of the one it lacks: `list_classes`
    /// with a `class`): the arguments the tool takes, and which tools — its own, or a
    /// specialist's — take that argument.
    fn no_such_argument(&self, tool: &AgentTool, argument: &str) -> String {
        let argument: String = argument.chars().take(64).collect();
        let takes = |t: &AgentTool| {
            t.contract.name != tool.contract.name
                && t.definition["function"]["parameters"]["properties"]
                    .get(argument.as_str())
                    .is_some()
        };
        let mut elsewhere: Vec<String> = self
            .tools
            .iter()
            .filter(|t| takes(t))
            .map(|t| t.contract.name.to_owned())
            .collect();
        for specialist in &self.subagents {
            let theirs_only = |t: &&AgentTool| takes(t) && self.tool(t.contract.name).is_none();
            elsewhere.extend(specialist.tools.iter().filter(theirs_only).map(|t| {
                format!(
                    "{} (the {} specialist's: call task with subagent \"{}\" and a description \
                     of the work)",
                    t.contract.name,
                    specialist.name(),
                    specialist.name()
                )
            }));
        }
        elsewhere.truncate(3);
        let own: Vec<&str> = tool.definition["function"]["parameters"]["properties"]
            .as_object()
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let own = if own.is_empty() {
            "it takes no arguments".to_owned()
        } else {
            format!("it takes {}", own.join(", "))
        };
        let hint = if elsewhere.is_empty() {
            String::new()
        } else {
            format!(" Tools that take {argument}: {}.", elsewhere.join("; "))
        };
        format!(
            "Invalid arguments for {}: there is no argument {argument} ({own}). Nothing was \
             run.{hint}",
            tool.contract.name
        )
    }

    /// What the model reads when it calls a tool it does not have: the tools it has, and where
    /// the one it wanted is (a specialist's, or not this staff member's at all).
    fn unknown_tool(&self, name: &str) -> String {
        let name: String = name.chars().take(64).collect();
        let mine: Vec<&str> = self.tools.iter().map(|t| t.contract.name).collect();
        let hint = if let Some(owner) = self.subagents.iter().find(|a| a.tool(&name).is_some()) {
            format!(
                " {name} is the {owner} specialist's tool: call task with subagent \"{owner}\" and a \
                 description of the work, with every detail they need.",
                owner = owner.name()
            )
        } else if rover_contracts::tools::by_name(&name).is_some() {
            format!(
                " {name} is not available to this staff member: tell them plainly that you cannot \
                 do that for them."
            )
        } else {
            " If none of them fits, answer in plain sentences.".to_owned()
        };
        format!(
            "There is no tool named {name} for you; nothing was run. Your tools: {}.{hint}",
            mine.join(", ")
        )
    }
}

/// Whether the thread has a sandbox mounted (the file tools exist only then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mounts {
    /// A per-thread sandbox is mounted.
    pub sandbox: bool,
}

/// A tool as the model is shown it, and the validator of its arguments.
#[derive(Debug)]
pub(crate) struct Definition {
    /// `{"type":"function","function":{"name","description","parameters"}}`.
    pub(crate) value: Value,
    /// Built from `parameters`, formats (`uuid`, `date`) checked; the registry's schemas are
    /// checked to be valid JSON Schema by the contracts tests.
    validator: Option<jsonschema::Validator>,
}

impl Definition {
    fn new(value: Value) -> Self {
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&value["function"]["parameters"])
            .ok();
        Self { value, validator }
    }
}

/// Every tool's definition, and `task`'s for each set of specialists (it offers exactly the
/// ones that exist for the turn, so a small model cannot name another), built once per process
/// from the contracts.
struct Catalogue {
    tools: HashMap<&'static str, Definition>,
    /// Index: bit `i` set when `Subagent::ALL[i]` is offered.
    tasks: Vec<Definition>,
}

fn catalogue() -> &'static Catalogue {
    static CATALOGUE: OnceLock<Catalogue> = OnceLock::new();
    CATALOGUE.get_or_init(|| {
        let tools: HashMap<&'static str, Value> = REGISTRY
            .iter()
            .map(|c| {
                let mut parameters = serde_json::to_value((c.args_schema)()).unwrap_or_else(|_| json!({}));
                if let Some(map) = parameters.as_object_mut() {
                    // Rust-side titles and doc headers mean nothing to a model.
                    map.remove("title");
                    map.remove("description");
                }
                let definition = json!({
                    "type": "function",
                    "function": { "name": c.name, "description": c.description, "parameters": parameters },
                });
                (c.name, definition)
            })
            .collect();
        let tasks = (0..1usize << Subagent::ALL.len())
            .map(|set| {
                let mut task = tools.get("task").cloned().unwrap_or_default();
                if let Some(roles) =
                    task["function"]["parameters"]["properties"]["subagent"]["oneOf"].as_array_mut()
                {
                    roles.retain(|role| {
                        Subagent::ALL.iter().enumerate().any(|(i, s)| {
                            set & (1 << i) != 0 && role["const"].as_str() == Some(s.name())
                        })
                    });
                }
                Definition::new(task)
            })
            .collect();
        Catalogue {
            tools: tools.into_iter().map(|(n, v)| (n, Definition::new(v))).collect(),
            tasks,
        }
    })
}

/// The definition of the tool named `name` (`task` offering every specialist).
pub(crate) fn definition(name: &str) -> Option<&'static Definition> {
    catalogue().tools.get(name)
}

/// The definition of `task` offering exactly `delegates`.
pub(crate) fn task_definition(delegates: &[Subagent]) -> &'static Definition {
    let set = Subagent::ALL
        .iter()
        .enumerate()
        .filter(|(_, s)| delegates.contains(s))
        .fold(0, |set, (i, _)| set | (1 << i));
    &catalogue().tasks[set]
}

/// Why a call cannot run (no such tool, arguments that are not JSON or that its schema
/// refuses): the text is the result the model reads instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct InvalidCall(pub(crate) String);

impl std::ops::Deref for InvalidCall {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

/// Checks a call's arguments against the very schema the model was shown (closed: unknown
/// fields are errors; ids must be ids), so nothing runs on arguments the contract does not allow.
/// The message names the first problem, cut short so a huge argument is never echoed back whole,
/// and says what the argument it concerns should hold (its description: where an id comes from).
pub(crate) fn validate_arguments(tool: &AgentTool, args: &Value) -> Result<(), InvalidCall> {
    let Some(validator) = tool.validator else {
        return Err(InvalidCall(format!(
            "The arguments of {} cannot be checked, so it was not run.",
            tool.contract.name
        )));
    };
    let Some(error) = validator.iter_errors(args).next() else {
        return Ok(());
    };
    const SHOWN: usize = 300;
    let path = error.instance_path().to_string();
    let at = if path.is_empty() {
        String::new()
    } else {
        format!(" (at {})", path.chars().take(100).collect::<String>())
    };
    let message = error.to_string();
    let mut shown: String = message.chars().take(SHOWN).collect();
    if message.chars().count() > SHOWN {
        shown.push('…');
    }
    let argument = path
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or_default();
    let hint = tool.definition["function"]["parameters"]["properties"][argument]["description"]
        .as_str()
        .map(|about| format!(" {argument}: {about}"))
        .unwrap_or_default();
    Err(InvalidCall(format!(
        "Invalid arguments for {}: {shown}{at}.{hint} Nothing was run.",
        tool.contract.name
    )))
}

/// The first top-level argument of `args` that `tool` does not take.
fn unknown_argument<'v>(tool: &AgentTool, args: &'v Value) -> Option<&'v str> {
    let properties = &tool.definition["function"]["parameters"]["properties"];
    args.as_object()?
        .keys()
        .find(|k| properties.get(k.as_str()).is_none())
        .map(String::as_str)
}

/// Whether a tool changes data (for the prompt's inventory).
pub(crate) fn is_write(tool: &AgentTool) -> bool {
    tool.contract.effect == Effect::Write
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(name: &str) -> AgentTool {
        AgentTool::new(
            rover_contracts::tools::by_name(name).expect("a registry tool"),
            definition(name).expect("a definition"),
        )
    }

    fn agent(subagent: Option<Subagent>, tools: &[&str], subagents: Vec<Agent>) -> Agent {
        Agent {
            subagent,
            tools: tools.iter().map(|t| tool(t)).collect(),
            subagents,
            skills: Vec::new(),
            system_prompt: String::new(),
        }
    }

    #[test]
    fn a_write_the_caller_was_not_given_is_answered_plainly() {
        let bursar = agent(None, &["find_students", "ask_user"], Vec::new());
        assert_eq!(
            bursar.cannot_do("create_department").as_deref(),
            Some(
                "I can't do that for you: creating a department is not part of your access here \
                 (your role in this school does not allow it)."
            )
        );
        // A read, an invented name, or a write a specialist holds: the model is told as before.
        assert_eq!(bursar.cannot_do("list_departments"), None);
        assert_eq!(bursar.cannot_do("create:Department"), None);
        let teacher = agent(
            Some(Subagent::SubjectTeacher),
            &["list_my_classes", "record_marks"],
            Vec::new(),
        );
        let amina = agent(None, &["task"], vec![teacher]);
        assert_eq!(amina.cannot_do("record_marks"), None);
        assert!(
            amina.cannot_do("record_attendance").unwrap().contains(
                "only a class's class teacher can, and you are class teacher of no class"
            )
        );
    }

    #[test]
    fn task_offers_exactly_the_turns_specialists_as_the_roster_words_them() {
        let roles = |delegates: &[Subagent]| -> Vec<(String, String)> {
            task_definition(delegates).value["function"]["parameters"]["properties"]["subagent"]
                ["oneOf"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        r["const"].as_str().unwrap().to_owned(),
                        r["description"].as_str().unwrap().to_owned(),
                    )
                })
                .collect()
        };
        let all = roles(&Subagent::ALL);
        assert_eq!(
            all,
            Subagent::ALL
                .iter()
                .map(|s| (s.name().to_owned(), s.summary().to_owned()))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            roles(&[Subagent::DirectorOfStudies]),
            [all[2].clone()],
            "only the specialist the turn has"
        );
        let task = AgentTool::new(
            rover_contracts::tools::by_name("task").unwrap(),
            task_definition(&[Subagent::ClassTeacher]),
        );
        let to =
            |subagent: &str| json!({ "subagent": subagent, "description": "Record attendance" });
        assert!(validate_arguments(&task, &to("class_teacher")).is_ok());
        assert!(validate_arguments(&task, &to("director_of_studies")).is_err());
    }

    #[test]
    fn an_argument_of_the_wrong_shape_is_refused_with_what_it_should_be() {
        let rename = tool("rename_department");
        let error = validate_arguments(
            &rename,
            &json!({ "department": { "id": 7 }, "newName": "Social Studies" }),
        )
        .unwrap_err();
        assert!(error.contains("string"), "{error}");
        assert!(
            error.contains(
                "department: The department: its name as staff say it (e.g. \"Maths\") or its id."
            ),
            "{error}"
        );
        // A name is what it takes now: no id to look up first.
        assert!(
            validate_arguments(
                &rename,
                &json!({ "department": "Maths", "newName": "Mathematics & Sciences" })
            )
            .is_ok()
        );
    }

    #[test]
    fn a_call_is_checked_against_the_tools_offered_and_their_schemas() {
        let teacher = agent(
            Some(Subagent::ClassTeacher),
            &["get_class_roster", "record_attendance"],
            Vec::new(),
        );
        let rover = agent(None, &["list_departments", "task"], vec![teacher]);
        assert!(rover.check_call("list_departments", &json!({})).is_ok());

        // Arguments the schema refuses (closed: an unknown field too).
        let invalid = rover
            .check_call("list_departments", &json!({ "schoolId": "x" }))
            .unwrap_err();
        assert!(
            invalid.starts_with("Invalid arguments for list_departments"),
            "{invalid}"
        );

        // A specialist's tool: the error says how to reach it.
        let theirs = rover
            .check_call("record_attendance", &json!({}))
            .unwrap_err();
        assert!(
            theirs.contains("Your tools: list_departments, task."),
            "{theirs}"
        );
        assert!(
            theirs.contains("call task with subagent \"class_teacher\""),
            "{theirs}"
        );
        // A tool this staff member does not have at all.
        let denied = rover
            .check_call("create_department", &json!({ "name": "Sciences" }))
            .unwrap_err();
        assert!(
            denied.contains("not available to this staff member"),
            "{denied}"
        );
        // A tool that does not exist: answer in sentences instead.
        // An argument the tool does not take: which tools take it, and how to reach them.
        let misplaced = rover
            .check_call("list_departments", &json!({ "class": "S1 Blue" }))
            .unwrap_err();
        assert!(
            misplaced.starts_with(
                "Invalid arguments for list_departments: there is no argument class (it takes \
                 no arguments)."
            ),
            "{misplaced}"
        );
        assert!(
            misplaced.contains(
                "Tools that take class: get_class_roster (the class_teacher specialist's: call \
                 task with subagent \"class_teacher\""
            ),
            "{misplaced}"
        );

        let invented = rover.check_call("say_hello", &json!({})).unwrap_err();
        assert!(invented.contains("no tool named say_hello"), "{invented}");
        assert!(invented.contains("answer in plain sentences"), "{invented}");
    }

    #[test]
    fn a_request_points_to_the_reads_its_words_name_never_to_a_write() {
        let dos = agent(
            None,
            &[
                "list_classes",
                "list_teaching_assignments",
                "assign_subject_teacher",
                "get_results_summary",
            ],
            vec![],
        );
        assert_eq!(
            dos.reads_named_in("Who teaches in S1 Blue?"),
            ["list_teaching_assignments"]
        );
        assert_eq!(
            dos.reads_named_in("How did S1 Blue do? Show me the results"),
            ["get_results_summary"]
        );
        assert_eq!(
            dos.reads_named_in("Assign Okello to S1 Blue"),
            ["list_teaching_assignments"],
            "the read of assignments, never assign_subject_teacher"
        );
        assert!(dos.reads_named_in("Hello there").is_empty());
    }
}
