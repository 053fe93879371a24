//! One tool call's database work in as few round trips as it can take: [`begin_call`] opens the
//! tenant transaction, checks the school, reads the school's policy version (and the live policy
//! rows only when the version moved since the caller last read them) and (for a write) locks the
//! call id, reads its stored reply and its approval — all in **one** round trip; [`finish_write`] records the
//! audit row and the inbox row in one statement. So a read is two round trips before its answer
//! (this and the query), and a write four (this, the write, [`finish_write`], `COMMIT`).

use rover_authz::{PolicyRow, RoleAssignment};
use rover_contracts::ids::{SchoolId, ThreadId, ToolCallId, TurnId, UserId};
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row as _};
use uuid::Uuid;

use crate::audit::AuditEntry;
#[cfg(doc)]
use crate::policy::LOAD_SQL;
use crate::policy::{AuthzRow, from_rows};
use crate::tenant::{BYPASSES_RLS, begin_sql, bypass_refused};
use crate::{DomainError, TenantTx};

/// What [`begin_call`] reads besides opening the transaction.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallReads<'a> {
    /// Read the school's policy version, and its policy rows and role assignments unless the
    /// version is still `policy_cached` (a policy-gated tool).
    pub policy: bool,
    /// The policy version the caller last read the rows at: the rows are read again only when
    /// the school's version differs (`policy_versions`, bumped by trigger in the transaction that
    /// changes a row), so a change is seen on the very next call.
    pub policy_cached: Option<i64>,
    /// Lock this call id for the transaction and read its stored reply (a write).
    pub inbox: Option<&'a ToolCallId>,
    /// Read whether this write needs approval, and whether it has one (a write).
    pub approval: Option<ApprovalRead<'a>>,
}

/// A write about to run, as its approval is looked up: the school's policy for the tool, and an
/// approved row bound to this very call — the turn it was given to, the call id, the exact input,
/// the staff member and the chat.
#[derive(Debug, Clone, Copy)]
pub struct ApprovalRead<'a> {
    /// The tool's name (the policy's key).
    pub tool: &'a str,
    /// The model's call id (the approval row's `call_id`: the wire id without its turn).
    pub call_id: &'a str,
    /// The turn running the call: the only one an approval may be consumed by.
    pub turn: TurnId,
    /// The chat.
    pub thread: ThreadId,
    /// The staff member.
    pub user: UserId,
    /// The arguments, exactly as they will run.
    pub input: &'a Value,
}

/// A write's approval, as read with the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApprovalStatus {
    /// The school's policy asks for approval of this tool (its row, else `*`, else yes).
    pub needed: bool,
    /// An approved row is bound to this very call, turn, input, user and chat.
    pub approved: bool,
}

/// A stored reply, with who the call ran for: it may be returned only to the same actor and
/// event.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredReply {
    /// The reply the first run sent.
    pub reply: Value,
    /// The tool event the call ran as.
    pub event: String,
    /// The user the call ran as (`None` for rows stored before actors were recorded).
    pub actor: Option<UserId>,
}

/// An open call transaction and what was read with it.
#[derive(Debug)]
pub struct CallStart {
    /// The tenant transaction the call runs in.
    pub tx: TenantTx,
    /// Whether the school exists (row-level security shows only its own row).
    pub school_exists: bool,
    /// The live policy rows and role assignments, if asked for and the version moved from
    /// `policy_cached` (else the caller's rows of that version are still the live ones).
    pub authz: Option<(Vec<PolicyRow>, Vec<RoleAssignment>)>,
    /// The school's policy version, if asked for.
    pub policy_version: Option<i64>,
    /// The call id's stored reply, if asked for and the call already ran.
    pub stored: Option<StoredReply>,
    /// The write's approval, if asked for.
    pub approval: Option<ApprovalStatus>,
}

