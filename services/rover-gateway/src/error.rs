//! API errors: one JSON shape, `{"error":{"code":"…","message":"…"}}`, with the HTTP status and the
//! stable code from the contracts' error table.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rover_contracts::ErrorCode;
use rover_domain::DomainError;
use serde_json::json;

/// An error an endpoint answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The stable code (and so the HTTP status).
    pub code: ErrorCode,
    /// A plain sentence for the client.
    pub message: String,
}

impl ApiError {
    /// An error with this code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
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
        (
            status,
            Json(json!({ "error": { "code": self.code, "message": self.message } })),
        )
            .into_response()
    }
}
