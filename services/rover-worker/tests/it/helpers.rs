//! `spawn_stack()`: a tool server, the scripted model and a worker on a fresh database, vhost and
//! key pair; `turn()` mints a demo user's runtime context and identity as the gateway would,
//! publishes the turn, and collects its events until `finish`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use chrono::Utc;
use rover_contracts::context::{RuntimeContext, Subagent};
use rover_contracts::identity::TurnGrant;
use rover_contracts::ids::{ThreadId, TurnId};
use rover_contracts::wire::{self, FinishReason, TurnEvent, TurnEventKind, TurnInput, TurnRequest};
use rover_domain::testing::TestDb;
use rover_messaging::{
    Broker, BrokerOptions, ConsumerHandle, ConsumerOptions, Outcome, OutgoingMessage, Topology,
};
use rover_settings::Secret;
use rover_testkit::{TestVhost, TurnKeys, within};
use serde_json::Value;
use sqlx::PgPool;
use tokio::sync::{Mutex, mpsc, oneshot};

/// The repository's skills folder.
pub(crate) fn skills_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../skills")
}

/// Everything a worker test needs, torn down when dropped.
pub(crate) struct Stack {
    pub(crate) db: TestDb,
    pub(crate) keys: TurnKeys,
    pub(crate) broker: Broker,
    pub(crate) topology: Topology,
    pub(crate) model: SocketAddr,
    pub(crate) owner: PgPool,
    stops: Vec<oneshot::Sender<()>>,
    tasks: Vec<tokio::task::JoinHandle<anyhow::Result<()>>>,
    _sandboxes: SandboxDir,
    _vhost: TestVhost,
}

struct SandboxDir(PathBuf);

impl Drop for SandboxDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a turn produced.
#[derive(Debug, Clone)]
pub(crate) struct Transcript {
    pub(crate) events: Vec<TurnEvent>,
}

