//! The eval's cases (`utterances.toml`): what a staff member says, and what must follow.

use std::collections::HashSet;
use std::path::Path;

use anyhow::{Context as _, bail, ensure};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The file shipped with the crate.
pub fn default_file() -> std::path::PathBuf {
    std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/utterances.toml"))
}

/// One utterance and its expectations.
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

/// Parses and checks cases: unique ids, known tools, each check names one comparison.
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
        for tool in case.tools.iter().chain(&case.forbid) {
            if !known.contains(tool.as_str()) {
                bail!("case {:?} names an unknown tool {tool:?}", case.id);
            }
        }
        for check in &case.args {
            ensure!(
                known.contains(check.tool.as_str()),
                "case {:?}: an argument check names an unknown tool {:?}",
                case.id,
                check.tool
            );
            ensure!(
                check.equals.is_some() != check.contains.is_some(),
                "case {:?}: the check of {}.{} needs exactly one of `equals` and `contains`",
                case.id,
                check.tool,
                check.path
            );
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
    fn the_shipped_file_has_at_least_twenty_cases_of_every_kind() {
        let cases = load(&default_file()).unwrap();
        assert!(cases.len() >= 20, "{} cases", cases.len());
        const KINDS: [Kind; 6] = [
            Kind::Read,
            Kind::Write,
            Kind::Campus,
            Kind::Denial,
            Kind::Delegation,
            Kind::AskUser,
        ];
        for kind in KINDS {
            assert!(cases.iter().any(|c| c.kind == kind), "no {kind:?} case");
        }
        // The CI subset runs against the real model in `.ci/run`: at least six cases, one of
        // every kind.
        let ci = select(cases, Some("ci"), &[]);
        assert!(ci.len() >= 6, "{} CI cases", ci.len());
        for kind in KINDS {
            assert!(ci.iter().any(|c| c.kind == kind), "no {kind:?} case in ci");
        }
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
