//! The eval's cases (`utterances.toml`): what a staff member says in a chat — a first message,
//! the answers to the questions it raises, later messages — and what must follow each.

use std::collections::HashSet;
use std::path::Path;

use anyhow::{Context as _, bail, ensure};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The file shipped with the crate.
pub fn default_file() -> std::path::PathBuf {
    std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/utterances.toml"))
}

/// One chat: what a staff member says first, what must follow, and what they say next.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub id: String,
    /// A demo user's email.
    pub user: String,
    pub text: String,
    pub kind: Kind,
    #[serde(default)]
    pub subsets: Vec<String>,
    /// Tools that must be called.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Tools that must not be called.
    #[serde(default)]
    pub forbid: Vec<String>,
    #[serde(default)]
    pub args: Vec<ArgCheck>,
    /// The writes the turn must make, and the only ones it may make.
    #[serde(default)]
    pub writes: Vec<WriteExpect>,
    /// The staff member's answers to the questions (`ask_user`) the turn asks, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<Answer>,
    /// Later messages in the same chat, each a turn with its own expectations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub followups: Vec<Followup>,
}

/// A later message in a case's chat, scored as its own turn.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Followup {
    pub text: String,
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default)]
    pub forbid: Vec<String>,
    #[serde(default)]
    pub args: Vec<ArgCheck>,
    #[serde(default)]
    pub writes: Vec<WriteExpect>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<Answer>,
}

/// One turn's message and expectations: a case's first, or a followup's.
#[derive(Debug, Clone, Copy)]
pub struct Expect<'a> {
    pub text: &'a str,
    pub tools: &'a [String],
    pub forbid: &'a [String],
    pub args: &'a [ArgCheck],
    pub writes: &'a [WriteExpect],
    pub answers: &'a [Answer],
}

impl Case {
    /// The chat's turns, in order: the first message, then each followup.
    pub fn turns(&self) -> Vec<Expect<'_>> {
        let first = Expect {
            text: &self.text,
            tools: &self.tools,
            forbid: &self.forbid,
            args: &self.args,
            writes: &self.writes,
            answers: &self.answers,
        };
        std::iter::once(first)
            .chain(self.followups.iter().map(|f| Expect {
                text: &f.text,
                tools: &f.tools,
                forbid: &f.forbid,
                args: &f.args,
                writes: &f.writes,
                answers: &f.answers,
            }))
            .collect()
    }
}

/// An answer to a question: given as written, or `{ choice = "Nakato Sarah" }`, the choice
/// offered that contains that text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Answer {
    Text(String),
    Choice { choice: String },
}

impl Answer {
    /// What to answer a question offering `choices`: the text, or the one choice that is (or
    /// else contains) the wanted text, case-insensitively. `Err` says why no choice fits.
    pub fn to(&self, choices: &[String]) -> Result<String, String> {
        let wanted = match self {
            Answer::Text(text) => return Ok(text.clone()),
            Answer::Choice { choice } => choice.trim().to_lowercase(),
        };
        if let Some(same) = choices.iter().find(|c| c.trim().to_lowercase() == wanted) {
            return Ok(same.clone());
        }
        let containing: Vec<&String> = choices
            .iter()
            .filter(|c| c.to_lowercase().contains(&wanted))
            .collect();
        match containing.as_slice() {
            [one] => Ok((*one).clone()),
            [] if choices.is_empty() => Err(format!("{self}: the question offered no choices")),
            [] => Err(format!(
                "{self}: no choice offered contains it (offered: {})",
                choices.join("; ")
            )),
            many => Err(format!(
                "{self}: {} choices contain it ({})",
                many.len(),
                many.iter()
                    .map(|c| c.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            )),
        }
    }
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Answer::Text(text) => write!(f, "{text:?}"),
            Answer::Choice { choice } => write!(f, "{{ choice = {choice:?} }}"),
        }
    }
}

/// What a case exercises (a column of the table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Read,
    Write,
    Campus,
    Denial,
    Delegation,
    AskUser,
    /// A chat of several messages (`followups`).
    Followup,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::Campus => "campus",
            Kind::Denial => "denial",
            Kind::Delegation => "delegation",
            Kind::AskUser => "ask_user",
            Kind::Followup => "followup",
        }
    }
}

