//! Hardened inputs: every error the gateway emits — its own and axum's — is the one JSON error
//! shape; chat messages, their parts and attachments and every JSON body's nesting are bounded;
//! a user's and a school's open turns are counted in Postgres until the worker ends them (429 +
//! `Retry-After`), a chat runs one turn at a time (409), a full turns queue is 503, the same chat
//! id in two schools is two threads; resumed streams share one consumer and are limited per user;
//! a client sending bad tokens is slowed to 429 while valid tokens from the same address still
//! pass, and `X-Forwarded-For` is believed only from a trusted proxy. Also: REST with another
//! school's ids.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, StatusCode, header};
use rover_contracts::ErrorCode;
use serde_json::{Value, json};
use tower::ServiceExt as _;
use uuid::Uuid;

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
    // (`/` itself is the Hub console's page: `console.rs`.)
    let unknown = rest.send(empty(Method::GET, "/api")).await;
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

    // An attachment is a bounded https link with a bounded name: not the file inline, not another
    // scheme, not a megabyte of URL or file name.
    let file = |url: String, filename: String| {
        chat_body(
            json!([{ "type": "file", "mediaType": "text/csv", "url": url, "filename": filename }]),
        )
    };
    let https = "https://files.hill.school/u/a.csv".to_owned();
    let long_url = format!("{https}?{}", "q".repeat(chat.max_attachment_url_bytes));
    let cases = [
        (
            file(long_url, "a.csv".to_owned()),
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::TooLarge,
        ),
        (
            file(
                https.clone(),
                "n".repeat(chat.max_attachment_name_bytes + 1),
            ),
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::TooLarge,
        ),
        (
            file("data:text/csv;base64,YSxi".to_owned(), "a.csv".to_owned()),
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
        ),
        (
            file("javascript:alert(1)".to_owned(), "a.csv".to_owned()),
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
        ),
    ];
    for (body, status, code) in cases {
        let refused = post(&rest, body).await;
        expect_error(&refused, status, code);
        assert!(
            refused.error().message.contains("attachment"),
            "{}",
            refused.body
        );
    }

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

