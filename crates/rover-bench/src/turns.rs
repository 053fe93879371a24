//! Whole turns through the gateway: the release scripted model, tool server, worker and gateway on
//! this run's vhost and database, driven over HTTP as a Hub would (`POST /api/chat`, reading the
//! SSE stream to `finish`), and the peak memory of each process.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use serde_json::{Value, json};

use crate::world::World;

/// What every turn says: a read tool call and a streamed answer.
pub(crate) const UTTERANCE: &str = "List the departments";
/// Who says it.
pub(crate) const SPEAKER: &str = "admin@hill.school";

/// The daily token limits of the bench's user and school: out of reach of any run.
const BENCH_DAILY_TOKENS: &str = "1000000000000";

/// How a stack is configured, beyond this run's vhost, database and keys.
#[derive(Debug, Clone)]
pub(crate) struct StackOptions {
    /// Flags for the scripted model (its latency knobs).
    pub(crate) model_flags: Vec<String>,
    /// The worker's prefetch (turns it runs at once).
    pub(crate) worker_prefetch: u16,
}

/// The four processes of one turn, on this run's world.
#[derive(Debug)]
pub(crate) struct Stack {
    services: rover_stack::Stack,
    pub(crate) gateway: SocketAddr,
    pub(crate) http: reqwest::Client,
    token: String,
}

impl Stack {
    pub(crate) fn start(world: &World, options: &StackOptions) -> anyhow::Result<Stack> {
        // The double records every request for tests to read; a soak's would grow it by tens
        // of MB a minute, so the bench's keeps a few.
        let mut model_flags = options.model_flags.clone();
        model_flags.extend(["--keep-requests".to_owned(), "16".to_owned()]);
        let stack_options = rover_stack::StackOptions::scripted(&model_flags)
            .env([("ROVER_DATABASE__MAX_CONNECTIONS", crate::toolhop::POOL_SIZE)])
            .service_env(
                "rover-toolserver",
                [("ROVER_AMQP__PREFETCH", crate::toolhop::TOOLSERVER_PREFETCH)],
            )
            // One user says every turn of a run (1,000 at once in the streams row), far more
            // than a staff member's day: the daily ledger still reserves and settles every model
            // call, against limits set out of reach (`0` would skip that work).
            .service_env(
                "rover-worker",
                [
                    ("ROVER_AMQP__PREFETCH", options.worker_prefetch.to_string()),
                    ("ROVER_BUDGET__USER_DAILY_TOKENS", BENCH_DAILY_TOKENS.to_owned()),
                    ("ROVER_BUDGET__SCHOOL_DAILY_TOKENS", BENCH_DAILY_TOKENS.to_owned()),
                ],
            )
            // One user opens every turn here, from one address: the per-user limit on open turns
            // and the per-address connection cap (guards against one client hogging a replica)
            // would turn the load into 429s and closed sockets, so they are off for the bench.
            .service_env(
                "rover-gateway",
                [
                    ("ROVER_CHAT__MAX_CONCURRENT_TURNS_PER_USER", "0"),
                    ("ROVER_CHAT__MAX_CONCURRENT_TURNS_PER_SCHOOL", "0"),
                    ("ROVER_HTTP__MAX_CONNECTIONS_PER_CLIENT", "0"),
                ],
            );
        let services = rover_stack::Stack::start(&crate::procs::launcher(), world, &stack_options)?;
        let settings = rover_gateway::AuthSettings::development();
        let token = rover_gateway::dev_token(
            &settings,
            world.db.ids.user(SPEAKER),
            SPEAKER,
            chrono::Utc::now(),
        )?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(300))
            .pool_max_idle_per_host(1024)
            .build()?;
        Ok(Stack {
            gateway: services.addrs.gateway,
            services,
            http,
            token,
        })
    }

    /// Meters every process's CPU.
    pub(crate) fn meter(&self) -> crate::cpu::Meter {
        crate::cpu::Meter::of(self.services.processes())
    }

    /// Resident memory of each process now, in MB.
    pub(crate) fn rss(&self) -> Vec<(&str, f64)> {
        self.services
            .processes()
            .filter_map(|p| Some((p.name(), crate::procs::rss_mb(p)?)))
            .collect()
    }

    /// Peak resident memory of each process, in MB.
    pub(crate) fn peak_rss(&self) -> Vec<(&str, f64)> {
        self.services
            .processes()
            .filter_map(|p| Some((p.name(), crate::procs::peak_rss_mb(p)?)))
            .collect()
    }

    /// One turn in a new chat; returns the time to the first SSE chunk and to the `finish` chunk.
    /// `on_first` runs when the first chunk arrives (to count open streams).
    pub(crate) async fn turn(&self, on_first: impl FnOnce()) -> Result<Timings, TurnError> {
        self.turn_saying(UTTERANCE, on_first).await
    }

    /// [`Stack::turn`] with `utterance` as what the user says.
    pub(crate) async fn turn_saying(
        &self,
        utterance: &str,
        on_first: impl FnOnce(),
    ) -> Result<Timings, TurnError> {
        let started = Instant::now();
        let chat = uuid::Uuid::new_v4().to_string();
        let body = json!({
            "id": chat,
            "trigger": "submit-message",
            "messages": [{ "id": "u1", "role": "user", "parts": [{ "type": "text", "text": utterance }] }],
        });
        let response = self
            .http
            .post(format!("http://{}/api/chat", self.gateway))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .map_err(TurnError::Post)?;
        if !response.status().is_success() {
            let status = response.status();
            let body = response.text().await.unwrap_or_default();
            return Err(TurnError::Refused { status, body });
        }
        let mut stream = response.bytes_stream();
        let (mut buffer, mut first, mut finish) = (Vec::<u8>::new(), None, None);
        let mut on_first = Some(on_first);
        while let Some(bytes) = stream.next().await {
            let bytes = bytes.map_err(TurnError::Read)?;
            buffer.extend_from_slice(&bytes);
            while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                let Some(data) = line.strip_prefix(b"data: ") else {
                    continue;
                };
                if first.is_none() {
                    first = Some(started.elapsed());
                    if let Some(f) = on_first.take() {
                        f();
                    }
                }
                if data.starts_with(b"[DONE]") {
                    continue;
                }
                let chunk: Value = serde_json::from_slice(data).map_err(TurnError::BadChunk)?;
                match chunk["type"].as_str() {
                    Some("finish") => finish = Some(started.elapsed()),
                    Some("error") => return Err(TurnError::Failed(chunk)),
                    _ => {}
                }
            }
        }
        match (first, finish) {
            (Some(first), Some(finish)) => Ok(Timings { first, finish }),
            _ => Err(TurnError::NoFinish),
        }
    }
}

/// Why one turn through the gateway failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TurnError {
    #[error("POST /api/chat: {0}")]
    Post(reqwest::Error),
    #[error("POST /api/chat: {status} {body}")]
    Refused {
        status: reqwest::StatusCode,
        body: String,
    },
    #[error("reading the stream: {0}")]
    Read(reqwest::Error),
    #[error("a bad chunk: {0}")]
    BadChunk(serde_json::Error),
    #[error("the turn failed: {0}")]
    Failed(Value),
    #[error("the stream ended without `finish`")]
    NoFinish,
}

/// When a turn's chunks arrived, from the moment the request was sent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timings {
    pub(crate) first: Duration,
    pub(crate) finish: Duration,
}
