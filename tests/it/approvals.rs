//! Approval before writes, through the real gateway: a write pauses the turn with
//! `tool-approval-request`, the next POST answers it (`addToolApprovalResponse`'s tool part), and
//! the write runs exactly once — or, declined, never, and the model is told. Answers are bound to
//! the call, its input and the caller: forged, altered, replayed or someone else's change nothing.

use serde_json::{Value, json};

use crate::checker::sciences;
use crate::stack::{Service, Stack, Turn, read_stream};

/// Every write needs approval in `school` (the demo seed lets them run without).
pub(crate) async fn require_approvals(stack: &Stack, school: uuid::Uuid) {
    sqlx::query("DELETE FROM tool_approval_policy WHERE school_id = $1")
        .bind(school)
        .execute(&stack.owner)
        .await
        .unwrap();
}

/// The staff member who asks for the write in these tests.
const EMAIL: &str = "admin@hill.school";

/// A stack where every write in Kampala Hill School needs approval, and a turn of `chat` paused on
/// creating the Sciences department: the stack, the paused turn, its approval request and the
/// call's input.
async fn paused_write(chat: &str) -> (Stack, Turn, Value, Value) {
    let stack = Stack::start().await;
    require_approvals(&stack, stack.db.ids.hill.as_uuid()).await;
    let paused = stack
        .say(EMAIL, chat, "Create a department called Sciences")
        .await;
    let (request, input) = requested(&paused);
    (stack, paused, request, input)
}

/// The answer `addToolApprovalResponse` makes: the tool part, approval-responded.
fn answer(request: &Value, tool: &str, input: &Value, approved: bool) -> Value {
    json!([{ "id": "a1", "role": "assistant", "parts": [{
        "type": format!("tool-{tool}"),
        "toolCallId": request["toolCallId"],
        "state": "approval-responded",
        "input": input,
        "approval": { "id": request["approvalId"], "approved": approved },
    }] }])
}

async fn post_answer(stack: &Stack, email: &str, chat: &str, body: Value) -> reqwest::Response {
    stack
        .post(stack.gateway, &stack.token(email), chat, body)
        .await
}

/// The paused turn's approval request and the input of the call it names.
fn requested(turn: &Turn) -> (Value, Value) {
    let requests = turn.of_type("tool-approval-request");
    assert_eq!(requests.len(), 1, "{:#?}", turn.chunks);
    let request = requests[0].clone();
    let input = turn
        .of_type("tool-input-available")
        .into_iter()
        .find(|c| c["toolCallId"] == request["toolCallId"])
        .expect("the call's input")["input"]
        .clone();
    (request, input)
}

#[tokio::test]
async fn an_approved_write_runs_once_and_a_replayed_approval_does_nothing() {
    let (stack, paused, request, input) = paused_write("chat-approve").await;
    let email = EMAIL;
    assert_eq!(
        paused.finish_reason(),
        Some("tool-calls"),
        "{:#?}",
        paused.chunks
    );
    assert!(paused.done);
    assert_eq!(input["name"], "Sciences");
    assert!(paused.of_type("tool-output-available").is_empty());
    assert_eq!(
        sciences(&stack).await,
        0,
        "nothing runs before the approval"
    );

    let body = answer(&request, "create_department", &input, true);
    let resumed = read_stream(post_answer(&stack, email, "chat-approve", body.clone()).await).await;
    assert_eq!(resumed.status, 200);
    assert_eq!(
        resumed.finish_reason(),
        Some("stop"),
        "{:#?}",
        resumed.chunks
    );
    let outputs = resumed.of_type("tool-output-available");
    assert_eq!(outputs.len(), 1, "{:#?}", resumed.chunks);
    assert_eq!(outputs[0]["toolCallId"], request["toolCallId"]);
    assert!(resumed.text().contains("Sciences"), "{}", resumed.text());
    // The continuation adds to the paused message: same message id, no call shown again.
    assert_eq!(
        resumed.of_type("start")[0]["messageId"],
        paused.of_type("start")[0]["messageId"]
    );
    assert!(
        resumed.of_type("tool-input-start").is_empty(),
        "{:#?}",
        resumed.chunks
    );
    assert_eq!(sciences(&stack).await, 1);

    // The same answer again: refused, and nothing runs twice.
    let replayed = post_answer(&stack, email, "chat-approve", body).await;
    assert_eq!(replayed.status(), 409);
    let error: Value = replayed.json().await.unwrap();
    assert_eq!(error["error"]["code"], "approval_invalid", "{error:#}");
    assert_eq!(sciences(&stack).await, 1);
}

