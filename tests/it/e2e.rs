//! The whole turn, end to end: the Hub's `POST /api/chat` through the gateway, the broker, the
//! worker, the scripted model and the tool server, back as the AI SDK UI message stream.

use serde_json::json;

use crate::stack::{Stack, read_stream};

const ADMIN: &str = "admin@hill.school";

#[tokio::test]
async fn a_turn_streams_as_the_ai_sdk_ui_message_stream() {
    let stack = Stack::start().await;
    let turn = stack
        .say(ADMIN, "chat-create", "Create a department called Sciences")
        .await;
    assert_eq!(turn.status, 200);
    assert_eq!(turn.headers["content-type"], "text/event-stream");
    assert_eq!(turn.headers["x-vercel-ai-ui-message-stream"], "v1");
    assert_eq!(turn.headers["cache-control"], "no-cache");
    assert_eq!(turn.headers["x-accel-buffering"], "no");
    assert!(turn.done, "the stream ends with [DONE]");

    let start = &turn.chunks[0];
    assert_eq!(start["type"], "start");
    assert!(start["messageId"].as_str().is_some());
    assert_eq!(
        start["messageMetadata"]["traceId"],
        turn.headers["x-rover-trace-id"].to_str().unwrap()
    );
    assert!(start["messageMetadata"]["turnId"].as_str().is_some());

    assert_eq!(turn.tools(), ["create_department"]);
    let label = turn.of_type("data-tool-label");
    assert_eq!(label[0]["data"]["label"], "Creating a department…");
    assert_eq!(label[0]["transient"], true);
    assert_eq!(turn.of_type("tool-output-available").len(), 1);
    assert!(
        turn.text().contains("Sciences") && turn.text().contains("across the whole school"),
        "{}",
        turn.text()
    );
    assert_eq!(turn.finish_reason(), Some("stop"));
    assert_eq!(turn.chunks.last().unwrap()["type"], "finish");

    // Only the protocol's chunk types, and a text-delta only inside its text part.
    let allowed = [
        "start",
        "start-step",
        "finish-step",
        "text-start",
        "text-delta",
        "text-end",
        "tool-input-start",
        "tool-input-available",
        "tool-output-available",
        "tool-output-error",
        "error",
        "finish",
    ];
    let mut open_text = std::collections::HashSet::new();
    for chunk in &turn.chunks {
        let kind = chunk["type"].as_str().unwrap();
        assert!(
            allowed.contains(&kind) || kind.starts_with("data-"),
            "unexpected chunk {chunk}"
        );
        match kind {
            "text-start" => assert!(open_text.insert(chunk["id"].clone())),
            "text-delta" => assert!(
                open_text.contains(&chunk["id"]),
                "delta without start: {chunk}"
            ),
            "text-end" => assert!(open_text.remove(&chunk["id"])),
            _ => {}
        }
        assert!(
            !chunk
                .as_object()
                .unwrap()
                .values()
                .any(serde_json::Value::is_null),
            "null field in {chunk}"
        );
    }
    let hill = stack.db.ids.hill.as_uuid();
    assert_eq!(
        stack
            .count(&format!(
                "SELECT count(*) FROM departments WHERE name = 'Sciences' AND school_id = '{hill}'"
            ))
            .await,
        1
    );
}

#[tokio::test]
async fn subagent_work_is_visible_and_attributed() {
    let stack = Stack::start().await;
    let turn = stack
        .say(
            "amina@hill.school",
            "chat-attendance",
            "Record attendance for S1 Blue: everyone present except Nakato",
        )
        .await;
    // One call names the class and the absentee as the staff member said them.
    assert_eq!(turn.tools(), ["task", "record_attendance"]);
    let agents: Vec<&str> = turn
        .of_type("data-tool-label")
        .iter()
        .map(|c| c["data"]["agent"].as_str().unwrap())
        .collect();
    assert_eq!(agents, ["rover", "class_teacher"]);
    assert!(
        turn.of_type("data-subagent")
            .iter()
            .any(|c| c["data"]["agent"] == "class_teacher")
    );
    let input = &turn
        .of_type("tool-input-available")
        .into_iter()
        .find(|c| c["toolName"] == "record_attendance")
        .expect("the write's input is in the stream")["input"];
    assert_eq!(input, &json!({ "class": "S1 Blue", "absent": ["Nakato"] }));
    let absent: Vec<uuid::Uuid> =
        sqlx::query_scalar("SELECT student_id FROM attendance WHERE NOT present")
            .fetch_all(&stack.owner)
            .await
            .unwrap();
    assert_eq!(absent, [stack.db.ids.student("Nakato Sarah").as_uuid()]);
}

