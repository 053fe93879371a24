//! Approval before writes: the per-school policy (which write tools need the staff member's
//! approval), the pending approvals a paused turn leaves, the staff member's answer to them, and
//! what a turn that continues a paused one reads (the history before the paused chain, its first
//! message and its journal).

use rover_contracts::ids::{ThreadId, TurnId, UserId};
use serde_json::Value;

use rover_domain::{DomainError, TenantTx};

/// Whether `user`'s write with `tool` needs approval in the caller's school: their most specific
/// rule decides (`rover_approval_mode`, migration `0060`, the very function the tool server's
/// opening query asks): their role and the tool, their role and any tool, any role and the tool,
/// the school's default; with no rule, yes.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", tool))]
pub async fn needs_approval(
    tx: &mut TenantTx,
    tool: &str,
    user: UserId,
) -> Result<bool, DomainError> {
    let mode: Option<String> = sqlx::query_scalar("SELECT rover_approval_mode($1, $2)")
        .bind(tool)
        .bind(user.as_uuid())
        .fetch_one(tx.connection())
        .await?;
    Ok(mode.as_deref() != Some("never"))
}

/// A write call a turn is about to run, as the approval gate sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct GatedCall {
    /// The chat.
    pub thread: ThreadId,
    /// The turn asking, and its chain (root first, the turn itself last).
    pub chain: Vec<TurnId>,
    /// The staff member whose turn it is: the only one who may answer.
    pub user: UserId,
    /// The call id, unique in the chain.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The arguments the model made: the approval is for exactly these.
    pub input: Value,
}

/// An approval's state, as the turn that asks may act on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalState {
    /// Waiting for the staff member: the turn pauses on it (the id goes to the client).
    Pending { approval_id: uuid::Uuid },
    /// Approved, for this very turn and input: run it — with `edited`, the input the staff
    /// member changed it to as they approved, when they did.
    Approved { edited: Option<Value> },
    /// Declined, with the staff member's reason if any.
    Denied { reason: Option<String> },
    /// Approved for another turn or input, or expired: never run.
    Void,
}

/// The stored approval of `call`, if it has one (pending or answered).
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", call_id = %call.call_id))]
pub async fn decided(
    tx: &mut TenantTx,
    call: &GatedCall,
) -> Result<Option<ApprovalState>, DomainError> {
    let Some(root) = call.chain.first() else {
        return Ok(None);
    };
    let exists: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM approvals WHERE root_turn_id = $1 AND call_id = $2)",
    )
    .bind(root.as_uuid())
    .bind(&call.call_id)
    .fetch_one(tx.connection())
    .await?;
    if exists {
        state_of(tx, call).await.map(Some)
    } else {
        Ok(None)
    }
}

/// The approval of `call`: the stored one, or — when there is none — a new pending one, which
/// can be answered for `ttl` (then it expires: migration `0061`).
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", call_id = %call.call_id))]
pub async fn approval_for(
    tx: &mut TenantTx,
    call: &GatedCall,
    ttl: std::time::Duration,
) -> Result<ApprovalState, DomainError> {
    let (Some(root), Some(turn)) = (call.chain.first(), call.chain.last()) else {
        return Err(DomainError::Invalid("A turn without a chain.".to_owned()));
    };
    let school = tx.school_id().as_uuid();
    let chain: Vec<uuid::Uuid> = call
        .chain
        .iter()
        .map(rover_contracts::ids::TurnId::as_uuid)
        .collect();
    sqlx::query(
        "INSERT INTO approvals (school_id, approval_id, thread_id, root_turn_id, turn_id, chain, \
                                call_id, tool, input, user_id, expires_at) \
         VALUES ($1, gen_random_uuid(), $2, $3, $4, $5, $6, $7, $8, $9, \
                 now() + make_interval(secs => $10)) \
         ON CONFLICT (school_id, root_turn_id, call_id) DO NOTHING",
    )
    .bind(school)
    .bind(call.thread.as_uuid())
    .bind(root.as_uuid())
    .bind(turn.as_uuid())
    .bind(&chain)
    .bind(&call.call_id)
    .bind(&call.tool)
    .bind(&call.input)
    .bind(call.user.as_uuid())
    .bind(ttl.as_secs_f64())
    .execute(tx.connection())
    .await?;
    state_of(tx, call).await
}

