//! API errors: one JSON shape, `{"error":{"code":"…","message":"…"}}` ([`ErrorBody`], its type for
//! the OpenAPI document and for clients), with the HTTP status and the stable code from the
//! contracts' error table. [`json_errors`] gives the same shape to every error response that did
//! not come from an [`ApiError`] (axum's own rejections, the timeout layer).

use axum::Json;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rover_contracts::ErrorCode;
use rover_domain::DomainError;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// An error an endpoint answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The stable code (and so the HTTP status).
    pub code: ErrorCode,
    /// A plain sentence for the client.
    pub message: String,
    /// Seconds after which a retry may succeed, sent as `Retry-After` (429s).
    retry_after_secs: Option<u64>,
}

impl ApiError {
    /// An error with this code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retry_after_secs: None,
        }
    }

    /// The same error with a `Retry-After` header of `secs` seconds (at least 1).
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after_secs = Some(secs.max(1));
        self
    }

    /// The `Retry-After` this error carries, if any.
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after_secs
    }

    /// A 401 with a short reason.
    pub fn unauthenticated(reason: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unauthenticated, reason)
    }

    /// A failure whose cause belongs in the logs, not in the response.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "request failed");
        Self::new(
            ErrorCode::Internal,
            "Something went wrong on our side. Please try again.",
        )
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl From<DomainError> for ApiError {
    fn from(error: DomainError) -> Self {
        match error {
            DomainError::Database(cause) => {
                let code = DomainError::Database(cause).code();
                if code == ErrorCode::Unavailable {
                    Self::new(
                        code,
                        "The school database is unavailable. Please try again.",
                    )
                } else {
                    Self::internal("database error")
                }
            }
            other => Self::new(other.code(), other.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (
            status,
            Json(json!({ "error": { "code": self.code, "message": self.message } })),
        )
            .into_response();
        if let Some(secs) = self.retry_after_secs {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// The body of every error response, as `ApiError` renders it: for the OpenAPI document and for
/// clients that want a type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// An error: a stable code and a sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorDetail {
    /// The stable, machine-readable code; it also fixes the HTTP status.
    pub code: ErrorCode,
    /// A plain sentence for the user.
    pub message: String,
}

/// The answer to a path no route matches.
pub(crate) async fn not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "There is no such endpoint.")
}

/// Middleware: an error response (4xx/5xx) whose body is not JSON — axum's own rejections (405,
/// an oversized body announced by `Content-Length`), the timeout layer's 504 — is given the
/// [`ApiError`] shape, keeping its status and headers and using its text as the message.
pub(crate) async fn json_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // Error bodies from axum and tower-http are short sentences; anything longer is cut.
    let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let text: String = text.trim().chars().take(300).collect();
    let code = code_for_status(status);
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("Error").to_owned()
    } else {
        text
    };
    parts.headers.remove(header::CONTENT_TYPE);
    parts.headers.remove(header::CONTENT_LENGTH);
    let mut rendered = ApiError::new(code, message).into_response();
    // The original status stands (a 415 stays a 415); the body says which code it is.
    *rendered.status_mut() = status;
    for (name, value) in rendered.headers() {
        parts.headers.insert(name.clone(), value.clone());
    }
    Response::from_parts(parts, rendered.into_body())
}

/// The stable code of an HTTP error status.
pub(crate) fn code_for_status(status: StatusCode) -> ErrorCode {
    match status.as_u16() {
        401 => ErrorCode::Unauthenticated,
        403 => ErrorCode::PermissionDenied,
        404 => ErrorCode::NotFound,
        405 => ErrorCode::MethodNotAllowed,
        408 | 504 => ErrorCode::DeadlineExceeded,
        409 => ErrorCode::Conflict,
        413 => ErrorCode::TooLarge,
        429 => ErrorCode::RateLimited,
        502 | 503 => ErrorCode::Unavailable,
        500..=599 => ErrorCode::Internal,
        _ => ErrorCode::InvalidRequest,
    }
}
