//! The agent is built per turn from live rows, and its prompt cannot drift from what the model is
//! given: the inventory lists exactly the tools sent, the roster exactly the subagents built.

use std::collections::BTreeSet;

use rover_agent::prompt::{cannot, inventory, roster};
use rover_agent::skills::SkillLibrary;
use rover_agent::{Mounts, build_agent};
use rover_domain::seed::DEMO_USERS;
use serde_json::Value;

use crate::helpers::{skills_dir, spawn_stack};

/// The names of tool definitions, as the worker sends them (borrowed) or as a request carried
/// them (owned).
fn tool_names<V: std::borrow::Borrow<Value>>(definitions: &[V]) -> Vec<String> {
    definitions
        .iter()
        .map(|t| t.borrow()["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// What a prompt cache can reuse: every demo user's prompt starts with the same fixed rules, up
/// to the tool list, and the runtime context (what changes with the caller) comes last.
#[tokio::test]
async fn every_prompt_starts_with_the_same_rules_and_ends_with_the_runtime_context() {
    let stack = spawn_stack().await;
    let skills = SkillLibrary::load(&skills_dir()).unwrap();
    let mut rules = None;
    for email in DEMO_USERS {
        let context = stack.context(email).await;
        let agent = build_agent(&context, &skills, Mounts { sandbox: false });
        let prompts = std::iter::once(&agent).chain(&agent.subagents);
        for prompt in prompts.map(|a| a.system_prompt.as_str()) {
            assert!(
                prompt.ends_with("</runtime_context>\n"),
                "{email}: {prompt}"
            );
            assert_eq!(prompt.matches("<runtime_context>").count(), 1);
        }
        let (fixed, _) = agent
            .system_prompt
            .split_once(rover_agent::prompt::TOOLS_HEADING)
            .expect("a tool list");
        assert!(
            fixed.contains("never write a tool's result")
                || fixed.contains("Never write a tool's result")
        );
        assert_eq!(
            rules.get_or_insert_with(|| fixed.to_owned()),
            fixed,
            "{email}: the rules before the tool list differ"
        );
    }
}

#[tokio::test]
async fn for_every_demo_user_the_inventory_is_the_tools_and_the_roster_is_the_subagents() {
    let stack = spawn_stack().await;
    let skills = SkillLibrary::load(&skills_dir()).unwrap();
    for email in DEMO_USERS {
        let context = stack.context(email).await;
        for sandbox in [false, true] {
            let agent = build_agent(&context, &skills, Mounts { sandbox });
            let sent = tool_names(&agent.tool_definitions());
            assert_eq!(
                inventory(&agent.system_prompt),
                sent,
                "{email}: inventory drifted"
            );
            let built: Vec<&str> = agent
                .subagents
                .iter()
                .map(rover_agent::Agent::name)
                .collect();
            assert_eq!(
                roster(&agent.system_prompt),
                built,
                "{email}: roster drifted"
            );
            assert_eq!(
                built.is_empty(),
                !sent.contains(&"task".to_owned()),
                "{email}: task exists iff a subagent does"
            );
            // Rover holds exactly its specialists' own tools (their RPC ones), each marked with
            // the specialist that makes its calls.
            let held: BTreeSet<(&str, &str)> = agent
                .tools
                .iter()
                .filter_map(|t| Some((t.contract.name, t.via?.name())))
                .collect();
            let theirs: BTreeSet<(&str, &str)> = agent
                .subagents
                .iter()
                .flat_map(|s| s.tools.iter().map(move |t| (t, s.name())))
                .filter(|(t, _)| t.contract.event().is_some())
                .map(|(t, owner)| (t.contract.name, owner))
                .collect();
            assert_eq!(held, theirs, "{email}");
            for subagent in &agent.subagents {
                assert!(subagent.tools.iter().all(|t| t.via.is_none()));
                assert_eq!(
                    inventory(&subagent.system_prompt),
                    tool_names(&subagent.tool_definitions()),
                    "{email} {}",
                    subagent.name()
                );
                assert!(
                    !subagent.system_prompt.contains("You are Rover"),
                    "subagents inherit nothing from Rover"
                );
                assert!(subagent.tools.iter().all(|t| t.contract.name != "task"));
            }
            // Tools whose policy permission is missing from the snapshot are left out.
            for tool in &agent.tools {
                if let Some(permission) = tool.contract.required_permission() {
                    assert!(
                        context.user_permissions.allows(permission),
                        "{email} got {}",
                        tool.contract.name
                    );
                }
            }
        }
    }
}

/// A small model told only what it can do hands the rest to the wrong specialist; so Rover's
/// prompt names, for every demo user, exactly the writes that neither Rover nor any of its
/// specialists was given, and who may make them.
#[tokio::test]
async fn for_every_demo_user_the_prompt_names_exactly_the_writes_they_cannot_make() {
    let stack = spawn_stack().await;
    let skills = SkillLibrary::load(&skills_dir()).unwrap();
    for email in DEMO_USERS {
        let context = stack.context(email).await;
        let agent = build_agent(&context, &skills, Mounts { sandbox: false });
        let given: BTreeSet<&str> = agent
            .tools
            .iter()
            .chain(agent.subagents.iter().flat_map(|s| &s.tools))
            .map(|t| t.contract.name)
            .collect();
        let missing: Vec<String> = rover_contracts::tools::REGISTRY
            .iter()
            .filter(|c| {
                c.effect == rover_contracts::tools::Effect::Write
                    && c.event().is_some()
                    && !given.contains(c.name)
            })
            .map(|c| rover_agent::prompt::doing(c))
            .collect();
        assert_eq!(cannot(&agent.system_prompt), missing, "{email}");
        // In words, never by a tool's name: a small model calls what it sees named.
        let (_, section) = agent
            .system_prompt
            .split_once(rover_agent::prompt::CANNOT_HEADING)
            .unwrap_or_default();
        for contract in rover_contracts::tools::REGISTRY
            .iter()
            .filter(|c| c.event().is_some())
        {
            assert!(
                !section.contains(contract.name),
                "{email}: {} named in {section}",
                contract.name
            );
        }
    }
    let okello = build_agent(
        &stack.context("okello@hill.school").await,
        &skills,
        Mounts { sandbox: false },
    );
    let (_, section) = okello
        .system_prompt
        .split_once(rover_agent::prompt::CANNOT_HEADING)
        .unwrap();
    assert!(
        section.contains("- recording attendance — only a class's class teacher may"),
        "{section}"
    );
    assert!(section.contains("- assigning a subject teacher — their roles do not allow it"));
}

#[tokio::test]
async fn what_the_model_is_shown_matches_the_prompts_inventory() {
    let stack = spawn_stack().await;
    stack
        .turn(
            "amina@hill.school",
            "Record attendance for S1 Blue: everyone present except Nakato",
        )
        .await;
    let requests = stack.model_requests().await;
    assert!(
        requests.len() >= 3,
        "Rover and the subagent both called the model"
    );
    for request in requests {
        let system = request["messages"][0]["content"].as_str().unwrap();
        let offered = request["tools"]
            .as_array()
            .map(|t| tool_names(t))
            .unwrap_or_default();
        assert_eq!(inventory(system), offered);
    }
}

#[tokio::test]
async fn a_role_change_between_two_turns_changes_the_tools_offered() {
    let stack = spawn_stack().await;
    let offered = |requests: &[Value]| -> BTreeSet<String> {
        requests
            .last()
            .and_then(|r| r["tools"].as_array())
            .map(|t| tool_names(t).into_iter().collect())
            .unwrap_or_default()
    };
    stack
        .turn("bursar@hill.school", "List the departments")
        .await;
    let before = offered(&stack.model_requests().await);
    assert!(!before.contains("list_departments"), "{before:?}");

    sqlx::query(
        "INSERT INTO role_assignments (school_id, user_id, role) VALUES ($1, $2, 'school_admin')",
    )
    .bind(stack.db.ids.hill.as_uuid())
    .bind(stack.db.ids.user("bursar@hill.school").as_uuid())
    .execute(&stack.owner)
    .await
    .unwrap();
    let turn = stack
        .turn("bursar@hill.school", "List the departments")
        .await;
    let after = offered(&stack.model_requests().await);
    assert!(
        after.contains("list_departments") && after.contains("create_department"),
        "{after:?}"
    );
    assert_eq!(turn.tool_names(), ["list_departments"]);
}

#[tokio::test]
async fn a_skill_with_bad_front_matter_fails_start_up_naming_the_file() {
    let dir = std::env::temp_dir().join(format!("rover-bad-skills-{}", uuid::Uuid::new_v4()));
    let skill = dir.join("rover/broken");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(skill.join("SKILL.md"), "---\nname: [unclosed\n---\nbody\n").unwrap();
    let keys = rover_testkit::TurnKeys::generate();
    let mut settings = rover_worker::Settings::default();
    settings.identity.public_key_file = Some(keys.public_key_file());
    settings.agent.skills_dir = dir.clone();
    let error = rover_worker::App::build(settings).await.unwrap_err();
    let text = format!("{error:#}");
    assert!(text.contains("rover/broken/SKILL.md"), "{text}");
    std::fs::remove_dir_all(dir).unwrap();
}
