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
    let call_id = ToolCallId::for_turn(deps.turn_id, call_id);
    let call = ToolCall {
        call_id: call_id.clone(),
        event: event.to_owned(),
        identity: deps.identity.clone(),
        args,
    };
    let reply = deps
        .tools
        .client
        .call(
            &deps.tools.exchange,
            event,
            call_id.as_str(),
            wire::encode(&call),
        )
        .await;
    match reply {
        Ok(bytes) => match wire::decode::<ToolReply>(&bytes) {
            Ok(reply) => (reply.outcome.as_str(), reply.result),
            Err(error) => (
                "error",
                AgentToolResult::error(format!(
                    "The tool server's reply could not be read: {error}."
                )),
            ),
        },
        Err(error) => {
            tracing::warn!(%error, event, "tool call failed");
            (
                "error",
                AgentToolResult::error("The tool did not answer in time. Try again in a moment."),
            )
        }
    }
}
