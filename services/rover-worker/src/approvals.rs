//! The turn's approval gate: before a write tool call runs, the school's policy (read live) and the
//! call's approval row decide whether it runs, waits for the staff member (a new pending row), or
//! was declined (`rover_domain::approvals`).

use futures::FutureExt as _;
use futures::future::BoxFuture;
use rover_agent::approval::{Gate, GateQuery};
use rover_contracts::wire::{TurnInput, TurnRequest};
use rover_domain::approvals::{ApprovalState, GatedCall};

use crate::Shared;

/// The gate of `request`'s turn.
pub(crate) fn gate(
    shared: &Shared,
    request: &TurnRequest,
) -> impl Fn(GateQuery) -> BoxFuture<'static, Result<Gate, String>> + Send + Sync + use<> {
    let pool = shared.pool.clone();
    let school = request.context.user_details.school.id;
    let user = request.context.user_details.user_id;
    let thread = request.thread_id;
    let mut chain = match &request.input {
        TurnInput::Continue { chain } => chain.clone(),
        _ => Vec::new(),
    };
    chain.push(request.turn_id);
    move |query: GateQuery| {
        let (pool, chain) = (pool.clone(), chain.clone());
        async move {
            let mut tx = rover_domain::begin_tenant(&pool, school)
                .await
                .map_err(|e| e.to_string())?;
            let call = GatedCall {
                thread,
                chain,
                user,
                call_id: query.call_id,
                tool: query.tool,
                input: query.input,
            };
            // An answered call is decided by its row, whatever the policy says now.
            let needs = rover_domain::approvals::needs_approval(&mut tx, &call.tool)
                .await
                .map_err(|e| e.to_string())?;
            let decided = rover_domain::approvals::decided(&mut tx, &call)
                .await
                .map_err(|e| e.to_string())?;
            let state = match decided {
                Some(state) => state,
                None if !needs => {
                    tx.commit().await.map_err(|e| e.to_string())?;
                    return Ok(Gate::Run);
                }
                None => rover_domain::approvals::approval_for(&mut tx, &call)
                    .await
                    .map_err(|e| e.to_string())?,
            };
            tx.commit().await.map_err(|e| e.to_string())?;
            Ok(match state {
                ApprovalState::Pending { approval_id } => Gate::Pending {
                    approval_id: approval_id.to_string(),
                },
                ApprovalState::Approved => Gate::Run,
                ApprovalState::Denied { reason } => Gate::Denied { reason },
                ApprovalState::Void => Gate::Refused(
                    "This action was not approved for this request (the approval was used, \
                     expired, or was for other details), so it was not done."
                        .to_owned(),
                ),
            })
        }
        .boxed()
    }
}