/// One argument check (see utterances.toml).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgCheck {
    pub tool: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<Value>,
    /// The tool lets a call leave the path out (a class teacher's only class): a call without
    /// it passes; one with it must hold.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

/// One expected audit row.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteExpect {
    /// The tool's event, as in the audit log (`create.department`).
    pub event: String,
    /// The campus the row must be scoped to (by name); absent: any scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub campus: Option<String>,
    /// What the row's `after` (the state the write left) must hold: what a correction must
    /// leave, whichever words the call used to get there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<AfterCheck>,
}

/// A value the state a write left must contain (`@student:…` references match by id).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AfterCheck {
    pub path: String,
    /// One value, or a list of values that must all be there.
    pub contains: Value,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    case: Vec<Case>,
}

/// Reads and checks a cases file.
pub fn load(path: &Path) -> anyhow::Result<Vec<Case>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("Failed to read the cases file {}", path.display()))?;
    parse(&text).with_context(|| format!("In {}", path.display()))
}

/// Parses and checks cases: unique ids, known tools, each check names one comparison, answers
/// are not empty, and a `followup` case has followups.
pub fn parse(text: &str) -> anyhow::Result<Vec<Case>> {
    let file: CaseFile = toml::from_str(text)?;
    let known: HashSet<&str> = rover_contracts::tools::REGISTRY
        .iter()
        .map(|c| c.name)
        .collect();
    let mut ids = HashSet::new();
    for case in &file.case {
        ensure!(
            ids.insert(case.id.as_str()),
            "case {:?} appears twice",
            case.id
        );
        ensure!(
            (case.kind == Kind::Followup) != case.followups.is_empty(),
            "case {:?}: a case has followups exactly when its kind is \"followup\"",
            case.id
        );
        for (n, turn) in case.turns().iter().enumerate() {
            let at = if n == 0 {
                format!("case {:?}", case.id)
            } else {
                format!("case {:?}, followup {n}", case.id)
            };
            ensure!(!turn.text.trim().is_empty(), "{at}: the message is empty");
            for tool in turn.tools.iter().chain(turn.forbid) {
                if !known.contains(tool.as_str()) {
                    bail!("{at} names an unknown tool {tool:?}");
                }
            }
            for check in turn.args {
                ensure!(
                    known.contains(check.tool.as_str()),
                    "{at}: an argument check names an unknown tool {:?}",
                    check.tool
                );
                ensure!(
                    check.equals.is_some() != check.contains.is_some(),
                    "{at}: the check of {}.{} needs exactly one of `equals` and `contains`",
                    check.tool,
                    check.path
                );
            }
            for answer in turn.answers {
                let text = match answer {
                    Answer::Text(text) | Answer::Choice { choice: text } => text,
                };
                ensure!(!text.trim().is_empty(), "{at}: an answer is empty");
            }
        }
    }
    Ok(file.case)
}