#[tokio::test]
async fn denied_users_get_an_answer_and_campus_users_hear_their_campus() {
    let stack = Stack::start().await;
    let turn = stack
        .say(
            "bursar@hill.school",
            "chat-bursar",
            "Create a department called Sciences",
        )
        .await;
    assert!(turn.tools().is_empty());
    assert!(
        turn.text().to_lowercase().contains("can't"),
        "{}",
        turn.text()
    );
    assert_eq!(stack.count("SELECT count(*) FROM audit_log").await, 0);

    let turn = stack
        .say(
            "kololo.admin@hill.school",
            "chat-kololo",
            "How many students do we have?",
        )
        .await;
    assert!(
        turn.text().contains("across your campus, Kololo"),
        "{}",
        turn.text()
    );
}

#[tokio::test]
async fn ask_user_round_trips_through_the_next_post() {
    let stack = Stack::start().await;
    let chat = "chat-question";
    let first = stack
        .say(ADMIN, chat, "Please sort out the thing from yesterday")
        .await;
    assert_eq!(first.tools(), ["ask_user"]);
    assert_eq!(first.finish_reason(), Some("tool-calls"));
    let call = first.of_type("tool-input-available")[0].clone();
    // useChat sends the whole thread back, with the question answered in the assistant message.
    let messages = json!([
        { "id": "u1", "role": "user", "parts": [{ "type": "text", "text": "Please sort out the thing from yesterday" }] },
        { "id": "a1", "role": "assistant", "parts": [{
            "type": "tool-ask_user", "toolCallId": call["toolCallId"], "state": "output-available",
            "input": call["input"], "output": "The attendance for S1 Blue",
        }] },
    ]);
    let second = read_stream(
        stack
            .post(stack.gateway, &stack.token(ADMIN), chat, messages)
            .await,
    )
    .await;
    assert_eq!(second.status, 200);
    assert_eq!(second.finish_reason(), Some("stop"), "{:?}", second.chunks);
    assert!(!second.text().is_empty());
}

#[tokio::test]
async fn a_chat_id_names_each_users_own_thread() {
    let stack = Stack::start().await;
    stack.say(ADMIN, "chat-mine", "List the departments").await;
    let colleague = stack.token("dos@hill.school");
    // The colleague resuming the admin's chat id sees what an unused id shows: nothing.
    let resume = |chat: &str| {
        stack
            .http
            .get(format!("http://{}/api/chat/{chat}/stream", stack.gateway))
            .bearer_auth(&colleague)
            .send()
    };
    assert_eq!(resume("chat-mine").await.unwrap().status(), 204);
    assert_eq!(resume("chat-never-used").await.unwrap().status(), 204);
    // Posting under it starts the colleague's own chat; the admin's is untouched.
    let messages = json!([{ "id": "u1", "role": "user", "parts": [{ "type": "text", "text": "List the departments" }] }]);
    let response = stack
        .post(stack.gateway, &colleague, "chat-mine", messages)
        .await;
    assert_eq!(response.status(), 200);
    let reply = read_stream(response).await;
    assert_eq!(reply.finish_reason(), Some("stop"), "{:?}", reply.chunks);
    let owners = stack
        .count("SELECT count(DISTINCT user_id) FROM threads")
        .await;
    assert_eq!(owners, 2, "two threads, one per staff member");
}

#[tokio::test]
async fn bad_tokens_are_401_and_publish_no_turn() {
    let stack = Stack::start().await;
    let messages = json!([{ "id": "u1", "role": "user", "parts": [{ "type": "text", "text": "Create a department called Sciences" }] }]);
    for token in ["", "not-a-jwt", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0."] {
        let response = stack
            .post(stack.gateway, token, "chat-bad", messages.clone())
            .await;
        assert_eq!(response.status(), 401, "{token}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unauthenticated");
    }
    assert_eq!(
        stack.count("SELECT count(*) FROM threads").await,
        0,
        "no turn was started"
    );
}

