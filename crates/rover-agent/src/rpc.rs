//! RPC tools: the call sent to the tool servers with the turn's signed identity.

use rover_contracts::AgentToolResult;
use rover_contracts::ids::ToolCallId;
use rover_contracts::wire::{self, ToolCall, ToolReply};
use serde_json::Value;

use crate::deps::TurnDeps;

/// The generic RPC proxy: identity and scope come from the signed turn identity, never from the
/// model's arguments; the tool server checks the arguments against the same schema.
pub(crate) async fn call_rpc(
    event: &str,
    call_id: &str,
    args: Value,
    deps: TurnDeps<'_>,
) -> (&'static str, AgentToolResult<Value>) {
    let call_id = ToolCallId::for_turn(deps.turn.turn_id, call_id);
    let call = ToolCall {
        call_id: call_id.clone(),
        event: event.to_owned(),
        identity: deps.turn.identity.clone(),
        args,
    };
    let tools = &deps.runtime.tools;
    let reply = tools
        .client
        .call(
            &tools.exchange,
            event,
            call_id.as_str(),
            wire::encode(&call),
        )
        .await;
    if let Err(error) = &reply {
        tracing::warn!(%error, event, "tool call failed");
    }
    ToolReply::read(reply.as_deref().ok())
}
