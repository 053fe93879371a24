//! Hardened inputs: every error the gateway emits — its own and axum's — is the one JSON error
//! shape; chat messages, their parts and attachments and every JSON body's nesting are bounded;
//! a user's open turns are limited per replica (429 + `Retry-After`); a client sending bad tokens
//! is slowed to 429 while valid tokens from the same address still pass, and `X-Forwarded-For` is
//! believed only from a trusted proxy. Also: REST with another school's ids.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, StatusCode, header};
use rover_contracts::ErrorCode;
use serde_json::{Value, json};
use tower::ServiceExt as _;

use crate::rest::{ADMIN, Reply, Rest, spawn_rest, spawn_rest_with};

/// Checks the error shape and the code, and that the status is the code's (unless `status`).
fn expect_error(reply: &Reply, status: StatusCode, code: ErrorCode) {
    assert_eq!(reply.status, status, "{}", reply.body);
    let error = reply.error();
    assert_eq!(error.code, code, "{}", reply.body);
    assert!(!error.message.is_empty());
}

async fn post(rest: &Rest, body: String) -> Reply {
    rest.json(Method::POST, ADMIN, "/api/chat", &body).await
}

fn chat_body(parts: Value) -> String {
    json!({ "id": "c1", "trigger": "submit-message", "messages": [{ "id": "m1", "role": "user", "parts": parts }] })
        .to_string()
}

#[tokio::test]
async fn every_error_response_is_the_json_error_shape() {
    let rest = spawn_rest_with(|s| s.http.request_timeout_ms = 0).await;
    let empty = |method: Method, path: &str| {
        rest.request(method, path, Some(ADMIN))
            .body(Body::empty())
            .unwrap()
    };

    let unknown = rest.send(empty(Method::GET, "/api/nothing-here")).await;
    expect_error(&unknown, StatusCode::NOT_FOUND, ErrorCode::NotFound);
    let unknown = rest.send(empty(Method::GET, "/")).await;
    expect_error(&unknown, StatusCode::NOT_FOUND, ErrorCode::NotFound);

    let wrong_method = rest.send(empty(Method::DELETE, "/api/departments")).await;
    expect_error(
        &wrong_method,
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::MethodNotAllowed,
    );
    let wrong_method = rest.send(empty(Method::GET, "/api/chat")).await;
    expect_error(
        &wrong_method,
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::MethodNotAllowed,
    );

    // No content type, broken JSON and an oversized body announced by Content-Length, on chat.
    let no_type = rest
        .send(
            rest.request(Method::POST, "/api/chat", Some(ADMIN))
                .body(Body::from(chat_body(
                    json!([{ "type": "text", "text": "hi" }]),
                )))
                .unwrap(),
        )
        .await;
    expect_error(&no_type, StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest);
    let broken = rest
        .json(Method::POST, ADMIN, "/api/chat", "{\"id\":")
        .await;
    expect_error(&broken, StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest);
    let limit = rest.state.settings.http.body_limit_bytes;
    let big = "x".repeat(limit + 1);
    let announced = rest
        .send(
            rest.request(Method::POST, "/api/departments", Some(ADMIN))
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::CONTENT_LENGTH, big.len())
                .body(Body::from(big))
                .unwrap(),
        )
        .await;
    expect_error(
        &announced,
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::TooLarge,
    );

    // A REST request over its deadline (0 ms here) is the timeout layer's 504, as JSON.
    let slow = rest.send(empty(Method::GET, "/api/departments")).await;
    expect_error(
        &slow,
        StatusCode::GATEWAY_TIMEOUT,
        ErrorCode::DeadlineExceeded,
    );
}

