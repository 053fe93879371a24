//! The `execute()` pipeline every tool call goes through, in the seed's order (hop 4):
//!
//! 1. reject a payload without a *verified* turn identity (signature, expiry);
//! 2. validate the arguments against the tool's schema (unknown fields are errors);
//! 3. fail closed when the identity's tenant does not exist;
//! 4. (writes) return the stored reply if this call id already ran — nothing runs twice;
//! 5. rebuild the permission check inside the tenant scope from live policy rows;
//! 6. run the posture: *policy* — the casbin gate, then the domain function in the tenant frame;
//!    *relationship* — the domain function asserts ownership itself;
//! 7. on a successful write, commit the write, exactly one audit row and the inbox row in one
//!    transaction; reads and failures write nothing;
//! 8. reply with the envelope: `{"data":…,"scopeContext":"…"}` or `{"error":"…"}`.

use std::collections::HashMap;
use std::sync::Arc;

use opentelemetry::trace::TraceContextExt as _;
use rover_authz::Authorizer;
use rover_contracts::AgentToolResult;
use rover_contracts::identity::{TurnVerifier, VerifiedTurnIdentity};
use rover_contracts::tools::{Effect, Posture, REGISTRY, ToolContract, ToolKind};
use rover_contracts::wire::{self, ToolCall, ToolOutcome, ToolReply};
use rover_domain::audit::{AuditEntry, record};
use rover_domain::{Actor, DomainError, TenantTx};
use rover_messaging::Delivery;
use rover_telemetry::metrics::ToolMetrics;
use serde_json::Value;
use tracing::Instrument as _;

use crate::dispatch;

/// A failed call: how it went, and the sentence the model reads.
#[derive(Debug)]
pub(crate) struct Failure {
    outcome: ToolOutcome,
    message: String,
}

impl Failure {
    fn denied(what: impl std::fmt::Display) -> Self {
        Self {
            outcome: ToolOutcome::Denied,
            message: format!("Permission denied: {what}"),
        }
    }

    fn invalid(message: String) -> Self {
        Self {
            outcome: ToolOutcome::Invalid,
            message,
        }
    }
}

impl From<DomainError> for Failure {
    fn from(error: DomainError) -> Self {
        let outcome = match &error {
            DomainError::NotFound(_) => ToolOutcome::NotFound,
            DomainError::Denied(_) => ToolOutcome::Denied,
            DomainError::Conflict(_) => ToolOutcome::Conflict,
            DomainError::Invalid(_) => ToolOutcome::Invalid,
            DomainError::Database(cause) => {
                tracing::error!(error = %cause, "tool call failed in the database");
                ToolOutcome::Error
            }
        };
        Self {
            outcome,
            message: error.to_string(),
        }
    }
}

/// An RPC tool the server knows, with its compiled argument schema.
struct RpcTool {
    contract: &'static ToolContract,
    event: &'static str,
    posture: Posture,
    validator: jsonschema::Validator,
}

/// Every RPC tool by event, with its argument schema compiled.
fn compile_tools() -> HashMap<&'static str, RpcTool> {
    REGISTRY
        .iter()
        .filter_map(|contract| {
            let ToolKind::Rpc { event, posture } = contract.kind else {
                return None;
            };
            let schema = serde_json::to_value((contract.args_schema)()).ok()?;
            // The registry's schemas are checked to be valid JSON Schema by the contracts tests.
            let validator = jsonschema::validator_for(&schema).ok()?;
            Some((
                event,
                RpcTool {
                    contract,
                    event,
                    posture,
                    validator,
                },
            ))
        })
        .collect()
}

/// Everything `execute()` needs; shared by the concurrent handlers.
pub struct Pipeline {
    verifier: TurnVerifier,
    pool: sqlx::PgPool,
    tools: HashMap<&'static str, RpcTool>,
    metrics: Option<ToolMetrics>,
    capture_content: bool,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

impl Pipeline {
    /// Compiles every RPC tool's argument schema once.
    pub fn new(verifier: TurnVerifier, pool: sqlx::PgPool) -> Self {
        let tools = compile_tools();
        Self {
            verifier,
            pool,
            tools,
            metrics: None,
            capture_content: false,
        }
    }

