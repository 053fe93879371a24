//! Warming a model server's prompt cache (`model.warm_prompt_cache`): when the worker starts, one
//! small request whose system prompt is the fixed rules every Rover prompt opens with, so a server
//! that caches prompt prefixes (llama.cpp's `llama-server`) has read them before the first turn.
//! The rest of a turn's first prompt — the caller's tools, roster, context and the tools' schemas
//! — still has to be read then.

use std::time::{Duration, Instant};

use rover_contracts::context::{
    Calendar, Capabilities, RunMode, RuntimeContext, SchoolRef, UserDetails, UserType,
};
use rover_contracts::ids::{AcademicYearId, ProfileId, SchoolId, UserId};
use rover_contracts::permission::PermissionSnapshot;
use serde_json::{Value, json};

use crate::model::{ModelClient, ModelError};
use crate::prompt;

/// The fixed start of Rover's system prompt, the same for every caller: who Rover is and its
/// rules, up to (not including) the caller's tool inventory. Read from the prompt itself, so it
/// cannot drift from what turns send.
pub fn rules_prefix() -> String {
    let whole = prompt::supervisor(&nobody(), &[], &[], &[]);
    match whole.split_once(prompt::TOOLS_HEADING) {
        Some((rules, _)) => rules.to_owned(),
        None => whole,
    }
}

/// The warm-up request's messages: the rules prefix as the system prompt, and a short message
/// (some chat templates refuse a conversation without one).
pub fn messages() -> Vec<Value> {
    vec![
        json!({ "role": "system", "content": rules_prefix() }),
        json!({ "role": "user", "content": "Hello." }),
    ]
}

/// Sends the warm-up request to the primary endpoint and answers how long it took.
pub async fn warm_prompt_cache(model: &ModelClient) -> Result<Duration, ModelError> {
    let started = Instant::now();
    model.warm(&messages()).await?;
    Ok(started.elapsed())
}

/// A caller with nothing: only the text before the tool inventory is kept, which names no one.
fn nobody() -> RuntimeContext {
    RuntimeContext {
        user_details: UserDetails {
            name: String::new(),
            email: String::new(),
            user_id: UserId::new(),
            profile_id: ProfileId::new(),
            user_type: UserType::Administrator,
            school: SchoolRef {
                id: SchoolId::new(),
                name: String::new(),
            },
            campus: None,
        },
        run_mode: RunMode::School,
        user_permissions: PermissionSnapshot::new(Vec::new()),
        capabilities: Capabilities::default(),
        calendar: Calendar {
            time_zone: "UTC".to_owned(),
            academic_year_id: AcademicYearId::new(),
            academic_year: String::new(),
            terms: Vec::new(),
        },
        teaching_map: None,
        attachments: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_prefix_is_the_fixed_start_of_rovers_prompt_and_names_no_caller() {
        let prefix = rules_prefix();
        assert!(prefix.starts_with("You are Rover"), "{prefix}");
        assert!(prefix.contains("Rules:"), "{prefix}");
        assert!(!prefix.contains(prompt::TOOLS_HEADING), "{prefix}");
        assert!(!prefix.contains("runtime_context"), "{prefix}");
        // Any caller's prompt opens with it.
        let mut caller = nobody();
        caller.user_details.name = "Grace Atim".to_owned();
        caller.capabilities.class_teacher = true;
        let theirs = prompt::supervisor(&caller, &[], &[], &[]);
        assert!(theirs.starts_with(&prefix));
        assert!(theirs[prefix.len()..].starts_with(prompt::TOOLS_HEADING));
    }
}
