//! MCP at `/mcp`, driven by the official MCP TypeScript SDK (`tests/node/mcp.mjs`): the tools a
//! caller is listed follow their live rows, and a call goes through the tool server's `execute()`
//! — audit row, denial, another school's id — with the envelope as `structuredContent`. Without
//! a valid token: 401 and the challenge naming the protected-resource metadata.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Command;

use crate::node::{node_packages, run};
use crate::stack::Stack;

const MCP_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `steps` through the SDK's client as `token` (`"-"`: none); returns the script's report.
async fn mcp(stack: &Stack, token: &str, steps: Value) -> Value {
    let dir = node_packages().await;
    let mut node = Command::new("node");
    node.current_dir(&dir).args([
        "mcp.mjs",
        &format!("http://{}", stack.gateway),
        token,
        &steps.to_string(),
    ]);
    let output = run(node, "node mcp.mjs", MCP_TIMEOUT).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the MCP client failed ({}):\n{stderr}\n{stdout}",
        output.status
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the script's report is not JSON ({e}):\n{stdout}\n{stderr}"))
}

/// Runs `steps` as the demo user `email`, who must connect.
async fn mcp_as(stack: &Stack, email: &str, steps: Value) -> Vec<Value> {
    let report = mcp(stack, &stack.token(email), steps).await;
    assert!(report["connectError"].is_null(), "{report:#}");
    // The SDK's newest version; rmcp speaks it too (2026-07-28 is newer than the SDK knows).
    assert_eq!(report["protocolVersion"], "2025-11-25", "{report:#}");
    assert_eq!(report["server"]["name"], "rover", "{report:#}");
    report["steps"].as_array().unwrap().clone()
}

