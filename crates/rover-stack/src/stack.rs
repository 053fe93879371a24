//! A whole Rover on a [`World`]: the model (the scripted test double started here, or any
//! OpenAI-compatible endpoint), then the tool server, the worker and the gateway, each started
//! once the one before it is ready, with the addresses they logged.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::process::{Env, LaunchError, Launcher, Process, Spawn};
use crate::world::World;

/// The repository's `skills/`, which the worker reads.
pub fn skills_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../skills"))
}

/// Settings a stack's caller has no flag for, given to every service it starts, last (so they
/// win): `KEY=VALUE` pairs separated by whitespace, e.g.
/// `ROVER_STACK_ENV=ROVER_MODEL__WARM_PROMPT_CACHE=true rover-eval …` (what `scripts/eval.sh`
/// does). The services never see the variable itself (no `ROVER_*` of the caller's reaches them).
pub const STACK_ENV: &str = "ROVER_STACK_ENV";

/// The pairs `ROVER_STACK_ENV` holds; a word without `=` is ignored.
pub fn stack_env(value: Option<&str>) -> Vec<(String, String)> {
    value
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|pair| pair.split_once('='))
        .filter(|(key, _)| !key.is_empty())
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect()
}

/// Which model the worker talks to.
#[derive(Debug, Clone)]
pub enum Model {
    /// `rover-scripted-model`, started here with these extra flags (latency knobs, rules, styles).
    Scripted(Vec<String>),
    /// An OpenAI-compatible endpoint already running: its base URL, ending in `/v1`.
    Endpoint(String),
}

/// How a stack is started, beyond its world.
#[derive(Debug, Clone)]
pub struct StackOptions {
    /// The model.
    pub model: Model,
    /// Environment for all three services, on top of the world's.
    pub env: Env,
    /// Environment for one service only, by binary name, on top of `env`.
    pub per_service: HashMap<String, Env>,
}

impl StackOptions {
    /// The scripted model with `flags`, and no extra environment.
    pub fn scripted<S: AsRef<str>>(flags: impl IntoIterator<Item = S>) -> StackOptions {
        StackOptions {
            model: Model::Scripted(flags.into_iter().map(|f| f.as_ref().to_owned()).collect()),
            env: Env::new(),
            per_service: HashMap::new(),
        }
    }

    /// `env` for every service.
    pub fn env<K: AsRef<str>, V: AsRef<str>>(
        mut self,
        env: impl IntoIterator<Item = (K, V)>,
    ) -> StackOptions {
        self.env.extend(
            env.into_iter()
                .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned())),
        );
        self
    }

    /// `env` for `service` only.
    pub fn service_env<K: AsRef<str>, V: AsRef<str>>(
        mut self,
        service: &str,
        env: impl IntoIterator<Item = (K, V)>,
    ) -> StackOptions {
        self.per_service
            .entry(service.to_owned())
            .or_default()
            .extend(
                env.into_iter()
                    .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned())),
            );
        self
    }
}

/// Where a running stack listens.
#[derive(Debug, Clone)]
pub struct Addrs {
    /// The model's base URL, as the worker was given it.
    pub model_url: String,
    /// The gateway's public listener.
    pub gateway: SocketAddr,
    /// The gateway's metrics listener.
    pub gateway_metrics: SocketAddr,
    /// The worker's health and metrics listener.
    pub worker_http: SocketAddr,
    /// The tool server's health and metrics listener.
    pub toolserver_http: SocketAddr,
}

/// A running Rover: its processes (each killed when dropped), where they listen, and the
/// environment they share (for a replica or a restart started like them).
#[derive(Debug)]
pub struct Stack {
    /// The scripted model, when this stack started it.
    pub model: Option<Process>,
    /// `rover-toolserver`.
    pub toolserver: Process,
    /// `rover-worker`.
    pub worker: Process,
    /// `rover-gateway`.
    pub gateway: Process,
    /// Where they listen.
    pub addrs: Addrs,
    /// What every service got: the world's environment, the model, the skills and
    /// [`StackOptions::env`] (not the per-service additions).
    pub env: Env,
}

impl Stack {
    /// Starts the model (if scripted), the tool server, the worker and the gateway on `world`,
    /// each once the one before is ready. Blocks the caller until the gateway is ready.
    pub fn start(
        launcher: &Launcher,
        world: &World,
        options: &StackOptions,
    ) -> Result<Stack, LaunchError> {
        let (model, model_url) = match &options.model {
            Model::Scripted(flags) => {
                let (model, ready) = launcher.spawn(
                    &Spawn::new("rover-scripted-model", "listening on")
                        .args(["--listen", "127.0.0.1:0"])
                        .args(flags),
                )?;
                let url = format!("http://{}/v1", ready.addr("addr")?);
                (Some(model), url)
            }
            Model::Endpoint(url) => (None, url.clone()),
        };
        let mut env = world.service_env();
        env.insert("ROVER_MODEL__BASE_URL".into(), model_url.clone());
        env.insert(
            "ROVER_AGENT__SKILLS_DIR".into(),
            skills_dir().display().to_string(),
        );
        env.extend(options.env.clone());
        env.extend(stack_env(std::env::var(STACK_ENV).ok().as_deref()));
        let start = |name: &str| {
            let only = options.per_service.get(name).into_iter().flatten();
            launcher.spawn(&Spawn::service(name).envs(&env).envs(only))
        };
        let (toolserver, ready) = start("rover-toolserver")?;
        let toolserver_http = ready.addr("http")?;
        let (worker, ready) = start("rover-worker")?;
        let worker_http = ready.addr("http")?;
        let (gateway, ready) = start("rover-gateway")?;
        let addrs = Addrs {
            model_url,
            gateway: ready.addr("listen")?,
            gateway_metrics: ready.addr("metrics")?,
            worker_http,
            toolserver_http,
        };
        Ok(Stack {
            model,
            toolserver,
            worker,
            gateway,
            addrs,
            env,
        })
    }

    /// Every process, the model first.
    pub fn processes(&self) -> impl Iterator<Item = &Process> {
        self.model
            .iter()
            .chain([&self.toolserver, &self.worker, &self.gateway])
    }
}

#[cfg(test)]
mod tests {
    use super::stack_env;

    #[test]
    fn the_stack_env_is_key_value_pairs_separated_by_whitespace() {
        assert_eq!(stack_env(None), []);
        assert_eq!(stack_env(Some("  ")), []);
        assert_eq!(
            stack_env(Some(
                "ROVER_MODEL__WARM_PROMPT_CACHE=true\n ROVER_MODEL__PROVIDER=llama.cpp junk =x A=b=c"
            )),
            [
                (
                    "ROVER_MODEL__WARM_PROMPT_CACHE".to_owned(),
                    "true".to_owned()
                ),
                ("ROVER_MODEL__PROVIDER".to_owned(), "llama.cpp".to_owned()),
                ("A".to_owned(), "b=c".to_owned()),
            ]
        );
    }
}
