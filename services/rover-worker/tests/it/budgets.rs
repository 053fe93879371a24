//! Budgets: every turn's token usage is recorded and reported in `finish`; a turn that would
//! pass its tool-call budget starts none of the step's calls and ends with one clear error; and
//! twenty concurrent turns of one user never spend past the user's daily budget.

use rover_contracts::ErrorCode;
use rover_contracts::wire::FinishReason;
use rover_worker::BudgetSettings;

use crate::helpers::{Knobs, spawn_stack_with};

fn budget(settings: BudgetSettings) -> Knobs {
    Knobs {
        budget: Some(settings),
        ..Knobs::default()
    }
}

#[tokio::test]
async fn a_turns_usage_is_recorded_per_user_and_reported_in_finish() {
    let stack = spawn_stack_with(Knobs::default()).await;
    let turn = stack
        .turn("admin@hill.school", "List the departments")
        .await;
    assert_eq!(turn.finish(), FinishReason::Stop);
    let usage = turn.usage().expect("finish reports usage");
    assert!(
        usage.input_tokens > 0 && usage.output_tokens > 0,
        "{usage:?}"
    );
    let stored = stack
        .count(
            "SELECT sum(input_tokens + output_tokens)::bigint FROM token_usage t \
             JOIN users u ON u.id = t.user_id WHERE u.email = 'admin@hill.school' \
             AND t.model_calls = 2 AND t.reserved_tokens = 0",
        )
        .await;
    assert_eq!(
        u64::try_from(stored).unwrap(),
        usage.input_tokens + usage.output_tokens,
        "the ledger holds what finish reported, settled"
    );
}

#[tokio::test]
async fn a_step_past_the_tool_call_budget_starts_none_of_its_calls() {
    // task → record_attendance: the second call (the write) is past a budget of one.
    let stack = spawn_stack_with(budget(BudgetSettings {
        turn_tool_calls: 1,
        ..BudgetSettings::default()
    }))
    .await;
    let turn = stack
        .turn(
            "amina@hill.school",
            "Record attendance for S1 Blue: everyone present except Nakato",
        )
        .await;
    assert_eq!(turn.finish(), FinishReason::Error);
    assert_eq!(turn.error_codes(), [ErrorCode::BudgetExceeded]);
    assert!(
        turn.errors()[0].contains("more than 1 tool calls"),
        "{:?}",
        turn.errors()
    );
    assert_eq!(stack.count("SELECT count(*) FROM attendance").await, 0);
    assert_eq!(stack.count("SELECT count(*) FROM audit_log").await, 0);
}

#[tokio::test]
async fn twenty_concurrent_turns_of_one_user_never_spend_past_the_daily_budget() {
    const DAILY: u64 = 12_000;
    let stack = spawn_stack_with(budget(BudgetSettings {
        user_daily_tokens: DAILY,
        output_reserve_tokens: 200,
        ..BudgetSettings::default()
    }))
    .await;
    let turns = futures::future::join_all(
        (0..20).map(|_| stack.turn("admin@hill.school", "List the departments")),
    )
    .await;

    let refused = turns
        .iter()
        .filter(|t| t.error_codes() == [ErrorCode::BudgetExceeded])
        .count();
    let answered = turns
        .iter()
        .filter(|t| t.finish() == FinishReason::Stop)
        .count();
    assert_eq!(
        refused + answered,
        20,
        "every turn ended once, answered or refused"
    );
    assert!(refused > 0, "twenty turns do not fit in {DAILY} tokens");
    for turn in turns.iter().filter(|t| t.finish() == FinishReason::Error) {
        assert!(
            turn.errors()[0].contains("today's budget"),
            "{:?}",
            turn.errors()
        );
    }
    let spent = stack
        .count("SELECT coalesce(sum(input_tokens + output_tokens + reserved_tokens), 0)::bigint FROM token_usage")
        .await;
    assert!(
        u64::try_from(spent).unwrap() <= DAILY,
        "{spent} tokens spent or held against a budget of {DAILY}"
    );
    assert_eq!(
        stack
            .count("SELECT coalesce(sum(reserved_tokens), 0)::bigint FROM token_usage")
            .await,
        0,
        "every reservation was settled"
    );
    // The day's totals the reservations were checked against are the ledger's sums, after twenty
    // turns reserved and settled at once.
    let differ = stack
        .count(
            "SELECT count(*) FROM ( \
                 SELECT school_id, day, user_id, sum(input_tokens + output_tokens + reserved_tokens)::bigint \
                 FROM token_usage GROUP BY 1, 2, 3) l(school_id, day, user_id, tokens) \
             FULL JOIN token_usage_days d USING (school_id, day, user_id) \
             WHERE coalesce(l.tokens, 0) <> coalesce(d.tokens, 0)",
        )
        .await;
    assert_eq!(differ, 0, "the day's totals drifted from the ledger");
}
