//! The staff member's answers to approval requests: the tool parts of the last (assistant)
//! message in state `approval-responded` (`addToolApprovalResponse`), bound server-side to the
//! pending approval they name (`rover_turnstore::approvals::answer`) — to the input as the staff
//! member edited it, when they did (`approval.editedInput`).

use rover_contracts::ErrorCode;
use rover_turnstore::approvals::ApprovalAnswer;
use serde_json::Value;

use crate::error::ApiError;

/// The longest reason kept with an answer.
const MAX_REASON_BYTES: usize = 1024;

/// The approval answers in `parts` (none when the message answers no approval request).
pub(crate) fn answers(parts: &[Value]) -> Result<Vec<ApprovalAnswer>, ApiError> {
    parts
        .iter()
        .filter(|p| p["state"] == "approval-responded")
        .map(|part| {
            let invalid = || {
                ApiError::new(
                    ErrorCode::InvalidRequest,
                    "An approval answer needs the call's toolCallId, input and approval {id, approved}.",
                )
            };
            let approval = &part["approval"];
            let approval_id = approval["id"]
                .as_str()
                .and_then(|id| uuid::Uuid::parse_str(id).ok())
                .ok_or_else(invalid)?;
            let call_id = part["toolCallId"].as_str().ok_or_else(invalid)?.to_owned();
            let approved = approval["approved"].as_bool().ok_or_else(invalid)?;
            let reason = match &approval["reason"] {
                Value::Null => None,
                Value::String(reason) if reason.len() <= MAX_REASON_BYTES => Some(reason.clone()),
                _ => return Err(invalid()),
            };
            let input = part.get("input").cloned().ok_or_else(invalid)?;
            let tool = tool_name(part).ok_or_else(invalid)?.to_owned();
            let edited = match approval.get("editedInput") {
                None | Some(Value::Null) => None,
                Some(edited) if approved => Some(checked_edit(&tool, edited)?),
                // An edit beside a denial changes nothing: nothing runs.
                Some(_) => None,
            };
            Ok(ApprovalAnswer {
                approval_id,
                call_id,
                tool,
                input,
                approved,
                reason,
                edited,
            })
        })
        .collect()
}

/// The tool a part is for: `tool-<name>`, or a dynamic tool's `toolName`.
fn tool_name(part: &Value) -> Option<&str> {
    match part["type"].as_str()? {
        "dynamic-tool" => part["toolName"].as_str(),
        kind => kind.strip_prefix("tool-"),
    }
}

/// The input a staff member edited a proposed write to, as they approved it (`approval.editedInput`,
/// Rover's extension of the AI SDK's answer: a client that only approves or denies never sends
/// it): checked against the tool's schema here, so a bad edit is refused while the approval still
/// waits — and again by the tool server's `execute()` when it runs.
fn checked_edit(tool: &str, edited: &Value) -> Result<Value, ApiError> {
    let contract = rover_contracts::tools::by_name(tool)
        .filter(|c| c.effect == rover_contracts::tools::Effect::Write && c.event().is_some())
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidRequest,
                "Only a write waiting for approval can be edited. Nothing was run.",
            )
        })?;
    contract.check_args(edited).map_err(|error| {
        ApiError::new(
            ErrorCode::InvalidRequest,
            format!(
                "Your edit of {tool} is not valid: {error}. Nothing was run; the approval still \
                 waits for your answer."
            ),
        )
    })?;
    Ok(edited.clone())
}

/// What a POST gets when an answer matches no pending approval of the caller's thread (one that
/// ran out of time is told so: `rover_turnstore::approvals::too_late`).
pub(crate) fn invalid_answer() -> ApiError {
    ApiError::new(
        ErrorCode::ApprovalInvalid,
        "That approval does not match a request waiting in this chat (it was already answered, \
         is for another call or input, or is not yours). Nothing was run.",
    )
}

/// Binds the message's answers to approval requests to `turn`, once: the turn then continues
/// the paused chain (its input becomes `Continue`, its message id the chain's). Anything else
/// the staff member sends moves the chat on, and what still waited for approval expires.
pub(crate) async fn bind(
    tx: &mut rover_domain::TenantTx,
    principal: &crate::auth::Principal,
    thread: rover_contracts::ids::ThreadId,
    turn: rover_contracts::ids::TurnId,
    input: rover_contracts::wire::TurnInput,
    answers: &[ApprovalAnswer],
) -> Result<(rover_contracts::wire::TurnInput, String), ApiError> {
    if answers.is_empty() {
        rover_turnstore::approvals::expire_pending(tx, thread).await?;
        return Ok((input, format!("msg-{turn}")));
    }
    let Some(chain) =
        rover_turnstore::approvals::answer(tx, thread, principal.user_id, turn, answers).await?
    else {
        // Too late is said as such; anything else is one answer for every mismatch.
        let ids: Vec<uuid::Uuid> = answers.iter().map(|a| a.approval_id).collect();
        return Err(
            match rover_turnstore::approvals::timed_out(tx, thread, principal.user_id, &ids).await?
            {
                Some(secs) => ApiError::new(
                    ErrorCode::ApprovalInvalid,
                    rover_turnstore::approvals::too_late(secs),
                ),
                None => invalid_answer(),
            },
        );
    };
    // The continuation adds to the paused chain's assistant message.
    let message_id = format!("msg-{}", chain.first().copied().unwrap_or(turn));
    Ok((
        rover_contracts::wire::TurnInput::Continue { chain },
        message_id,
    ))
}
