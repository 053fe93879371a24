//! Migration 0063 fills the day's token totals from the ledger a database already holds: every
//! school, day and user's used + reserved tokens.

use rover_domain::MIGRATOR;
use sqlx::migrate::Migrate;

use crate::shard_keys::ScratchDb;

/// The migration that adds `token_usage_days`.
const TOTALS_MIGRATION: i64 = 63;

#[tokio::test]
async fn the_day_totals_migration_sums_the_ledger_it_finds() {
    let scratch = ScratchDb::new().await;
    let (mut conn, _) = scratch.seeded_before(TOTALS_MIGRATION).await;
    // Three turns per user on each of two days, one of them still holding a reservation.
    sqlx::raw_sql(
        "INSERT INTO token_usage (school_id, turn_id, user_id, day, reserved_tokens, \
                                  input_tokens, output_tokens, model_calls) \
         SELECT u.school_id, gen_random_uuid(), u.id, current_date - d, \
                CASE WHEN n = 3 THEN 50 ELSE 0 END, 100 * n, 10 * n, 1 \
           FROM users u, generate_series(0, 1) d, generate_series(1, 3) n",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let migration = MIGRATOR
        .iter()
        .find(|m| m.version == TOTALS_MIGRATION)
        .expect("migration 0063");
    conn.apply(migration).await.unwrap();

    let ledger = "SELECT school_id, day, user_id, sum(input_tokens + output_tokens + reserved_tokens)::bigint \
                  FROM token_usage GROUP BY 1, 2, 3";
    let differ: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM ({ledger}) l(school_id, day, user_id, tokens) \
         FULL JOIN token_usage_days d USING (school_id, day, user_id) \
         WHERE l.tokens IS DISTINCT FROM d.tokens"
    ))
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(differ, 0, "every total is its ledger's sum");
    let (users, totals): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM token_usage_days)",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(totals, 2 * users, "two days of every user");
}