fn retry_after(headers: &axum::http::HeaderMap) -> u64 {
    headers[header::RETRY_AFTER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_users_open_turns_are_counted_until_the_turn_ends_not_until_the_client_leaves() {
    let rest = spawn_rest_with(|s| s.chat.max_concurrent_turns_per_user = 2).await;
    // Two turns started; their clients went away at once (the streams were dropped).
    for chat in ["c1", "c2"] {
        let (status, _, body) = rest.start_turn(ADMIN, chat).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    assert_eq!(rest.count("open_turns").await, 2);
    let (status, headers, body) = rest.start_turn(ADMIN, "c3").await;
    let refused = Reply { status, body };
    expect_error(
        &refused,
        StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::RateLimited,
    );
    assert_eq!(
        retry_after(&headers),
        rest.state.settings.chat.busy_retry_after_secs
    );
    assert_eq!(rest.count("open_turns").await, 2, "a refusal opens nothing");
    // Another user is not affected.
    let (status, _, body) = rest.start_turn("dos@hill.school", "c4").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Once the worker ends the admin's turns, they may start again.
    rest.finish_turns_of(ADMIN).await;
    let (status, _, body) = rest.start_turn(ADMIN, "c3").await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn a_second_message_on_a_chat_whose_reply_is_in_progress_is_409() {
    let rest = spawn_rest().await;
    let (status, _, body) = rest.start_turn(ADMIN, "busy-chat").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _, body) = rest.start_turn(ADMIN, "busy-chat").await;
    expect_error(
        &Reply { status, body },
        StatusCode::CONFLICT,
        ErrorCode::TurnInProgress,
    );
    assert_eq!(rest.count("open_turns").await, 1);
    // Another chat of the same user is not busy; and once the turn ends, the chat is free.
    let (status, _, _) = rest.start_turn(ADMIN, "other-chat").await;
    assert_eq!(status, StatusCode::OK);
    rest.finish_turns_of(ADMIN).await;
    let (status, _, body) = rest.start_turn(ADMIN, "busy-chat").await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn an_open_turn_nothing_closed_stops_counting_when_its_identity_expires() {
    // A turn whose worker never closed it (say it was dead-lettered undecoded) must not block
    // its chat or its user for ever.
    let rest = spawn_rest_with(|s| s.chat.max_concurrent_turns_per_user = 1).await;
    let (status, _, _) = rest.start_turn(ADMIN, "stuck").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = rest.start_turn(ADMIN, "stuck").await;
    assert_eq!(status, StatusCode::CONFLICT);
    rest.expire_open_turns().await;
    let (status, _, body) = rest.start_turn(ADMIN, "stuck").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        rest.count("open_turns").await,
        1,
        "the expired row was swept"
    );
}

#[tokio::test]
async fn a_school_over_its_open_turn_limit_gets_429_and_other_schools_do_not() {
    let rest = spawn_rest_with(|s| {
        s.chat.max_concurrent_turns_per_user = 0;
        s.chat.max_concurrent_turns_per_school = 2;
    })
    .await;
    for (email, chat) in [(ADMIN, "s1"), ("dos@hill.school", "s2")] {
        let (status, _, body) = rest.start_turn(email, chat).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (status, headers, body) = rest.start_turn("amina@hill.school", "s3").await;
    expect_error(
        &Reply { status, body },
        StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::RateLimited,
    );
    assert!(retry_after(&headers) >= 1);
    let (status, _, body) = rest.start_turn("admin@lakeside.college", "s4").await;
    assert_eq!(status, StatusCode::OK, "another school: {body}");
}

#[tokio::test]
async fn a_full_turns_queue_refuses_the_turn_with_503_and_it_does_not_count() {
    let rest = spawn_rest_with(|s| s.amqp.turns_max_length = 1).await;
    // No worker consumes, so the turns stay queued. A quorum queue applies its limit once it is
    // exceeded: it takes one turn beyond it, then the broker nacks every publish.
    let mut accepted = 0;
    let refused = loop {
        let (status, headers, body) = rest.start_turn(ADMIN, &format!("q{accepted}")).await;
        if status != StatusCode::OK {
            break (Reply { status, body }, headers);
        }
        accepted += 1;
        assert!(accepted <= 2, "the queue is capped at its limit (+1)");
    };
    assert!(accepted >= 1);
    expect_error(
        &refused.0,
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Unavailable,
    );
    assert!(retry_after(&refused.1) >= 1);
    assert_eq!(
        rest.count("open_turns").await,
        accepted,
        "the refused turn was closed"
    );
    let (status, _, body) = rest.start_turn("dos@hill.school", "q-other").await;
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "still full: {body}"
    );
}

#[tokio::test]
async fn a_chat_is_keyed_by_school_user_and_id_so_no_one_can_claim_or_probe_anothers() {
    let rest = spawn_rest().await;
    let uuid = Uuid::new_v4().to_string();
    for chat in ["shared-chat-id", uuid.as_str()] {
        // Lakeside takes the id first; Hill's users are not locked out of it, and a colleague in
        // the same school who takes it first does not lock the admin out either.
        for email in ["admin@lakeside.college", "dos@hill.school", ADMIN] {
            let (status, _, body) = rest.start_turn(email, chat).await;
            assert_eq!(status, StatusCode::OK, "{email}: {body}");
        }
    }
    assert_eq!(rest.count("threads").await, 6);
    assert_eq!(
        rest.count("open_turns").await,
        6,
        "each its own thread, running"
    );
}

#[tokio::test]
async fn a_colleagues_chat_id_answers_exactly_as_an_unused_one() {
    let rest = spawn_rest().await;
    let (status, _, body) = rest.start_turn(ADMIN, "admins-chat").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let colleague = "dos@hill.school";
    let probe = |chat: &'static str| {
        let rest = &rest;
        async move {
            let resumed = rest
                .get(colleague, &format!("/api/chat/{chat}/stream"))
                .await;
            let stopped = rest
                .json(
                    Method::POST,
                    colleague,
                    &format!("/api/chat/{chat}/stop"),
                    "",
                )
                .await;
            (
                (resumed.status, resumed.body),
                (stopped.status, stopped.body),
            )
        }
    };
    let taken = probe("admins-chat").await;
    let unused = probe("never-used-chat").await;
    assert_eq!(taken, unused);
    assert_eq!(taken.0.0, StatusCode::NO_CONTENT);
    assert_eq!(taken.1.0, StatusCode::NO_CONTENT);
    // The admin's reply was not stopped by the colleague's Stop.
    let stopped: i64 = rest
        .count("open_turns WHERE stop_requested_at IS NOT NULL")
        .await;
    assert_eq!(stopped, 0);
}

#[tokio::test]
async fn resumed_streams_share_the_replicas_one_consumer_and_are_limited_per_user() {
    let rest = spawn_rest().await;
    let max = rest.state.settings.chat.max_resumes_per_user;
    assert!(max > 1);
    let (status, _, body) = rest.start_turn(ADMIN, "resumed").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let resume = || {
        rest.request(Method::GET, "/api/chat/resumed/stream", Some(ADMIN))
            .body(Body::empty())
            .unwrap()
    };
    // `max` streams of the running turn, held open.
    let mut open = Vec::new();
    for _ in 0..max {
        let response = rest.router.clone().oneshot(resume()).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        open.push(response);
    }
    // However many streams are open, the replica has one consumer and one subscription queue.
    let consumers = rest.vhost.list("list_consumers", &["queue_name"]);
    assert_eq!(
        consumers.len(),
        1,
        "one consumer for every stream: {consumers:?}"
    );
    let subscriptions = rest
        .vhost
        .list("list_queues", &["name", "exclusive"])
        .into_iter()
        .filter(|q| q["exclusive"] == true)
        .count();
    assert_eq!(subscriptions, 1);
    assert_eq!(rest.state.events.turns_followed(), 1);
    // One more is refused, with the JSON error and a Retry-After.
    let response = rest.router.clone().oneshot(resume()).await.unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(retry_after(response.headers()) >= 1);
    // A stream that ends frees its place; when none follows the turn, the replica forgets it.
    open.pop();
    let response = rest.router.clone().oneshot(resume()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    drop(response);
    drop(open);
    assert_eq!(rest.state.events.turns_followed(), 0);
    assert_eq!(rest.state.resumes.open(rest.db.ids.user(ADMIN)), 0);
}

#[tokio::test]
async fn a_client_sending_bad_tokens_is_slowed_to_429_and_others_are_not() {
    let rest = spawn_rest().await;
    let max = rest.state.settings.auth.max_failures_per_window;
    let from = |ip: [u8; 4], token: &str| {
        let mut request = Request::get("/api/staff")
            .header(header::HOST, "localhost")
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
    let mut request = Request::get("/api/staff")
        .header(header::HOST, "localhost")
        .header(header::AUTHORIZATION, format!("Bearer {token}"));
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
