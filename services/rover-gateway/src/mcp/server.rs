//! The MCP server behind `/mcp`: `tools/list` from the caller's live rows, `tools/call` through the
//! very RPC the worker uses, under a turn identity the gateway signs for that one call.
//!
//! Each `tools/call` is its own "turn": a fresh turn id (and thread id) signed with the caller's
//! identity and call scope, minted from live rows like a chat turn's, and a call id scoped to that
//! turn (`<turn>/mcp`), so the tool server's identity check, live policy, RLS, audit row and inbox
//! apply unchanged. Nothing is stored in conversations: an MCP call has no thread to keep.
//!
//! A write the tool server refuses with `approval_required` is asked about ([`approval`]): over the
//! 2026-07-28 `input_required` round trip when the client can elicit, else as an `isError` result
//! that says where approval can be given. The answer comes back as an approval signed into the
//! retried call's identity; the tool server, not this module, decides whether it suffices.

use std::time::Duration;

use axum::http::request::Parts;
use chrono::Utc;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rover_contracts::AgentToolResult;
use rover_contracts::identity::{ApprovedCall, TurnGrant};
use rover_contracts::ids::{ThreadId, ToolCallId, TurnId};
use rover_contracts::tools::{self, Offer, ToolContract};
use rover_contracts::wire::{self, ToolCall, ToolOutcome, ToolReply};
use rover_messaging::{RpcClient, RpcOptions};
use serde_json::Value;
use tracing::Instrument as _;

use super::approval::Answer;
use super::catalogue;
use crate::auth::Principal;
use crate::caller::{self, Caller};
use crate::error::ApiError;
use crate::state::AppState;

/// The model-call id part of an MCP call's id (`<turn>/mcp`): one call per turn.
const CALL_ID: &str = "mcp";

/// The HTTP request's span, handed to the MCP handlers through the request's extensions (the
/// `/mcp` door puts it there).
#[derive(Debug, Clone)]
pub(crate) struct RequestSpan(pub(crate) tracing::Span);

/// Answers MCP requests for the gateway. Cheap to clone (rmcp makes one per request).
#[derive(Debug, Clone)]
pub(crate) struct McpServer {
    state: AppState,
    rpc: RpcClient,
    exchange: String,
}

/// Who an MCP request acts as: the bearer token's principal and their school, both checked by the
/// `/mcp` door before any handler runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Member {
    pub(crate) principal: Principal,
    pub(crate) school: rover_contracts::ids::SchoolId,
}

/// One round of a `tools/call`: the staff member's answer to an approval question, if this round
/// carries one, and whether the client can be asked.
#[derive(Debug, Clone, Copy)]
struct Round {
    answer: Option<Answer>,
    can_ask: bool,
}

impl McpServer {
    /// A server over the gateway's broker connection, with an RPC client of its own (its reply
    /// channel opens on the first call) and the worker's RPC deadlines (`amqp.rpc_*`).
    pub(crate) fn new(state: &AppState) -> Self {
        let amqp = &state.settings.amqp;
        let rpc = state.broker.rpc_client(RpcOptions {
            attempt_timeout: Duration::from_millis(amqp.rpc_attempt_timeout_ms),
            attempts: amqp.rpc_attempts,
        });
        Self {
            exchange: state.topology.tools_exchange(),
            state: state.clone(),
            rpc,
        }
    }

    /// The caller's runtime context, minted from live rows (no campus choice: a campus
    /// administrator acts in their own campus, as in chat without the campus header).
    async fn caller(&self, member: Member) -> Result<Caller, ErrorData> {
        let mut tx = rover_domain::begin_tenant(&self.state.pool, member.school)
            .await
            .map_err(|e| rpc_error(e.into()))?;
        let caller = caller::resolve(&mut tx, &member.principal, None, Vec::new())
            .await
            .map_err(rpc_error)?;
        tx.rollback().await.map_err(|e| rpc_error(e.into()))?;
        Ok(caller)
    }

    async fn list(&self, member: Member) -> Result<ListToolsResult, ErrorData> {
        let caller = self.caller(member).await?;
        let tools: Vec<Tool> = tools::offered(&caller.context, Offer::EveryAgent)
            .filter_map(catalogue::definition)
            .collect();
        tracing::info!(tools = tools.len(), "MCP tools listed");
        // The list is the caller's, from live rows: no one may cache it, not even for a moment.
        Ok(ListToolsResult::with_all_items(tools)
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Private))
    }

    async fn call(
        &self,
        member: Member,
        contract: &'static ToolContract,
        arguments: Value,
        round: Round,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = self.caller(member).await?;
        // An approved retry runs in the turn it was asked in: the same call id, so it runs once.
        let turn = match round.answer {
            Some(Answer::Approved(turn)) => turn,
            _ => TurnId::new(),
        };
        tracing::Span::current().record("turn_id", tracing::field::display(turn));
        let settings = &self.state.settings;
        let grant = TurnGrant {
            turn_id: turn,
            thread_id: ThreadId::new(),
            identity: caller.identity(),
            scope: caller.scope(),
        };
        let call_id = ToolCallId::for_turn(turn, CALL_ID);
        let (now, ttl) = (Utc::now(), identity_ttl(settings));
        let identity = match round.answer {
            Some(Answer::Approved(_)) => {
                let approved = ApprovedCall {
                    call_id: call_id.clone(),
                    input: arguments.clone(),
                };
                self.state.signer.mint_approved(grant, approved, now, ttl)
            }
            _ => self.state.signer.mint(grant, now, ttl),
        }
        .map_err(|e| rpc_error(ApiError::internal(e)))?;
        let event = contract.event().unwrap_or_default();
        let call = ToolCall {
            call_id: call_id.clone(),
            event: event.to_owned(),
            identity,
            args: arguments.clone(),
        };
        let reply = self
            .rpc
            .call(&self.exchange, event, call_id.as_str(), wire::encode(&call))
            .await;
        if let Err(error) = &reply {
            tracing::warn!(%error, event, "MCP tool call failed");
        }
        let (outcome, envelope) = ToolReply::read(reply.as_deref().ok());
        tracing::Span::current().record("rover.tool.outcome", outcome);
        tracing::info!(outcome, "MCP tool call done");
        if outcome == ToolOutcome::ApprovalRequired.as_str() && round.answer.is_none() {
            if round.can_ask {
                tracing::info!("asking the MCP client for approval");
                let question = self.state.questions.ask(
                    member.principal.user_id,
                    turn,
                    contract,
                    &arguments,
                )?;
                return Ok(question.into());
            }
            return Ok(result(AgentToolResult::error(cannot_ask(contract))).into());
        }
        Ok(result(envelope).into())
    }
}

