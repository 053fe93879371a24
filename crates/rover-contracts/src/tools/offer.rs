//! Which RPC tools a caller is offered: the one rule the worker's agent build and the gateway's MCP
//! listing both apply.
//!
//! A tool is offered when its agent exists this turn (Rover always; a subagent only when the
//! caller's live capabilities give it) and the caller's permission snapshot holds the tool's
//! policy permission, if it has one. The offer is advisory: the tool server decides every call
//! again from live rows.

use crate::context::{RuntimeContext, Subagent};

use super::{Owner, REGISTRY, ToolContract, ToolKind};

/// Whose tools are asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Offer {
    /// The supervisor's own RPC tools.
    Rover,
    /// One subagent's RPC tools (none when the caller's capabilities do not give that subagent).
    Subagent(Subagent),
    /// The RPC tools of every agent of the turn: Rover and each subagent the caller has (the MCP
    /// listing, where one client stands for them all).
    EveryAgent,
}

impl Offer {
    /// The offer of the agent that owns a tool (`Rover`, or that subagent).
    pub const fn of(owner: Owner) -> Self {
        match owner {
            Owner::Rover => Offer::Rover,
            Owner::Subagent(role) => Offer::Subagent(role),
        }
    }

    /// Whether this offer gives `contract` to a caller with `context`: an RPC tool whose agent
    /// the offer covers and exists this turn (Rover always; a subagent only when the caller's
    /// capabilities give it), and whose policy permission (if any) the caller's permission
    /// snapshot holds. A local tool is never part of an offer; the agent adds its own.
    pub fn includes(self, context: &RuntimeContext, contract: &ToolContract) -> bool {
        let ToolKind::Rpc { .. } = contract.kind else {
            return false;
        };
        let agent_exists = match contract.owner {
            Owner::Rover => true,
            Owner::Subagent(role) => context.capabilities.has(role),
        };
        let asked_for = match self {
            Offer::Rover => contract.owner == Owner::Rover,
            Offer::Subagent(role) => contract.owner == Owner::Subagent(role),
            Offer::EveryAgent => true,
        };
        agent_exists
            && asked_for
            && contract
                .required_permission()
                .is_none_or(|p| context.user_permissions.allows(p))
    }
}

/// The RPC tools `offer` gives a caller with this runtime context ([`Offer::includes`]), in
/// catalogue order.
pub fn offered(
    context: &RuntimeContext,
    offer: Offer,
) -> impl Iterator<Item = &'static ToolContract> + '_ {
    REGISTRY
        .iter()
        .copied()
        .filter(move |contract| offer.includes(context, contract))
}
