//! `Stack::start()`: the scripted model and the three real binaries as child processes, on a fresh
//! database, vhost and key pair (started by `rover_stack`), with a client that speaks to the
//! gateway as a Hub would, and what only the tests do to them: a second gateway, signals, waiting
//! for an exit, restarts.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use futures::StreamExt as _;
use rover_domain::testing::TestDb;
use rover_stack::{Env, Launcher, Process, Spawn, StackOptions, World};
use rover_testkit::{TestVhost, TurnKeys};
use serde_json::Value;
use sqlx::PgPool;

/// A running Rover: its processes, its database and a way to talk to it.
pub(crate) struct Stack {
    pub(crate) db: TestDb,
    pub(crate) owner: PgPool,
    pub(crate) gateway: SocketAddr,
    /// The first gateway's metrics listener (not its public port).
    pub(crate) gateway_metrics: SocketAddr,
    /// The worker's health and metrics listener.
    pub(crate) worker_http: SocketAddr,
    /// The tool server's health and metrics listener.
    pub(crate) toolserver_http: SocketAddr,
    pub(crate) http: reqwest::Client,
    env: Env,
    launcher: Launcher,
    /// By [`Service`] index (the model first), then extra gateways; `None` once taken by
    /// [`Stack::exited`].
    processes: std::sync::Mutex<Vec<Option<Process>>>,
    sandboxes: std::path::PathBuf,
    _keys: TurnKeys,
    pub(crate) vhost: TestVhost,
}

/// The stack's processes, by their index in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Service {
    Toolserver = 1,
    Worker = 2,
    Gateway = 3,
}

impl Service {
    fn binary(self) -> &'static str {
        match self {
            Service::Toolserver => "rover-toolserver",
            Service::Worker => "rover-worker",
            Service::Gateway => "rover-gateway",
        }
    }
}

impl Stack {
    pub(crate) async fn start() -> Stack {
        Self::start_with_model(&[]).await
    }

    /// Starts the stack with extra flags for the scripted model (latency knobs, say).
    pub(crate) async fn start_with_model(model_flags: &[&str]) -> Stack {
        Self::start_with(model_flags, &[]).await
    }

    /// Starts the stack with extra model flags and extra environment for the three services.
    pub(crate) async fn start_with(model_flags: &[&str], service_env: &[(&str, &str)]) -> Stack {
        Self::start_on(
            TestVhost::create(),
            model_flags,
            service_env,
            &HashMap::new(),
        )
        .await
    }

    /// Starts the stack on `vhost`, with environment for one service only (by binary name) on top
    /// of the shared environment.
    pub(crate) async fn start_on(
        vhost: TestVhost,
        model_flags: &[&str],
        service_env: &[(&str, &str)],
        per_service: &HashMap<&str, Vec<(String, String)>>,
    ) -> Stack {
        let world = World::on(vhost).await;
        let sandboxes = std::env::temp_dir().join(format!("rover-e2e-{}", uuid::Uuid::new_v4()));
        let mut options = StackOptions::scripted(model_flags).env([
            ("ROVER_AGENT__SANDBOX_DIR", sandboxes.display().to_string()),
            ("ROVER_CHAT__KEEPALIVE_MS", "1000".to_owned()),
        ]);
        options = options.env(service_env.iter().copied());
        for (service, env) in per_service {
            options = options.service_env(service, env.iter().cloned());
        }
        let launcher = Launcher::new();
        let stack = rover_stack::Stack::start(&launcher, &world, &options)
            .unwrap_or_else(|e| panic!("the stack did not start: {e}"));
        let rover_stack::Stack {
            model,
            toolserver,
            worker,
            gateway,
            addrs,
            env,
        } = stack;
        let processes = vec![model, Some(toolserver), Some(worker), Some(gateway)];
        let World { db, keys, vhost } = world;
        let owner = PgPool::connect(db.owner_url()).await.unwrap();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        Stack {
            db,
            owner,
            gateway: addrs.gateway,
            gateway_metrics: addrs.gateway_metrics,
            worker_http: addrs.worker_http,
            toolserver_http: addrs.toolserver_http,
            http,
            env,
            launcher,
            processes: std::sync::Mutex::new(processes),
            sandboxes,
            _keys: keys,
            vhost,
        }
    }

