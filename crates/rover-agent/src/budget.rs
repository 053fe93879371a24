//! Budgets: what one turn may spend (tokens, model calls, tool calls), and the daily ledger of
//! tokens per user and school it draws on. A model call is checked and its tokens *reserved*
//! before it is made (its prompt, estimated, plus an output allowance), then settled to what the
//! model reported; a step's tool calls are checked together before any of them starts. Spending
//! past a limit ends the turn with one error and starts nothing more, so nothing is half-done.

use std::sync::{Mutex, PoisonError};

use rover_contracts::wire::TokenUsage;

use crate::store::{DailyLimit, TurnStore};

/// Per-turn limits; `0` means no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TurnLimits {
    /// Tokens (input + output, as reported) across the turn's model calls.
    pub tokens: u64,
    /// Model calls across Rover and its subagents.
    pub model_calls: u32,
    /// Tool calls across Rover and its subagents.
    pub tool_calls: u32,
    /// Tokens reserved for a model call's output before it is made.
    pub output_reserve: u64,
}

/// Which budget is spent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// The turn's tokens.
    #[error("This request used up its budget of {0} tokens, so I stopped before doing more.")]
    TurnTokens(u64),
    /// The turn's model calls.
    #[error("This request needed more than {0} model calls, so I stopped before doing more.")]
    TurnModelCalls(u32),
    /// The turn's tool calls.
    #[error("This request needed more than {0} tool calls, so I stopped before running more.")]
    TurnToolCalls(u32),
    /// The user's daily tokens.
    #[error("You have used today's budget of {0} tokens. Please try again tomorrow.")]
    UserDaily(u64),
    /// The school's daily tokens.
    #[error("Your school has used today's budget of {0} tokens. Please try again tomorrow.")]
    SchoolDaily(u64),
    /// The ledger could not be read or written, so the call was not made (fail closed).
    #[error("The usage budget could not be checked, so I stopped: {0}")]
    Ledger(String),
}

impl BudgetError {
    /// Every [`Self::limit`] name, for metrics that start each at zero.
    pub const LIMITS: [&'static str; 6] = [
        "turn_tokens",
        "turn_model_calls",
        "turn_tool_calls",
        "user_daily_tokens",
        "school_daily_tokens",
        "ledger",
    ];

    /// The limit's name, for metrics: one of [`Self::LIMITS`].
    pub fn limit(&self) -> &'static str {
        match self {
            Self::TurnTokens(_) => "turn_tokens",
            Self::TurnModelCalls(_) => "turn_model_calls",
            Self::TurnToolCalls(_) => "turn_tool_calls",
            Self::UserDaily(_) => "user_daily_tokens",
            Self::SchoolDaily(_) => "school_daily_tokens",
            Self::Ledger(_) => "ledger",
        }
    }
}

/// One turn's budget: its limits and what it has spent. The daily ledger it draws on is the
/// turn's store ([`TurnStore::reserve`]), passed to each model call's check.
pub struct TurnBudget {
    limits: TurnLimits,
    spent: Mutex<Spent>,
}

impl std::fmt::Debug for TurnBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnBudget")
            .field("limits", &self.limits)
            .field("spent", &*self.spent())
            .finish_non_exhaustive()
    }
}

/// What earlier deliveries of a turn, and the earlier turns of its approval chain, already spent:
/// the per-turn limits hold across the whole chain and every redelivery, not per process.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Carried {
    /// Tokens the model reported (input and output together).
    pub tokens: u64,
    /// Model calls made.
    pub model_calls: u32,
    /// Tool calls made (their results are in the journal).
    pub tool_calls: u32,
}

#[derive(Debug, Default, Clone)]
struct Spent {
    /// What was spent before this delivery (counted against the limits, not reported again).
    carried: u64,
    usage: TokenUsage,
    /// Tokens reserved by model calls in flight in this turn.
    reserved: u64,
    model_calls: u32,
    tool_calls: u32,
    /// The first limit the turn hit: once spent, the whole turn stops (a subagent's too).
    exhausted: Option<BudgetError>,
    /// The model that answered the turn's latest model call in this delivery.
    model: Option<String>,
}

/// A model call's reservation, to settle when it ends.
#[derive(Debug)]
#[must_use = "a reservation is settled when the call ends"]
pub struct Reservation {
    tokens: u64,
}

impl TurnBudget {
    /// A budget with `limits`.
    pub fn new(limits: TurnLimits) -> Self {
        Self {
            limits,
            spent: Mutex::new(Spent::default()),
        }
    }

