//! [`DomainError`]: why a domain function did not do what was asked, in sentences a model may read.

use rover_contracts::ErrorCode;

/// Why a domain call failed.
///
/// Every message is a plain sentence that is safe to show a model or a user: it names only things
/// the caller can already see, so another school's rows are indistinguishable from rows that do not
/// exist. The cause of a [`DomainError::Database`] stays in the error chain for logs and traces.
#[derive(Debug, thiserror::Error)]
pub enum DomainError {
    /// No such row in the caller's scope (what another school's or campus's ids look like too).
    #[error("{0}")]
    NotFound(String),
    /// The caller lacks the relationship the call needs ("you are not the class teacher of S1 Blue").
    #[error("Permission denied: {0}.")]
    Denied(String),
    /// The change collides with existing data (a duplicate name).
    #[error("{0}")]
    Conflict(String),
    /// The arguments make no sense for the data (a student who is not in the class, a score of 120).
    #[error("{0}")]
    Invalid(String),
    /// A name fits two or more rows in scope, or none: nothing was done, and the error carries
    /// the question to ask the staff member ([`crate::resolve`]).
    #[error("{0}")]
    Unresolved(crate::resolve::Unresolved),
    /// The database failed; the cause is in the source chain, never in the message.
    #[error("The school database could not complete the request.")]
    Database(#[from] sqlx::Error),
}

impl DomainError {
    /// The stable wire code for this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            DomainError::NotFound(_) => ErrorCode::NotFound,
            DomainError::Denied(_) => ErrorCode::PermissionDenied,
            DomainError::Conflict(_) => ErrorCode::Conflict,
            DomainError::Invalid(_) => ErrorCode::InvalidArguments,
            DomainError::Unresolved(unresolved) if unresolved.ambiguous => ErrorCode::Ambiguous,
            DomainError::Unresolved(_) => ErrorCode::NotFound,
            DomainError::Database(sqlx::Error::PoolTimedOut | sqlx::Error::Io(_)) => {
                ErrorCode::Unavailable
            }
            DomainError::Database(_) => ErrorCode::Internal,
        }
    }

    /// The question this failure raises for the staff member, if any.
    pub fn ask(&self) -> Option<rover_contracts::Ask> {
        match self {
            DomainError::Unresolved(unresolved) => unresolved.ask(),
            _ => None,
        }
    }

    pub(crate) fn not_found(what: &str) -> Self {
        DomainError::NotFound(format!("No {what} with that id was found here."))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_sentences_and_codes_are_stable() {
        let denied = DomainError::Denied("you are not the class teacher of S1 Blue".into());
        assert_eq!(
            denied.to_string(),
            "Permission denied: you are not the class teacher of S1 Blue."
        );
        assert_eq!(denied.code(), ErrorCode::PermissionDenied);
        assert_eq!(
            DomainError::not_found("class").to_string(),
            "No class with that id was found here."
        );
        let db = DomainError::from(sqlx::Error::RowNotFound);
        assert!(!db.to_string().contains("RowNotFound"));
        assert_eq!(db.code(), ErrorCode::Internal);
    }
}