#[tokio::test]
async fn chat_messages_parts_attachments_and_nesting_are_bounded() {
    let rest = spawn_rest().await;
    let chat = &rest.state.settings.chat;

    let long = post(
        &rest,
        chat_body(json!([{ "type": "text", "text": "x".repeat(chat.max_message_bytes + 1) }])),
    )
    .await;
    expect_error(&long, StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::TooLarge);
    assert!(long.error().message.contains("too long"), "{}", long.body);

    // Two parts that are each under the limit but together over it.
    let half = "y".repeat(chat.max_message_bytes / 2 + 1);
    let split = post(
        &rest,
        chat_body(json!([
            { "type": "text", "text": half },
            { "type": "text", "text": half },
        ])),
    )
    .await;
    expect_error(&split, StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::TooLarge);

    let parts: Vec<Value> = (0..=chat.max_parts)
        .map(|_| json!({ "type": "text", "text": "a" }))
        .collect();
    let many_parts = post(&rest, chat_body(json!(parts))).await;
    expect_error(
        &many_parts,
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::TooLarge,
    );
    assert!(many_parts.error().message.contains("parts"));

    let files: Vec<Value> = (0..=chat.max_attachments)
        .map(|i| json!({ "type": "file", "mediaType": "text/plain", "url": format!("data:,{i}") }))
        .collect();
    let many_files = post(&rest, chat_body(json!(files))).await;
    expect_error(
        &many_files,
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::TooLarge,
    );
    assert!(many_files.error().message.contains("attachments"));

    let answer = json!({
        "id": "c1",
        "messages": [{ "role": "assistant", "parts": [{
            "type": "tool-ask_user", "toolCallId": "call_1", "state": "output-available",
            "output": "z".repeat(chat.max_message_bytes + 1),
        }] }],
    });
    let long_answer = post(&rest, answer.to_string()).await;
    expect_error(
        &long_answer,
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::TooLarge,
    );

    let depth = rest.state.settings.http.max_json_depth;
    let nested = format!("{}{}", "[".repeat(depth + 1), "]".repeat(depth + 1));
    let deep_chat = post(
        &rest,
        chat_body(json!([{ "type": "text", "text": "hi", "x": "PLACEHOLDER" }]))
            .replace("\"PLACEHOLDER\"", &nested),
    )
    .await;
    expect_error(
        &deep_chat,
        StatusCode::BAD_REQUEST,
        ErrorCode::InvalidRequest,
    );
    assert!(
        deep_chat.error().message.contains("deeper"),
        "{}",
        deep_chat.body
    );
    let deep_rest = rest
        .json(
            Method::POST,
            ADMIN,
            "/api/departments",
            &format!("{{\"name\":{nested}}}"),
        )
        .await;
    expect_error(
        &deep_rest,
        StatusCode::BAD_REQUEST,
        ErrorCode::InvalidRequest,
    );
    assert!(
        deep_rest.error().message.contains("deeper"),
        "{}",
        deep_rest.body
    );

    // Nothing was started or written by any of them.
    assert_eq!(rest.count("threads").await, 0);
    assert_eq!(rest.count("audit_log").await, 0);
}

