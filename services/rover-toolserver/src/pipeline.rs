//! The `execute()` pipeline every tool call goes through, in the seed's order (hop 4):
//!
//! 1. reject a payload without a *verified* turn identity (signature, expiry);
//! 2. validate the arguments against the tool's schema (unknown fields are errors);
//! 3. fail closed when the identity's tenant does not exist;
//! 4. (writes) return the stored reply if this call id already ran — nothing runs twice;
//! 5. rebuild the permission check inside the tenant scope from live policy rows; then, for a
//!    write whose school's policy asks for approval, require an approval bound to this very call
//!    (an approved row given to this turn for this call id, input, user and chat; or, over MCP, an
//!    approval the gateway signed into the call's identity) — else `approval_required`, nothing
//!    runs. This is the one place approval is decided: chat, subagents, MCP and whatever comes
//!    next pass it;
//! 6. run the posture: *policy* — the casbin gate, then the domain function in the tenant frame;
//!    *relationship* — the domain function asserts ownership itself;
//! 7. on a successful write, commit the write, exactly one audit row and the inbox row in one
//!    transaction; reads and failures write nothing;
//! 8. reply with the envelope: `{"data":…,"scopeContext":"…"}` or `{"error":"…"}`.
//!
//! A policy-gated read whose work is one query (`dispatch::one_trip`) takes steps 3, 5 and 6 in
//! one database round trip once its school's policy rows are known: authorised on those rows,
//! its opening and its query sent together, its answer kept only if their version is still the
//! live one — else it takes the steps above one by one, on the live rows.

use std::collections::HashMap;
use std::sync::Arc;

use rover_contracts::AgentToolResult;
use rover_contracts::identity::{CachingVerifier, TurnVerifier, VerifiedTurnIdentity};
use rover_contracts::ids::SchoolId;
use rover_contracts::tools::{Effect, Posture, REGISTRY, ToolContract, ToolKind};
use rover_contracts::wire::{self, ToolCall, ToolOutcome};
use rover_domain::audit::AuditEntry;
use rover_domain::call::{ApprovalRead, CallReads, CallStart, begin_call};
use rover_domain::policy::{self, Authorizer, Refusal};
use rover_domain::pool::CallPool;
use rover_domain::{Actor, DomainError};
use rover_messaging::Delivery;
use rover_telemetry::metrics::ToolMetrics;
use serde_json::Value;
use serde_json::value::RawValue;
use tracing::Instrument as _;

use crate::dispatch;

/// The reply a call gets: its data serialised once, as it goes onto the wire (decision 0021).
pub type Reply = rover_contracts::wire::ToolReply<Box<RawValue>>;

/// A failed call: how it went, and the sentence the model reads.
#[derive(Debug)]
pub(crate) struct Failure {
    outcome: ToolOutcome,
    message: String,
    /// The question it raises for the staff member (a name that fits two students).
    ask: Option<rover_contracts::Ask>,
}

impl Failure {
    fn denied(what: impl std::fmt::Display) -> Self {
        Self {
            outcome: ToolOutcome::Denied,
            message: format!("Permission denied: {what}"),
            ask: None,
        }
    }

    fn approval_required(tool: &str) -> Self {
        Self {
            outcome: ToolOutcome::ApprovalRequired,
            message: format!(
                "Not done: the school requires the staff member's approval for {tool}, and this \
                 call carried none. Nothing was changed."
            ),
            ask: None,
        }
    }

    fn invalid(message: String) -> Self {
        Self {
            outcome: ToolOutcome::Invalid,
            message,
            ask: None,
        }
    }

    fn error(message: String) -> Self {
        Self {
            outcome: ToolOutcome::Error,
            message,
            ask: None,
        }
    }

    /// The error envelope the caller reads.
    fn envelope<T>(self) -> AgentToolResult<T> {
        match self.ask {
            Some(ask) => AgentToolResult::error_asking(self.message, ask),
            None => AgentToolResult::error(self.message),
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
            DomainError::Unresolved(unresolved) if unresolved.ambiguous => ToolOutcome::Ambiguous,
            DomainError::Unresolved(_) => ToolOutcome::NotFound,
            DomainError::Database(cause) => {
                tracing::error!(error = %cause, "tool call failed in the database");
                ToolOutcome::Error
            }
        };
        Self {
            outcome,
            ask: error.ask(),
            message: error.to_string(),
        }
    }
}

