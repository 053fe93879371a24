//! The tool hop: Rover's RPC client → the release `rover-toolserver` → Postgres → the reply, for a
//! read tool (`list_departments`) and a write tool (`create_department`: durable, audited, inbox),
//! each call a real, successful call with its own call id.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rover_contracts::identity::SignedTurnIdentity;
use rover_contracts::ids::{ToolCallId, TurnId};
use rover_contracts::wire::{self, ToolCall, ToolOutcome, ToolReply};
use rover_messaging::{Broker, BrokerOptions, RpcClient, RpcOptions, Topology};
use serde_json::{Value, json};

use rover_stack::{Process, Spawn};

use crate::world::{World, WorldExt as _};

/// The read tool's event.
pub(crate) const READ_EVENT: &str = "list.departments";
/// The write tool's event.
pub(crate) const WRITE_EVENT: &str = "create.department";
/// Who reads (a school-wide admin of Kampala Hill School).
pub(crate) const READER: &str = "admin@hill.school";
/// Who writes: another school, so the departments the writes create never swell what the read
/// tool and the later sections list.
pub(crate) const WRITER: &str = "admin@lakeside.college";

/// Tool server settings for the bench (what differs from the defaults), recorded in the report.
pub(crate) const TOOLSERVER_PREFETCH: &str = "64";
pub(crate) const POOL_SIZE: &str = "16";

/// A running tool server and a client that calls it as two demo users.
#[derive(Debug)]
pub(crate) struct ToolHop {
    server: Process,
    broker: Broker,
    rpc: RpcClient,
    exchange: Arc<str>,
    reader: Turn,
    writer: Turn,
}

/// A turn's signed identity, and its id for the call ids sent under it.
#[derive(Debug)]
pub(crate) struct Turn {
    id: TurnId,
    identity: SignedTurnIdentity,
}

impl Turn {
    fn of(
        world: &World,
        context: &rover_contracts::context::RuntimeContext,
    ) -> anyhow::Result<Self> {
        let id = TurnId::new();
        Ok(Turn {
            id,
            identity: world.mint(context, id)?,
        })
    }
}

impl ToolHop {
    /// Starts the release tool server on `world` with the bench's settings, then
    /// `ROVER_STACK_ENV`'s (as a stack's services get them: for pairs of runs that differ in one
    /// setting), and with `ROVER_BENCH_DB_SSLMODE` as its database URL's `sslmode` when set (to
    /// price TLS to Postgres; the default is sqlx's `prefer`, TLS where the server offers it).
    pub(crate) async fn start(world: &World) -> anyhow::Result<ToolHop> {
        let mut env = world.service_env();
        if let Ok(mode) = std::env::var("ROVER_BENCH_DB_SSLMODE")
            && let Some(url) = env.get_mut("ROVER_DATABASE__URL")
        {
            let joint = if url.contains('?') { '&' } else { '?' };
            url.push_str(&format!("{joint}sslmode={mode}"));
        }
        let (server, _) = crate::procs::launcher().spawn(
            &Spawn::service("rover-toolserver")
                .envs(env)
                .envs([
                    ("ROVER_AMQP__PREFETCH", TOOLSERVER_PREFETCH),
                    ("ROVER_DATABASE__MAX_CONNECTIONS", POOL_SIZE),
                ])
                .envs(rover_stack::stack_env(
                    std::env::var(rover_stack::STACK_ENV).ok().as_deref(),
                )),
        )?;
        let broker = Broker::connect(BrokerOptions::new(world.vhost.url()))
            .await
            .context("Failed to connect the RPC client")?;
        let rpc = broker.rpc_client(RpcOptions {
            attempt_timeout: Duration::from_secs(30),
            attempts: 1,
        });
        Ok(ToolHop {
            server,
            broker,
            rpc,
            exchange: Topology::default().tools_exchange().into(),
            reader: Turn::of(world, &world.context(READER).await?)?,
            writer: Turn::of(world, &world.context(WRITER).await?)?,
        })
    }

    fn read_call(&self) -> ToolCall {
        call(&self.reader, READ_EVENT, json!({}))
    }

    /// One `list_departments` call; fails unless the reply is a success.
    pub(crate) async fn read(&self) -> Result<(), HopError> {
        self.send(self.read_call()).await
    }

    /// One `create_department` call with a fresh name (department names are unique per school).
    pub(crate) async fn write(&self, n: u64) -> Result<(), HopError> {
        let name = format!(
            "Bench {n} {}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        self.send(call(&self.writer, WRITE_EVENT, json!({ "name": name })))
            .await
    }

    async fn send(&self, call: ToolCall) -> Result<(), HopError> {
        let body = wire::encode(&call);
        let reply = self
            .rpc
            .call(&self.exchange, &call.event, call.call_id.as_str(), body)
            .await
            .map_err(HopError::Rpc)?;
        let reply: ToolReply = wire::decode(&reply).map_err(HopError::Reply)?;
        if reply.outcome == ToolOutcome::Ok {
            Ok(())
        } else {
            Err(HopError::Refused {
                outcome: reply.outcome,
                result: reply.result,
            })
        }
    }

    /// Meters the tool server's CPU.
    pub(crate) fn meter(&self) -> crate::cpu::Meter {
        crate::cpu::Meter::of([&self.server])
    }

    pub(crate) async fn stop(self) {
        self.broker.close().await;
    }
}

/// Why one tool call failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HopError {
    #[error("the RPC failed: {0}")]
    Rpc(rover_messaging::RpcError),
    #[error("the reply is not a tool reply: {0}")]
    Reply(wire::WireError),
    #[error("the tool server answered {outcome:?}: {result:?}")]
    Refused {
        outcome: ToolOutcome,
        result: rover_contracts::envelope::AgentToolResult<Value>,
    },
}

/// The size of the tool-call frame Rover sends for the read tool (what the floor pads to).
pub(crate) async fn read_frame_len(world: &World) -> anyhow::Result<usize> {
    let turn = Turn::of(world, &world.context(READER).await?)?;
    Ok(wire::encode(&call(&turn, READ_EVENT, json!({}))).len())
}

/// Read calls as the tool-hop row sends them (one turn, a fresh call id each), for the stages
/// breakdown to run in process.
pub(crate) async fn read_calls(world: &World) -> anyhow::Result<impl Fn() -> ToolCall> {
    let turn = Turn::of(world, &world.context(READER).await?)?;
    Ok(move || call(&turn, READ_EVENT, json!({})))
}

/// A tool call shaped as the worker sends it: call id `<turn>/<model's call id>`.
fn call(turn: &Turn, event: &str, args: Value) -> ToolCall {
    let model_id = format!("call_{}", &uuid::Uuid::new_v4().simple().to_string()[..24]);
    ToolCall {
        call_id: ToolCallId::for_turn(turn.id, &model_id),
        event: event.to_owned(),
        identity: turn.identity.clone(),
        args,
    }
}
