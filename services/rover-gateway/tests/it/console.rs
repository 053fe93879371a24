//! The Hub console's side of the gateway, in-process: the built console served at `/` (its files,
//! the `index.html` fallback, the note when it is not built, unknown `/api/…` paths still the JSON
//! 404), and `POST /api/dev/token`, minted only in development mode. The console itself, in a real
//! browser, is `tests/it/console.rs` of `rover-tests`.

use std::path::PathBuf;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use rover_contracts::ErrorCode;
use rover_settings::Secret;
use rover_testkit::within;
use serde_json::{Value, json};
use tower::ServiceExt as _;

use crate::rest::{ADMIN, Rest, spawn_rest, spawn_rest_with};

const INDEX: &str = "<!doctype html><title>Rover console</title><div id=root></div>";
const SCRIPT: &str = "console.log('rover');";

/// A response's status, content type and body text.
struct Page {
    status: StatusCode,
    content_type: String,
    text: String,
}

async fn fetch(rest: &Rest, method: Method, path: &str) -> Page {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, "localhost")
        .body(Body::empty())
        .unwrap();
    let response = within("the router answers", rest.router.clone().oneshot(request))
        .await
        .expect("the router is infallible");
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("read the body");
    Page {
        status,
        content_type,
        text: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// A built console in a fresh directory: `index.html` and one asset.
fn built_console() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rover-console-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(dir.join("assets")).unwrap();
    std::fs::write(dir.join("index.html"), INDEX).unwrap();
    std::fs::write(dir.join("assets/index-1234.js"), SCRIPT).unwrap();
    dir
}

fn assert_json_not_found(page: &Page) {
    assert_eq!(page.status, StatusCode::NOT_FOUND, "{}", page.text);
    assert!(
        page.content_type.starts_with("application/json"),
        "{}",
        page.content_type
    );
    let body: Value = serde_json::from_str(&page.text).unwrap();
    assert_eq!(body["error"]["code"], json!(ErrorCode::NotFound), "{body}");
}

#[tokio::test]
async fn the_built_console_is_served_at_the_root_and_api_paths_stay_json() {
    let dir = built_console();
    let console_dir = dir.clone();
    let rest = spawn_rest_with(move |s| s.http.console_dir = console_dir).await;

    let index = fetch(&rest, Method::GET, "/").await;
    assert_eq!(index.status, StatusCode::OK);
    assert!(
        index.content_type.starts_with("text/html"),
        "{}",
        index.content_type
    );
    assert_eq!(index.text, INDEX);
    let script = fetch(&rest, Method::GET, "/assets/index-1234.js").await;
    assert_eq!(script.status, StatusCode::OK);
    assert!(
        script.content_type.contains("javascript"),
        "{}",
        script.content_type
    );
    assert_eq!(script.text, SCRIPT);
    // Any other page is the console's index (it reads the chat id from the query string).
    let deep = fetch(&rest, Method::GET, "/chats/anything?chat=c-1").await;
    assert_eq!((deep.status, deep.text.as_str()), (StatusCode::OK, INDEX));
    // The API's own paths never fall through to the console, nor do writes.
    assert_json_not_found(&fetch(&rest, Method::GET, "/api/no-such-endpoint").await);
    assert_json_not_found(&fetch(&rest, Method::GET, "/api").await);
    assert_json_not_found(&fetch(&rest, Method::POST, "/").await);
    // The endpoints still answer as before.
    let labels = fetch(&rest, Method::GET, "/api/tool-labels").await;
    assert_eq!(labels.status, StatusCode::OK);
    assert!(labels.content_type.starts_with("application/json"));
    std::fs::remove_dir_all(dir).unwrap();
}