/// What a client that cannot be asked reads when a write needs approval.
fn cannot_ask(contract: &ToolContract) -> String {
    format!(
        "Not done: your school requires your approval before {} runs, and this MCP client \
         cannot ask for it (approval over MCP needs protocol version 2026-07-28 with \
         elicitation). Nothing was changed. Ask Rover in the Hub's chat, where you can approve \
         it, or ask a school administrator about the approval policy.",
        contract.name
    )
}

/// What a declined approval answers.
fn declined(contract: &ToolContract) -> CallToolResult {
    result(AgentToolResult::error(format!(
        "Not done: you declined {}, so nothing was changed.",
        contract.name
    )))
}

/// The envelope as MCP returns it: `structuredContent` (what `outputSchema` describes), the same
/// JSON as a text block for clients that read only text, and `isError` for an `{"error"}`.
fn result(envelope: AgentToolResult<Value>) -> CallToolResult {
    let is_error = envelope.is_error();
    let text = envelope.to_model_string();
    let structured = serde_json::to_value(&envelope).unwrap_or(Value::Null);
    let mut result = if is_error {
        CallToolResult::structured_error(structured)
    } else {
        CallToolResult::structured(structured)
    };
    result.content = vec![ContentBlock::text(text)];
    result
}

/// A call's identity lives as long as the RPC may retry it, and a minute more for clock skew;
/// never longer than `identity.ttl_secs`.
fn identity_ttl(settings: &crate::settings::Settings) -> chrono::Duration {
    let rpc_ms = settings
        .amqp
        .rpc_attempt_timeout_ms
        .saturating_mul(u64::from(settings.amqp.rpc_attempts.max(1)));
    let secs = (rpc_ms / 1000 + 60).min(settings.identity.ttl_secs.max(1));
    chrono::Duration::seconds(i64::try_from(secs).unwrap_or(60))
}

/// Who the `/mcp` door let in (rmcp hands handlers the HTTP parts).
fn member(context: &RequestContext<RoleServer>) -> Result<Member, ErrorData> {
    context
        .extensions
        .get::<Parts>()
        .and_then(|parts| parts.extensions.get::<Member>())
        .copied()
        .ok_or_else(|| ErrorData::invalid_request("No authenticated caller.", None))
}

/// The HTTP request's span, so a call's spans join the request's trace (rmcp runs handlers in
/// tasks of their own).
fn request_span(context: &RequestContext<RoleServer>) -> tracing::Span {
    context
        .extensions
        .get::<Parts>()
        .and_then(|parts| parts.extensions.get::<RequestSpan>())
        .map_or_else(tracing::Span::current, |span| span.0.clone())
}

/// A gateway error as a JSON-RPC error: its plain sentence, its stable code as data.
fn rpc_error(error: ApiError) -> ErrorData {
    let data = Some(serde_json::json!({ "code": error.code }));
    match error.code.http_status() {
        500..=599 => ErrorData::internal_error(error.message, data),
        _ => ErrorData::invalid_request(error.message, data),
    }
}

impl rmcp::ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("rover", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Rover's school tools. Every call acts as the signed-in staff member, inside \
                 their school (and campus), with their live permissions; results are \
                 {\"data\",\"scopeContext\"} or {\"error\"}.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let member = member(&context)?;
        let span = tracing::info_span!(parent: &request_span(&context), "rover.gateway.mcp.list_tools", user_id = %member.principal.user_id);
        self.list(member).instrument(span).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let member = member(&context)?;
        let principal = member.principal;
        let contract = catalogue::rpc_tool(&request.name).ok_or_else(|| {
            let name: String = request.name.chars().take(64).collect();
            ErrorData::invalid_params(format!("There is no tool `{name}`."), None)
        })?;
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let answer = match request.request_state.as_deref() {
            Some(state) => Some(self.state.questions.answer(
                principal.user_id,
                contract,
                &arguments,
                state,
                request.input_responses.as_ref(),
            )?),
            None => None,
        };
        if answer == Some(Answer::Declined) {
            tracing::info!(tool = contract.name, "MCP approval declined");
            return Ok(declined(contract).into());
        }
        let round = Round {
            answer,
            can_ask: context
                .protocol_version()
                .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28)
                && context
                    .client_capabilities()
                    .is_some_and(|capabilities| capabilities.elicitation.is_some()),
        };
        let span = tracing::info_span!(
            parent: &request_span(&context),
            "rover.gateway.mcp.call_tool",
            user_id = %principal.user_id,
            gen_ai.tool.name = contract.name,
            turn_id = tracing::field::Empty,
            rover.tool.outcome = tracing::field::Empty,
        );
        self.call(member, contract, arguments, round)
            .instrument(span)
            .await
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        catalogue::rpc_tool(name).and_then(catalogue::definition)
    }
}