#[tokio::test]
async fn a_disconnected_client_resumes_the_whole_turn_on_another_gateway() {
    let mut stack = Stack::start().await;
    let other = stack.another_gateway();
    let chat = "chat-resume";
    // Nothing to resume yet.
    let nothing = stack.resume(other, ADMIN, chat).await;
    assert_eq!(nothing.status(), 204);

    // Start the turn on the first gateway and hang up after the first bytes.
    let messages = json!([{ "id": "u1", "role": "user", "parts": [{ "type": "text", "text": "Rename the Languages department to Modern Languages" }] }]);
    let response = stack
        .post(stack.gateway, &stack.token(ADMIN), chat, messages)
        .await;
    assert_eq!(response.status(), 200);
    let mut bytes = response.bytes_stream();
    let first = futures::StreamExt::next(&mut bytes).await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("\"start\""));
    drop(bytes);

    // The turn goes on without the client; the other replica replays it from its start.
    let resumed = read_stream(stack.resume(other, ADMIN, chat).await).await;
    assert_eq!(resumed.status, 200);
    assert_eq!(resumed.chunks[0]["type"], "start");
    assert_eq!(resumed.tools(), ["list_departments", "rename_department"]);
    assert_eq!(resumed.finish_reason(), Some("stop"));
    assert!(resumed.done);
    let hill = stack.db.ids.hill.as_uuid();
    assert_eq!(stack.count(&format!("SELECT count(*) FROM departments WHERE name = 'Modern Languages' AND school_id = '{hill}'")).await, 1);
}

#[tokio::test]
async fn long_silences_carry_keep_alive_comments() {
    // The model takes 2.5 s to start answering; the gateway sends a comment every second.
    let stack = Stack::start_with_model(&["--first-token-delay-ms", "2500"]).await;
    let turn = stack
        .say(ADMIN, "chat-slow", "What's the date today?")
        .await;
    assert!(
        turn.comments >= 1,
        "no keep-alive in a long silence: {:?}",
        turn.chunks
    );
    assert_eq!(turn.finish_reason(), Some("stop"));
}

#[tokio::test]
async fn operations_probes_request_ids_and_body_limits() {
    let stack = Stack::start().await;
    let ready = stack
        .http
        .get(format!("http://{}/readyz", stack.gateway))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    let health = stack
        .http
        .get(format!("http://{}/healthz", stack.gateway))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert!(
        health.headers().contains_key("x-request-id"),
        "every response carries a request id"
    );

    // A body over the limit (1 MiB by default) is refused before anything runs.
    let huge = "x".repeat(2 * 1024 * 1024);
    let messages =
        json!([{ "id": "u1", "role": "user", "parts": [{ "type": "text", "text": huge }] }]);
    let response = stack
        .post(stack.gateway, &stack.token(ADMIN), "chat-huge", messages)
        .await;
    assert_eq!(response.status(), 413);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_large");
    assert_eq!(stack.count("SELECT count(*) FROM threads").await, 0);
}

#[tokio::test]
async fn a_role_change_between_two_turns_shows_in_the_next_turn() {
    let stack = Stack::start().await;
    let before = stack
        .say(
            "bursar@hill.school",
            "chat-role",
            "Create a department called Sciences",
        )
        .await;
    assert!(before.tools().is_empty());
    sqlx::query(
        "INSERT INTO role_assignments (school_id, user_id, role) VALUES ($1, $2, 'school_admin')",
    )
    .bind(stack.db.ids.hill.as_uuid())
    .bind(stack.db.ids.user("bursar@hill.school").as_uuid())
    .execute(&stack.owner)
    .await
    .unwrap();
    let after = stack
        .say(
            "bursar@hill.school",
            "chat-role",
            "Create a department called Sciences",
        )
        .await;
    assert_eq!(after.tools(), ["create_department"]);
    assert_eq!(after.finish_reason(), Some("stop"));
}

