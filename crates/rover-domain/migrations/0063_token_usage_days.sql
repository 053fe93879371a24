-- Each user's token total of a day, kept as the ledger changes, so a reservation checks the daily
-- limits by reading a row per user of the day instead of summing every model call of the school's
-- day. That sum grew with every turn of the day, inside the school's serialised reservation: a
-- long run of turns slowed down as it went (`make bench`'s soak, 2026-12-06).
--
-- `tokens` is always the user's used + reserved tokens of `token_usage` that day: every statement
-- that changes `token_usage` changes the row in the same transaction (`rover_turnstore::usage`).
-- The school's total is the sum of its users' rows.
CREATE TABLE token_usage_days (
    school_id uuid NOT NULL REFERENCES schools (id) ON DELETE CASCADE,
    day date NOT NULL,
    user_id uuid NOT NULL,
    tokens bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (school_id, day, user_id)
);

INSERT INTO token_usage_days (school_id, day, user_id, tokens)
SELECT school_id, day, user_id, sum(input_tokens + output_tokens + reserved_tokens)
  FROM token_usage GROUP BY school_id, day, user_id;

SELECT rover_enable_tenant_rls('token_usage_days');