#[tokio::test]
async fn a_user_over_the_open_turn_limit_gets_429_with_retry_after_and_nothing_starts() {
    let rest = spawn_rest().await;
    let admin = rest.db.ids.user(ADMIN);
    let max = rest.state.settings.chat.max_concurrent_turns_per_user;
    assert!(max > 0);
    // `max` turns already open for the admin on this replica.
    let open: Vec<_> = (0..max)
        .map(|_| rest.state.turns.try_acquire(admin).expect("a slot"))
        .collect();
    let request = || {
        rest.request(Method::POST, "/api/chat", Some(ADMIN))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(chat_body(
                json!([{ "type": "text", "text": "List the departments" }]),
            )))
            .unwrap()
    };
    let response = rest.router.clone().oneshot(request()).await.unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after = response.headers()[header::RETRY_AFTER]
        .to_str()
        .unwrap()
        .parse::<u64>()
        .unwrap();
    assert_eq!(retry_after, rest.state.settings.chat.busy_retry_after_secs);
    let refused = rest.send(request()).await;
    expect_error(
        &refused,
        StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::RateLimited,
    );
    assert_eq!(rest.count("threads").await, 0, "nothing started");
    assert_eq!(rest.state.turns.open(admin), max, "a refusal holds no slot");

    // Another user is not affected; and the admin gets past the limit once a turn ends.
    let other = rest
        .send(
            rest.request(Method::POST, "/api/chat", Some("dos@hill.school"))
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(chat_body(
                    json!([{ "type": "text", "text": "hi" }]),
                )))
                .unwrap(),
        )
        .await;
    assert_ne!(
        other.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        other.body
    );
    drop(open);
    let after = rest.router.clone().oneshot(request()).await.unwrap();
    assert_ne!(after.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn a_client_sending_bad_tokens_is_slowed_to_429_and_others_are_not() {
    let rest = spawn_rest().await;
    let max = rest.state.settings.auth.max_failures_per_window;
    let from = |ip: [u8; 4], token: &str| {
        let mut request = Request::get("/api/staff")
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Body::empty())
            .unwrap();
        request
            .extensions_mut()
            .insert(ConnectInfo(SocketAddr::from((ip, 40_000))));
        request
    };
    let good = rest.token(ADMIN);
    // A client with valid tokens is never limited, however often it calls.
    for _ in 0..max + 5 {
        assert_eq!(
            rest.send(from([10, 0, 0, 1], &good)).await.status,
            StatusCode::OK
        );
    }
    for _ in 0..max {
        let reply = rest.send(from([10, 0, 0, 2], "not.a.token")).await;
        expect_error(&reply, StatusCode::UNAUTHORIZED, ErrorCode::Unauthenticated);
    }
    let response = rest
        .router
        .clone()
        .oneshot(from([10, 0, 0, 2], "not.a.token"))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = response.headers()[header::RETRY_AFTER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=rest.state.settings.auth.failure_window_secs).contains(&retry_after));
    // Verified first: a valid token from that very address (a school behind one NAT) passes.
    for _ in 0..3 {
        assert_eq!(
            rest.send(from([10, 0, 0, 2], &good)).await.status,
            StatusCode::OK
        );
    }
    let still_limited = rest.send(from([10, 0, 0, 2], "not.a.token")).await;
    expect_error(
        &still_limited,
        StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::RateLimited,
    );
    // Other addresses, good or bad, are unaffected.
    assert_eq!(
        rest.send(from([10, 0, 0, 3], &good)).await.status,
        StatusCode::OK
    );
    let other_bad = rest.send(from([10, 0, 0, 3], "not.a.token")).await;
    assert_eq!(other_bad.status, StatusCode::UNAUTHORIZED);
}

/// A request for `/api/staff` from `peer` with `token` and, if given, `X-Forwarded-For`.
fn staff_request(peer: [u8; 4], forwarded_for: Option<&str>, token: &str) -> Request<Body> {
    let mut request =
        Request::get("/api/staff").header(header::AUTHORIZATION, format!("Bearer {token}"));
    if let Some(forwarded_for) = forwarded_for {
        request = request.header("x-forwarded-for", forwarded_for);
    }
    let mut request = request.body(Body::empty()).unwrap();
    request
        .extensions_mut()
        .insert(ConnectInfo(SocketAddr::from((peer, 40_000))));
    request
}