/// The stored approval of `call`, as the turn asking may act on it.
async fn state_of(tx: &mut TenantTx, call: &GatedCall) -> Result<ApprovalState, DomainError> {
    let (Some(root), Some(turn)) = (call.chain.first(), call.chain.last()) else {
        return Err(DomainError::Invalid("A turn without a chain.".to_owned()));
    };
    // The call is found by what the model proposed: an edited row keeps it in `edited_from`.
    let (approval_id, state, reason, consumer, same_input, edited): (
        uuid::Uuid,
        String,
        Option<String>,
        Option<uuid::Uuid>,
        bool,
        Option<Value>,
    ) = sqlx::query_as(
        "SELECT approval_id, state, reason, consumer_turn_id, \
                coalesce(edited_from, input) = $3 AND user_id = $4, \
                CASE WHEN edited_from IS NOT NULL THEN input END \
         FROM approvals WHERE root_turn_id = $1 AND call_id = $2",
    )
    .bind(root.as_uuid())
    .bind(&call.call_id)
    .bind(&call.input)
    .bind(call.user.as_uuid())
    .fetch_one(tx.connection())
    .await?;
    Ok(match state.as_str() {
        "pending" if same_input => ApprovalState::Pending { approval_id },
        "approved" if same_input && consumer == Some(turn.as_uuid()) => {
            ApprovalState::Approved { edited }
        }
        "denied" => ApprovalState::Denied { reason },
        _ => ApprovalState::Void,
    })
}

/// The staff member's answer to one approval request, as the client sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalAnswer {
    /// The id the approval request carried.
    pub approval_id: uuid::Uuid,
    /// The call it answers.
    pub call_id: String,
    /// The tool the client says the call is for (what an edit was checked against: an edited
    /// answer must name the stored call's tool).
    pub tool: String,
    /// The call's input as the client has it: must be the stored one.
    pub input: Value,
    /// Approved, or declined.
    pub approved: bool,
    /// The input the staff member changed the call to as they approved it (checked against the
    /// tool's schema by the caller): the approval binds to it instead.
    pub edited: Option<Value>,
    /// The staff member's reason, if given.
    pub reason: Option<String>,
}

/// Records `answers` for `turn`, the turn that will continue the paused one: each must name a
/// pending approval of this user's thread, for that very call and input, not past its time, and
/// all the same paused turn. An answer with an edited input binds the approval to that input
/// (`input`), keeping the proposed one in `edited_from`. Returns that turn's chain, or `None` when any answer does not match
/// (then nothing may be recorded: the caller rolls the transaction back; [`timed_out`] says
/// whether it was too late).
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread, answers = answers.len()))]
pub async fn answer(
    tx: &mut TenantTx,
    thread: ThreadId,
    user: UserId,
    turn: TurnId,
    answers: &[ApprovalAnswer],
) -> Result<Option<Vec<TurnId>>, DomainError> {
    let mut chain: Option<Vec<uuid::Uuid>> = None;
    for answer in answers {
        let answered: Option<Vec<uuid::Uuid>> = sqlx::query_scalar(
            "UPDATE approvals SET state = CASE WHEN $6 THEN 'approved' ELSE 'denied' END, \
                 reason = $7, consumer_turn_id = $8, decided_at = now(), \
                 input = coalesce($9, input), \
                 edited_from = CASE WHEN $9 IS DISTINCT FROM input AND $9 IS NOT NULL \
                                    THEN input END \
             WHERE approval_id = $1 AND call_id = $2 AND input = $3 AND user_id = $4 \
               AND thread_id = $5 AND state = 'pending' AND expires_at > now() \
               AND ($9 IS NULL OR tool = $10) \
             RETURNING chain",
        )
        .bind(answer.approval_id)
        .bind(&answer.call_id)
        .bind(&answer.input)
        .bind(user.as_uuid())
        .bind(thread.as_uuid())
        .bind(answer.approved)
        .bind(&answer.reason)
        .bind(turn.as_uuid())
        .bind(answer.edited.as_ref().filter(|_| answer.approved))
        .bind(answer.edited.as_ref().map(|_| answer.tool.as_str()))
        .fetch_optional(tx.connection())
        .await?;
        match (answered, &chain) {
            (None, _) => return Ok(None),
            (Some(found), Some(seen)) if &found != seen => return Ok(None),
            (Some(found), _) => chain = Some(found),
        }
    }
    Ok(chain.map(|c| c.into_iter().map(TurnId::from_uuid).collect()))
}

/// Of `approval_ids`, the first that was this user's in this thread and ran out of time
/// unanswered (still pending past `expires_at`, or expired by the sweep): how long it could be
/// answered, in seconds. `None` when none did.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread))]
pub async fn timed_out(
    tx: &mut TenantTx,
    thread: ThreadId,
    user: UserId,
    approval_ids: &[uuid::Uuid],
) -> Result<Option<i64>, DomainError> {
    Ok(sqlx::query_scalar(
        "SELECT extract(epoch FROM expires_at - created_at)::bigint FROM approvals \
         WHERE approval_id = ANY($1) AND thread_id = $2 AND user_id = $3 \
           AND expires_at <= now() \
           AND (state = 'pending' OR (state = 'expired' AND decided_at >= expires_at)) \
         LIMIT 1",
    )
    .bind(approval_ids)
    .bind(thread.as_uuid())
    .bind(user.as_uuid())
    .fetch_optional(tx.connection())
    .await?)
}

