//! A school's approval rules: which staff members' writes wait for their approval. A rule names a
//! role (or `*`, any role), a write tool (or `*`, any write) and a mode — `always` (the write
//! waits) or `never` (it runs). The caller's most specific rule decides, in the database
//! (`rover_approval_mode`, migration `0060`): their role and the tool, their role and any tool,
//! any role and the tool, the school's default; with no rule at all, every write waits.
//!
//! A school admin reads and replaces the rules through `GET/PUT /api/approval-policy`; this module
//! reads them, and checks and stores a replacement whole.

use std::collections::HashSet;

use rover_contracts::tools::{Effect, REGISTRY, ToolKind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use rover_domain::{DomainError, TenantTx};

/// The most rules a school keeps.
pub const MAX_RULES: usize = 200;

/// Any role, or any write tool.
pub const ANY: &str = "*";

/// Whether a matching write waits for approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The write waits for the staff member's approval.
    Always,
    /// The write runs without asking.
    Never,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Self::Always => "always",
            Self::Never => "never",
        }
    }
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// A role of the school (`teacher`, `school_admin`, …) or `*` for any role.
    #[schemars(length(min = 1, max = 100))]
    pub role: String,
    /// A write tool (`record_attendance`, …) or `*` for any write.
    #[schemars(length(min = 1, max = 100))]
    pub tool: String,
    /// `always`: the write waits for approval; `never`: it runs.
    pub mode: Mode,
}

/// The write tools a rule may name: those the tool server runs (a file in the chat's own sandbox
/// never asks).
pub fn write_tools() -> Vec<&'static str> {
    REGISTRY
        .iter()
        .filter(|c| c.effect == Effect::Write && matches!(c.kind, ToolKind::Rpc { .. }))
        .map(|c| c.name)
        .collect()
}

/// The roles of the caller's school, as its policy rows name them.
pub async fn roles(tx: &mut TenantTx) -> Result<Vec<String>, DomainError> {
    Ok(
        sqlx::query_scalar("SELECT DISTINCT role FROM authz_policies ORDER BY role")
            .fetch_all(tx.connection())
            .await?,
    )
}

/// The caller's school's rules: most specific first (as they are decided), then by role and tool.
pub async fn rules(tx: &mut TenantTx) -> Result<Vec<Rule>, DomainError> {
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT role, tool, mode FROM tool_approval_policy \
         ORDER BY (role = '*'), (tool = '*'), role, tool",
    )
    .fetch_all(tx.connection())
    .await?;
    Ok(rows
        .into_iter()
        .map(|(role, tool, mode)| Rule {
            role,
            tool,
            mode: if mode == "never" {
                Mode::Never
            } else {
                Mode::Always
            },
        })
        .collect())
}

/// Replaces the caller's school's rules with `rules`, whole, after checking every one: a role the
/// school has (or `*`), a write tool (or `*`), each role and tool once. Returns the rules stored.
/// The check names the first rule that does not fit; then nothing is changed.
pub async fn replace(tx: &mut TenantTx, rules: &[Rule]) -> Result<Vec<Rule>, DomainError> {
    if rules.len() > MAX_RULES {
        return Err(DomainError::Invalid(format!(
            "At most {MAX_RULES} rules; {} were given.",
            rules.len()
        )));
    }
    let roles = roles(tx).await?;
    let tools = write_tools();
    let mut seen = HashSet::new();
    for (at, rule) in rules.iter().enumerate() {
        if rule.role != ANY && !roles.contains(&rule.role) {
            return Err(DomainError::Invalid(format!(
                "Rule {}: the school has no role {:?} (its roles: {}; or \"*\" for any role).",
                at + 1,
                cut(&rule.role),
                roles.join(", ")
            )));
        }
        if rule.tool != ANY && !tools.contains(&rule.tool.as_str()) {
            return Err(DomainError::Invalid(format!(
                "Rule {}: {:?} is not a write tool (they are: {}; or \"*\" for any write).",
                at + 1,
                cut(&rule.tool),
                tools.join(", ")
            )));
        }
        if !seen.insert((rule.role.as_str(), rule.tool.as_str())) {
            return Err(DomainError::Invalid(format!(
                "Rule {}: role {:?} and tool {:?} have a rule already; give each pair one.",
                at + 1,
                rule.role,
                rule.tool
            )));
        }
    }
    sqlx::query("DELETE FROM tool_approval_policy")
        .execute(tx.connection())
        .await?;
    let school = tx.school_id().as_uuid();
    for rule in rules {
        sqlx::query(
            "INSERT INTO tool_approval_policy (school_id, role, tool, mode) VALUES ($1, $2, $3, $4)",
        )
        .bind(school)
        .bind(&rule.role)
        .bind(&rule.tool)
        .bind(rule.mode.as_str())
        .execute(tx.connection())
        .await?;
    }
    self::rules(tx).await
}

/// At most 100 characters of what a caller sent, to say back.
fn cut(text: &str) -> String {
    text.chars().take(100).collect()
}
