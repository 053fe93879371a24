//! MCP at `/mcp`: Rover's RPC tools for MCP clients, over Streamable HTTP (rmcp), stateless —
//! any replica answers any request, as with chat.
//!
//! - **Auth.** The gateway is an OAuth 2.0 resource server: `/mcp` takes the same bearer JWTs as
//!   the rest of the API, verified by the same [`Principal`] extractor (and so the same per-client
//!   limit on rejected tokens). Without a valid one: 401 with `WWW-Authenticate: Bearer
//!   resource_metadata="…"`, naming the protected-resource metadata document (RFC 9728) served at
//!   `/.well-known/oauth-protected-resource` (and `…/mcp`, the path-suffixed form).
//! - **`tools/list`** ([`catalogue`]): the RPC tools the caller's live rows give them.
//! - **`tools/call`** ([`server`]): a turn identity signed for the one call, through the tool
//!   server's `execute()`; the envelope comes back as `structuredContent`.

pub mod approval;
pub mod catalogue;
pub mod server;

use axum::Router;
use axum::extract::{FromRequestParts as _, Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rover_contracts::ErrorCode;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::auth::Principal;
use crate::state::AppState;

/// Where the MCP endpoint is served.
pub const PATH: &str = "/mcp";
/// Where the protected-resource metadata is served (RFC 9728 §3).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The MCP endpoint's settings (`[mcp]`, `ROVER_MCP__…`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct McpSettings {
    /// The gateway's public base URL (`https://rover.example.org`): the protected resource is
    /// `<public_url>/mcp`. Unset (development): taken from each request's `Host` header, as
    /// `http://<host>`. Set it in production, where TLS ends before the gateway.
    pub public_url: Option<String>,
    /// The authorization servers (issuer URLs) the metadata names, where clients get tokens.
    /// Empty: `auth.issuer`.
    pub authorization_servers: Vec<String>,
    /// The `Host` values the gateway accepts when `http.allowed_hosts` is empty (kept for
    /// existing configurations; see `http.allowed_hosts`).
    pub allowed_hosts: Vec<String>,
}

/// The HTTP request's span, handed to the MCP handlers through the request's extensions.
#[derive(Debug, Clone)]
struct RequestSpan(tracing::Span);

/// `/mcp` (bearer token required) and the metadata documents (public).
pub fn router(state: &AppState) -> Router<AppState> {
    let settings = &state.settings;
    let config = StreamableHttpServerConfig::default()
        // Stateless: no session lives in one replica's memory, and a request is one answer.
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_allowed_hosts(crate::edge::allowed_hosts(settings))
        .with_max_request_body_bytes(settings.http.body_limit_bytes);
    let server = server::McpServer::new(state);
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        NeverSessionManager::default().into(),
        config,
    );
    Router::new()
        .route_service(PATH, service)
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            require_bearer,
        ))
        .route(METADATA_PATH, axum::routing::get(metadata))
        .route(
            &format!("{METADATA_PATH}{PATH}"),
            axum::routing::get(metadata),
        )
}

/// Middleware: a valid bearer token becomes the request's [`Principal`]; anything else is the
/// gateway's usual 401 (or 429 past the limit on rejected tokens), with the challenge that
/// points an MCP client at the metadata.
async fn require_bearer(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    match Principal::from_request_parts(&mut parts, &state).await {
        Ok(principal) => {
            parts.extensions.insert(principal);
            parts
                .extensions
                .insert(RequestSpan(tracing::Span::current()));
            next.run(Request::from_parts(parts, body)).await
        }
        Err(error) => {
            let challenge = error.code == ErrorCode::Unauthenticated;
            let mut response = error.into_response();
            if challenge {
                let presented = parts.headers.contains_key(header::AUTHORIZATION);
                let value = challenge_header(&base_url(&state, &parts.headers), presented);
                if let Ok(value) = HeaderValue::from_str(&value) {
                    response
                        .headers_mut()
                        .insert(header::WWW_AUTHENTICATE, value);
                }
            }
            response
        }
    }
}

/// `Bearer resource_metadata="…"`, with `error="invalid_token"` when a token was presented
/// (RFC 6750 §3: a request without one gets no error code).
fn challenge_header(base: &str, presented: bool) -> String {
    let error = if presented {
        r#", error="invalid_token""#
    } else {
        ""
    };
    format!(r#"Bearer resource_metadata="{base}{METADATA_PATH}"{error}"#)
}

/// The protected-resource metadata (RFC 9728 §2).
async fn metadata(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let base = base_url(&state, &headers);
    let settings = &state.settings;
    let servers = if settings.mcp.authorization_servers.is_empty() {
        vec![settings.auth.issuer.clone()]
    } else {
        settings.mcp.authorization_servers.clone()
    };
    axum::Json(json!({
        "resource": format!("{base}{PATH}"),
        "authorization_servers": servers,
        "bearer_methods_supported": ["header"],
        "resource_name": "Rover",
    }))
    .into_response()
}

/// `mcp.public_url`, or `http://<Host>` when it is unset — a `Host` of anything but host
/// characters is replaced by `localhost`, so it cannot break out of the quoted challenge.
fn base_url(state: &AppState, headers: &HeaderMap) -> String {
    if let Some(url) = &state.settings.mcp.public_url {
        return url.trim_end_matches('/').to_owned();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'))
        })
        .unwrap_or("localhost");
    format!("http://{host}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_names_the_metadata() {
        assert_eq!(
            challenge_header("https://rover.example", false),
            r#"Bearer resource_metadata="https://rover.example/.well-known/oauth-protected-resource""#
        );
        assert!(challenge_header("http://h", true).ends_with(r#", error="invalid_token""#));
    }
}