/// The console's file server never redirects: a directory asked for without its trailing slash
/// used to answer `307 Location: <path>/`, and `GET //assets` sent the browser to `//assets/`,
/// another host. Every such path is now the page itself (or the directory's own file), in place.
#[tokio::test]
async fn the_console_never_redirects_least_of_all_off_origin() {
    let dir = built_console();
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    std::fs::write(dir.join("docs/index.html"), "docs").unwrap();
    let console_dir = dir.clone();
    let rest = spawn_rest_with(move |s| s.http.console_dir = console_dir).await;
    for path in [
        "//assets",
        "/assets",
        "///assets",
        "//assets?x=1",
        "//evil.example",
        "//evil.example/assets",
        "/./assets",
        "/assets/../assets",
        "/%2Fassets",
        "/%2F%2Fevil.example",
        "/%5Cevil.example",
        "//docs",
        "/docs",
    ] {
        for method in [Method::GET, Method::HEAD] {
            let Ok(request) = Request::builder()
                .method(method.clone())
                .uri(path)
                .header(header::HOST, "localhost")
                .body(Body::empty())
            else {
                continue;
            };
            let response = within("the router answers", rest.router.clone().oneshot(request))
                .await
                .expect("the router is infallible");
            assert!(
                !response.status().is_redirection()
                    && response.headers().get(header::LOCATION).is_none(),
                "{method} {path}: {} {:?}",
                response.status(),
                response.headers().get(header::LOCATION)
            );
            assert!(
                response.status() == StatusCode::OK || response.status() == StatusCode::NOT_FOUND,
                "{method} {path}: {}",
                response.status()
            );
        }
    }
    // A directory is its own index.html where it has one, the console's page where it has none.
    let docs = fetch(&rest, Method::GET, "/docs").await;
    assert_eq!((docs.status, docs.text.as_str()), (StatusCode::OK, "docs"));
    let assets = fetch(&rest, Method::GET, "//assets").await;
    assert_eq!(
        (assets.status, assets.text.as_str()),
        (StatusCode::OK, INDEX)
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn without_a_built_console_the_root_says_to_run_make_console() {
    let missing = std::env::temp_dir().join(format!("rover-no-console-{}", uuid::Uuid::new_v4()));
    let rest = spawn_rest_with(move |s| s.http.console_dir = missing).await;
    let root = fetch(&rest, Method::GET, "/").await;
    assert_eq!(root.status, StatusCode::OK);
    assert!(root.content_type.starts_with("text/plain"));
    assert_eq!(root.text, rover_gateway::NOT_BUILT);
    assert!(root.text.contains("make console"));
    assert_json_not_found(&fetch(&rest, Method::GET, "/assets/index-1234.js").await);
}

#[tokio::test]
async fn development_mode_mints_a_demo_users_token() {
    let rest = spawn_rest().await;
    let session = rest
        .send(
            Request::post("/api/dev/token")
                .header(header::HOST, "localhost")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(json!({ "email": ADMIN }).to_string()))
                .unwrap(),
        )
        .await;
    assert_eq!(session.status, StatusCode::OK, "{}", session.body);
    assert_eq!(session.body["email"], ADMIN);
    assert_eq!(session.body["school"], "Kampala Hill School");
    assert!(session.body["name"].as_str().is_some_and(|n| !n.is_empty()));
    // The token is the user's: the API accepts it as them.
    let token = session.body["token"].as_str().expect("a token");
    let mut headers = axum::http::HeaderMap::new();
    headers.insert(
        header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    let principal = rest
        .state
        .auth
        .authenticate(&headers)
        .await
        .expect("the minted token verifies");
    assert_eq!(principal.user_id, rest.db.ids.user(ADMIN));
    let departments = rest
        .send(
            Request::get("/api/departments")
                .header(header::HOST, "localhost")
                .header(header::AUTHORIZATION, format!("Bearer {token}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(departments.status, StatusCode::OK, "{}", departments.body);

    let unknown = rest
        .send(
            Request::post("/api/dev/token")
                .header(header::HOST, "localhost")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(
                    json!({ "email": "nobody@hill.school" }).to_string(),
                ))
                .unwrap(),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.error().code, ErrorCode::NotFound);
    assert!(unknown.error().message.contains("no user"));
}

#[tokio::test]
async fn outside_development_mode_there_is_no_token_endpoint() {
    let rest = spawn_rest_with(|s| {
        s.auth.development = false;
        s.auth.hs256_secret = Some(Secret::new("a configured secret of 32 bytes!!".to_owned()));
    })
    .await;
    let refused = rest
        .send(
            Request::post("/api/dev/token")
                .header(header::HOST, "localhost")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(json!({ "email": ADMIN }).to_string()))
                .unwrap(),
        )
        .await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND, "{}", refused.body);
    assert_eq!(refused.error().code, ErrorCode::NotFound);
    assert!(refused.body.to_string().find("eyJ").is_none());
}

#[tokio::test]
async fn an_empty_console_dir_turns_the_console_off() {
    let rest = spawn_rest_with(|s| s.http.console_dir = PathBuf::new()).await;
    assert_json_not_found(&fetch(&rest, Method::GET, "/").await);
    assert_json_not_found(&fetch(&rest, Method::GET, "/index.html").await);
}
