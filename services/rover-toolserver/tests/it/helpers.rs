//! `spawn_toolserver()`: a tool server on a fresh database, vhost and key pair, plus a caller that
//! mints turn identities for the demo users and calls tools over the real RPC path.

use std::net::SocketAddr;
use std::time::Duration;

use chrono::Utc;
use rover_contracts::context::{CallScope, Identity, RunMode};
use rover_contracts::identity::{SignedTurnIdentity, TurnGrant};
use rover_contracts::ids::{ThreadId, ToolCallId, TurnId};
use rover_contracts::wire::{self, ToolCall, ToolReply};
use rover_domain::testing::TestDb;
use rover_messaging::{Broker, BrokerOptions, RpcClient, RpcOptions, Topology};
use rover_settings::Secret;
use rover_testkit::{TestVhost, TurnKeys, within};
use rover_toolserver::{App, Settings};
use serde_json::Value;
use sqlx::PgPool;
use tokio::sync::oneshot;

/// A running tool server and everything needed to call it and inspect its effects.
pub(crate) struct TestServer {
    pub(crate) db: TestDb,
    pub(crate) keys: TurnKeys,
    pub(crate) rpc: RpcClient,
    pub(crate) broker: Broker,
    pub(crate) topology: Topology,
    pub(crate) http: SocketAddr,
    /// Connected as the owner role (bypasses row-level security): for looking behind the app's back.
    pub(crate) owner: PgPool,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    // Dropped last, after every connection to it.
    pub(crate) vhost: TestVhost,
}

/// Who a call acts as: the identity and scope the gateway would sign.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub(crate) identity: Identity,
    pub(crate) scope: CallScope,
}

pub(crate) async fn spawn_toolserver() -> TestServer {
    spawn_toolserver_with(|_| {}).await
}

/// [`spawn_toolserver`] with `configure` changing its settings last.
pub(crate) async fn spawn_toolserver_with(configure: impl FnOnce(&mut Settings)) -> TestServer {
    let vhost = TestVhost::create();
    let db = TestDb::new().await;
    let keys = TurnKeys::generate();
    let mut settings = Settings::default();
    settings.http.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    settings.amqp.url = Secret::new(vhost.url());
    settings.database.url = Secret::new(db.app_url().to_owned());
    settings.database.max_connections = 8;
    settings.identity.public_key_file = Some(keys.public_key_file());
    configure(&mut settings);
    let app = within("build the tool server", App::build(settings))
        .await
        .expect("the tool server builds");
    let http = app.http_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(app.run(async {
        let _ = stopped.await;
    }));
    let broker = within("connect", Broker::connect(BrokerOptions::new(vhost.url())))
        .await
        .expect("connects");
    let topology = Topology::default();
    let rpc = broker.rpc_client(RpcOptions {
        attempt_timeout: Duration::from_secs(10),
        attempts: 1,
    });
    let owner = PgPool::connect(db.owner_url())
        .await
        .expect("connect as the owner");
    TestServer {
        db,
        keys,
        rpc,
        broker,
        topology,
        http,
        owner,
        stop: Some(stop),
        task: Some(task),
        vhost,
    }
}

impl TestServer {
    /// The identity and scope of a demo user, read from the database the way the gateway mints
    /// them: campus-tied users run in campus mode.
    pub(crate) async fn caller(&self, email: &str) -> Caller {
        let school = self.db.ids.school_of(email);
        let mut tx = rover_domain::begin_tenant(&self.db.pool, school)
            .await
            .expect("tenant tx");
        let user = rover_domain::actor::load_user(&mut tx, self.db.ids.user(email))
            .await
            .expect("demo user");
        tx.rollback().await.expect("rollback");
        let run_mode = match &user.campus {
            Some(campus) => RunMode::Campus {
                campus: campus.clone(),
            },
            None => RunMode::School,
        };
        Caller {
            identity: Identity {
                user_id: user.user_id,
                profile_id: user.profile_id,
                email: user.email.clone(),
                user_type: user.user_type,
                school_id: user.school.id,
            },
            scope: CallScope {
                school_id: user.school.id,
                run_mode,
            },
        }
    }