impl Transcript {
    /// Rover's own text (not the subagents').
    pub(crate) fn text(&self) -> String {
        self.events
            .iter()
            .filter(|e| e.subagent.is_none())
            .filter_map(|e| match &e.event {
                TurnEventKind::TextDelta { delta, .. } => Some(delta.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The tools called, with the agent that called them, in order.
    pub(crate) fn tool_calls(&self) -> Vec<(Option<Subagent>, String)> {
        self.events
            .iter()
            .filter_map(|e| match &e.event {
                TurnEventKind::ToolInputAvailable { tool_name, .. } => {
                    Some((e.subagent, tool_name.clone()))
                }
                _ => None,
            })
            .collect()
    }

    /// The `ask_user` call the turn ended on: its id and input.
    pub(crate) fn question(&self) -> (String, Value) {
        self.events
            .iter()
            .find_map(|e| match &e.event {
                TurnEventKind::ToolInputAvailable {
                    tool_call_id,
                    tool_name,
                    input,
                } if tool_name == "ask_user" => Some((tool_call_id.clone(), input.clone())),
                _ => None,
            })
            .expect("an ask_user call")
    }

    /// Just the tool names, in order.
    pub(crate) fn tool_names(&self) -> Vec<String> {
        self.tool_calls()
            .into_iter()
            .map(|(_, name)| name)
            .collect()
    }

    /// How the turn finished.
    pub(crate) fn finish(&self) -> FinishReason {
        self.events
            .iter()
            .find_map(|e| match e.event {
                TurnEventKind::Finish { reason, .. } => Some(reason),
                _ => None,
            })
            .expect("a finish event")
    }

    /// The error texts of failed tool calls.
    pub(crate) fn tool_errors(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match &e.event {
                TurnEventKind::ToolOutputError { error_text, .. } => Some(error_text.clone()),
                _ => None,
            })
            .collect()
    }

    /// The turn's `error` events.
    /// The codes of the turn's error events.
    pub(crate) fn error_codes(&self) -> Vec<rover_contracts::ErrorCode> {
        self.events
            .iter()
            .filter_map(|e| match &e.event {
                TurnEventKind::Error { code, .. } => Some(*code),
                _ => None,
            })
            .collect()
    }

    /// The model the turn's `finish` named.
    pub(crate) fn model(&self) -> Option<String> {
        self.events.iter().find_map(|e| match &e.event {
            TurnEventKind::Finish { model, .. } => model.clone(),
            _ => None,
        })
    }

    /// The token usage the turn's `finish` reported.
    pub(crate) fn usage(&self) -> Option<rover_contracts::wire::TokenUsage> {
        self.events.iter().find_map(|e| match &e.event {
            TurnEventKind::Finish { usage, .. } => *usage,
            _ => None,
        })
    }

    pub(crate) fn errors(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match &e.event {
                TurnEventKind::Error { message, .. } => Some(message.clone()),
                _ => None,
            })
            .collect()
    }
}

/// Worker knobs a test may change.
#[derive(Debug, Clone)]
pub(crate) struct Knobs {
    pub(crate) step_limit: u32,
    /// Point the worker at another model endpoint (an unreachable one, say).
    pub(crate) model_url: Option<String>,
    /// `agent.context_budget_tokens` and `agent.tool_result_max_tokens`, when not the defaults.
    pub(crate) context: Option<(usize, usize)>,
    /// Runs on the (empty) sandbox directory before the worker starts.
    pub(crate) prepare_sandboxes: Option<fn(&std::path::Path)>,
    /// The worker's budgets, when not the defaults.
    pub(crate) budget: Option<rover_worker::BudgetSettings>,
    /// `model.warm_prompt_cache`.
    pub(crate) warm_prompt_cache: bool,
}

impl Default for Knobs {
    fn default() -> Self {
        Self {
            step_limit: 8,
            model_url: None,
            context: None,
            prepare_sandboxes: None,
            budget: None,
            warm_prompt_cache: false,
        }
    }
}

pub(crate) async fn spawn_stack() -> Stack {
    spawn_stack_with(Knobs::default()).await
}

pub(crate) async fn spawn_stack_with(knobs: Knobs) -> Stack {
    let vhost = TestVhost::create();
    let db = TestDb::new().await;
    let keys = TurnKeys::generate();
    let mut stops = Vec::new();
    let mut tasks = Vec::new();

    // The tool server.
    let mut settings = rover_toolserver::Settings::default();
    settings.http.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    settings.amqp.url = Secret::new(vhost.url());
    settings.database.url = Secret::new(db.app_url().to_owned());
    settings.identity.public_key_file = Some(keys.public_key_file());
    let toolserver = within(
        "build the tool server",
        rover_toolserver::App::build(settings),
    )
    .await
    .expect("tool server");
    let (stop, stopped) = oneshot::channel::<()>();
    stops.push(stop);
    tasks.push(tokio::spawn(toolserver.run(async {
        let _ = stopped.await;
    })));

    // The scripted model (a test double speaking the OpenAI API).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let model = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    stops.push(stop);
    tasks.push(tokio::spawn(rover_scripted_model::serve(
        listener,
        rover_scripted_model::Config::default(),
        async {
            let _ = stopped.await;
        },
    )));

    // The worker.
    let sandboxes =
        SandboxDir(std::env::temp_dir().join(format!("rover-sandboxes-{}", uuid::Uuid::new_v4())));
    let mut settings = rover_worker::Settings::default();
    settings.http.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    settings.amqp.url = Secret::new(vhost.url());
    settings.database.url = Secret::new(db.app_url().to_owned());
    settings.model.base_url = knobs
        .model_url
        .clone()
        .unwrap_or_else(|| format!("http://{model}/v1"));
    settings.model.timeout_ms = 10_000;
    settings.model.warm_prompt_cache = knobs.warm_prompt_cache;
    settings.agent.skills_dir = skills_dir();
    settings.agent.sandbox_dir = Some(sandboxes.0.clone());
    if let Some(prepare) = knobs.prepare_sandboxes {
        std::fs::create_dir_all(&sandboxes.0).expect("the sandbox directory");
        prepare(&sandboxes.0);
    }
    settings.agent.step_limit = knobs.step_limit;
    if let Some(budget) = knobs.budget.clone() {
        settings.budget = budget;
    }
    if let Some((budget, tool_result)) = knobs.context {
        settings.agent.context_budget_tokens = budget;
        settings.agent.tool_result_max_tokens = tool_result;
    }
    settings.identity.public_key_file = Some(keys.public_key_file());
    let worker = within("build the worker", rover_worker::App::build(settings))
        .await
        .expect("worker");
    let (stop, stopped) = oneshot::channel::<()>();
    stops.push(stop);
    tasks.push(tokio::spawn(worker.run(async {
        let _ = stopped.await;
    })));

    let broker = within("connect", Broker::connect(BrokerOptions::new(vhost.url())))
        .await
        .expect("connect");
    let owner = PgPool::connect(db.owner_url()).await.expect("owner pool");
    Stack {
        db,
        keys,
        broker,
        topology: Topology::default(),
        model,
        owner,
        stops,
        tasks,
        _sandboxes: sandboxes,
        _vhost: vhost,
    }
}

impl Stack {
    /// The runtime context of a demo user, minted from live rows as the gateway does.
    pub(crate) async fn context(&self, email: &str) -> RuntimeContext {
        let user = self.db.ids.user(email);
        let mut tx = rover_domain::begin_tenant(&self.db.pool, self.db.ids.school_of(email))
            .await
            .expect("tenant");
        let context = rover_domain::context::runtime_context(&mut tx, user, None, Vec::new())
            .await
            .expect("context");
        tx.rollback().await.expect("rollback");
        context
    }

    /// Runs one turn of `text` as `email` in `thread`, and returns its events once it finishes.
    pub(crate) async fn turn_in(
        &self,
        thread: ThreadId,
        email: &str,
        input: TurnInput,
    ) -> Transcript {
        let context = self.context(email).await;
        let turn_id = TurnId::new();
        let grant = TurnGrant {
            turn_id,
            thread_id: thread,
            identity: context.identity(),
            scope: context.call_scope(),
        };
        let identity = self
            .keys
            .signer()
            .mint(grant, Utc::now(), chrono::Duration::minutes(15))
            .expect("mint");
        let request = TurnRequest {
            turn_id,
            thread_id: thread,
            message_id: format!("msg-{turn_id}"),
            context,
            identity,
            input,
        };

        let (events_tx, mut events_rx) = mpsc::unbounded_channel::<TurnEvent>();
        let events_tx = Arc::new(Mutex::new(events_tx));
        let key = rover_messaging::turn_event_routing_key(&turn_id.to_string());
        let subscription: ConsumerHandle = within(
            "subscribe",
            self.broker.subscribe(
                &self.topology.turn_events_exchange(),
                &[&key],
                ConsumerOptions::default(),
                move |delivery| {
                    let events_tx = events_tx.clone();
                    async move {
                        if let Ok(event) = wire::decode::<TurnEvent>(&delivery.body) {
                            let _ = events_tx.lock().await.send(event);
                        }
                        Outcome::Ack
                    }
                },
            ),
        )
        .await
        .expect("subscribe");
        within(
            "publish the turn",
            self.broker.publisher().publish(
                &self.topology.turns_exchange(),
                rover_messaging::TURN_ROUTING_KEY,
                OutgoingMessage::new(wire::encode(&request)),
            ),
        )
        .await
        .expect("published");

        // Events may arrive out of order (the subscription runs handlers concurrently): collect
        // by seq until the finish event and everything before it are in.
        let mut events: BTreeMap<u64, TurnEvent> = BTreeMap::new();
        let mut finish_seq = None;
        while finish_seq.is_none_or(|last| events.len() as u64 <= last) {
            let event = within("the next turn event", events_rx.recv())
                .await
                .expect("events flow");
            if matches!(event.event, TurnEventKind::Finish { .. }) {
                finish_seq = Some(event.seq);
            }
            events.insert(event.seq, event);
        }
        subscription.shutdown().await;
        Transcript {
            events: events.into_values().collect(),
        }
    }

    /// Runs one turn of `text` as `email` in a fresh thread.
    pub(crate) async fn turn(&self, email: &str, text: &str) -> Transcript {
        self.turn_in(
            ThreadId::new(),
            email,
            TurnInput::Message {
                text: text.to_owned(),
            },
        )
        .await
    }

    /// What the scripted model was shown, request by request.
    pub(crate) async fn model_requests(&self) -> Vec<Value> {
        let (status, body) = rover_testkit::http_get(self.model, "/v1/requests")
            .await
            .expect("GET /v1/requests");
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).expect("JSON")
    }

    /// Where the worker keeps the threads' files (`<dir>/<school>/<user>/<thread>/`).
    pub(crate) fn sandbox_dir(&self) -> &std::path::Path {
        &self._sandboxes.0
    }

    /// A count over the whole database (as the owner, so RLS does not filter).
    pub(crate) async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sql)
            .fetch_one(&self.owner)
            .await
            .expect("count")
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        for stop in self.stops.drain(..) {
            let _ = stop.send(());
        }
        for task in self.tasks.drain(..) {
            task.abort();
        }
    }
}
