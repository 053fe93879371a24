//! Approval rules per role, through the real gateway: a school admin sets whose writes wait
//! (`PUT /api/approval-policy`), the caller's most specific rule decides at the next write, and the
//! API is guarded, validated, audited and the school's own — attacked as a teacher who would
//! rather not wait, as a campus-scoped admin, and as another school.

use serde_json::{Value, json};

use crate::checker::sciences;
use crate::stack::{Stack, Turn};

const ADMIN: &str = "admin@hill.school";
const AMINA: &str = "amina@hill.school";

async fn put_rules(stack: &Stack, email: &str, rules: Value) -> reqwest::Response {
    stack
        .http
        .put(format!("http://{}/api/approval-policy", stack.gateway))
        .bearer_auth(stack.token(email))
        .json(&json!({ "rules": rules }))
        .send()
        .await
        .unwrap()
}

async fn get_rules(stack: &Stack, email: &str) -> reqwest::Response {
    stack
        .http
        .get(format!("http://{}/api/approval-policy", stack.gateway))
        .bearer_auth(stack.token(email))
        .send()
        .await
        .unwrap()
}

/// Whether the turn paused on an approval request.
fn waits(turn: &Turn) -> bool {
    !turn.of_type("tool-approval-request").is_empty()
}

#[tokio::test]
async fn the_callers_most_specific_rule_decides_whose_writes_wait() {
    let stack = Stack::start().await;
    // Teachers' writes wait, except their marks; everyone else's run.
    let set = put_rules(
        &stack,
        ADMIN,
        json!([
            { "role": "*", "tool": "*", "mode": "never" },
            { "role": "teacher", "tool": "*", "mode": "always" },
            { "role": "teacher", "tool": "record_marks", "mode": "never" },
        ]),
    )
    .await;
    assert_eq!(set.status(), 200, "{}", set.text().await.unwrap());

    let register = stack
        .say(
            AMINA,
            "chat-rules-register",
            "Record attendance for S1 Blue: everyone present except Nakato",
        )
        .await;
    assert!(
        waits(&register),
        "role and any tool: {:#?}",
        register.chunks
    );
    assert_eq!(stack.count("SELECT count(*) FROM attendance").await, 0);

    let marks = stack
        .say(
            AMINA,
            "chat-rules-marks",
            "Record Mathematics marks for S1 Blue: Nakato 78",
        )
        .await;
    assert!(!waits(&marks), "role and tool: {:#?}", marks.chunks);
    assert_eq!(stack.count("SELECT count(*) FROM marks").await, 1);

    let department = stack
        .say(
            ADMIN,
            "chat-rules-admin",
            "Create a department called Sciences",
        )
        .await;
    assert!(!waits(&department), "the default: {:#?}", department.chunks);
    assert_eq!(sciences(&stack).await, 1);

    // The role's rule for any tool beats any role's rule for the tool.
    let set = put_rules(
        &stack,
        ADMIN,
        json!([
            { "role": "*", "tool": "create_department", "mode": "always" },
            { "role": "school_admin", "tool": "*", "mode": "never" },
        ]),
    )
    .await;
    assert_eq!(set.status(), 200);
    let drama = stack
        .say(
            ADMIN,
            "chat-rules-admin-2",
            "Create a department called Drama",
        )
        .await;
    assert!(!waits(&drama), "{:#?}", drama.chunks);
    // A colleague whose role has no rule (the campus admin): any role's rule for the tool holds.
    let kololo = stack
        .say(
            "kololo.admin@hill.school",
            "chat-rules-campus",
            "Create a department called Music",
        )
        .await;
    assert!(waits(&kololo), "{:#?}", kololo.chunks);
}

#[tokio::test]
async fn the_approval_policy_api_is_guarded_validated_audited_and_the_schools_own() {
    let stack = Stack::start().await;
    let read = get_rules(&stack, ADMIN).await;
    assert_eq!(read.status(), 200);
    let policy: Value = read.json().await.unwrap();
    assert_eq!(
        policy["rules"],
        json!([{ "role": "*", "tool": "*", "mode": "never" }])
    );
    let roles = policy["roles"].as_array().unwrap();
    assert!(roles.contains(&json!("teacher")), "{policy}");
    let tools = policy["tools"].as_array().unwrap();
    assert!(tools.contains(&json!("record_attendance")), "{policy}");
    assert!(!tools.contains(&json!("list_classes")), "reads never wait");

    // A teacher who would rather not wait: neither reads nor changes the rules.
    let wait_less = json!([{ "role": "teacher", "tool": "*", "mode": "never" }]);
    assert_eq!(get_rules(&stack, AMINA).await.status(), 403);
    assert_eq!(
        put_rules(&stack, AMINA, wait_less.clone()).await.status(),
        403
    );
    // A school admin acting within one campus reads them, and may not change the school's.
    let campus = stack.db.ids.campus("Kololo").to_string();
    let scoped = stack
        .http
        .put(format!("http://{}/api/approval-policy", stack.gateway))
        .bearer_auth(stack.token(ADMIN))
        .header("x-rover-campus", &campus)
        .json(&json!({ "rules": wait_less }))
        .send()
        .await
        .unwrap();
    assert_eq!(scoped.status(), 403);

    // Rules that do not fit are refused whole, naming the first that does not.
    for (rules, says) in [
        (
            json!([{ "role": "headmaster", "tool": "*", "mode": "never" }]),
            "the school has no role \\\"headmaster\\\"",
        ),
        (
            json!([{ "role": "*", "tool": "list_classes", "mode": "always" }]),
            "\\\"list_classes\\\" is not a write tool",
        ),
        (
            json!([
                { "role": "*", "tool": "*", "mode": "never" },
                { "role": "*", "tool": "*", "mode": "always" },
            ]),
            "Rule 2",
        ),
        (
            json!([{ "role": "*", "tool": "*", "mode": "sometimes" }]),
            "sometimes",
        ),
        (
            json!([{ "role": "*", "tool": "*", "mode": "never", "school_id": "x" }]),
            "school_id",
        ),
    ] {
        let refused = put_rules(&stack, ADMIN, rules.clone()).await;
        assert_eq!(refused.status(), 400, "{rules}");
        let body = refused.text().await.unwrap();
        assert!(body.contains(says), "{rules}: {body}");
    }
    let audited = "SELECT count(*) FROM audit_log WHERE event = 'update.approval_policy'";
    assert_eq!(stack.count(audited).await, 0, "nothing refused is stored");

    let teachers_wait = json!([
        { "role": "teacher", "tool": "*", "mode": "always" },
        { "role": "*", "tool": "*", "mode": "never" },
    ]);
    let set = put_rules(&stack, ADMIN, teachers_wait).await;
    assert_eq!(set.status(), 200);
    let stored: Value = set.json().await.unwrap();
    assert_eq!(stored["rules"][0]["role"], "teacher", "most specific first");
    assert_eq!(stack.count(audited).await, 1);
    let before_after = stack
        .count(
            "SELECT count(*) FROM audit_log WHERE event = 'update.approval_policy' \
             AND before -> 'rules' -> 0 ->> 'role' = '*' AND after -> 'rules' -> 0 ->> 'role' = 'teacher'",
        )
        .await;
    assert_eq!(before_after, 1);

    // Another school's admin sees their own rules, untouched.
    let lakeside: Value = get_rules(&stack, "admin@lakeside.college")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        lakeside["rules"],
        json!([{ "role": "*", "tool": "*", "mode": "never" }])
    );
}