    /// The budget of a turn that already spent `carried` (a redelivery, or a continuation after
    /// an approval): what is left of the limits is what the whole turn has left.
    pub fn carrying(self, carried: Carried) -> Self {
        {
            let mut spent = self.spent();
            spent.carried = carried.tokens;
            spent.model_calls = carried.model_calls;
            spent.tool_calls = carried.tool_calls;
        }
        self
    }

    /// No limits of its own.
    pub fn unlimited() -> Self {
        Self::new(TurnLimits::default())
    }

    fn spent(&self) -> std::sync::MutexGuard<'_, Spent> {
        // Plain counters cannot be left half-updated by a panic.
        self.spent.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The limit the turn hit, if any: an agent that sees one stops, even when the error was a
    /// subagent's and reached it only as a failed `task`.
    pub fn exhausted(&self) -> Option<BudgetError> {
        self.spent().exhausted.clone()
    }

    fn refuse(&self, error: BudgetError) -> BudgetError {
        self.spent().exhausted.get_or_insert(error).clone()
    }

    /// What the turn's model calls used so far.
    pub fn usage(&self) -> TokenUsage {
        self.spent().usage
    }

    /// Notes the model that answered a model call (the name its response gave).
    pub fn answered_by(&self, model: &str) {
        self.spent().model = Some(model.to_owned());
    }

    /// The model that answered the turn's latest model call here; `None` before any (or when
    /// every step was replayed from the journal).
    pub fn model(&self) -> Option<String> {
        self.spent().model.clone()
    }

    /// Checks a model call whose prompt is about `prompt_tokens`, and reserves its tokens (in the
    /// turn's limits, then in `ledger`'s day).
    pub async fn before_model_call(
        &self,
        ledger: &dyn TurnStore,
        prompt_tokens: u64,
    ) -> Result<Reservation, BudgetError> {
        let tokens = prompt_tokens + self.limits.output_reserve;
        let refused = {
            let mut spent = self.spent();
            let limits = self.limits;
            let used = spent.carried + spent.usage.input_tokens + spent.usage.output_tokens;
            if let Some(error) = &spent.exhausted {
                Some(error.clone())
            } else if limits.model_calls > 0 && spent.model_calls >= limits.model_calls {
                Some(BudgetError::TurnModelCalls(limits.model_calls))
            } else if limits.tokens > 0 && used + spent.reserved + prompt_tokens > limits.tokens {
                Some(BudgetError::TurnTokens(limits.tokens))
            } else {
                spent.model_calls += 1;
                spent.reserved += tokens;
                None
            }
        };
        if let Some(error) = refused {
            return Err(self.refuse(error));
        }
        let refused = match ledger.reserve(tokens).await {
            Ok(Ok(())) => return Ok(Reservation { tokens }),
            Ok(Err(DailyLimit::User(limit))) => BudgetError::UserDaily(limit),
            Ok(Err(DailyLimit::School(limit))) => BudgetError::SchoolDaily(limit),
            Err(error) => BudgetError::Ledger(error.to_string()),
        };
        self.spent().reserved -= tokens;
        Err(self.refuse(refused))
    }

    /// Settles a model call: what it used replaces what it reserved.
    pub async fn after_model_call(
        &self,
        ledger: &dyn TurnStore,
        reservation: Reservation,
        used: TokenUsage,
    ) {
        {
            let mut spent = self.spent();
            spent.reserved -= reservation.tokens;
            spent.usage.input_tokens += used.input_tokens;
            spent.usage.output_tokens += used.output_tokens;
        }
        if let Err(error) = ledger.settle(reservation.tokens, used).await {
            // The reservation stays counted against the day: failing closed.
            tracing::error!(%error, "could not settle a model call's tokens");
        }
    }

