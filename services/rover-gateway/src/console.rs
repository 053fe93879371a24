//! The Hub console (`console/` at the repository root, built by `make console`): its built assets
//! served at `/` from `http.console_dir`, and — in development mode only — `POST /api/dev/token`,
//! the console's sign-in as a demo user.
//!
//! Paths under `/api/` never reach the console: an unknown endpoint stays the JSON 404. Any other
//! `GET` is a file of the built console, or its `index.html` (the page reads its chat id from the
//! query string) — never a redirect. When the console is not built, `/` says how to build it; with `console_dir`
//! empty (the container images) there is no console and every unknown path is the JSON 404.

use std::path::Path;

use anyhow::Context as _;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use rover_contracts::ErrorCode;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use tower::ServiceExt as _;
use tower_http::services::{ServeDir, ServeFile};

use crate::error::{self, ApiError};
use crate::settings::AuthSettings;
use crate::state::AppState;

/// What `/` says when `http.console_dir` has no built console.
pub const NOT_BUILT: &str = "Rover's gateway is running, but the console is not built here. \
Run `make console` (npm ci && npm run build in console/), then reload this page.\n";

/// The console's API routes: `POST /api/dev/token` when `auth.development` is on, nothing
/// otherwise (the path is then the JSON 404 of any unknown endpoint).
pub(crate) fn router(development: bool) -> Router<AppState> {
    let router = Router::new();
    if development {
        router.route("/api/dev/token", post(dev_token))
    } else {
        router
    }
}

/// The gateway's fallback: the JSON 404 for unknown endpoints, the built console for pages.
pub(crate) async fn fallback(State(state): State<AppState>, request: Request) -> Response {
    let path = request.uri().path();
    let page = matches!(*request.method(), Method::GET | Method::HEAD)
        && path != "/api"
        && !path.starts_with("/api/");
    let dir = &state.settings.http.console_dir;
    if !page || dir.as_os_str().is_empty() {
        return error::not_found().await.into_response();
    }
    serve(dir, request).await
}

/// Serves `request` from the built console in `dir`, falling back to its `index.html`.
async fn serve(dir: &Path, request: Request) -> Response {
    let index = dir.join("index.html");
    if !index.is_file() {
        if request.uri().path() == "/" {
            return (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                NOT_BUILT,
            )
                .into_response();
        }
        return error::not_found().await.into_response();
    }
    // Never a redirect: ServeDir would answer a directory without its trailing slash with one to
    // the same path plus `/`, and `GET //assets` would send the browser to `//assets/` — another
    // host. A directory is its `index.html` if it has one, the console's page otherwise.
    let files = ServeDir::new(dir)
        .redirect_to_trailing_slash(false)
        .fallback(ServeFile::new(index));
    match files.oneshot(request).await {
        Ok(response) => response.map(axum::body::Body::new),
        Err(never) => match never {},
    }
}

/// The body of `POST /api/dev/token`.
#[derive(Debug, Deserialize)]
struct TokenRequest {
    email: String,
}

/// What `POST /api/dev/token` answers: the bearer token and who it is for.
#[derive(Debug, Serialize)]
pub(crate) struct DevSession {
    /// A development bearer token (HS256), as `rover-gateway token` prints.
    pub token: String,
    /// The user's login email.
    pub email: String,
    /// Their display name.
    pub name: String,
    /// Their school's name.
    pub school: String,
    /// Their campus's name, for campus staff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub campus: Option<String>,
}

/// `POST /api/dev/token {email}`: a development token for a demo user (registered only in
/// development mode). An unknown email is a 404.
async fn dev_token(
    State(state): State<AppState>,
    Json(body): Json<TokenRequest>,
) -> Result<Json<DevSession>, ApiError> {
    let session = dev_session(&state.pool, &state.settings.auth, body.email.trim())
        .await
        .map_err(|error| match error.downcast::<NoSuchUser>() {
            Ok(NoSuchUser) => {
                ApiError::new(ErrorCode::NotFound, "There is no user with that email.")
            }
            Err(other) => ApiError::internal(format!("{other:#}")),
        })?;
    Ok(Json(session))
}

/// The email names no user of any school.
#[derive(Debug, thiserror::Error)]
#[error("no user has this email")]
struct NoSuchUser;

/// A development token for the user with this email, and who they are: what `rover-gateway
/// token` prints and `POST /api/dev/token` answers.
pub(crate) async fn dev_session(
    pool: &PgPool,
    auth: &AuthSettings,
    email: &str,
) -> anyhow::Result<DevSession> {
    let school = rover_domain::actor::user_school_by_email(pool, email)
        .await?
        .ok_or(NoSuchUser)
        .with_context(|| format!("No user with the email {email}"))?;
    let mut tx = rover_domain::begin_tenant(pool, school).await?;
    let user = rover_domain::actor::load_user_by_email(&mut tx, email).await?;
    tx.rollback().await?;
    let token = crate::auth::dev_token(auth, user.user_id, &user.email, chrono::Utc::now())?;
    Ok(DevSession {
        token,
        email: user.email,
        name: user.name,
        school: user.school.name,
        campus: user.campus.map(|c| c.name),
    })
}