    /// Reads one delivery from the tools queue. `None` — reject it unread, to the dead-letter
    /// queue — when the body does not decode and names no call; otherwise the work that
    /// answers it (an undecodable body that names its call id gets an `invalid` reply at once,
    /// so the caller fails fast instead of timing out).
    pub(crate) fn handle(
        self: &Arc<Self>,
        delivery: Delivery,
    ) -> Option<impl Future<Output = Vec<u8>> + Send + use<>> {
        let parent = rover_messaging::extract(&delivery.headers);
        let span_context = parent.span().span_context().clone();
        let trace_id = span_context
            .is_valid()
            .then(|| span_context.trace_id().to_string());
        let call = match wire::decode::<ToolCall>(&delivery.body) {
            Ok(call) => Ok(call),
            Err(error) => {
                tracing::warn!(%error, "undecodable tool call");
                let call_id = delivery
                    .correlation_id
                    .as_deref()
                    .and_then(|id| rover_contracts::ids::ToolCallId::parse(id).ok())?;
                Err(ToolReply {
                    call_id,
                    outcome: ToolOutcome::Invalid,
                    result: AgentToolResult::error(format!(
                        "The tool call could not be read: {error}"
                    )),
                })
            }
        };
        let pipeline = self.clone();
        Some(async move {
            let reply = match call {
                Ok(call) => pipeline.execute(call, trace_id.as_deref()).await,
                Err(reply) => reply,
            };
            wire::encode(&reply)
        })
    }