#[tokio::test]
async fn every_scripted_utterance_works_through_the_gateway_for_the_right_user() {
    let stack = Stack::start().await;
    let cases = [
        (ADMIN, "List the departments", vec!["list_departments"]),
        (ADMIN, "Find the student Nakato", vec!["find_students"]),
        (
            ADMIN,
            "How many students do we have?",
            vec!["get_enrollment_summary"],
        ),
        (ADMIN, "What's the date today?", vec!["get_current_date"]),
        (ADMIN, "What can you do?", vec!["list_agent_map"]),
        (
            ADMIN,
            "Rename the Languages department to Modern Languages",
            vec!["list_departments", "rename_department"],
        ),
        (
            "amina@hill.school",
            "Record Mathematics marks for S1 Blue: Nakato 78, Mugisha 64",
            vec!["task", "record_marks"],
        ),
        (
            "dos@hill.school",
            "Assign Okello to teach Physics in S1 Blue",
            vec!["task", "assign_subject_teacher"],
        ),
    ];
    for (i, (user, text, tools)) in cases.into_iter().enumerate() {
        let turn = stack.say(user, &format!("chat-utterance-{i}"), text).await;
        assert_eq!(turn.tools(), tools, "{user}: {text}");
        assert_eq!(turn.finish_reason(), Some("stop"), "{user}: {text}");
        assert!(
            turn.of_type("tool-output-error").is_empty(),
            "{user}: {text}: {:?}",
            turn.chunks
        );
    }
    assert_eq!(stack.count("SELECT count(*) FROM marks").await, 2);
    assert_eq!(
        stack.count("SELECT count(*) FROM audit_log").await,
        3,
        "rename, marks, assignment"
    );
}