/// The cases to run: those in `subset` (all when `None`), then those named in `only` (all when
/// empty).
pub fn select(cases: Vec<Case>, subset: Option<&str>, only: &[String]) -> Vec<Case> {
    cases
        .into_iter()
        .filter(|c| subset.is_none_or(|s| c.subsets.iter().any(|x| x == s)))
        .filter(|c| only.is_empty() || only.contains(&c.id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_file_has_at_least_thirty_four_cases_of_every_kind() {
        let cases = load(&default_file()).unwrap();
        assert!(cases.len() >= 34, "{} cases", cases.len());
        const KINDS: [Kind; 7] = [
            Kind::Read,
            Kind::Write,
            Kind::Campus,
            Kind::Denial,
            Kind::Delegation,
            Kind::AskUser,
            Kind::Followup,
        ];
        for kind in KINDS {
            assert!(cases.iter().any(|c| c.kind == kind), "no {kind:?} case");
        }
        let chats = cases.iter().filter(|c| !c.followups.is_empty()).count();
        assert!(chats >= 4, "{chats} chats with followups");
        assert!(cases.iter().any(|c| !c.answers.is_empty()));
        // The CI subset runs against the real model in `.ci/run` (7 of 8 must pass, the
        // Makefile's EVAL_CI_MIN_PASS): at least eight cases, one of every kind, among them the
        // register, marks and a name the tool has to ask about.
        let ci = select(cases, Some("ci"), &[]);
        assert!(ci.len() >= 8, "{} CI cases", ci.len());
        for kind in KINDS {
            assert!(ci.iter().any(|c| c.kind == kind), "no {kind:?} case in ci");
        }
        let calls =
            |c: &Case, tool: &str| c.turns().iter().any(|t| t.tools.iter().any(|x| x == tool));
        assert!(
            ci.iter().any(|c| calls(c, "record_attendance")),
            "no register in ci"
        );
        assert!(
            ci.iter().any(|c| calls(c, "record_marks")),
            "no marks in ci"
        );
        assert!(
            ci.iter()
                .any(|c| calls(c, "ask_user") && !c.answers.is_empty()),
            "no ambiguous name in ci"
        );
    }

    #[test]
    fn followups_and_answers_parse_into_turns() {
        let cases = parse(
            r#"
[[case]]
id = "chat"
user = "amina@hill.school"
text = "Give Nakato 75 for the maths quiz"
kind = "followup"
tools = ["record_marks"]
answers = [{ choice = "Nakato Sarah" }, "The second one"]

[[case.followups]]
text = "And Mugisha 60"
writes = [{ event = "record.marks" }]
"#,
        )
        .unwrap();
        let turns = cases[0].turns();
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[0].text, "Give Nakato 75 for the maths quiz");
        assert_eq!(
            turns[0].answers,
            [
                Answer::Choice {
                    choice: "Nakato Sarah".to_owned()
                },
                Answer::Text("The second one".to_owned())
            ]
        );
        assert_eq!(turns[1].text, "And Mugisha 60");
        assert!(turns[1].tools.is_empty() && turns[1].answers.is_empty());
        assert_eq!(turns[1].writes[0].event, "record.marks");
        // A followup's checks are checked too; followups need the kind, and the kind followups.
        let base = "[[case]]\nid = \"a\"\nuser = \"admin@hill.school\"\ntext = \"x\"\n";
        assert!(
            parse(&format!(
                "{base}kind = \"followup\"\n[[case.followups]]\ntext = \"y\"\ntools = [\"nope\"]\n"
            ))
            .is_err()
        );
        assert!(parse(&format!("{base}kind = \"followup\"\n")).is_err());
        assert!(
            parse(&format!(
                "{base}kind = \"read\"\n[[case.followups]]\ntext = \"y\"\n"
            ))
            .is_err()
        );
        assert!(parse(&format!("{base}kind = \"read\"\nanswers = [\" \"]\n")).is_err());
    }

    #[test]
    fn a_choice_answer_is_the_one_offered_choice_that_contains_it() {
        let offered = [
            "Nakato Sarah (S1 Blue, KHS003)".to_owned(),
            "Nakato Mary (S2 Green, KHS016)".to_owned(),
        ];
        let choice = |c: &str| Answer::Choice {
            choice: c.to_owned(),
        };
        assert_eq!(
            choice("nakato sarah").to(&offered).unwrap(),
            "Nakato Sarah (S1 Blue, KHS003)"
        );
        let none = choice("Nakato Zed").to(&offered).unwrap_err();
        assert!(none.contains("no choice offered contains it"), "{none}");
        assert!(none.contains("Nakato Mary (S2 Green, KHS016)"), "{none}");
        assert!(
            choice("Nakato")
                .to(&offered)
                .unwrap_err()
                .contains("2 choices")
        );
        assert!(choice("Sarah").to(&[]).unwrap_err().contains("no choices"));
        assert_eq!(
            Answer::Text("Either".to_owned()).to(&offered).unwrap(),
            "Either"
        );
    }

    #[test]
    fn unknown_tools_and_ambiguous_checks_are_refused() {
        let base =
            "[[case]]\nid = \"a\"\nuser = \"admin@hill.school\"\ntext = \"x\"\nkind = \"read\"\n";
        assert!(parse(&format!("{base}tools = [\"no_such_tool\"]\n")).is_err());
        assert!(
            parse(&format!(
                "{base}args = [{{ tool = \"create_department\", path = \"name\" }}]\n"
            ))
            .is_err()
        );
        assert!(parse(&format!("{base}{base}")).is_err(), "a repeated id");
        assert!(parse(base).is_ok());
    }
}