#[tokio::test]
async fn a_declined_write_never_runs_and_the_model_is_told() {
    let (stack, _, request, input) = paused_write("chat-deny").await;
    let email = EMAIL;
    let body = answer(&request, "create_department", &input, false);
    let resumed = read_stream(post_answer(&stack, email, "chat-deny", body).await).await;
    assert_eq!(
        resumed.finish_reason(),
        Some("stop"),
        "{:#?}",
        resumed.chunks
    );
    let denied = resumed.of_type("tool-output-denied");
    assert_eq!(denied.len(), 1, "{:#?}", resumed.chunks);
    assert_eq!(denied[0]["toolCallId"], request["toolCallId"]);
    assert!(resumed.text().contains("declined"), "{}", resumed.text());
    assert_eq!(sciences(&stack).await, 0);
}

#[tokio::test]
async fn forged_altered_and_someone_elses_approvals_change_nothing() {
    let (stack, _, request, input) = paused_write("chat-forged").await;
    let email = EMAIL;
    let refused = |response: reqwest::Response| async move {
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        (
            status,
            body["error"]["code"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    };
    // Another input under the same approval id.
    let altered = answer(
        &request,
        "create_department",
        &json!({ "name": "Arts" }),
        true,
    );
    let got = refused(post_answer(&stack, email, "chat-forged", altered).await).await;
    assert_eq!(got, (409, "approval_invalid".to_owned()));
    // An approval id nobody issued.
    let mut forged_request = request.clone();
    forged_request["approvalId"] = json!(uuid::Uuid::new_v4().to_string());
    let forged = answer(&forged_request, "create_department", &input, true);
    let got = refused(post_answer(&stack, email, "chat-forged", forged).await).await;
    assert_eq!(got, (409, "approval_invalid".to_owned()));
    // Another call id under the real approval id.
    let mut other_call = request.clone();
    other_call["toolCallId"] = json!("0-call_other");
    let other = answer(&other_call, "create_department", &input, true);
    let got = refused(post_answer(&stack, email, "chat-forged", other).await).await;
    assert_eq!(got, (409, "approval_invalid".to_owned()));
    // Someone else, in their own chat, with the real approval: not theirs.
    let body = answer(&request, "create_department", &input, true);
    let got =
        refused(post_answer(&stack, "dos@hill.school", "chat-forged-dos", body.clone()).await)
            .await;
    assert_eq!(got, (409, "approval_invalid".to_owned()));
    // ... nor under the owner's chat id (which names the colleague's own chat: nothing waits
    // there, exactly as in any chat of theirs).
    let got =
        refused(post_answer(&stack, "dos@hill.school", "chat-forged", body.clone()).await).await;
    assert_eq!(got, (409, "approval_invalid".to_owned()));
    assert_eq!(sciences(&stack).await, 0, "nothing ran");

    // The call is still pending: the real answer still works, once.
    let resumed = read_stream(post_answer(&stack, email, "chat-forged", body).await).await;
    assert_eq!(
        resumed.of_type("tool-output-available").len(),
        1,
        "{:#?}",
        resumed.chunks
    );
    assert_eq!(sciences(&stack).await, 1);
}

#[tokio::test]
async fn a_new_message_expires_a_pending_approval() {
    let (stack, _, request, input) = paused_write("chat-expire").await;
    let email = EMAIL;
    let next = stack
        .say(email, "chat-expire", "List the departments")
        .await;
    assert_eq!(next.finish_reason(), Some("stop"), "{:#?}", next.chunks);
    let body = answer(&request, "create_department", &input, true);
    let late = post_answer(&stack, email, "chat-expire", body).await;
    assert_eq!(late.status(), 409);
    assert_eq!(sciences(&stack).await, 0);
}

/// The status `GET /api/chats` gives `chat`.
async fn status(stack: &Stack, email: &str, chat: &str) -> String {
    let list = stack.get_json(email, "/api/chats").await;
    list["chats"]
        .as_array()
        .and_then(|chats| chats.iter().find(|c| c["id"] == chat))
        .and_then(|c| c["status"].as_str())
        .unwrap_or_else(|| panic!("{chat} not in {list:#}"))
        .to_owned()
}

/// An approval can be answered for `agent.approval_ttl_secs`. Past that, the chat says it
/// expired, its card reads as declined saying why, and a late answer is refused saying why and
/// runs nothing, before and after the sweep marks it; the next message moves the chat on.
#[tokio::test]
async fn an_approval_past_its_time_expires_and_a_late_answer_runs_nothing() {
    let stack = Stack::start_with(&[], &[("ROVER_AGENT__APPROVAL_TTL_SECS", "3600")]).await;
    require_approvals(&stack, stack.db.ids.hill.as_uuid()).await;
    let paused = stack
        .say(EMAIL, "chat-late", "Create a department called Sciences")
        .await;
    let (request, input) = requested(&paused);
    let approval = uuid::Uuid::parse_str(request["approvalId"].as_str().unwrap()).unwrap();
    let lasts: f64 = sqlx::query_scalar(
        "SELECT extract(epoch FROM expires_at - created_at)::float8 FROM approvals \
         WHERE approval_id = $1",
    )
    .bind(approval)
    .fetch_one(&stack.owner)
    .await
    .unwrap();
    assert!(
        (lasts - 3600.0).abs() < 5.0,
        "the worker's setting: {lasts}"
    );
    assert_eq!(
        status(&stack, EMAIL, "chat-late").await,
        "awaiting_approval"
    );

    // Two hours pass with nobody answering.
    sqlx::query(
        "WITH a AS (UPDATE approvals SET created_at = created_at - interval '2 hours', \
                        expires_at = expires_at - interval '2 hours' \
                    WHERE approval_id = $1 RETURNING thread_id) \
         UPDATE threads SET last_activity_at = last_activity_at - interval '2 hours' \
          WHERE id = (SELECT thread_id FROM a)",
    )
    .bind(approval)
    .execute(&stack.owner)
    .await
    .unwrap();
    assert_eq!(status(&stack, EMAIL, "chat-late").await, "approval_expired");
    let card = |chat: &Value| {
        chat["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["parts"].as_array().unwrap())
            .find(|p| p["toolCallId"] == request["toolCallId"])
            .cloned()
            .unwrap_or_else(|| panic!("no card in {chat:#}"))
    };
    let shown = card(&stack.get_json(EMAIL, "/api/chats/chat-late").await);
    assert_eq!(shown["state"], "output-denied", "{shown:#}");
    let why = shown["approval"]["reason"].as_str().unwrap().to_owned();
    assert!(
        why.contains("expired") && why.contains("within 1 hour"),
        "{why}"
    );

    let late = || async {
        let body = answer(&request, "create_department", &input, true);
        let response = post_answer(&stack, EMAIL, "chat-late", body).await;
        let status = response.status().as_u16();
        let error: Value = response.json().await.unwrap();
        (status, error)
    };
    let (code, error) = late().await;
    assert_eq!(code, 409, "{error:#}");
    assert_eq!(error["error"]["code"], "approval_invalid");
    assert_eq!(error["error"]["message"], why.as_str(), "told why");

    // The worker's sweep marks it expired; a late answer is still told why, and runs nothing.
    let swept: i64 = sqlx::query_scalar("SELECT rover_expire_approvals()")
        .fetch_one(&stack.owner)
        .await
        .unwrap();
    assert_eq!(swept, 1);
    let (code, error) = late().await;
    assert_eq!(
        (code, error["error"]["message"].as_str()),
        (409, Some(why.as_str()))
    );
    assert_eq!(status(&stack, EMAIL, "chat-late").await, "approval_expired");
    assert_eq!(sciences(&stack).await, 0, "nothing ran");

    // The next message moves the chat on.
    let next = stack.say(EMAIL, "chat-late", "List the departments").await;
    assert_eq!(next.finish_reason(), Some("stop"), "{:#?}", next.chunks);
    assert_eq!(status(&stack, EMAIL, "chat-late").await, "idle");
    assert_eq!(sciences(&stack).await, 0);
}

#[tokio::test]
async fn a_subagents_write_pauses_and_resumes_inside_the_subagent() {
    let stack = Stack::start().await;
    require_approvals(&stack, stack.db.ids.hill.as_uuid()).await;
    let email = "amina@hill.school";
    let paused = stack
        .say(
            email,
            "chat-approve-subagent",
            "Record attendance for S1 Blue: everyone present except Nakato",
        )
        .await;
    assert_eq!(
        paused.finish_reason(),
        Some("tool-calls"),
        "{:#?}",
        paused.chunks
    );
    let (request, input) = requested(&paused);
    let call = request["toolCallId"].as_str().unwrap().to_owned();
    assert!(
        call.contains("/class_teacher-"),
        "a subagent's call: {call}"
    );
    assert_eq!(stack.count("SELECT count(*) FROM attendance").await, 0);

    let body = answer(&request, "record_attendance", &input, true);
    let resumed =
        read_stream(post_answer(&stack, email, "chat-approve-subagent", body).await).await;
    assert_eq!(
        resumed.finish_reason(),
        Some("stop"),
        "{:#?}",
        resumed.chunks
    );
    let outputs: Vec<&str> = resumed
        .of_type("tool-output-available")
        .iter()
        .map(|c| c["toolCallId"].as_str().unwrap())
        .collect();
    assert!(outputs.contains(&call.as_str()), "{:#?}", resumed.chunks);
    let task = call.split('/').next().unwrap();
    assert!(
        outputs.contains(&task),
        "the task ends too: {:#?}",
        resumed.chunks
    );
    assert_eq!(
        stack
            .count("SELECT count(*) FROM attendance WHERE NOT present")
            .await,
        1
    );
    let written = stack.count("SELECT count(*) FROM attendance").await;
    assert!(written > 1);
    assert_eq!(
        stack
            .count("SELECT count(*) FROM audit_log WHERE event = 'record.attendance'")
            .await,
        1,
        "the approved call ran once"
    );
}

#[tokio::test]
async fn a_pause_survives_a_worker_kill_and_is_answered_on_another_gateway() {
    let mut stack = Stack::start().await;
    require_approvals(&stack, stack.db.ids.hill.as_uuid()).await;
    let email = "admin@hill.school";
    let paused = stack
        .say(
            email,
            "chat-approve-kill",
            "Create a department called Sciences",
        )
        .await;
    let (request, input) = requested(&paused);
    stack.kill(Service::Worker);
    stack.restart(Service::Worker, &[], &[]);
    let other = stack.another_gateway();
    let body = answer(&request, "create_department", &input, true);
    let resumed = read_stream(
        stack
            .post(other, &stack.token(email), "chat-approve-kill", body)
            .await,
    )
    .await;
    assert_eq!(
        resumed.finish_reason(),
        Some("stop"),
        "{:#?}",
        resumed.chunks
    );
    assert_eq!(resumed.of_type("tool-output-available").len(), 1);
    assert_eq!(sciences(&stack).await, 1);
}

#[tokio::test]
async fn a_worker_killed_after_the_approved_write_resumes_the_continuation_without_repeating_it() {
    // A slow model keeps the continuation running after its write.
    let stack = Stack::start_with_model(&["--first-token-delay-ms", "300"]).await;
    require_approvals(&stack, stack.db.ids.hill.as_uuid()).await;
    let email = "amina@hill.school";
    let chat = "chat-approve-kill-mid";
    let paused = stack
        .say(
            email,
            chat,
            "Record attendance for S1 Blue: everyone present except Nakato",
        )
        .await;
    let (request, input) = requested(&paused);
    let body = answer(&request, "record_attendance", &input, true);
    let response = post_answer(&stack, email, chat, body).await;
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    let mut raw = String::new();
    let mut pending = String::new();
    let mut killed = false;
    let mut bytes = response.bytes_stream();
    while let Some(chunk) = futures::StreamExt::next(&mut bytes).await {
        let chunk = String::from_utf8_lossy(&chunk.unwrap()).into_owned();
        raw.push_str(&chunk);
        pending.push_str(&chunk);
        while let Some(end) = pending.find('\n') {
            let line: String = pending.drain(..=end).collect();
            let Some(value) = line
                .trim_end()
                .strip_prefix("data: ")
                .and_then(|d| serde_json::from_str::<Value>(d).ok())
            else {
                continue;
            };
            if !killed
                && value["type"] == "tool-output-available"
                && value["toolCallId"] == request["toolCallId"]
            {
                killed = true;
                stack.kill(Service::Worker);
                stack.restart(Service::Worker, &[], &[]);
            }
        }
    }
    let resumed = crate::stack::parse_sse(status, headers, &raw);
    assert!(
        killed,
        "the worker was killed mid-continuation: {:#?}",
        resumed.chunks
    );
    assert_eq!(
        resumed.finish_reason(),
        Some("stop"),
        "{:#?}",
        resumed.chunks
    );
    assert_eq!(
        stack
            .count("SELECT count(*) FROM audit_log WHERE event = 'record.attendance'")
            .await,
        1,
        "the approved call ran once"
    );
    assert_eq!(
        stack
            .count("SELECT count(*) FROM attendance WHERE NOT present")
            .await,
        1
    );
}

#[tokio::test]
async fn a_tools_own_policy_beats_the_schools_and_is_read_live() {
    let stack = Stack::start().await;
    let hill = stack.db.ids.hill.as_uuid();
    require_approvals(&stack, hill).await;
    // `never` for this tool only: it runs straight away, with no approval asked.
    sqlx::query(
        "INSERT INTO tool_approval_policy (school_id, tool, mode) VALUES ($1, 'create_department', 'never')",
    )
    .bind(hill)
    .execute(&stack.owner)
    .await
    .unwrap();
    let turn = stack
        .say(
            "admin@hill.school",
            "chat-policy",
            "Create a department called Sciences",
        )
        .await;
    assert_eq!(turn.finish_reason(), Some("stop"), "{:#?}", turn.chunks);
    assert!(turn.of_type("tool-approval-request").is_empty());
    assert_eq!(sciences(&stack).await, 1);
    // The school says `always` again, live: the next write waits.
    sqlx::query("DELETE FROM tool_approval_policy WHERE school_id = $1")
        .bind(hill)
        .execute(&stack.owner)
        .await
        .unwrap();
    let turn = stack
        .say(
            "admin@hill.school",
            "chat-policy-2",
            "Create a department called Arts",
        )
        .await;
    assert_eq!(
        turn.of_type("tool-approval-request").len(),
        1,
        "{:#?}",
        turn.chunks
    );
    assert_eq!(
        stack
            .count("SELECT count(*) FROM departments WHERE name = 'Arts'")
            .await,
        0
    );
}

/// The per-turn budget holds across the whole turn: the continuation after an approval carries
/// what the paused turn spent. Allowed one model call, the paused turn spent it asking to write;
/// the approved write runs (it was paid for), but no further model call may answer after it.
#[tokio::test]
async fn the_per_turn_budget_holds_across_an_approval_continuation() {
    let worker = std::collections::HashMap::from([(
        "rover-worker",
        vec![("ROVER_BUDGET__TURN_MODEL_CALLS".to_owned(), "1".to_owned())],
    )]);
    let stack = Stack::start_on(rover_testkit::TestVhost::create(), &[], &[], &worker).await;
    require_approvals(&stack, stack.db.ids.hill.as_uuid()).await;
    let paused = stack
        .say(EMAIL, "chat-budget", "Create a department called Sciences")
        .await;
    let (request, input) = requested(&paused);
    let body = answer(&request, "create_department", &input, true);
    let resumed = read_stream(post_answer(&stack, EMAIL, "chat-budget", body).await).await;
    assert_eq!(resumed.status, 200);
    let chunks = serde_json::to_string(&resumed.chunks).unwrap();
    assert!(
        chunks.contains("budget_exceeded") || chunks.contains("model calls"),
        "the continuation may not make a second model call: {chunks}"
    );
    assert_eq!(
        stack
            .count("SELECT coalesce(sum(model_calls), 0)::bigint FROM token_usage")
            .await,
        1,
        "one model call in the whole turn"
    );
}

/// A message queued behind a running reply (double-texting `enqueue`) moves the conversation past
/// what that reply asks approval for after the message arrived: the approval expires when the
/// queued message's turn starts, and answering it later runs nothing.
#[tokio::test]
async fn an_approval_asked_after_a_newer_message_arrived_does_not_survive_it() {
    let stack = Stack::start_with(
        &["--first-token-delay-ms", "1500"],
        &[("ROVER_CHAT__DOUBLE_TEXTING", "enqueue")],
    )
    .await;
    require_approvals(&stack, stack.db.ids.hill.as_uuid()).await;
    let chat = "chat-queued-past";
    let (paused, queued) = crate::stop::say_and(
        &stack,
        EMAIL,
        chat,
        "Create a department called Sciences",
        "start",
        || async {
            let messages = json!([{ "id": "u2", "role": "user", "parts": [{ "type": "text", "text": "What's the date today?" }] }]);
            read_stream(stack.post(stack.gateway, &stack.token(EMAIL), chat, messages).await).await
        },
    )
    .await;
    // The first reply asked after the second message was queued; the second then ran.
    let (request, input) = requested(&paused);
    assert_eq!(queued.finish_reason(), Some("stop"), "{:#?}", queued.chunks);
    let body = answer(&request, "create_department", &input, true);
    let response = post_answer(&stack, EMAIL, chat, body).await;
    assert_eq!(response.status(), 409);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "approval_invalid", "{error}");
    assert_eq!(sciences(&stack).await, 0, "nothing ran");
}

/// A specialist that fills a write's date with a day nobody said: the worker drops it before the
/// write is gated, the approval request shows the call as it will run (today's register), and the
/// staff member's answer — bound to that input — lets it run.
#[tokio::test]
async fn an_approval_binds_to_the_write_as_it_will_run_without_a_day_nobody_said() {
    let stack = Stack::start().await;
    require_approvals(&stack, stack.db.ids.hill.as_uuid()).await;
    let email = "amina@hill.school";
    let chat = "chat-approve-made-up-day";
    let paused = stack
        .say(email, chat, "Mark Nakato absent in S1 Blue today")
        .await;
    assert_eq!(
        paused.finish_reason(),
        Some("tool-calls"),
        "{:#?}",
        paused.chunks
    );
    let (request, input) = requested(&paused);
    assert!(
        input.get("date").is_none(),
        "the made-up day is not shown: {input}"
    );
    assert_eq!(input["class"], "S1 Blue");

    let body = answer(&request, "record_attendance", &input, true);
    let resumed = read_stream(post_answer(&stack, email, chat, body).await).await;
    assert_eq!(resumed.status, 200);
    assert_eq!(
        resumed.finish_reason(),
        Some("stop"),
        "{:#?}",
        resumed.chunks
    );
    assert_eq!(
        stack
            .count("SELECT count(*) FROM attendance WHERE NOT present")
            .await,
        1
    );
    assert_eq!(
        stack
            .count("SELECT count(*) FROM attendance WHERE on_date = '2023-04-15'")
            .await,
        0,
        "today's register (the school's calendar), not the made-up day"
    );
}

/// An answer that approves with `edited` as the staff member's input (`approval.editedInput`).
fn edited_answer(request: &Value, tool: &str, input: &Value, edited: Value) -> Value {
    let mut body = answer(request, tool, input, true);
    body[0]["parts"][0]["approval"]["editedInput"] = edited;
    body
}

/// Edit before approve: an edit the tool's schema refuses, or for another tool, is refused while
/// the approval still waits; a valid one runs instead of the model's input, once, and the model is
/// told what the staff member changed (the scripted double says back the result's `staffEdits`).
#[tokio::test]
async fn an_edited_approval_runs_the_staff_members_input_and_the_model_is_told() {
    let (stack, _, request, input) = paused_write("chat-edit").await;
    let refused = |response: reqwest::Response| async move {
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        (status, body["error"].clone())
    };
    let post = |body| post_answer(&stack, EMAIL, "chat-edit", body);
    // Not the schema's: a name that is not text, and a smuggled school id.
    let (status, error) = refused(
        post(edited_answer(
            &request,
            "create_department",
            &input,
            json!({ "name": 7 }),
        ))
        .await,
    )
    .await;
    assert_eq!(status, 400, "{error:#}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("not valid") && message.contains("still waits"),
        "{message}"
    );
    let smuggled = json!({ "name": "Arts", "school_id": stack.db.ids.hill.as_uuid() });
    let (status, _) = refused(
        post(edited_answer(
            &request,
            "create_department",
            &input,
            smuggled,
        ))
        .await,
    )
    .await;
    assert_eq!(status, 400);
    // Valid for another tool's schema, but this approval is for create_department.
    let (status, error) = refused(
        post(edited_answer(
            &request,
            "rename_department",
            &input,
            json!({ "department": "Sciences", "newName": "Arts" }),
        ))
        .await,
    )
    .await;
    assert_eq!((status, &error["code"]), (409, &json!("approval_invalid")));
    let pending = stack
        .count("SELECT count(*) FROM approvals WHERE state = 'pending'")
        .await;
    assert_eq!(pending, 1, "the approval still waits");

    let edited = json!({ "name": "Natural Sciences" });
    let body = edited_answer(&request, "create_department", &input, edited.clone());
    let resumed = read_stream(post(body.clone()).await).await;
    assert_eq!(
        resumed.finish_reason(),
        Some("stop"),
        "{:#?}",
        resumed.chunks
    );
    let outputs = resumed.of_type("tool-output-available");
    assert_eq!(outputs.len(), 1, "{:#?}", resumed.chunks);
    let output = &outputs[0]["output"];
    assert_eq!(output["data"]["name"], "Natural Sciences", "{output:#}");
    let told = r#"name: "Sciences" → "Natural Sciences""#;
    assert!(
        output["staffEdits"].as_str().unwrap().contains(told),
        "{output:#}"
    );
    assert!(
        resumed.text().contains("edited this call") && resumed.text().contains(told),
        "the model reads what changed: {}",
        resumed.text()
    );
    assert_eq!(sciences(&stack).await, 0, "the model's input never ran");
    let natural = "SELECT count(*) FROM departments WHERE name = 'Natural Sciences'";
    assert_eq!(stack.count(natural).await, 1);
    let audited = "SELECT count(*) FROM audit_log \
                   WHERE event = 'create.department' AND after->>'name' = 'Natural Sciences'";
    assert_eq!(stack.count(audited).await, 1);
    let kept = "SELECT count(*) FROM approvals \
                WHERE edited_from->>'name' = 'Sciences' AND input->>'name' = 'Natural Sciences'";
    assert_eq!(stack.count(kept).await, 1, "the row keeps both");
    // Answered once: the same edit again runs nothing.
    let (status, _) = refused(post(body).await).await;
    assert_eq!(status, 409);
    assert_eq!(stack.count(natural).await, 1);

    // A reopened chat shows the call as it ran: the edited input on its approval, the output.
    let chat = stack.get_json(EMAIL, "/api/chats/chat-edit").await;
    let part = chat["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["parts"].as_array().unwrap())
        .find(|p| p["type"] == "tool-create_department")
        .expect("the call's part")
        .clone();
    assert_eq!(part["state"], "output-available", "{chat:#}");
    assert_eq!(part["approval"]["editedInput"], edited, "{chat:#}");
    assert_eq!(
        part["output"]["data"]["name"], "Natural Sciences",
        "{chat:#}"
    );
}