    /// Starts a service with `env`; panics if it does not become ready.
    fn spawn(&self, service: Service, env: &Env) -> (Process, rover_stack::Ready) {
        self.launcher
            .spawn(&Spawn::service(service.binary()).envs(env))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts another gateway replica on the same broker and database; returns its address.
    pub(crate) fn another_gateway(&mut self) -> SocketAddr {
        let (gateway, ready) = self.spawn(Service::Gateway, &self.env);
        self.processes.lock().unwrap().push(Some(gateway));
        ready.addr("listen").unwrap()
    }

    fn signal(&self, service: Service, signal: &str) {
        self.processes.lock().unwrap()[service as usize]
            .as_ref()
            .expect("the process is running")
            .signal(signal)
            .unwrap();
    }

    /// Sends SIGTERM to the first gateway (how Kubernetes stops a pod).
    pub(crate) fn terminate_gateway(&self) {
        self.signal(Service::Gateway, "TERM");
    }

    /// The process id of a service (the chaos suite reads its memory).
    #[allow(dead_code)]
    pub(crate) fn pid(&self, service: Service) -> u32 {
        self.processes.lock().unwrap()[service as usize]
            .as_ref()
            .expect("the process is running")
            .id()
    }

    /// `kill -9` on a service.
    pub(crate) fn kill(&self, service: Service) {
        self.signal(service, "KILL");
    }

    /// Resolves with the service's exit status when it exits (it is no longer the stack's).
    pub(crate) fn exited(
        &self,
        service: Service,
    ) -> impl std::future::Future<Output = std::process::ExitStatus> + use<> {
        let mut process = self.processes.lock().unwrap()[service as usize]
            .take()
            .expect("the process is running");
        let waiting = tokio::task::spawn_blocking(move || process.wait().unwrap());
        async move { waiting.await.unwrap() }
    }

    /// Waits for the first gateway to exit; its exit status.
    pub(crate) async fn gateway_exit(&self) -> std::process::ExitStatus {
        self.exited(Service::Gateway).await
    }

    /// Starts `service` again (after it exited or was killed) with the stack's environment, minus
    /// `without` and plus `with`; returns once it is ready. Blocks the caller for that long.
    pub(crate) fn restart(&self, service: Service, without: &[&str], with: &[(&str, &str)]) {
        let mut env = self.env.clone();
        for key in without {
            env.remove(*key);
        }
        for (key, value) in with {
            env.insert((*key).to_owned(), (*value).to_owned());
        }
        let (process, _) = self.spawn(service, &env);
        // The old process, if still held, is killed and reaped as its guard drops.
        let old = self.processes.lock().unwrap()[service as usize].replace(process);
        drop(old);
    }

    /// Messages in the stack's queues (ready and unacknowledged), by queue name.
    pub(crate) fn queue_depths(&self) -> HashMap<String, u64> {
        self.vhost
            .list("list_queues", &["name", "messages"])
            .into_iter()
            .map(|q| {
                (
                    q["name"].as_str().unwrap_or_default().to_owned(),
                    q["messages"].as_u64().unwrap_or_default(),
                )
            })
            .collect()
    }

    /// The scripted model's base URL, as the services were given it.
    pub(crate) fn model_url(&self) -> &str {
        &self.env["ROVER_MODEL__BASE_URL"]
    }

    /// A development bearer token for a demo user.
    pub(crate) fn token(&self, email: &str) -> String {
        let settings = rover_gateway::AuthSettings::development();
        rover_gateway::dev_token(
            &settings,
            self.db.ids.user(email),
            email,
            chrono::Utc::now(),
        )
        .unwrap()
    }

    /// `GET` of `path` on the gateway as the demo user `email`: the JSON body, whatever the status.
    pub(crate) async fn get_json(&self, email: &str, path: &str) -> serde_json::Value {
        self.http
            .get(format!("http://{}{path}", self.gateway))
            .bearer_auth(self.token(email))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// `POST /api/chat` with one user message; returns the response.
    pub(crate) async fn post(
        &self,
        gateway: SocketAddr,
        token: &str,
        chat: &str,
        messages: Value,
    ) -> reqwest::Response {
        self.http
            .post(format!("http://{gateway}/api/chat"))
            .bearer_auth(token)
            .json(&serde_json::json!({ "id": chat, "messages": messages, "trigger": "submit-message" }))
            .send()
            .await
            .unwrap()
    }

    /// `GET /api/chat/{chat}/stream` on `gateway` as `email`: resumes the chat's current (or last)
    /// turn.
    pub(crate) async fn resume(
        &self,
        gateway: SocketAddr,
        email: &str,
        chat: &str,
    ) -> reqwest::Response {
        self.http
            .get(format!("http://{gateway}/api/chat/{chat}/stream"))
            .bearer_auth(self.token(email))
            .send()
            .await
            .unwrap()
    }

    /// Sends `text` as `email` in chat `chat` on the first gateway and reads the whole stream.
    pub(crate) async fn say(&self, email: &str, chat: &str, text: &str) -> Turn {
        let messages = serde_json::json!([{ "id": "u1", "role": "user", "parts": [{ "type": "text", "text": text }] }]);
        let response = self
            .post(self.gateway, &self.token(email), chat, messages)
            .await;
        read_stream(response).await
    }

    /// Counts over the whole database (as the owner; RLS does not filter).
    pub(crate) async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sql)
            .fetch_one(&self.owner)
            .await
            .unwrap()
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.processes.lock().unwrap().clear();
        let _ = std::fs::remove_dir_all(&self.sandboxes);
    }
}

