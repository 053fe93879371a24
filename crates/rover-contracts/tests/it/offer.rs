//! The offer rule: which RPC tools Rover, a subagent, or every agent of a turn (MCP) is offered,
//! from the caller's capabilities and permission snapshot.

use rover_contracts::context::{Capabilities, Subagent};
use rover_contracts::permission::{Action, Permission, PermissionSnapshot, Subject};
use rover_contracts::tools::{Offer, Owner, REGISTRY, ToolKind, offered};

use crate::fixtures::teacher_context;

fn names(
    tools: impl Iterator<Item = &'static rover_contracts::tools::ToolContract>,
) -> Vec<&'static str> {
    tools.map(|c| c.name).collect()
}

fn every_permission() -> PermissionSnapshot {
    PermissionSnapshot::new(
        Action::ALL
            .iter()
            .flat_map(|a| Subject::ALL.iter().map(|s| Permission::new(*a, *s)))
            .collect(),
    )
}

#[test]
fn rover_is_offered_its_rpc_tools_whose_permission_the_snapshot_holds() {
    let mut context = teacher_context();
    // The fixture's snapshot holds read:Department only.
    assert_eq!(names(offered(&context, Offer::Rover)), ["list_departments"]);
    context.user_permissions = PermissionSnapshot::default();
    assert!(names(offered(&context, Offer::Rover)).is_empty());
    context.user_permissions = every_permission();
    let expected: Vec<_> = REGISTRY
        .iter()
        .filter(|c| c.owner == Owner::Rover && matches!(c.kind, ToolKind::Rpc { .. }))
        .map(|c| c.name)
        .collect();
    assert_eq!(names(offered(&context, Offer::Rover)), expected);
}

#[test]
fn a_subagent_is_offered_its_own_tools_only_when_the_caller_has_it() {
    let mut context = teacher_context();
    context.user_permissions = every_permission();
    for role in Subagent::ALL {
        let own: Vec<_> = REGISTRY
            .iter()
            .filter(|c| c.owner == Owner::Subagent(role) && matches!(c.kind, ToolKind::Rpc { .. }))
            .map(|c| c.name)
            .collect();
        assert!(!own.is_empty(), "{role:?} has RPC tools");
        let mut with = context.clone();
        with.capabilities = Capabilities::default();
        assert!(
            names(offered(&with, Offer::Subagent(role))).is_empty(),
            "{role:?} without the capability"
        );
        with.capabilities = Capabilities {
            class_teacher: role == Subagent::ClassTeacher,
            subject_teacher: role == Subagent::SubjectTeacher,
            director_of_studies: role == Subagent::DirectorOfStudies,
        };
        assert_eq!(
            names(offered(&with, Offer::Subagent(role))),
            own,
            "{role:?}"
        );
    }
}

#[test]
fn a_subagent_tool_needs_its_permission_too() {
    let mut context = teacher_context();
    context.capabilities.director_of_studies = true;
    let gated: Vec<_> = REGISTRY
        .iter()
        .filter(|c| c.owner == Owner::Subagent(Subagent::DirectorOfStudies))
        .filter(|c| c.required_permission().is_some())
        .collect();
    assert!(
        !gated.is_empty(),
        "the director of studies has policy tools"
    );
    context.user_permissions = PermissionSnapshot::default();
    let offer: Vec<_> = names(offered(
        &context,
        Offer::Subagent(Subagent::DirectorOfStudies),
    ));
    for tool in &gated {
        assert!(
            !offer.contains(&tool.name),
            "{} offered without its permission",
            tool.name
        );
    }
    context.user_permissions = every_permission();
    let offer: Vec<_> = names(offered(
        &context,
        Offer::Subagent(Subagent::DirectorOfStudies),
    ));
    for tool in &gated {
        assert!(
            offer.contains(&tool.name),
            "{} not offered with its permission",
            tool.name
        );
    }
}

#[test]
fn every_agent_is_rover_and_each_subagent_the_caller_has_in_catalogue_order() {
    let base = teacher_context();
    for bits in 0..8u8 {
        for snapshot in [
            PermissionSnapshot::default(),
            base.user_permissions.clone(),
            every_permission(),
        ] {
            let mut context = base.clone();
            context.capabilities = Capabilities {
                class_teacher: bits & 1 != 0,
                subject_teacher: bits & 2 != 0,
                director_of_studies: bits & 4 != 0,
            };
            context.user_permissions = snapshot;
            let agents: Vec<Offer> = std::iter::once(Offer::Rover)
                .chain(context.capabilities.subagents().map(Offer::Subagent))
                .collect();
            let expected: Vec<_> = REGISTRY
                .iter()
                .filter(|c| agents.iter().any(|a| a.includes(&context, c)))
                .map(|c| c.name)
                .collect();
            assert_eq!(
                names(offered(&context, Offer::EveryAgent)),
                expected,
                "capabilities {bits:03b}"
            );
        }
    }
}

#[test]
fn local_tools_are_never_offered() {
    let mut context = teacher_context();
    context.capabilities = Capabilities {
        class_teacher: true,
        subject_teacher: true,
        director_of_studies: true,
    };
    context.user_permissions = every_permission();
    let offer = [Offer::Rover, Offer::EveryAgent]
        .into_iter()
        .chain(Subagent::ALL.map(Offer::Subagent));
    for offer in offer {
        for tool in offered(&context, offer) {
            assert!(
                matches!(tool.kind, ToolKind::Rpc { .. }),
                "{} is local",
                tool.name
            );
        }
    }
    let every = names(offered(&context, Offer::EveryAgent));
    let rpc = REGISTRY
        .iter()
        .filter(|c| matches!(c.kind, ToolKind::Rpc { .. }))
        .count();
    assert_eq!(
        every.len(),
        rpc,
        "every RPC tool, to a caller who has everything"
    );
}