/// The names of a list step's tools.
fn names(step: &Value) -> BTreeSet<String> {
    step["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool list: {step:#}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

/// A call step's result, checked against the shape MCP promises: `structuredContent` valid
/// against the listed `outputSchema`, the same JSON as the text block, `isError` iff `{"error"}`.
fn envelope(step: &Value) -> &Value {
    assert_eq!(step["schemaValid"], true, "{step:#}");
    unlisted_envelope(step)
}

/// [`envelope`] for a tool the caller was not listed (so the client holds no `outputSchema`).
fn unlisted_envelope(step: &Value) -> &Value {
    let result = &step["result"];
    assert!(step["thrown"].is_null(), "{step:#}");
    let structured = &result["structuredContent"];
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(&text, structured, "{step:#}");
    assert_eq!(
        result["isError"].as_bool(),
        Some(structured.get("error").is_some()),
        "{step:#}"
    );
    structured
}

const ADMIN_TOOLS: &[&str] = &[
    "list_departments",
    "create_department",
    "rename_department",
    "list_classes",
    "find_students",
    "get_enrollment_summary",
    "list_staff",
];

#[tokio::test]
async fn mcp_clients_get_the_callers_tools_through_execute() {
    let stack = Stack::start().await;
    let hill = stack.db.ids.hill.as_uuid();
    let lakeside_sciences = stack.db.ids.department("Sciences");

    let steps = mcp_as(
        &stack,
        "admin@hill.school",
        json!([
            { "op": "list" },
            { "op": "call", "name": "list_departments" },
            { "op": "call", "name": "create_department", "arguments": { "name": "Robotics" } },
            // Another school's id: refused as not found, nothing of it returned or changed.
            { "op": "call", "name": "rename_department",
              "arguments": { "department": lakeside_sciences, "newName": "Hijacked" } },
            // Local tools belong to the agent loop; they are not served.
            { "op": "call", "name": "ask_user", "arguments": { "question": "?" } },
        ]),
    )
    .await;
    assert_eq!(names(&steps[0]), set(ADMIN_TOOLS), "{:#}", steps[0]);
    for tool in steps[0]["tools"].as_array().unwrap() {
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool:#}");
        assert_eq!(tool["outputSchema"]["type"], "object", "{tool:#}");
    }

    let listed = envelope(&steps[1]);
    let departments: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert!(departments.contains(&"Languages"), "{listed:#}");
    assert!(!departments.contains(&"Sciences"), "Lakeside's: {listed:#}");
    assert_eq!(listed["scopeContext"], "across the whole school");

    let created = envelope(&steps[2]);
    assert_eq!(created["data"]["name"], "Robotics", "{created:#}");
    assert_eq!(
        stack
            .count(&format!(
                "SELECT count(*) FROM departments WHERE name = 'Robotics' AND school_id = '{hill}'"
            ))
            .await,
        1
    );
    // The write is audited once, as the caller, under a call id of its own signed turn.
    assert_eq!(
        stack
            .count(&format!(
                "SELECT count(*) FROM audit_log WHERE event = 'create.department' \
                 AND actor_email = 'admin@hill.school' AND school_id = '{hill}' \
                 AND call_id LIKE '%/mcp'"
            ))
            .await,
        1
    );

    let refused = envelope(&steps[3]);
    // Exactly what an id that does not exist gets: nothing says the department is elsewhere.
    assert_eq!(
        refused["error"], "No department with that id was found here.",
        "{refused:#}"
    );
    assert_eq!(
        stack
            .count("SELECT count(*) FROM departments WHERE name = 'Hijacked'")
            .await,
        0
    );
    assert_eq!(
        stack
            .count("SELECT count(*) FROM audit_log WHERE event = 'rename.department'")
            .await,
        0
    );
    assert!(
        steps[4]["thrown"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("ask_user")),
        "{:#}",
        steps[4]
    );

    // Teachers are listed the RPC tools of the subagents their live relationships give them, the
    // policy tools their role allows, and none of the administrator's writes or local tools: a
    // subject teacher (Okello) five, fewer than the administrator's seven; a class teacher who
    // also teaches (Amina) the class teacher's tools too.
    let steps = mcp_as(&stack, "okello@hill.school", json!([{ "op": "list" }])).await;
    let okello = names(&steps[0]);
    assert_eq!(
        okello,
        set(&[
            "list_departments",
            "list_classes",
            "list_my_classes",
            "record_marks",
            "get_class_marks"
        ])
    );
    assert!(okello.len() < ADMIN_TOOLS.len());
    let steps = mcp_as(&stack, "amina@hill.school", json!([{ "op": "list" }])).await;
    assert_eq!(
        names(&steps[0]),
        set(&[
            "list_departments",
            "list_classes",
            "get_class_roster",
            "record_attendance",
            "list_my_classes",
            "record_marks",
            "get_class_marks",
        ])
    );

    // The bursar reads students only; a call to an unlisted tool still reaches the tool server,
    // whose live policy refuses it, and nothing is written.
    let steps = mcp_as(
        &stack,
        "bursar@hill.school",
        json!([
            { "op": "list" },
            { "op": "call", "name": "create_department", "arguments": { "name": "Bursary" } },
        ]),
    )
    .await;
    assert_eq!(
        names(&steps[0]),
        set(&["find_students", "get_enrollment_summary"])
    );
    let denied = unlisted_envelope(&steps[1]);
    assert_eq!(
        denied["error"], "Permission denied: create:Department",
        "{denied:#}"
    );
    assert_eq!(
        stack
            .count("SELECT count(*) FROM departments WHERE name = 'Bursary'")
            .await,
        0
    );
    assert_eq!(
        stack
            .count("SELECT count(*) FROM audit_log WHERE actor_email = 'bursar@hill.school'")
            .await,
        0
    );

    // A permission row granted live changes the very next list, and the call goes through.
    sqlx::query(
        "INSERT INTO authz_policies (school_id, role, action, subject) \
         VALUES ($1, 'bursar', 'read', 'Department')",
    )
    .bind(hill)
    .execute(&stack.owner)
    .await
    .unwrap();
    let steps = mcp_as(
        &stack,
        "bursar@hill.school",
        json!([{ "op": "list" }, { "op": "call", "name": "list_departments" }]),
    )
    .await;
    assert_eq!(
        names(&steps[0]),
        set(&[
            "list_departments",
            "find_students",
            "get_enrollment_summary"
        ])
    );
    assert!(envelope(&steps[1])["data"].is_array(), "{:#}", steps[1]);
}

#[tokio::test]
async fn mcp_needs_a_bearer_token_and_says_where_to_get_one() {
    let stack = Stack::start().await;
    let base = format!("http://{}", stack.gateway);
    let challenge =
        format!(r#"Bearer resource_metadata="{base}/.well-known/oauth-protected-resource""#);
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": { "name": "curl", "version": "1" } }
    });
    let post = |token: Option<&str>| {
        let mut request = stack
            .http
            .post(format!("{base}/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };

    let response = post(None).await.unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(response.headers()["www-authenticate"], challenge.as_str());
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthenticated", "{body:#}");

    let response = post(Some("not-a-jwt")).await.unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(
        response.headers()["www-authenticate"],
        format!(r#"{challenge}, error="invalid_token""#).as_str()
    );

    // A valid token is served (the answer to `initialize`).
    let response = post(Some(&stack.token("admin@hill.school"))).await.unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["result"]["serverInfo"]["name"], "rover", "{body:#}");

    // The protected-resource metadata (RFC 9728), public, at both well-known paths.
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let response = stack
            .http
            .get(format!("{base}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let metadata: Value = response.json().await.unwrap();
        assert_eq!(metadata["resource"], format!("{base}/mcp"), "{metadata:#}");
        assert_eq!(metadata["authorization_servers"], json!(["rover-dev"]));
        assert_eq!(metadata["bearer_methods_supported"], json!(["header"]));
    }

    // A `Host` that is not this server's (DNS rebinding) is refused even with a valid token.
    let response = stack
        .http
        .post(format!("{base}/mcp"))
        .header("host", "attacker.example")
        .header("accept", "application/json, text/event-stream")
        .bearer_auth(stack.token("admin@hill.school"))
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);

    // The real client, without a token, cannot connect.
    let report = mcp(&stack, "-", json!([])).await;
    assert_eq!(report["connectError"]["code"], 401, "{report:#}");
}

/// Runs one `tools/call` through the official SDK v2 (protocol 2026-07-28, elicitation) as the
/// demo user `email`, answering any approval question with `answer`.
async fn mcp_v2(stack: &Stack, email: &str, answer: &str, call: Value) -> Value {
    let dir = node_packages().await;
    let mut node = Command::new("node");
    node.current_dir(&dir).args([
        "mcp-approval.mjs",
        &format!("http://{}", stack.gateway),
        &stack.token(email),
        answer,
        &call.to_string(),
    ]);
    let output = run(node, "node mcp-approval.mjs", MCP_TIMEOUT).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}\n{stdout}");
    let report: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the script's report is not JSON ({e}):\n{stdout}\n{stderr}"));
    assert!(report["thrown"].is_null(), "{report:#}");
    assert_eq!(report["protocolVersion"], "2026-07-28", "{report:#}");
    report
}

#[tokio::test]
async fn mcp_writes_obey_the_schools_approval_policy() {
    let stack = Stack::start().await;
    let hill = stack.db.ids.hill.as_uuid();
    crate::approvals::require_approvals(&stack, hill).await;
    let departments = |name: &str| {
        format!("SELECT count(*) FROM departments WHERE name = '{name}' AND school_id = '{hill}'")
    };
    let audit = "SELECT count(*) FROM audit_log WHERE event = 'create.department'";
    let admin = "admin@hill.school";

    // A client that cannot be asked (SDK v1, 2025-11-25): refused, told why and where, nothing
    // written.
    let steps = mcp_as(
        &stack,
        admin,
        json!([
            { "op": "list" },
            { "op": "call", "name": "create_department", "arguments": { "name": "Unasked" } },
            { "op": "call", "name": "list_departments" },
        ]),
    )
    .await;
    let refused = envelope(&steps[1]);
    let error = refused["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("approval")
            && error.contains("chat")
            && error.contains("Nothing was changed"),
        "{refused:#}"
    );
    assert_eq!(
        envelope(&steps[2])["scopeContext"],
        "across the whole school",
        "reads run"
    );
    assert_eq!(stack.count(&departments("Unasked")).await, 0);
    assert_eq!(stack.count(audit).await, 0);

    // A client that can be asked: the question shows exactly what will run; declining (in any
    // of the three ways) writes nothing.
    let call = json!({ "name": "create_department", "arguments": { "name": "Asked" } });
    for answer in ["decline", "cancel", "refuse"] {
        let report = mcp_v2(&stack, admin, answer, call.clone()).await;
        let asked = report["asked"].as_array().unwrap();
        assert_eq!(asked.len(), 1, "{report:#}");
        let message = asked[0]["message"].as_str().unwrap();
        assert!(
            message.contains("create_department") && message.contains("\"name\": \"Asked\""),
            "{message}"
        );
        assert_eq!(report["result"]["isError"], true, "{report:#}");
        assert!(
            report["result"]["structuredContent"]["error"]
                .as_str()
                .is_some_and(|e| e.contains("declined")),
            "{report:#}"
        );
    }
    assert_eq!(stack.count(&departments("Asked")).await, 0);
    assert_eq!(stack.count(audit).await, 0);

    // Approved: the retried call runs once, with its audit row.
    let report = mcp_v2(&stack, admin, "approve", call).await;
    assert_eq!(report["result"]["isError"], false, "{report:#}");
    assert_eq!(
        report["result"]["structuredContent"]["data"]["name"], "Asked",
        "{report:#}"
    );
    assert_eq!(stack.count(&departments("Asked")).await, 1);
    assert_eq!(stack.count(audit).await, 1);
}