/// Opens the tenant transaction of a tool call and reads what the call needs before it runs, in
/// one simple-protocol round trip: `BEGIN`; `set_config('app.school_id', …, true)`; for a write,
/// `pg_advisory_xact_lock` on the call id (so concurrent deliveries of one call run one after the
/// other); then one row saying whether the role bypasses row-level security (refused), whether the
/// school exists and the call's stored reply; then the policy rows.
///
/// Every value written into the SQL is a parsed UUID or hex, so nothing a caller sent is
/// interpreted as SQL. A connection that turns out dead on this first use is replaced once (the
/// pool does not ping on acquire; see [`crate::call_pool`]).
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", school_id = %school_id))]
pub async fn begin_call(
    pool: &PgPool,
    school_id: SchoolId,
    reads: CallReads<'_>,
) -> Result<CallStart, DomainError> {
    let sql = call_sql(school_id, reads);
    let opened = match TenantTx::open(pool, school_id, sql.clone()).await {
        Err(DomainError::Database(sqlx::Error::Io(error))) => {
            tracing::info!(%error, "a pooled connection was dead; opening the call on another");
            TenantTx::open(pool, school_id, sql).await
        }
        opened => opened,
    };
    let (tx, rows) = opened?;
    let mut context = None;
    let mut authz_rows: Vec<AuthzRow> = Vec::new();
    let mut policy_version = None;
    for row in rows {
        if row.try_column("bypasses_rls").is_ok() {
            if reads.policy {
                policy_version = Some(row.try_get::<i64, _>("policy_version")?);
            }
            context = Some(row);
        } else if row.try_column("is_policy").is_ok() {
            authz_rows.push((
                row.try_get("is_policy")?,
                row.try_get("role")?,
                row.try_get("action")?,
                row.try_get("subject")?,
                row.try_get("user_id")?,
            ));
        }
    }
    let context = context.ok_or_else(|| {
        DomainError::Database(sqlx::Error::Protocol(
            "the call's opening query returned no context row".into(),
        ))
    })?;
    if context.try_get::<bool, _>("bypasses_rls")? {
        return Err(bypass_refused());
    }
    let stored = match reads.inbox {
        Some(_) => stored_reply(&context)?,
        None => None,
    };
    let approval = match reads.approval {
        Some(_) => Some(ApprovalStatus {
            needed: context
                .try_get::<Option<String>, _>("approval_mode")?
                .as_deref()
                != Some("never"),
            approved: context.try_get("approved")?,
        }),
        None => None,
    };
    // Rows came: the version moved (by the time they were read). None came: unchanged — or the
    // school has no rows at all, which only a moved version can tell.
    let moved = !authz_rows.is_empty()
        || (policy_version.is_some() && policy_version != reads.policy_cached);
    Ok(CallStart {
        tx,
        school_exists: context.try_get("school_exists")?,
        authz: (reads.policy && moved)
            .then(|| from_rows(authz_rows))
            .transpose()?,
        policy_version: policy_version.filter(|_| reads.policy),
        stored,
        approval,
    })
}

fn stored_reply(context: &PgRow) -> Result<Option<StoredReply>, DomainError> {
    let Some(reply) = context.try_get::<Option<Value>, _>("stored_reply")? else {
        return Ok(None);
    };
    Ok(Some(StoredReply {
        reply,
        event: context.try_get("stored_event")?,
        actor: context
            .try_get::<Option<Uuid>, _>("stored_actor")?
            .map(UserId::from_uuid),
    }))
}

/// Text as a SQL expression: hex in the SQL, decoded by Postgres, so nothing a caller sent is
/// read as SQL.
fn text_sql(text: &str) -> String {
    let hex: String = text.bytes().map(|byte| format!("{byte:02x}")).collect();
    format!("convert_from(decode('{hex}', 'hex'), 'UTF8')")
}

/// The call id as a SQL expression.
fn call_id_sql(call_id: &ToolCallId) -> String {
    text_sql(call_id.as_str())
}

