//! The `/mcp` door, attacked as an outsider and as a colleague would: a token issued for the whole
//! API (not for this resource), a valid token of a user who does not exist, a web page on another
//! origin — each refused before any tool is listed or called. And names that hide text from a
//! colleague are refused by REST exactly as by the tools (one validator, in the domain).

use axum::body::Body;
use axum::http::{Method, StatusCode, header};
use chrono::Utc;
use rover_contracts::ids::UserId;
use rover_gateway::dev_token;
use serde_json::json;

use crate::rest::{ADMIN, Rest, spawn_rest_with};

const RESOURCE: &str = "http://localhost/mcp";

/// A development token for `user` whose `aud` is `audience`.
fn token_for(rest: &Rest, user: UserId, audience: &str) -> String {
    let mut settings = rest.state.settings.auth.clone();
    settings.audience = audience.to_owned();
    dev_token(&settings, user, "someone@hill.school", Utc::now()).expect("mint")
}

/// `tools/list` on `/mcp` with `token` (and `origin`, if any): status, challenge and body.
async fn list(
    rest: &Rest,
    token: &str,
    origin: Option<&str>,
) -> (StatusCode, Option<String>, String) {
    let mut request = rest
        .request(Method::POST, "/mcp", None)
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25");
    if let Some(origin) = origin {
        request = request.header(header::ORIGIN, origin);
    }
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {} });
    let response = tower::ServiceExt::oneshot(
        rest.router.clone(),
        request.body(Body::from(body.to_string())).unwrap(),
    )
    .await
    .unwrap();
    let status = response.status();
    let challenge = response
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .map(|v| v.to_str().unwrap().to_owned());
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        challenge,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

#[tokio::test]
async fn tokens_are_bound_to_the_resource_and_to_a_real_user() {
    let rest = spawn_rest_with(|settings| {
        settings.mcp.audiences = vec![RESOURCE.to_owned()];
    })
    .await;
    let admin = rest.db.ids.user(ADMIN);

    // Bound to /mcp: served.
    let (status, _, body) = list(&rest, &token_for(&rest, admin, RESOURCE), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("list_departments"), "{body}");

    // The Hub's token for the whole API (`aud=rover`): 401 with the challenge.
    let (status, challenge, body) = list(&rest, &rest.token(ADMIN), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body.contains("wrong audience"), "{body}");
    assert!(challenge.is_some_and(|c| c.contains("resource_metadata")));

    // A well-signed token of a user who does not exist: 401 with the challenge, not 200.
    let (status, challenge, body) =
        list(&rest, &token_for(&rest, UserId::new(), RESOURCE), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(challenge.is_some_and(|c| c.contains("resource_metadata")));
    assert!(!body.contains("list_departments"));
}

#[tokio::test]
async fn a_page_on_another_origin_cannot_call_mcp() {
    let rest = spawn_rest_with(|_| {}).await;
    let token = rest.token(ADMIN);
    for origin in [
        "https://evil.example",
        "http://localhost.evil.example",
        "null",
    ] {
        let (status, _, body) = list(&rest, &token, Some(origin)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{origin}: {body}");
        assert!(!body.contains("list_departments"));
    }
    // The gateway's own origin, and native clients (no Origin), are served.
    for origin in [Some("http://localhost"), None] {
        let (status, _, body) = list(&rest, &token, origin).await;
        assert_eq!(status, StatusCode::OK, "{origin:?}: {body}");
    }
}

#[tokio::test]
async fn rest_refuses_names_hiding_text_as_the_tools_do() {
    let rest = spawn_rest_with(|_| {}).await;
    let before = rest.count("departments").await;
    for name in ["Sciences\u{202E}sdrawkcab", "\u{2066}Sciences\u{2069}"] {
        let reply = rest
            .post(ADMIN, "/api/departments", json!({ "name": name }))
            .await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        assert!(
            reply.body.to_string().contains("invisible"),
            "{}",
            reply.body
        );
    }
    assert_eq!(rest.count("departments").await, before);
}

/// `tools/call` for `list_departments` on `/mcp` as `token` (owned, so it can be spawned).
async fn call(router: axum::Router, token: String) -> (StatusCode, String) {
    let request = axum::http::Request::post("/mcp")
        .header(header::HOST, "localhost")
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .body(Body::from(
            json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": { "name": "list_departments", "arguments": {} } })
            .to_string(),
        ))
        .unwrap();
    let response = tower::ServiceExt::oneshot(router, request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn a_user_may_have_only_so_many_mcp_requests_in_flight() {
    let rest = spawn_rest_with(|settings| {
        settings.mcp.max_in_flight_per_user = 1;
        // No tool server runs here: a call waits for this long, then fails.
        settings.amqp.rpc_attempt_timeout_ms = 3_000;
        settings.amqp.rpc_attempts = 1;
    })
    .await;
    // The call is in flight once its RPC reaches the tools queue.
    let (arrived, mut arrivals) = tokio::sync::mpsc::unbounded_channel();
    let _consumer = rest
        .state
        .broker
        .consume(
            &rest.state.topology.tools_queue(),
            rover_messaging::ConsumerOptions::default(),
            move |_| {
                let _ = arrived.send(());
                async { rover_messaging::Outcome::Ack }
            },
        )
        .await
        .expect("consume the tools queue");
    let token = rest.token(ADMIN);
    let first = tokio::spawn(call(rest.router.clone(), token.clone()));
    rover_testkit::within("the first call reaches the tools queue", arrivals.recv())
        .await
        .expect("a call");

    // The same user again, while the first waits: 429 with Retry-After.
    let (status, body) = call(rest.router.clone(), token.clone()).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(body.contains("in flight"), "{body}");
    // A colleague is not held up by it.
    let (status, _, body) = list(&rest, &rest.token("dos@hill.school"), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Once the first ends, the user may call again.
    assert_eq!(first.await.unwrap().0, StatusCode::OK);
    let (status, _, _) = list(&rest, &token, None).await;
    assert_eq!(status, StatusCode::OK);
}