    /// A turn identity for `caller` in `turn_id`, signed with the gateway's key, valid for 15
    /// minutes.
    pub(crate) fn mint_for_turn(&self, caller: &Caller, turn_id: TurnId) -> SignedTurnIdentity {
        let grant = TurnGrant {
            turn_id,
            thread_id: ThreadId::new(),
            identity: caller.identity.clone(),
            scope: caller.scope.clone(),
        };
        self.keys
            .signer()
            .mint(grant, Utc::now(), chrono::Duration::minutes(15))
            .expect("mint")
    }

    /// A tool call as `caller` in a fresh turn, with a call id of that turn.
    pub(crate) fn tool_call(&self, caller: &Caller, event: &str, args: Value) -> ToolCall {
        let turn = TurnId::new();
        ToolCall {
            call_id: ToolCallId::for_turn(turn, &format!("call_{}", uuid::Uuid::new_v4().simple())),
            event: event.to_owned(),
            identity: self.mint_for_turn(caller, turn),
            args,
        }
    }

    /// Sends a call over the tools exchange (routing key = its event) and waits for the reply.
    pub(crate) async fn send(&self, call: &ToolCall) -> ToolReply {
        let body = wire::encode(call);
        let reply = within(
            "tool reply",
            self.rpc.call(
                &self.topology.tools_exchange(),
                &call.event,
                call.call_id.as_str(),
                body,
            ),
        )
        .await
        .expect("the tool server replies");
        wire::decode(&reply).expect("a tool reply")
    }

    /// Calls `event` as the demo user `email`.
    pub(crate) async fn call(&self, email: &str, event: &str, args: Value) -> ToolReply {
        let caller = self.caller(email).await;
        self.send(&self.tool_call(&caller, event, args)).await
    }

    /// Rows in `table` across every school (as the owner, so row-level security does not filter).
    pub(crate) async fn count(&self, table: &str) -> i64 {
        sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(&self.owner)
            .await
            .expect("count")
    }

    /// A snapshot of what tools can change, to prove a call changed nothing.
    pub(crate) async fn state(&self) -> Value {
        let row: (Value,) = sqlx::query_as(
            "SELECT jsonb_build_object( \
               'departments', (SELECT jsonb_agg(to_jsonb(d) ORDER BY d.id) FROM departments d), \
               'attendance', (SELECT count(*) FROM attendance), \
               'marks', (SELECT count(*) FROM marks), \
               'teaching', (SELECT count(*) FROM teaching_assignments), \
               'audit', (SELECT count(*) FROM audit_log), \
               'inbox', (SELECT count(*) FROM tool_call_inbox))",
        )
        .fetch_one(&self.owner)
        .await
        .expect("state");
        row.0
    }

    /// Resolves the shutdown future and waits for `run` to return.
    pub(crate) async fn shutdown(&mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let task = self.task.take().expect("running");
        within("graceful shutdown", task)
            .await
            .expect("the run task")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The envelope's `data`, or a panic naming the error.
pub(crate) fn data(reply: &ToolReply) -> &Value {
    match &reply.result {
        rover_contracts::AgentToolResult::Data { data, .. } => data,
        rover_contracts::AgentToolResult::Error { error, .. } => {
            panic!("expected data, got error: {error}")
        }
    }
}

/// The envelope's error text, or a panic showing the data.
pub(crate) fn error(reply: &ToolReply) -> &str {
    match &reply.result {
        rover_contracts::AgentToolResult::Error { error, .. } => error,
        rover_contracts::AgentToolResult::Data { data, .. } => {
            panic!("expected an error, got data: {data}")
        }
    }
}

/// The envelope's `scopeContext`.
pub(crate) fn scope_context(reply: &ToolReply) -> &str {
    match &reply.result {
        rover_contracts::AgentToolResult::Data { scope_context, .. } => scope_context,
        rover_contracts::AgentToolResult::Error { error, .. } => {
            panic!("expected data, got error: {error}")
        }
    }
}
