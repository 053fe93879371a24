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

pub(crate) mod approval;
pub(crate) mod catalogue;
pub(crate) mod server;

use axum::Router;
use axum::extract::{FromRequestParts as _, Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rover_contracts::ErrorCode;
use serde_json::json;

use crate::auth::{Audiences, Principal};
use crate::error::ApiError;
use crate::settings::McpSettings;
use crate::state::AppState;

/// Where the MCP endpoint is served.
pub(crate) const PATH: &str = "/mcp";
/// Where the protected-resource metadata is served (RFC 9728 §3).
pub(crate) const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// What guards the `/mcp` door besides the token: the user's requests in flight.
#[derive(Debug, Clone)]
struct Door {
    state: AppState,
    in_flight: std::sync::Arc<crate::limits::StreamSlots>,
}

/// `/mcp` (bearer token required) and the metadata documents (public).
pub(crate) fn router(state: &AppState) -> Router<AppState> {
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
            Door {
                state: state.clone(),
                in_flight: crate::limits::StreamSlots::new(settings.mcp.max_in_flight_per_user),
            },
            require_bearer,
        ))
        .route(METADATA_PATH, axum::routing::get(metadata))
        .route(
            &format!("{METADATA_PATH}{PATH}"),
            axum::routing::get(metadata),
        )
}

/// Middleware: the `/mcp` door. A browser's `Origin` must be allowed (403); a valid bearer token
/// bound to this resource, of a user that exists, becomes the request's [`Principal`] — anything
/// else is the gateway's usual 401 (or 429 past the limit on rejected tokens), with the challenge
/// that points an MCP client at the metadata; and the user may have only so many requests in
/// flight (429).
async fn require_bearer(State(door): State<Door>, request: Request, next: Next) -> Response {
    let state = &door.state;
    let (mut parts, body) = request.into_parts();
    let base = base_url(state, &parts.headers);
    if let Some(origin) = parts.headers.get(header::ORIGIN)
        && !origin_allowed(
            &state.settings.mcp,
            &base,
            origin.to_str().unwrap_or_default(),
        )
    {
        tracing::warn!(origin = ?origin, "MCP request from a foreign origin refused");
        return ApiError::new(
            ErrorCode::PermissionDenied,
            "Requests to /mcp from this web origin are not allowed (mcp.allowed_origins).",
        )
        .into_response();
    }
    parts.extensions.insert(audiences(state, &base));
    let principal = match Principal::from_request_parts(&mut parts, state).await {
        Ok(principal) => principal,
        Err(error) => return challenged(error, &base, &parts.headers),
    };
    // A token whose subject is no user here is as good as none. The school found is the
    // request's tenant from here on (the handlers do not look it up again).
    let school = match crate::caller::school_of(state, &principal).await {
        Ok(school) => school,
        Err(error) => return challenged(error, &base, &parts.headers),
    };
    let Some(slot) = door.in_flight.try_acquire(principal.user_id) else {
        return ApiError::new(
            ErrorCode::RateLimited,
            format!(
                "You already have {} MCP requests in flight. Wait for one, then try again.",
                state.settings.mcp.max_in_flight_per_user
            ),
        )
        .retry_after(state.settings.chat.busy_retry_after_secs)
        .into_response();
    };
    parts
        .extensions
        .insert(server::Member { principal, school });
    parts
        .extensions
        .insert(server::RequestSpan(tracing::Span::current()));
    let response = next.run(Request::from_parts(parts, body)).await;
    drop(slot);
    response
}

/// A rejection, with the challenge when it is a 401.
fn challenged(error: ApiError, base: &str, headers: &HeaderMap) -> Response {
    let challenge = error.code == ErrorCode::Unauthenticated;
    let mut response = error.into_response();
    if challenge {
        let presented = headers.contains_key(header::AUTHORIZATION);
        if let Ok(value) = HeaderValue::from_str(&challenge_header(base, presented)) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
    }
    response
}

/// The audiences a token for `/mcp` may carry (`mcp.audiences`).
fn audiences(state: &AppState, base: &str) -> Audiences {
    let settings = &state.settings;
    if !settings.mcp.audiences.is_empty() {
        return Audiences(settings.mcp.audiences.clone());
    }
    let mut audiences = vec![format!("{base}{PATH}")];
    if settings.auth.development {
        audiences.push(settings.auth.audience.clone());
    }
    Audiences(audiences)
}

/// Whether a browser's `origin` may call `/mcp` (`mcp.allowed_origins`, else the gateway's own).
fn origin_allowed(settings: &McpSettings, base: &str, origin: &str) -> bool {
    let origin = origin.trim_end_matches('/');
    if settings.allowed_origins.is_empty() {
        return origin.eq_ignore_ascii_case(base);
    }
    settings
        .allowed_origins
        .iter()
        .any(|allowed| allowed.trim_end_matches('/').eq_ignore_ascii_case(origin))
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
