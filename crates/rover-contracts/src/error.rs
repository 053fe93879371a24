//! The one table of stable error codes that cross a wire (AMQP events, tool replies, HTTP bodies).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident = $code:literal, $status:literal;)*) => {
        /// A stable, machine-readable error code. Never renamed: clients and dashboards key on it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
        pub enum ErrorCode {
            $($(#[$doc])* #[serde(rename = $code)] $variant,)*
        }

        impl ErrorCode {
            /// Every code, in table order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant),*];

            /// The code as written on the wire.
            pub const fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $code),* }
            }

            /// The HTTP status a REST response with this code carries.
            pub const fn http_status(self) -> u16 {
                match self { $(ErrorCode::$variant => $status),* }
            }
        }
    };
}

error_codes! {
    /// The request or message is malformed.
    InvalidRequest = "invalid_request", 400;
    /// Tool arguments do not match the tool's schema.
    InvalidArguments = "invalid_arguments", 400;
    /// A wire message of a version this service does not speak.
    UnsupportedVersion = "unsupported_version", 400;
    /// No or bad credentials (bearer token).
    Unauthenticated = "unauthenticated", 401;
    /// The turn identity is missing, forged or expired.
    InvalidIdentity = "invalid_identity", 401;
    /// The caller lacks the permission or the relationship.
    PermissionDenied = "permission_denied", 403;
    /// The identity carries no tenant: fail closed.
    NoTenant = "no_tenant", 403;
    /// No such row in the caller's scope (also what another school's ids look like).
    NotFound = "not_found", 404;
    /// The endpoint exists but not with this HTTP method.
    MethodNotAllowed = "method_not_allowed", 405;
    /// No tool has that name or event.
    UnknownTool = "unknown_tool", 404;
    /// The change conflicts with existing data (a duplicate name, say).
    Conflict = "conflict", 409;
    /// A name fits more than one thing in the caller's scope (two students called Nakato): the
    /// candidates come with the error, and nothing was done.
    Ambiguous = "ambiguous", 409;
    /// The chat already has a reply in progress: one turn at a time per thread.
    TurnInProgress = "turn_in_progress", 409;
    /// An approval answer matches no approval request waiting in the caller's chat (forged,
    /// altered, replayed or someone else's): nothing runs.
    ApprovalInvalid = "approval_invalid", 409;
    /// The body is over the size limit.
    TooLarge = "too_large", 413;
    /// Too many requests or concurrent turns.
    RateLimited = "rate_limited", 429;
    /// The model failed, timed out or produced malformed output.
    ModelError = "model_error", 502;
    /// The turn reached its step limit.
    StepLimit = "step_limit", 500;
    /// A token, step or tool-call budget (per turn, or per user or school per day) is spent.
    BudgetExceeded = "budget_exceeded", 429;
    /// A downstream call missed its deadline.
    DeadlineExceeded = "deadline_exceeded", 504;
    /// A dependency (broker, database) is unavailable.
    Unavailable = "unavailable", 503;
    /// A bug or an unexpected failure; the details are in the logs and the trace.
    Internal = "internal", 500;
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_snake_case_and_serialise_as_themselves() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "duplicate {code}");
            assert!(
                code.as_str()
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_')
            );
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                serde_json::json!(code.as_str())
            );
            assert!((400..600).contains(&code.http_status()));
        }
    }
}