#[tokio::test]
async fn forwarded_for_names_the_client_only_behind_a_trusted_proxy() {
    let rest = spawn_rest_with(|settings| {
        settings.http.trusted_proxies = vec!["10.9.0.0/16".to_owned()];
    })
    .await;
    let max = rest.state.settings.auth.max_failures_per_window;
    let good = rest.token(ADMIN);
    // An untrusted peer cannot dodge the limit by inventing a new X-Forwarded-For each time.
    for n in 0..max {
        let spoofed = format!("203.0.113.{n}");
        let reply = rest
            .send(staff_request([10, 1, 0, 1], Some(&spoofed), "not.a.token"))
            .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    }
    let reply = rest
        .send(staff_request(
            [10, 1, 0, 1],
            Some("198.51.100.99"),
            "not.a.token",
        ))
        .await;
    expect_error(
        &reply,
        StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::RateLimited,
    );

    // Behind the trusted ingress, each client is its own X-Forwarded-For address: one client's
    // failures limit that client, not everyone the ingress forwards.
    for _ in 0..max {
        let reply = rest
            .send(staff_request(
                [10, 9, 0, 1],
                Some("1.1.1.1, 203.0.113.5"),
                "not.a.token",
            ))
            .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    }
    let limited = rest
        .send(staff_request(
            [10, 9, 0, 2],
            Some("203.0.113.5"),
            "not.a.token",
        ))
        .await;
    expect_error(
        &limited,
        StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::RateLimited,
    );
    let other = rest
        .send(staff_request(
            [10, 9, 0, 1],
            Some("203.0.113.6"),
            "not.a.token",
        ))
        .await;
    assert_eq!(
        other.status,
        StatusCode::UNAUTHORIZED,
        "another client behind the ingress"
    );
    assert_eq!(
        rest.send(staff_request([10, 9, 0, 1], Some("203.0.113.5"), &good))
            .await
            .status,
        StatusCode::OK,
        "the limited client's valid token still passes"
    );
}

#[tokio::test]
async fn every_rest_endpoint_that_takes_an_id_reaches_nothing_of_another_school() {
    let rest: Rest = spawn_rest().await;
    let ids = &rest.db.ids;
    let lakeside_admin = "admin@lakeside.college";
    let departments = rest.count("departments").await;

    // Hill's admin with Lakeside's ids, and Lakeside's admin with Hill's.
    let attempts = [
        (
            ADMIN,
            Method::PATCH,
            format!("/api/departments/{}", ids.department("Sciences")),
            Some(json!({ "name": "Taken" })),
        ),
        (
            lakeside_admin,
            Method::PATCH,
            format!("/api/departments/{}", ids.department("Kololo Arts")),
            Some(json!({ "name": "Taken" })),
        ),
        (
            ADMIN,
            Method::GET,
            format!(
                "/api/students?query=Ochieng&classId={}",
                ids.class("Form 1")
            ),
            None,
        ),
        (
            lakeside_admin,
            Method::GET,
            format!(
                "/api/students?query=Nakato&classId={}",
                ids.class("S1 Blue")
            ),
            None,
        ),
    ];
    for (who, method, path, body) in attempts {
        let reply = match body {
            Some(body) => {
                rest.json(method.clone(), who, &path, &body.to_string())
                    .await
            }
            None => rest.get(who, &path).await,
        };
        match reply.status {
            StatusCode::NOT_FOUND => assert_eq!(reply.error().code, ErrorCode::NotFound),
            StatusCode::OK => assert_eq!(reply.body, json!([]), "{who} {method} {path}"),
            other => panic!("{who} {method} {path}: {other} {}", reply.body),
        }
    }
    // The campus header with another school's campus.
    for (who, campus) in [
        (ADMIN, ids.campus("Main")),
        (lakeside_admin, ids.campus("Kololo")),
    ] {
        for path in ["/api/departments", "/api/classes", "/api/staff"] {
            let reply = rest
                .send(
                    rest.request(Method::GET, path, Some(who))
                        .header("x-rover-campus", campus.to_string())
                        .body(Body::empty())
                        .unwrap(),
                )
                .await;
            assert!(
                matches!(reply.status, StatusCode::NOT_FOUND | StatusCode::FORBIDDEN),
                "{who} {path}: {} {}",
                reply.status,
                reply.body
            );
        }
    }
    assert_eq!(rest.count("departments").await, departments);
    assert_eq!(rest.count("audit_log").await, 0);
}
