//! The eval's own Rover, started by `rover_stack` on a fresh vhost, seeded database and key pair:
//! the tool server, worker and gateway, and, with `--scripted`, the scripted model. What is the
//! eval's own is the choice of model. Everything is removed when the stack is dropped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use rover_domain::testing::TestDb;
use rover_stack::{Launcher, Model, StackOptions, World};
use rover_testkit::{TestVhost, TurnKeys};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

/// Which model the worker talks to.
#[derive(Debug, Clone)]
pub enum ModelChoice {
    /// The scripted test double, started here (optionally with its own rules file, and writing
    /// its tool calls as text in a `--tool-calls` style: fenced, bare, tagged, list).
    Scripted {
        rules: Option<PathBuf>,
        tool_calls: Option<String>,
    },
    /// Any OpenAI-compatible endpoint (base URL ending in `/v1`), and the model name to send.
    Url { base_url: String, name: String },
}

impl ModelChoice {
    /// What the stack starts or points at, and the model name the worker sends.
    fn model(&self) -> (Model, String) {
        match self {
            ModelChoice::Scripted { rules, tool_calls } => {
                let mut flags = Vec::new();
                if let Some(rules) = rules {
                    flags.extend(["--rules".to_owned(), rules.display().to_string()]);
                }
                if let Some(style) = tool_calls {
                    flags.extend(["--tool-calls".to_owned(), style.clone()]);
                }
                (Model::Scripted(flags), "rover-scripted".to_owned())
            }
            ModelChoice::Url { base_url, name } => {
                (Model::Endpoint(base_url.clone()), name.clone())
            }
        }
    }
}

/// A running Rover of the eval's own.
#[derive(Debug)]
pub struct Stack {
    pub gateway: SocketAddr,
    /// Connected as the owner role: reads the audit log behind row-level security.
    pub owner: PgPool,
    /// The model's base URL, as the worker was given it.
    pub model_url: String,
    /// Dropped (the processes killed) before the database, vhost and keys they use.
    _services: rover_stack::Stack,
    pub db: TestDb,
    _keys: TurnKeys,
    _vhost: TestVhost,
}

impl Stack {
    /// Starts a Rover on `model` whose worker gives each model request `model_timeout_ms`; the
    /// services' log lines (standard error too) go to `log_dir` when given, and nowhere else.
    pub async fn start(
        model: &ModelChoice,
        model_timeout_ms: u64,
        log_dir: Option<&Path>,
    ) -> anyhow::Result<Stack> {
        let world = World::create().await;
        let (model, name) = model.model();
        let options = StackOptions {
            model,
            env: Default::default(),
            per_service: Default::default(),
        }
        .env([
            ("ROVER_MODEL__NAME", name),
            ("ROVER_MODEL__TIMEOUT_MS", model_timeout_ms.to_string()),
        ]);
        let launcher = Launcher::new()
            .log_dir(log_dir.map(Path::to_owned))
            .quiet()
            .ready_timeout(Duration::from_secs(120));
        let services = rover_stack::Stack::start(&launcher, &world, &options)
            .context("Failed to start the eval's Rover")?;
        let owner = PgPoolOptions::new()
            .max_connections(1)
            .connect(world.db.owner_url())
            .await
            .context("Failed to connect to the eval database as its owner")?;
        let World { db, keys, vhost } = world;
        Ok(Stack {
            gateway: services.addrs.gateway,
            owner,
            model_url: services.addrs.model_url.clone(),
            _services: services,
            db,
            _keys: keys,
            _vhost: vhost,
        })
    }
}