/// The level of a call's "tool call done" line: `info` for every call that changed data or did
/// not succeed; `debug` for a read that succeeded, which the metrics count and the trace shows —
/// formatting and writing its line was a sixth of the tool server's CPU per read (decision 0018).
fn done_level(effect: Option<Effect>, outcome: ToolOutcome) -> tracing::Level {
    if effect == Some(Effect::Read) && outcome == ToolOutcome::Ok {
        tracing::Level::DEBUG
    } else {
        tracing::Level::INFO
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

/// The policy each school's calls last read — an [`Authorizer`] built from its rows — by school,
/// with its version: a call reads the rows again, and builds again, only when the school's version
/// moved (`rover_domain::call::begin_call`).
#[derive(Default)]
struct Policies(std::sync::Mutex<HashMap<SchoolId, (i64, Arc<Authorizer>)>>);

impl Policies {
    /// At most this many schools are kept; past it the map starts over.
    const MAX_SCHOOLS: usize = 4096;

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SchoolId, (i64, Arc<Authorizer>)>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn get(&self, school: SchoolId) -> Option<(i64, Arc<Authorizer>)> {
        self.lock().get(&school).cloned()
    }

    /// Keeps `policy` as `school`'s at `version`, unless a newer version is kept already.
    fn keep(&self, school: SchoolId, version: i64, policy: Arc<Authorizer>) {
        let mut kept = self.lock();
        if kept.len() >= Self::MAX_SCHOOLS && !kept.contains_key(&school) {
            kept.clear();
        }
        match kept.get(&school) {
            Some((newer, _)) if *newer > version => {}
            _ => {
                kept.insert(school, (version, policy));
            }
        }
    }
}

/// Everything `execute()` needs; shared by the concurrent handlers.
pub struct Pipeline {
    verifier: CachingVerifier,
    pool: CallPool,
    tools: HashMap<&'static str, RpcTool>,
    policies: Policies,
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
    /// How many verified turn identities are kept, by their exact bytes, until they expire (or
    /// the cache is full). A turn's identity lives 30 minutes, far longer than its turn, so the
    /// cache is full in steady state: an entry (the token and its claims) is ≈ 1.5 KB, and at
    /// 10,000 the tool server's RSS grew 15 MB over a soak's first 10,000 turns. The turns in
    /// flight at once are what it must hold — a worker runs at most its prefetch (64 in the
    /// bench) — so 1,024 keeps every live turn's identity in ≈ 1.5 MB, and a full cache costs one
    /// Ed25519 verification for each turn still running when it starts over.
    pub const IDENTITY_CACHE: usize = 1_024;

    /// Compiles every RPC tool's argument schema once.
    pub fn new(verifier: TurnVerifier, pool: CallPool) -> Self {
        let tools = compile_tools();
        Self {
            verifier: CachingVerifier::new(verifier, Self::IDENTITY_CACHE),
            pool,
            tools,
            policies: Policies::default(),
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
        let trace_id = rover_telemetry::context_trace_id(&parent);
        let call = match wire::decode::<ToolCall>(&delivery.body) {
            Ok(call) => Ok(call),
            Err(error) => {
                tracing::warn!(%error, "undecodable tool call");
                let call_id = delivery
                    .correlation_id
                    .as_deref()
                    .and_then(|id| rover_contracts::ids::ToolCallId::parse(id).ok())?;
                Err(Reply {
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
    pub async fn execute(&self, call: ToolCall, trace_id: Option<&str>) -> Reply {
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
                Err(failure) => Reply {
                    call_id: call.call_id.clone(),
                    outcome: failure.outcome,
                    result: failure.envelope(),
                },
            }
        }
        .instrument(span.clone())
        .await;
        span.record("rover.tool.outcome", reply.outcome.as_str());
        let tool = self.tools.get(call.event.as_str());
        if done_level(tool.map(|tool| tool.contract.effect), reply.outcome) == tracing::Level::INFO
        {
            tracing::info!(parent: &span, outcome = reply.outcome.as_str(), "tool call done");
        } else {
            tracing::debug!(parent: &span, outcome = reply.outcome.as_str(), "tool call done");
        }
        if let Some(metrics) = &self.metrics {
            // Only registered events become label values: a caller cannot mint new series.
            let event = tool.map_or("unknown", |tool| tool.event);
            metrics.observe(event, reply.outcome.as_str(), started.elapsed());
        }
        reply
    }

    async fn try_execute(&self, call: &ToolCall, trace_id: Option<&str>) -> Result<Reply, Failure> {
        let (verified, tool) = self.admit(call)?;
        let is_write = tool.contract.effect == Effect::Write;
        let policy = match tool.posture {
            Posture::Policy(permission) => Some(permission),
            _ => None,
        };
        let school = verified.scope().school_id;
        let known = policy.and_then(|_| self.policies.get(school));
        if let (Some(permission), Some(known), false) = (policy, known.as_ref(), is_write)
            && let Some(reply) = self
                .read_in_one_trip(call, &verified, tool, permission, known)
                .await?
        {
            return Ok(reply);
        }
        let CallStart {
            mut tx,
            school_exists,
            authz,
            policy_version,
            stored,
            approval,
        } = open_call(
            &self.pool,
            call,
            &verified,
            tool,
            policy.map(|_| known.as_ref().map(|(version, _)| *version)),
        )
        .await?;
        if !school_exists {
            return Err(Failure::denied("the caller belongs to no school here"));
        }
        // 4. A write that already ran returns its stored reply, running nothing — but only to
        //    the actor and event it ran for.
        if let Some(stored) = stored {
            return replay(stored, &verified, tool);
        }
        // 5–6. Live permission check, then the posture: on the policy built from the rows just
        //      read, or — when the school's policy version has not moved — the one kept for it.
        if let (Some(permission), Some(version)) = (policy, policy_version) {
            let live = self.live_policy(school, version, authz, known).await?;
            self.authorize(&verified, permission, &live)?;
        }
        if let Some(status) = approval
            && status.needed
            && !status.approved
            && !verified.approves(&call.call_id, &call.args)
        {
            tracing::info!(
                tool = tool.contract.name,
                "write refused: no approval bound to this call"
            );
            return Err(Failure::approval_required(tool.contract.name));
        }
        let actor = Actor::from(verified.identity());
        let scope = verified.scope();
        let executed = dispatch::run(&mut tx, tool.contract, &actor, scope, call.args.clone())
            .instrument(tracing::info_span!("rover.toolserver.posture"))
            .await?;
        let reply = Reply {
            call_id: call.call_id.clone(),
            outcome: ToolOutcome::Ok,
            result: AgentToolResult::data(executed.data, scope.describe()),
        };
        // 7. A write commits with exactly one audit row and its inbox row (one statement); a
        //    read writes nothing, and its transaction is rolled back as the connection goes
        //    back to the pool, after the reply.
        let Some(change) = executed.change.as_ref().filter(|_| is_write) else {
            rover_settings::fault::point("toolserver.before-commit");
            drop(tx);
            return Ok(reply);
        };
        let entry = AuditEntry {
            actor: &actor,
            scope,
            event: tool.event,
            call_id: Some(&call.call_id),
            trace_id,
            change,
        };
        commit_write(tx, &entry, &reply).await?;
        Ok(reply)
    }

    /// Steps 3, 5, 6 of a policy-gated read with a one-trip form ([`dispatch::one_trip`]), in one
    /// database round trip: authorised first on the rows of the school's policy version `known`
    /// (read by an earlier call), then the opening query and the read's query together, and the
    /// answer kept only if that version is still the live one, read in the same transaction.
    /// `None` — no such form, refused on those rows, the version moved, no such school — sends the
    /// call down the two-step path, which decides on the live rows (a refusal there is the
    /// answer; a permission revoked since `known` is refused on the very next call).
    async fn read_in_one_trip(
        &self,
        call: &ToolCall,
        verified: &VerifiedTurnIdentity,
        tool: &RpcTool,
        permission: rover_contracts::permission::Permission,
        (version, known): &(i64, Arc<Authorizer>),
    ) -> Result<Option<Reply>, Failure> {
        let scope = verified.scope();
        let Some(read) = dispatch::one_trip(tool.contract, scope, call.args.clone()) else {
            return Ok(None);
        };
        if self.authorize(verified, permission, known).is_err() {
            return Ok(None);
        }
        // Arguments are judged only once the caller may make the call, as on the two-step path: a
        // caller without the permission learns that, not what its arguments lacked.
        let read = read?;
        let data =
            rover_domain::call::read_in_one_trip(&self.pool, scope.school_id, *version, read)
                .instrument(
                    tracing::info_span!("rover.toolserver.one_trip", db.system.name = "postgresql", school_id = %scope.school_id),
                )
                .await?;
        Ok(data.map(|data| Reply {
            call_id: call.call_id.clone(),
            outcome: ToolOutcome::Ok,
            result: AgentToolResult::data(data, scope.describe()),
        }))
    }

    /// Steps 1–2: a verified identity (cached by its exact bytes until it expires) and a call id
    /// that belongs to the verified turn; a known tool, and arguments that match its schema
    /// exactly.
    fn admit(&self, call: &ToolCall) -> Result<(VerifiedTurnIdentity, &RpcTool), Failure> {
        // The identity and schema checks take about a microsecond each (the bench's *read
        // stages*); at `info` their spans cost the tool server more than the checks, so they are
        // `debug` spans, shown with `RUST_LOG=rover_toolserver=debug`.
        let verified = tracing::debug_span!("rover.toolserver.identity")
            .in_scope(|| self.verifier.verify(&call.identity))
            .map_err(|e| Failure::denied(format!("no valid turn identity ({e})")))?;
        if !call.call_id.belongs_to(verified.turn_id()) {
            return Err(Failure::denied(
                "the call id does not belong to the verified turn",
            ));
        }
        let tool = self.tools.get(call.event.as_str()).ok_or_else(|| {
            Failure::invalid(format!("Unknown tool event `{}`.", truncate(&call.event)))
        })?;
        tracing::Span::current().record("gen_ai.tool.name", tool.contract.name);
        tracing::debug_span!("rover.toolserver.schema").in_scope(|| validate(tool, &call.args))?;
        Ok((verified, tool))
    }

    /// The school's live policy at `version`: built from the rows just `read` (and kept for the
    /// next calls), or — the version unchanged — the one `known` of that version.
    async fn live_policy(
        &self,
        school: SchoolId,
        version: i64,
        read: Option<(Vec<policy::PolicyRow>, Vec<policy::RoleAssignment>)>,
        known: Option<(i64, Arc<Authorizer>)>,
    ) -> Result<Arc<Authorizer>, Failure> {
        match (read, known) {
            (Some((policies, assignments)), _) => {
                let built = Authorizer::build(school, &policies, &assignments)
                    .await
                    .map_err(|error| Failure::error(format!("Authorization failed: {error}")))?;
                let built = Arc::new(built);
                self.policies.keep(school, version, built.clone());
                Ok(built)
            }
            (None, Some((_, known))) => Ok(known),
            (None, None) => Err(Failure::error(
                "Authorization failed: the policy rows were not read.".to_owned(),
            )),
        }
    }

    /// Step 5's permission check: [`rover_domain::policy::decide`], the decision REST makes too,
    /// on the school's live policy.
    fn authorize(
        &self,
        verified: &VerifiedTurnIdentity,
        permission: rover_contracts::permission::Permission,
        live: &Authorizer,
    ) -> Result<(), Failure> {
        let span = tracing::info_span!("rover.toolserver.permission", rover.permission = %permission, rover.permission.rule = tracing::field::Empty, rover.permission.allowed = tracing::field::Empty);
        let user = verified.identity().user_id;
        match span.in_scope(|| policy::decide(live, user, permission)) {
            Ok(_) => Ok(()),
            Err(Refusal::Denied(permission)) => Err(Failure::denied(permission)),
            Err(Refusal::Unevaluable(error)) => {
                Err(Failure::error(format!("Authorization failed: {error}")))
            }
        }
    }
}

/// Steps 3–5 in one round trip: the tenant frame (fail closed when the school does not exist),
/// a write's call-id lock, stored reply and approval, and the school's policy version with the
/// live policy rows when it moved from `policy` (`Some(None)`: read them; `None`: no policy).
async fn open_call(
    pool: &CallPool,
    call: &ToolCall,
    verified: &VerifiedTurnIdentity,
    tool: &RpcTool,
    policy: Option<Option<i64>>,
) -> Result<CallStart, Failure> {
    let is_write = tool.contract.effect == Effect::Write;
    let school = verified.scope().school_id;
    let model_call_id = call
        .call_id
        .as_str()
        .strip_prefix(&format!("{}/", verified.turn_id()))
        .unwrap_or_default();
    let reads = CallReads {
        policy: policy.is_some(),
        policy_cached: policy.flatten(),
        inbox: is_write.then_some(&call.call_id),
        approval: is_write.then_some(ApprovalRead {
            tool: tool.contract.name,
            call_id: model_call_id,
            turn: verified.turn_id(),
            thread: verified.thread_id(),
            user: verified.identity().user_id,
            input: &call.args,
        }),
    };
    Ok(begin_call(pool, school, reads)
        .instrument(tracing::info_span!("rover.toolserver.tenant", school_id = %school))
        .await?)
}

/// A repeated call id: the stored reply, to the actor and event it ran for only.
fn replay(
    stored: rover_domain::call::StoredReply,
    verified: &VerifiedTurnIdentity,
    tool: &RpcTool,
) -> Result<Reply, Failure> {
    let actor = verified.identity().user_id;
    if stored.actor != Some(actor) || stored.event != tool.event {
        return Err(Failure::denied("that call id was used by another call"));
    }
    tracing::info!("repeated call id: returning the stored reply");
    let unreadable =
        |e: serde_json::Error| Failure::error(format!("The stored reply is unreadable: {e}"));
    let stored: rover_contracts::wire::ToolReply =
        serde_json::from_value(stored.reply).map_err(unreadable)?;
    Ok(Reply {
        call_id: stored.call_id,
        outcome: stored.outcome,
        result: stored
            .result
            .try_map(|data| serde_json::value::to_raw_value(&data))
            .map_err(unreadable)?,
    })
}

/// Step 7 for a write: its audit row and inbox row (with the reply to return to a repeat) and
/// the commit, in one round trip.
async fn commit_write(
    tx: rover_domain::TenantTx,
    entry: &AuditEntry<'_>,
    reply: &Reply,
) -> Result<(), Failure> {
    // Serialised once, as text: its data is JSON text already (no `Value` built to write it).
    let stored = serde_json::to_string(reply)
        .map_err(|e| Failure::error(format!("The reply could not be stored: {e}")))?;
    // The write has run, uncommitted: dying here must leave nothing behind.
    rover_settings::fault::point("toolserver.before-commit");
    rover_domain::call::commit_write(tx, entry, &reply.call_id, &stored)
        .instrument(tracing::info_span!("rover.toolserver.audit"))
        .await?;
    rover_settings::fault::point("toolserver.after-commit");
    Ok(())
}

fn validate(tool: &RpcTool, args: &Value) -> Result<(), Failure> {
    match tool.validator.iter_errors(args).next() {
        None => Ok(()),
        Some(error) => Err(Failure::invalid(format!(
            "Invalid arguments for {}: {}.",
            tool.contract.name,
            rover_contracts::tools::schema_error(&error)
        ))),
    }
}

fn truncate(text: &str) -> String {
    text.chars().take(64).collect()
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod log_level {
    use rover_contracts::tools::Effect;
    use rover_contracts::wire::ToolOutcome;
    use tracing::Level;

    use super::done_level;

    #[test]
    fn only_a_read_that_succeeded_is_logged_below_info() {
        assert_eq!(
            done_level(Some(Effect::Read), ToolOutcome::Ok),
            Level::DEBUG
        );
        assert_eq!(
            done_level(Some(Effect::Write), ToolOutcome::Ok),
            Level::INFO
        );
        for outcome in [
            ToolOutcome::Denied,
            ToolOutcome::Invalid,
            ToolOutcome::NotFound,
            ToolOutcome::Error,
            ToolOutcome::ApprovalRequired,
        ] {
            assert_eq!(
                done_level(Some(Effect::Read), outcome),
                Level::INFO,
                "{outcome:?}"
            );
            assert_eq!(
                done_level(Some(Effect::Write), outcome),
                Level::INFO,
                "{outcome:?}"
            );
        }
        assert_eq!(done_level(None, ToolOutcome::Invalid), Level::INFO);
    }
}