#[tokio::test]
async fn a_school_wide_user_may_pick_a_campus_and_a_campus_user_may_not_leave_theirs() {
    let stack = Stack::start().await;
    let kololo = stack.db.ids.campus("Kololo");
    let naalya = stack.db.ids.campus("Naalya");
    let messages = json!([{ "id": "u1", "role": "user", "parts": [{ "type": "text", "text": "How many students do we have?" }] }]);
    let response = stack
        .http
        .post(format!("http://{}/api/chat", stack.gateway))
        .bearer_auth(stack.token(ADMIN))
        .header("x-rover-campus", kololo.to_string())
        .json(&json!({ "id": "chat-pick", "messages": messages, "trigger": "submit-message" }))
        .send()
        .await
        .unwrap();
    let turn = read_stream(response).await;
    assert!(
        turn.text().contains("across your campus, Kololo"),
        "{}",
        turn.text()
    );

    let body = json!({ "id": "chat-leave", "messages": messages, "trigger": "submit-message", "campusId": naalya });
    let response = stack
        .http
        .post(format!("http://{}/api/chat", stack.gateway))
        .bearer_auth(stack.token("kololo.admin@hill.school"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
}

#[tokio::test]
async fn expired_wrong_audience_wrong_issuer_and_wrong_key_tokens_are_401() {
    use jsonwebtoken::{EncodingKey, Header, encode};
    let stack = Stack::start().await;
    let settings = rover_gateway::AuthSettings::development();
    let secret = rover_gateway::DEVELOPMENT_HS256_SECRET.to_owned();
    let now = chrono::Utc::now().timestamp();
    let user = stack.db.ids.user(ADMIN).to_string();
    let claims = |iss: &str, aud: &str, exp: i64| json!({ "sub": user, "iss": iss, "aud": aud, "iat": now - 10, "exp": exp });
    let sign = |claims: serde_json::Value, key: &str| {
        encode(
            &Header::default(),
            &claims,
            &EncodingKey::from_secret(key.as_bytes()).unwrap(),
        )
        .unwrap()
    };
    let cases = [
        (
            "token expired",
            sign(
                claims(&settings.issuer, &settings.audience, now - 3600),
                &secret,
            ),
        ),
        (
            "wrong audience",
            sign(
                claims(&settings.issuer, "someone-else", now + 3600),
                &secret,
            ),
        ),
        (
            "wrong issuer",
            sign(claims("evil", &settings.audience, now + 3600), &secret),
        ),
        (
            "invalid signature",
            sign(
                claims(&settings.issuer, &settings.audience, now + 3600),
                "another-secret-entirely",
            ),
        ),
    ];
    let messages = json!([{ "id": "u1", "role": "user", "parts": [{ "type": "text", "text": "List the departments" }] }]);
    for (reason, token) in cases {
        let response = stack
            .post(stack.gateway, &token, "chat-tokens", messages.clone())
            .await;
        assert_eq!(response.status(), 401, "{reason}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"]["message"], reason);
    }
    assert_eq!(
        stack.count("SELECT count(*) FROM threads").await,
        0,
        "no turn was started"
    );
}

#[tokio::test]
async fn a_failing_model_streams_one_error_and_a_finish() {
    let stack = Stack::start().await;
    let turn = stack
        .say(ADMIN, "chat-fail", "Trigger a model failure")
        .await;
    assert_eq!(turn.of_type("error").len(), 1, "{:?}", turn.chunks);
    assert_eq!(turn.finish_reason(), Some("error"));
    assert!(turn.done);
}

#[tokio::test]
async fn rest_and_the_tool_write_the_same_rows_and_audit_entries() {
    let stack = Stack::start().await;
    // Through the tool path: the model calls create_department.
    let turn = stack
        .say(
            ADMIN,
            "chat-tool-write",
            "Create a department called Sciences",
        )
        .await;
    assert_eq!(turn.tools(), ["create_department"]);
    // Through REST: the same domain function, the same authorization, the same audit.
    let response = stack
        .http
        .post(format!("http://{}/api/departments", stack.gateway))
        .bearer_auth(stack.token(ADMIN))
        .json(&json!({ "name": "Arts" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let rows: Vec<(String, String, Option<uuid::Uuid>, serde_json::Value)> = sqlx::query_as(
        "SELECT event, actor_email, campus_id, after FROM audit_log ORDER BY after->>'name' DESC",
    )
    .fetch_all(&stack.owner)
    .await
    .unwrap();
    assert_eq!(rows.len(), 2);
    let (tool, rest) = (&rows[0], &rows[1]);
    assert_eq!(
        (tool.0.as_str(), tool.1.as_str(), tool.2),
        ("create.department", ADMIN, None)
    );
    assert_eq!(
        (rest.0.as_str(), rest.1.as_str(), rest.2),
        ("create.department", ADMIN, None)
    );
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&tool.3), keys(&rest.3), "the same audit summary shape");
    assert_eq!(
        (tool.3["name"].as_str(), rest.3["name"].as_str()),
        (Some("Sciences"), Some("Arts"))
    );

    // And a REST denial reads exactly like the tool's envelope.
    let denied = stack
        .http
        .post(format!("http://{}/api/departments", stack.gateway))
        .bearer_auth(stack.token("bursar@hill.school"))
        .json(&json!({ "name": "Music" }))
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), 403);
    let body: serde_json::Value = denied.json().await.unwrap();
    assert_eq!(
        body["error"]["message"],
        "Permission denied: create:Department"
    );
}

#[tokio::test]
async fn a_gateway_shutting_down_lets_its_open_stream_finish() {
    // Slow chunks keep the stream open while the gateway is told to stop.
    let stack = Stack::start_with_model(&["--chunk-delay-ms", "60"]).await;
    let messages = json!([{ "id": "u1", "role": "user", "parts": [{ "type": "text", "text": "Rename the Languages department to Modern Languages" }] }]);
    let response = stack
        .post(stack.gateway, &stack.token(ADMIN), "chat-drain", messages)
        .await;
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    let mut bytes = response.bytes_stream();
    let mut body =
        String::from_utf8_lossy(&futures::StreamExt::next(&mut bytes).await.unwrap().unwrap())
            .into_owned();
    stack.terminate_gateway();
    while let Some(more) = futures::StreamExt::next(&mut bytes).await {
        body.push_str(&String::from_utf8_lossy(&more.unwrap()));
    }
    let turn = crate::stack::parse_sse(200, headers, &body);
    assert!(turn.done, "the open stream ran to its end");
    assert_eq!(turn.finish_reason(), Some("stop"));
    assert!(
        stack.gateway_exit().await.success(),
        "the gateway exits cleanly once its streams are done"
    );
}