    /// Checks that `count` more tool calls fit, and counts them.
    pub fn before_tool_calls(&self, count: usize) -> Result<(), BudgetError> {
        let count = u32::try_from(count).unwrap_or(u32::MAX);
        let limit = self.limits.tool_calls;
        let refused = {
            let mut spent = self.spent();
            if let Some(error) = &spent.exhausted {
                Some(error.clone())
            } else if limit > 0 && spent.tool_calls.saturating_add(count) > limit {
                Some(BudgetError::TurnToolCalls(limit))
            } else {
                spent.tool_calls += count;
                None
            }
        };
        refused.map_or(Ok(()), |error| Err(self.refuse(error)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Memory, MemoryStore};

    const LIMITS: TurnLimits = TurnLimits {
        tokens: 1_000,
        model_calls: 3,
        tool_calls: 4,
        output_reserve: 100,
    };

    #[test]
    fn every_limit_is_listed_for_the_metrics() {
        for spent in [
            BudgetError::TurnTokens(1),
            BudgetError::TurnModelCalls(1),
            BudgetError::TurnToolCalls(1),
            BudgetError::UserDaily(1),
            BudgetError::SchoolDaily(1),
            BudgetError::Ledger(String::new()),
        ] {
            assert!(BudgetError::LIMITS.contains(&spent.limit()), "{spent:?}");
        }
    }

    fn used(input: u64, output: u64) -> TokenUsage {
        TokenUsage {
            input_tokens: input,
            output_tokens: output,
        }
    }

    #[tokio::test]
    async fn model_calls_are_counted_and_the_turn_stops_at_its_limit() {
        let budget = TurnBudget::new(LIMITS);
        for _ in 0..3 {
            let r = budget
                .before_model_call(&MemoryStore::default(), 10)
                .await
                .expect("within limits");
            budget
                .after_model_call(&MemoryStore::default(), r, used(10, 5))
                .await;
        }
        assert_eq!(
            budget
                .before_model_call(&MemoryStore::default(), 10)
                .await
                .unwrap_err(),
            BudgetError::TurnModelCalls(3)
        );
        assert_eq!(budget.usage(), used(30, 15));
    }

    #[tokio::test]
    async fn a_call_whose_prompt_would_pass_the_turns_tokens_is_not_made() {
        let budget = TurnBudget::new(LIMITS);
        let r = budget
            .before_model_call(&MemoryStore::default(), 600)
            .await
            .unwrap();
        budget
            .after_model_call(&MemoryStore::default(), r, used(600, 300))
            .await;
        assert_eq!(
            budget
                .before_model_call(&MemoryStore::default(), 200)
                .await
                .unwrap_err(),
            BudgetError::TurnTokens(1_000)
        );
    }

    #[test]
    fn a_steps_tool_calls_are_checked_together() {
        let budget = TurnBudget::new(LIMITS);
        budget.before_tool_calls(3).unwrap();
        assert_eq!(
            budget.before_tool_calls(2).unwrap_err(),
            BudgetError::TurnToolCalls(4)
        );
        assert_eq!(
            budget.before_tool_calls(1).unwrap_err(),
            BudgetError::TurnToolCalls(4),
            "once spent, the turn stays spent"
        );
        assert_eq!(budget.exhausted(), Some(BudgetError::TurnToolCalls(4)));
    }

    #[tokio::test]
    async fn the_ledger_refusing_stops_the_call_and_releases_the_turns_reservation() {
        let budget = TurnBudget::new(LIMITS);
        let ledger = MemoryStore::new(Memory {
            daily_tokens: 5,
            ..Memory::default()
        });
        assert_eq!(
            budget.before_model_call(&ledger, 10).await.unwrap_err(),
            BudgetError::UserDaily(5)
        );
        assert_eq!(budget.spent().reserved, 0);
        assert_eq!(ledger.snapshot().reserved, 0, "nothing was held in the day");
    }

    #[tokio::test]
    async fn what_a_turn_carried_over_counts_against_its_limits() {
        let budget = TurnBudget::new(LIMITS).carrying(Carried {
            tokens: 850,
            model_calls: 2,
            tool_calls: 3,
        });
        assert_eq!(
            budget.before_tool_calls(2).unwrap_err(),
            BudgetError::TurnToolCalls(4)
        );
        let budget = TurnBudget::new(LIMITS).carrying(Carried {
            tokens: 850,
            model_calls: 2,
            tool_calls: 0,
        });
        assert_eq!(
            budget
                .before_model_call(&MemoryStore::default(), 200)
                .await
                .unwrap_err(),
            BudgetError::TurnTokens(1_000)
        );
        let budget = TurnBudget::new(LIMITS).carrying(Carried {
            tokens: 0,
            model_calls: 3,
            tool_calls: 0,
        });
        assert_eq!(
            budget
                .before_model_call(&MemoryStore::default(), 1)
                .await
                .unwrap_err(),
            BudgetError::TurnModelCalls(3)
        );
        assert_eq!(
            budget.usage(),
            TokenUsage::default(),
            "carried tokens are not reported again"
        );
    }
}
