//! The eval's own Rover: a fresh vhost, a seeded database and a key pair, and the tool server,
//! worker and gateway (and, with `--scripted`, the scripted model) as child processes, the way
//! the cross-service tests start them. Everything is removed when the stack is dropped.

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use rover_domain::testing::TestDb;
use rover_testkit::{TestVhost, TurnKeys};
use serde_json::Value;
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

/// A built workspace binary: next to this executable (`target/<profile>/rover-eval`) or, for a
/// test executable in `target/<profile>/deps/`, one directory up.
pub fn binary(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("Failed to find the running executable")?;
    let mut dir = exe.parent();
    while let Some(d) = dir {
        let path = d.join(name);
        if path.is_file() {
            return Ok(path);
        }
        if d.file_name().is_some_and(|n| n == "target") {
            break;
        }
        dir = d.parent();
    }
    bail!(
        "{name} is not built next to {}: run `cargo build --workspace --bins` (make eval does) first",
        exe.display()
    )
}

/// The repository's `skills/`, which the worker reads.
pub fn skills_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../skills"))
}

/// A child process, killed when dropped.
#[derive(Debug)]
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `name`, waits for a log line containing `ready` and returns it parsed (JSON logs).
/// Its stderr goes to `log_dir/<name>.log` when given (kept for reading a failure).
fn start(
    name: &str,
    args: &[&str],
    env: &HashMap<String, String>,
    ready: &str,
    log_dir: Option<&Path>,
) -> anyhow::Result<(Process, Value)> {
    let mut command = Command::new(binary(name)?);
    for (key, _) in std::env::vars() {
        if key.starts_with("ROVER_") || key.starts_with("OTEL_") || key == "RUST_LOG" {
            command.env_remove(key);
        }
    }
    let stderr = match log_dir {
        Some(dir) => Stdio::from(
            std::fs::File::create(dir.join(format!("{name}.stderr.log")))
                .context("Failed to create a service log file")?,
        ),
        None => Stdio::null(),
    };
    let mut child = command
        .args(args)
        .envs(env)
        .env("ROVER_TELEMETRY__FORMAT", "json")
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("Failed to start {name}"))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let process = Process(child);
    let mut keep = match log_dir {
        Some(dir) => Some(std::fs::File::create(dir.join(format!("{name}.log")))?),
        None => None,
    };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(file) = keep.as_mut() {
                use std::io::Write as _;
                let _ = writeln!(file, "{line}");
            }
            // Keep draining after the ready line, so the child never blocks on a full pipe.
            let _ = tx.send(line);
        }
    });
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .with_context(|| format!("{name} did not become ready"))?;
        if line.contains(ready) {
            std::thread::spawn(move || for _ in rx {});
            return Ok((process, serde_json::from_str(&line).unwrap_or(Value::Null)));
        }
    }
}

/// What a service logs once it serves.
const READY: &str = "ready; waiting for shutdown";

/// A running Rover of the eval's own.
#[derive(Debug)]
pub struct Stack {
    pub gateway: SocketAddr,
    pub db: TestDb,
    /// Connected as the owner role: reads the audit log behind row-level security.
    pub owner: PgPool,
    /// The model's base URL, as the worker was given it.
    pub model_url: String,
    processes: Vec<Process>,
    _keys: TurnKeys,
    _vhost: TestVhost,
}

impl Stack {
    pub async fn start(
        model: &ModelChoice,
        model_timeout_ms: u64,
        log_dir: Option<&Path>,
    ) -> anyhow::Result<Stack> {
        let vhost = TestVhost::create();
        let db = TestDb::new().await;
        let keys = TurnKeys::generate();
        let mut processes = Vec::new();
        let (model_url, model_name) = match model {
            ModelChoice::Scripted { rules, tool_calls } => {
                let mut args = vec!["--listen".to_owned(), "127.0.0.1:0".to_owned()];
                if let Some(rules) = rules {
                    args.extend(["--rules".to_owned(), rules.display().to_string()]);
                }
                if let Some(style) = tool_calls {
                    args.extend(["--tool-calls".to_owned(), style.clone()]);
                }
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let (p, line) = start(
                    "rover-scripted-model",
                    &args,
                    &HashMap::new(),
                    "listening on",
                    log_dir,
                )?;
                processes.push(p);
                let addr = line["addr"]
                    .as_str()
                    .context("the scripted model logged no address")?;
                (format!("http://{addr}/v1"), "rover-scripted".to_owned())
            }
            ModelChoice::Url { base_url, name } => (base_url.clone(), name.clone()),
        };
        let mut env = HashMap::new();
        env.insert("ROVER_AMQP__URL".to_owned(), vhost.url());
        env.insert("ROVER_DATABASE__URL".to_owned(), db.app_url().to_owned());
        env.insert("ROVER_HTTP__LISTEN".to_owned(), "127.0.0.1:0".to_owned());
        // The gateway's metrics listener too, so evals, tests and `make run` never collide.
        env.insert(
            "ROVER_HTTP__METRICS_ADDR".to_owned(),
            "127.0.0.1:0".to_owned(),
        );
        env.insert(
            "ROVER_IDENTITY__PUBLIC_KEY_FILE".to_owned(),
            keys.public_key_file().display().to_string(),
        );
        env.insert(
            "ROVER_IDENTITY__PRIVATE_KEY_FILE".to_owned(),
            keys.private_key_file().display().to_string(),
        );
        env.insert("ROVER_AUTH__DEVELOPMENT".to_owned(), "true".to_owned());
        env.insert("ROVER_MODEL__BASE_URL".to_owned(), model_url.clone());
        env.insert("ROVER_MODEL__NAME".to_owned(), model_name);
        env.insert(
            "ROVER_MODEL__TIMEOUT_MS".to_owned(),
            model_timeout_ms.to_string(),
        );
        env.insert(
            "ROVER_AGENT__SKILLS_DIR".to_owned(),
            skills_dir().display().to_string(),
        );
        processes.push(start("rover-toolserver", &[], &env, READY, log_dir)?.0);
        processes.push(start("rover-worker", &[], &env, READY, log_dir)?.0);
        let (gateway, line) = start("rover-gateway", &[], &env, READY, log_dir)?;
        processes.push(gateway);
        let gateway: SocketAddr = line["listen"]
            .as_str()
            .context("the gateway logged no address")?
            .parse()?;
        let owner = PgPoolOptions::new()
            .max_connections(1)
            .connect(db.owner_url())
            .await
            .context("Failed to connect to the eval database as its owner")?;
        Ok(Stack {
            gateway,
            db,
            owner,
            model_url,
            processes,
            _keys: keys,
            _vhost: vhost,
        })
    }

    /// The number of running child processes (for the report).
    pub fn process_count(&self) -> usize {
        self.processes.len()
    }
}