/// The thread's approvals that ran out of time unanswered, and how long each could be answered
/// (seconds): the history read shows their cards as expired.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread))]
pub async fn timed_out_in(
    tx: &mut TenantTx,
    thread: ThreadId,
) -> Result<Vec<(uuid::Uuid, i64)>, DomainError> {
    Ok(sqlx::query_as(
        "SELECT approval_id, extract(epoch FROM expires_at - created_at)::bigint FROM approvals \
         WHERE thread_id = $1 AND expires_at <= now() \
           AND (state = 'pending' OR (state = 'expired' AND decided_at >= expires_at))",
    )
    .bind(thread.as_uuid())
    .fetch_all(tx.connection())
    .await?)
}

/// Expires every school's pending approvals past their time (`rover_expire_approvals`, past
/// row-level security); how many. The worker's sweep calls it.
pub async fn expire_due(pool: &sqlx::PgPool) -> Result<i64, DomainError> {
    Ok(sqlx::query_scalar("SELECT rover_expire_approvals()")
        .fetch_one(pool)
        .await?)
}

/// How a staff member is told an answer came too late, `secs` being how long it could wait.
#[must_use]
pub fn too_late(secs: i64) -> String {
    let waited = match secs {
        s if s >= 3600 && s % 3600 == 0 => plural(s / 3600, "hour"),
        s if s >= 60 && s % 60 == 0 => plural(s / 60, "minute"),
        s => plural(s, "second"),
    };
    format!(
        "That approval expired: nobody answered it within {waited}, so nothing was run. Ask again \
         if it is still needed."
    )
}

fn plural(n: i64, unit: &str) -> String {
    if n == 1 {
        format!("1 {unit}")
    } else {
        format!("{n} {unit}s")
    }
}

/// Expires the thread's pending approvals: the conversation moved on without them.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread))]
pub async fn expire_pending(tx: &mut TenantTx, thread: ThreadId) -> Result<(), DomainError> {
    sqlx::query(
        "UPDATE approvals SET state = 'expired', decided_at = now() \
         WHERE thread_id = $1 AND state = 'pending'",
    )
    .bind(thread.as_uuid())
    .execute(tx.connection())
    .await?;
    Ok(())
}

/// Expires the thread's pending approvals that `turn`'s chain did not ask for: a message queued
/// behind a running reply (double-texting `enqueue`/`interrupt`) moves the conversation past what
/// that reply asked after the message arrived, as any new message does.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread, turn_id = %turn))]
pub async fn expire_pending_before(
    tx: &mut TenantTx,
    thread: ThreadId,
    turn: TurnId,
) -> Result<u64, DomainError> {
    let expired = sqlx::query(
        "UPDATE approvals SET state = 'expired', decided_at = now() \
         WHERE thread_id = $1 AND state = 'pending' AND NOT ($2 = ANY (chain))",
    )
    .bind(thread.as_uuid())
    .bind(turn.as_uuid())
    .execute(tx.connection())
    .await?;
    Ok(expired.rows_affected())
}

/// The thread's history before `root`'s first message, and that message (the staff member's
/// message that started the paused chain).
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", thread_id = %thread, turn_id = %root))]
pub async fn history_before(
    tx: &mut TenantTx,
    thread: ThreadId,
    root: TurnId,
) -> Result<(Vec<Value>, Option<Value>), DomainError> {
    let rows: Vec<(Value, bool)> = sqlx::query_as(
        "SELECT message, turn_id = $2 FROM conversation_log WHERE thread_id = $1 AND position <= \
             (SELECT min(position) FROM conversation_log WHERE thread_id = $1 AND turn_id = $2) \
         ORDER BY position",
    )
    .bind(thread.as_uuid())
    .bind(root.as_uuid())
    .fetch_all(tx.connection())
    .await?;
    let mut history: Vec<Value> = Vec::with_capacity(rows.len());
    let mut first = None;
    for (message, is_root) in rows {
        if is_root {
            first = Some(message);
        } else {
            history.push(message);
        }
    }
    Ok((history, first))
}

/// Approvals pending across every school that can still be answered (not past their time), and
/// how long the oldest has waited in seconds (0 when none): two numbers for the worker's
/// `/metrics`, nothing of any school (`rover_approvals_waiting()`, past row-level security).
pub async fn waiting(pool: &sqlx::PgPool) -> Result<(i64, f64), DomainError> {
    Ok(
        sqlx::query_as("SELECT waiting, oldest_seconds FROM rover_approvals_waiting()")
            .fetch_one(pool)
            .await?,
    )
}

#[cfg(test)]
mod tests {
    use super::too_late;

    #[test]
    fn a_late_answer_says_how_long_the_approval_could_wait() {
        assert!(too_late(86_400).contains("within 24 hours, so nothing was run"));
        assert!(too_late(3_600).contains("within 1 hour,"));
        assert!(too_late(90).contains("within 90 seconds,"));
        assert!(too_late(120).contains("within 2 minutes,"));
    }
}