/// A streamed turn as the Hub saw it.
#[derive(Debug, Clone)]
pub(crate) struct Turn {
    pub(crate) status: u16,
    pub(crate) headers: reqwest::header::HeaderMap,
    /// Every `data:` payload except `[DONE]`, parsed.
    pub(crate) chunks: Vec<Value>,
    /// Whether the stream ended with `data: [DONE]`.
    pub(crate) done: bool,
    /// `:` comment lines (keep-alives).
    pub(crate) comments: usize,
}

impl Turn {
    pub(crate) fn of_type(&self, kind: &str) -> Vec<&Value> {
        self.chunks.iter().filter(|c| c["type"] == kind).collect()
    }

    pub(crate) fn text(&self) -> String {
        self.of_type("text-delta")
            .iter()
            .filter_map(|c| c["delta"].as_str())
            .collect()
    }

    pub(crate) fn tools(&self) -> Vec<String> {
        self.of_type("tool-input-available")
            .iter()
            .map(|c| c["toolName"].as_str().unwrap().to_owned())
            .collect()
    }

    pub(crate) fn finish_reason(&self) -> Option<&str> {
        self.of_type("finish")
            .first()
            .and_then(|c| c["finishReason"].as_str())
    }
}

/// Reads an SSE response to its end.
pub(crate) async fn read_stream(response: reqwest::Response) -> Turn {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let mut body = String::new();
    let mut stream = response.bytes_stream();
    while let Some(bytes) = stream.next().await {
        match bytes {
            Ok(bytes) => body.push_str(&String::from_utf8_lossy(&bytes)),
            // A broken or timed-out stream is what it is: the caller's assertions say what is
            // missing (no `finish`, no `[DONE]`).
            Err(error) => {
                eprintln!("the stream broke: {error}");
                break;
            }
        }
    }
    parse_sse(status, headers, &body)
}

pub(crate) fn parse_sse(status: u16, headers: reqwest::header::HeaderMap, body: &str) -> Turn {
    let mut chunks = Vec::new();
    let mut done = false;
    let mut comments = 0;
    for line in body.lines() {
        if let Some(data) = line.strip_prefix("data: ") {
            if data == "[DONE]" {
                done = true;
            } else {
                chunks.push(
                    serde_json::from_str(data).unwrap_or_else(|e| panic!("bad chunk {data}: {e}")),
                );
            }
        } else if line.starts_with(':') {
            comments += 1;
        }
    }
    Turn {
        status,
        headers,
        chunks,
        done,
        comments,
    }
}