    /// Counts every call in `metrics` (by event and outcome, with `execute()`'s latency).
    pub fn with_metrics(mut self, metrics: ToolMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Puts argument values into the `execute` span (`telemetry.capture_content`).
    pub fn capture_content(mut self, capture: bool) -> Self {
        self.capture_content = capture;
        self
    }

    /// Runs one tool call through the pipeline and returns the reply; never panics on input.
    pub async fn execute(&self, call: ToolCall, trace_id: Option<&str>) -> ToolReply {
        let started = std::time::Instant::now();
        let span = tracing::info_span!(
            "rover.toolserver.execute",
            otel.kind = "server",
            gen_ai.tool.name = tracing::field::Empty,
            gen_ai.tool.call.id = %call.call_id,
            gen_ai.tool.call.arguments = tracing::field::Empty,
            rover.tool.event = %truncate(&call.event),
            rover.tool.outcome = tracing::field::Empty,
        );
        if self.capture_content {
            span.record(
                "gen_ai.tool.call.arguments",
                tracing::field::display(&call.args),
            );
        }
        let reply = async {
            match self.try_execute(&call, trace_id).await {
                Ok(reply) => reply,
                Err(failure) => ToolReply {
                    call_id: call.call_id.clone(),
                    outcome: failure.outcome,
                    result: AgentToolResult::error(failure.message),
                },
            }
        }
        .instrument(span.clone())
        .await;
        span.record("rover.tool.outcome", reply.outcome.as_str());
        tracing::info!(parent: &span, outcome = reply.outcome.as_str(), "tool call done");
        if let Some(metrics) = &self.metrics {
            // Only registered events become label values: a caller cannot mint new series.
            let event = self
                .tools
                .get(call.event.as_str())
                .map_or("unknown", |tool| tool.event);
            metrics.observe(event, reply.outcome.as_str(), started.elapsed());
        }
        reply
    }

    async fn try_execute(
        &self,
        call: &ToolCall,
        trace_id: Option<&str>,
    ) -> Result<ToolReply, Failure> {
        // 1. A verified identity, or nothing.
        let verified = tracing::info_span!("rover.toolserver.identity")
            .in_scope(|| self.verifier.verify(&call.identity))
            .map_err(|e| Failure::denied(format!("no valid turn identity ({e})")))?;
        // 2. A known tool, and arguments that match its schema exactly.
        let tool = self.tools.get(call.event.as_str()).ok_or_else(|| {
            Failure::invalid(format!("Unknown tool event `{}`.", truncate(&call.event)))
        })?;
        tracing::Span::current().record("gen_ai.tool.name", tool.contract.name);
        tracing::info_span!("rover.toolserver.schema").in_scope(|| validate(tool, &call.args))?;
        // 3. The tenant frame: fail closed when the identity's school does not exist.
        let mut tx = self.tenant(&verified).await?;
        // 4. A write that already ran returns its stored reply, running nothing.
        let is_write = tool.contract.effect == Effect::Write;
        if is_write && let Some(stored) = rover_domain::inbox::find(&mut tx, &call.call_id).await? {
            tracing::info!("repeated call id: returning the stored reply");
            return serde_json::from_value(stored).map_err(|e| Failure {
                outcome: ToolOutcome::Error,
                message: format!("The stored reply is unreadable: {e}"),
            });
        }
        // 5–6. Live permission check, then the posture.
        if let Posture::Policy(permission) = tool.posture {
            self.authorize(&mut tx, &verified, permission).await?;
        }
        let actor = Actor::from(verified.identity());
        let scope = verified.scope();
        let executed = dispatch::run(&mut tx, tool.contract, &actor, scope, call.args.clone())
            .instrument(tracing::info_span!("rover.toolserver.posture"))
            .await?;
        let reply = ToolReply {
            call_id: call.call_id.clone(),
            outcome: ToolOutcome::Ok,
            result: AgentToolResult::data(executed.data, scope.describe()),
        };
        // 7. A write commits with exactly one audit row and its inbox row; a read writes nothing.
        if let Some(change) = executed.change.as_ref().filter(|_| is_write) {
            let event = tool.event;
            let entry = AuditEntry {
                actor: &actor,
                scope,
                event,
                call_id: Some(&call.call_id),
                trace_id,
                change,
            };
            record(&mut tx, &entry)
                .instrument(tracing::info_span!("rover.toolserver.audit"))
                .await?;
            let stored = serde_json::to_value(&reply).map_err(|e| Failure {
                outcome: ToolOutcome::Error,
                message: format!("The reply could not be stored: {e}"),
            })?;
            rover_domain::inbox::store(&mut tx, &call.call_id, event, &stored).await?;
        }
        rover_settings::fault::point("toolserver.before-commit");
        tx.commit().await?;
        rover_settings::fault::point("toolserver.after-commit");
        Ok(reply)
    }

    async fn tenant(&self, verified: &VerifiedTurnIdentity) -> Result<TenantTx, Failure> {
        let school = verified.scope().school_id;
        let mut tx = rover_domain::begin_tenant(&self.pool, school)
            .instrument(tracing::info_span!("rover.toolserver.tenant", school_id = %school))
            .await?;
        if !rover_domain::school_exists(&mut tx).await? {
            return Err(Failure::denied("the caller belongs to no school here"));
        }
        Ok(tx)
    }

    async fn authorize(
        &self,
        tx: &mut TenantTx,
        verified: &VerifiedTurnIdentity,
        permission: rover_contracts::permission::Permission,
    ) -> Result<(), Failure> {
        let span = tracing::info_span!("rover.toolserver.permission", rover.permission = %permission, rover.permission.rule = tracing::field::Empty, rover.permission.allowed = tracing::field::Empty);
        async {
            let (policies, assignments) = rover_domain::policy::load(tx).await?;
            let authorizer = Authorizer::build(verified.scope().school_id, &policies, &assignments)
                .await
                .map_err(|e| Failure {
                    outcome: ToolOutcome::Error,
                    message: format!("Authorization failed: {e}"),
                })?;
            let decision = authorizer
                .decide(verified.identity().user_id, permission)
                .map_err(|e| Failure {
                    outcome: ToolOutcome::Error,
                    message: format!("Authorization failed: {e}"),
                })?;
            tracing::Span::current().record("rover.permission.rule", decision.rule.as_str());
            tracing::Span::current().record("rover.permission.allowed", decision.allowed);
            if decision.allowed {
                Ok(())
            } else {
                Err(Failure::denied(permission))
            }
        }
        .instrument(span)
        .await
    }
}

fn validate(tool: &RpcTool, args: &Value) -> Result<(), Failure> {
    match tool.validator.iter_errors(args).next() {
        None => Ok(()),
        Some(error) => {
            let path = error.instance_path().to_string();
            let at = if path.is_empty() {
                String::new()
            } else {
                format!(" (at {path})")
            };
            Err(Failure::invalid(format!(
                "Invalid arguments for {}: {error}{at}.",
                tool.contract.name
            )))
        }
    }
}

fn truncate(text: &str) -> String {
    text.chars().take(64).collect()
}

#[cfg(test)]
mod fuzz;
