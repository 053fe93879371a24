//! The HTTP edge, attacked as an outsider would: a page on another host rebinding DNS to the
//! gateway (refused on every route, development token included), a page framing the console
//! (refused by its headers), and slow clients holding connections — a head or a body sent a byte
//! at a time, idle keep-alive sockets, one address opening connection after connection. The slow
//! attacks run over real TCP through `edge::serve`, the gateway's own accept loop.

use std::net::SocketAddr;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use rover_contracts::ErrorCode;
use rover_gateway::Settings;
use rover_testkit::within;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tower::ServiceExt as _;

use crate::rest::{ADMIN, Rest, spawn_rest, spawn_rest_with};

/// `rest`'s router served over TCP by the gateway's accept loop, until the sender is dropped.
async fn serve(rest: &Rest) -> (SocketAddr, oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(rover_gateway::serve(
        listener,
        rest.router.clone(),
        rest.state.settings.http.clone(),
        rest.state.proxies.clone(),
        async {
            let _ = stopped.await;
        },
    ));
    (address, stop)
}

/// Reads until the server closes the connection; what it sent.
async fn read_to_close(socket: &mut TcpStream) -> String {
    let mut received = Vec::new();
    // A reset is a close too.
    let _ = within(
        "the server closes the connection",
        socket.read_to_end(&mut received),
    )
    .await;
    String::from_utf8_lossy(&received).into_owned()
}

#[tokio::test]
async fn a_foreign_host_is_refused_on_every_route_but_the_health_probes() {
    let rest = spawn_rest().await;
    let with_host = |method: Method, path: &str, host: &str, body: &str| {
        Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, host)
            .header(header::CONTENT_TYPE, "application/json")
            .header(
                header::AUTHORIZATION,
                format!("Bearer {}", rest.token(ADMIN)),
            )
            .body(Body::from(body.to_owned()))
            .unwrap()
    };
    let token_request = r#"{"email":"admin@hill.school"}"#;
    let attacks = [
        (Method::POST, "/api/dev/token", token_request),
        (Method::GET, "/api/departments", ""),
        (Method::POST, "/api/chat", "{}"),
        (Method::POST, "/mcp", "{}"),
        (Method::GET, "/", ""),
        (Method::GET, "/.well-known/oauth-protected-resource", ""),
    ];
    for (method, path, body) in attacks {
        let reply = rest
            .send(with_host(
                method.clone(),
                path,
                "rebind.attacker.example",
                body,
            ))
            .await;
        assert_eq!(
            reply.status,
            StatusCode::FORBIDDEN,
            "{method} {path}: {}",
            reply.body
        );
        assert_eq!(reply.error().code, ErrorCode::PermissionDenied);
        assert!(reply.body.get("token").is_none());
    }
    // The gateway's own name still mints, and the probes answer the kubelet's pod address.
    let minted = rest
        .send(with_host(
            Method::POST,
            "/api/dev/token",
            "localhost:8080",
            token_request,
        ))
        .await;
    assert_eq!(minted.status, StatusCode::OK, "{}", minted.body);
    assert!(minted.body["token"].is_string());
    for probe in ["/healthz", "/readyz"] {
        let response = rest
            .router
            .clone()
            .oneshot(with_host(Method::GET, probe, "10.1.2.3:8080", ""))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{probe}");
    }
}

#[tokio::test]
async fn every_response_forbids_framing_and_foreign_scripts() {
    let rest = spawn_rest().await;
    for path in ["/", "/api/departments", "/healthz"] {
        let response = rest
            .router
            .clone()
            .oneshot(
                rest.request(Method::GET, path, Some(ADMIN))
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        let headers = response.headers();
        assert_eq!(headers[header::X_FRAME_OPTIONS], "DENY", "{path}");
        let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert!(csp.contains("script-src 'self'"), "{path}: {csp}");
        assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    }
}

fn slow(settings: &mut Settings) {
    settings.http.header_read_timeout_ms = 300;
    settings.http.idle_timeout_ms = 600;
    settings.http.body_read_timeout_ms = 300;
    settings.http.max_connections_per_client = 3;
}

#[tokio::test]
async fn a_head_sent_slowly_or_never_is_cut_off() {
    let rest = spawn_rest_with(slow).await;
    let (address, _stop) = serve(&rest).await;

    // A head dripped a byte every 100 ms (never idle for the 600 ms idle timeout): cut off at
    // the 300 ms header deadline, long before the dripping ends.
    let mut drip = TcpStream::connect(address).await.unwrap();
    let (mut reader, mut writer) = drip.split();
    let head = format!(
        "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: {}",
        "a".repeat(60)
    );
    let dripping = async {
        for byte in head.bytes() {
            if writer.write_all(&[byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    let mut answer = Vec::new();
    tokio::select! {
        _ = reader.read_to_end(&mut answer) => {}
        () = dripping => panic!("the server waited out a head dripped over 6 s"),
    }
    assert!(!String::from_utf8_lossy(&answer).contains("200 OK"));

    // Half a request head, then nothing: closed, with nothing served.
    let mut half = TcpStream::connect(address).await.unwrap();
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        .await
        .unwrap();
    let answer = read_to_close(&mut half).await;
    assert!(!answer.contains("200 OK"), "{answer}");

    // A connection that never sends anything is closed too.
    let mut idle = TcpStream::connect(address).await.unwrap();
    assert_eq!(read_to_close(&mut idle).await, "");

    // A whole request is served as ever.
    let mut whole = TcpStream::connect(address).await.unwrap();
    whole
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut whole).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
}

#[tokio::test]
async fn a_body_sent_slowly_ends_with_408() {
    let rest = spawn_rest_with(slow).await;
    let (address, _stop) = serve(&rest).await;
    let mut socket = TcpStream::connect(address).await.unwrap();
    let head = format!(
        "POST /api/chat HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"id\":",
        rest.token(ADMIN)
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let answer = read_to_close(&mut socket).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("did not arrive within 300 ms"), "{answer}");
}

#[tokio::test]
async fn one_address_may_hold_only_so_many_connections() {
    let rest = spawn_rest_with(|settings| {
        slow(settings);
        settings.http.header_read_timeout_ms = 60_000;
        settings.http.idle_timeout_ms = 60_000;
    })
    .await;
    let (address, _stop) = serve(&rest).await;
    // Three connections, each proven accepted by a request answered on it (kept alive).
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut socket = TcpStream::connect(address).await.unwrap();
        socket
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await
            .unwrap();
        let mut buffer = [0u8; 512];
        let read = within("an answer", socket.read(&mut buffer)).await.unwrap();
        assert!(buffer[..read].starts_with(b"HTTP/1.1 200 OK"));
        held.push(socket);
    }
    // The fourth is closed at accept, unanswered.
    let mut fourth = TcpStream::connect(address).await.unwrap();
    let _ = fourth
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await;
    assert_eq!(read_to_close(&mut fourth).await, "");
    drop(held);
}
