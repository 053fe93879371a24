//! Why a turn ended without an answer: the model failed, a budget is spent, the turn's state
//! could not be kept, or the request cannot be run as sent. Each variant's text is what the staff
//! member reads; [`TurnError::kind`] is what a worker maps to the wire's error code.

use crate::budget::BudgetError;
use crate::model::ModelError;
use crate::store::StoreError;

/// Why a turn failed.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// The model failed (after its retries and fallbacks).
    #[error("The assistant's model failed: {0}")]
    Model(#[from] ModelError),
    /// The model failed while folding the thread's oldest turns into its summary.
    #[error("The assistant's model failed while summarising the thread: {0}")]
    Summarising(#[source] ModelError),
    /// A budget is spent: the turn stops before spending more.
    #[error(transparent)]
    Budget(#[from] BudgetError),
    /// The turn's store failed, or what the turn continues is gone.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An answer to an `ask_user` question that is not (or no longer) waiting.
    #[error("That question is no longer waiting for an answer.")]
    NoQuestion,
    /// The message alone, with the instructions and tools, passes the model's context.
    #[error(
        "This message, with Rover's instructions and tools (about {fixed} tokens), is too long \
         for the model's context. Please shorten it."
    )]
    TooLong {
        /// The tokens that cannot be left out.
        fixed: usize,
    },
    /// Summarising did not bring the thread under the context (a guard; one pass always fits).
    #[error("The conversation could not be fitted to the model's context.")]
    Unfitted,
}

/// What kind of failure a [`TurnError`] is, for the wire's error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The model.
    Model,
    /// A budget.
    Budget,
    /// The store is unavailable.
    Unavailable,
    /// The request cannot run as sent.
    Invalid,
    /// A bug or an impossible state.
    Internal,
}

impl TurnError {
    /// What kind of failure it is.
    pub fn kind(&self) -> FailureKind {
        match self {
            Self::Model(_) | Self::Summarising(_) => FailureKind::Model,
            Self::Budget(_) => FailureKind::Budget,
            Self::Store(StoreError::Failed { .. }) => FailureKind::Unavailable,
            Self::Store(StoreError::Gone(_)) | Self::NoQuestion | Self::TooLong { .. } => {
                FailureKind::Invalid
            }
            Self::Unfitted => FailureKind::Internal,
        }
    }
}
