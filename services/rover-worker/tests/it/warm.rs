//! `model.warm_prompt_cache`: a worker that starts with it on sends the model server one small
//! request of the rules every Rover prompt opens with, in the background; without it, none. Either
//! way turns run, and their `finish` names the model that answered.

use std::time::Duration;

use serde_json::Value;

use crate::helpers::{Knobs, Stack, spawn_stack, spawn_stack_with};

/// The requests the scripted model got that were warm-ups (`max_tokens` 1, not streamed).
async fn warm_ups(stack: &Stack) -> Vec<Value> {
    stack
        .model_requests()
        .await
        .into_iter()
        .filter(|request| request.get("max_tokens").is_some())
        .collect()
}

#[tokio::test]
async fn the_worker_warms_the_prompt_cache_with_the_rules_only_when_asked() {
    let on = spawn_stack_with(Knobs {
        warm_prompt_cache: true,
        ..Knobs::default()
    })
    .await;
    let off = spawn_stack().await;

    // On: one warm-up arrives soon after start, by itself (no turn asked for it).
    let mut sent = Vec::new();
    for _ in 0..100 {
        sent = warm_ups(&on).await;
        if !sent.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(sent.len(), 1, "{sent:#?}");
    let warm_up = &sent[0];
    assert_eq!(warm_up["max_tokens"], 1);
    assert_eq!(warm_up["stream"], false);
    assert_eq!(warm_up["model"], "rover-scripted");
    assert_eq!(warm_up["messages"][0]["role"], "system");
    let rules = rover_agent::warm::rules_prefix();
    assert_eq!(warm_up["messages"][0]["content"], rules.as_str());

    // A turn's system prompt opens with exactly those rules: what was warmed is its prefix.
    let turn = on.turn("admin@hill.school", "List the departments").await;
    assert_eq!(turn.tool_names(), ["list_departments"]);
    assert_eq!(turn.model().as_deref(), Some("rover-scripted"));
    let requests = on.model_requests().await;
    let first_turn_request = requests
        .iter()
        .find(|request| request.get("max_tokens").is_none())
        .expect("the turn's model request");
    let system = first_turn_request["messages"][0]["content"]
        .as_str()
        .expect("a system prompt");
    assert!(system.starts_with(&rules), "{system}");
    assert_eq!(warm_ups(&on).await.len(), 1, "one warm-up per start");

    // Off: a turn runs, and no warm-up was ever sent.
    let turn = off.turn("admin@hill.school", "List the departments").await;
    assert_eq!(turn.tool_names(), ["list_departments"]);
    assert_eq!(turn.model().as_deref(), Some("rover-scripted"));
    assert!(!off.model_requests().await.is_empty());
    assert_eq!(warm_ups(&off).await, Vec::<Value>::new());
}