/// The approval columns of the opening query: the policy's mode for the tool, and whether an
/// approved row is bound to this very call (`rover_turnstore::approvals::approval_for` writes them;
/// `approvals_consumed_idx` finds one).
fn approval_sql(read: &ApprovalRead<'_>) -> String {
    let tool = text_sql(read.tool);
    let call = text_sql(read.call_id);
    let input = text_sql(&read.input.to_string());
    format!(
        ", (SELECT mode FROM tool_approval_policy WHERE tool = {tool} OR tool = '*' \
              ORDER BY (tool = '*') LIMIT 1) AS approval_mode, \
           EXISTS (SELECT 1 FROM approvals WHERE consumer_turn_id = '{turn}' \
              AND call_id = {call} AND state = 'approved' AND user_id = '{user}' \
              AND thread_id = '{thread}' AND input = ({input})::jsonb) AS approved",
        turn = read.turn.as_uuid(),
        user = read.user.as_uuid(),
        thread = read.thread.as_uuid(),
    )
}

fn call_sql(school_id: SchoolId, reads: CallReads<'_>) -> String {
    let mut sql = begin_sql(school_id);
    let school = school_id.as_uuid();
    let mut context = format!(
        "SELECT {BYPASSES_RLS} AS bypasses_rls, EXISTS (SELECT 1 FROM schools) AS school_exists"
    );
    if reads.policy {
        context.push_str(&format!(", {POLICY_VERSION} AS policy_version"));
    }
    if let Some(read) = &reads.approval {
        context.push_str(&approval_sql(read));
    }
    if let Some(call_id) = reads.inbox {
        let call = call_id_sql(call_id);
        // The same lock key as `inbox::find`, so both paths serialise one call id.
        sql.push_str(&format!(
            "; SELECT pg_advisory_xact_lock(hashtextextended('{school}' || '/' || {call}, 0))"
        ));
        context.push_str(&format!(
            ", i.reply AS stored_reply, i.event AS stored_event, i.actor_user_id AS stored_actor \
             FROM (SELECT 1) AS one LEFT JOIN tool_call_inbox i ON i.call_id = {call}"
        ));
    }
    sql.push_str("; ");
    sql.push_str(&context);
    if reads.policy {
        sql.push_str("; ");
        sql.push_str(&policy_rows_sql(reads.policy_cached));
    }
    sql
}

/// The policy rows and role assignments (in [`LOAD_SQL`]'s order) only when the school's policy
/// version is not `cached` — the version itself is read before, in the context row (`-1`: no
/// version, so the rows always come). Read after the version, the rows are never older than it:
/// rows newer than the version read only cost the next call a re-read.
fn policy_rows_sql(cached: Option<i64>) -> String {
    let cached = cached.unwrap_or(-1);
    format!(
        "SELECT true AS is_policy, role, action, subject, NULL::uuid AS user_id \
           FROM authz_policies WHERE {POLICY_VERSION} <> {cached} \
         UNION ALL \
         SELECT false, role, NULL, NULL, user_id FROM role_assignments \
           WHERE {POLICY_VERSION} <> {cached} \
         ORDER BY 1 DESC, 5, 2, 3, 4"
    )
}

/// The current school's policy version: `policy_versions` counts from 1, a school without a row
/// is 0.
const POLICY_VERSION: &str = "coalesce((SELECT version FROM policy_versions), 0)";

/// Records a successful write's audit row and its inbox row (the reply, the event and the actor)
/// in one statement, in the write's transaction.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", event = entry.event))]
pub async fn finish_write(
    tx: &mut TenantTx,
    entry: &AuditEntry<'_>,
    call_id: &ToolCallId,
    reply: &Value,
) -> Result<(), DomainError> {
    let school = tx.school_uuid();
    sqlx::query(
        "WITH audit AS (INSERT INTO audit_log (school_id, campus_id, actor_user_id, actor_email, \
         event, subject_id, call_id, trace_id, before, after) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)) \
         INSERT INTO tool_call_inbox (school_id, call_id, event, reply, actor_user_id) \
         VALUES ($1, $7, $5, $11, $3)",
    )
    .bind(school)
    .bind(entry.scope.run_mode.campus().map(|c| c.id.as_uuid()))
    .bind(entry.actor.user_id.as_uuid())
    .bind(&entry.actor.email)
    .bind(entry.event)
    .bind(&entry.change.subject_id)
    .bind(call_id.as_str())
    .bind(entry.trace_id)
    .bind(&entry.change.before)
    .bind(&entry.change.after)
    .bind(reply)
    .execute(tx.connection())
    .await?;
    Ok(())
}
