//! The worker's settings: the broker, the database, the model, the agent's limits and budgets.

use std::path::PathBuf;

use rover_agent::sandbox::{Quota, SandboxLimits};
use rover_settings::{
    AmqpSettings, DatabaseSettings, HttpSettings, ModelSettings, TelemetrySettings,
    VerifierSettings,
};
use serde::{Deserialize, Serialize};

use crate::BudgetSettings;

/// The worker's settings (`rover-worker --print-config` shows the effective ones).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// Health listener.
    pub http: HttpSettings,
    /// The broker turns are consumed from.
    pub amqp: AmqpSettings,
    /// The database the conversation history lives in (as the application role).
    pub database: DatabaseSettings,
    /// The OpenAI-compatible model endpoint.
    pub model: ModelSettings,
    /// The agent: skills, sandboxes and limits.
    pub agent: AgentSettings,
    /// What a turn, a user's day and a school's day may spend.
    pub budget: BudgetSettings,
    /// The gateway's public key: every turn's runtime context must match its signed identity.
    pub identity: VerifierSettings,
    /// Logging.
    pub telemetry: TelemetrySettings,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            http: HttpSettings::on(([127, 0, 0, 1], 9091)),
            amqp: AmqpSettings::default(),
            database: DatabaseSettings::default(),
            model: ModelSettings::default(),
            agent: AgentSettings::default(),
            budget: BudgetSettings::default(),
            identity: VerifierSettings::default(),
            telemetry: TelemetrySettings::default(),
        }
    }
}

/// How agents are built and bounded.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentSettings {
    /// The skills folder (`general/`, `rover/`, one per role subagent).
    pub skills_dir: PathBuf,
    /// Where per-thread sandboxes live (`<dir>/<school>/<user>/<thread>/`); unset, threads have
    /// no files.
    pub sandbox_dir: Option<PathBuf>,
    /// Most bytes one thread's sandbox may hold.
    pub sandbox_limit_bytes: u64,
    /// Most files and directories one thread's sandbox may hold.
    pub sandbox_limit_entries: u64,
    /// Most bytes one user's sandboxes may hold together.
    pub sandbox_user_limit_bytes: u64,
    /// Most files and directories one user's sandboxes may hold together.
    pub sandbox_user_limit_entries: u64,
    /// Most bytes one school's sandboxes may hold together.
    pub sandbox_school_limit_bytes: u64,
    /// Most files and directories one school's sandboxes may hold together (this also bounds
    /// the walk that measures usage before each write).
    pub sandbox_school_limit_entries: u64,
    /// A thread's sandbox not opened for this many seconds is removed by the sweep.
    pub sandbox_max_age_secs: u64,
    /// How often the sweep runs (it also runs when the worker starts), in seconds.
    pub sandbox_sweep_interval_secs: u64,
    /// How often the chat retention sweep runs (it also runs when the worker starts), in seconds:
    /// each school's chats idle past its retention period go (`chat_retention`; no row keeps
    /// them), and approvals past their time are marked expired. Safe on every replica at once.
    pub chat_sweep_interval_secs: u64,
    /// How long the staff member can answer an approval a turn asks for, in seconds (24 hours by
    /// default); then it expires, the chat says so, and a late answer is refused. At least 1.
    pub approval_ttl_secs: u64,
    /// Model calls one agent may make in a turn before it stops with a clear message.
    pub step_limit: u32,
    /// Attempts of a model request on transport errors.
    pub model_attempts: u32,
    /// The longest a turn may run, in milliseconds; it then ends with an error. RabbitMQ's
    /// `consumer_timeout` must be longer (see docs/design/durable-turns.md).
    pub turn_timeout_ms: u64,
    /// The most one model request may carry, in estimated tokens (system prompt, tool
    /// definitions, the thread's summary and history, the new message; a quarter is left for
    /// the turn's own steps). Older turns are summarised to stay under it.
    pub context_budget_tokens: usize,
    /// An earlier turn's tool result larger than this (estimated tokens) is sent as a stub
    /// naming its call id; the full result stays stored with the thread.
    pub tool_result_max_tokens: usize,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            skills_dir: PathBuf::from("skills"),
            sandbox_dir: None,
            sandbox_limit_bytes: 10 * 1024 * 1024,
            sandbox_limit_entries: 1_000,
            sandbox_user_limit_bytes: 50 * 1024 * 1024,
            sandbox_user_limit_entries: 5_000,
            sandbox_school_limit_bytes: 1024 * 1024 * 1024,
            sandbox_school_limit_entries: 50_000,
            sandbox_max_age_secs: 30 * 24 * 60 * 60,
            sandbox_sweep_interval_secs: 60 * 60,
            chat_sweep_interval_secs: 60 * 60,
            approval_ttl_secs: 24 * 60 * 60,
            step_limit: 8,
            model_attempts: 2,
            turn_timeout_ms: 10 * 60 * 1000,
            context_budget_tokens: 32_000,
            tool_result_max_tokens: 2_000,
        }
    }
}

impl AgentSettings {
    /// The sandbox quotas, per thread, user and school.
    pub fn sandbox_limits(&self) -> SandboxLimits {
        SandboxLimits {
            thread: Quota {
                bytes: self.sandbox_limit_bytes,
                entries: self.sandbox_limit_entries,
            },
            user: Quota {
                bytes: self.sandbox_user_limit_bytes,
                entries: self.sandbox_user_limit_entries,
            },
            school: Quota {
                bytes: self.sandbox_school_limit_bytes,
                entries: self.sandbox_school_limit_entries,
            },
        }
    }
}

impl rover_service::Telemetry for Settings {
    fn telemetry(&self) -> &TelemetrySettings {
        &self.telemetry
    }
}
