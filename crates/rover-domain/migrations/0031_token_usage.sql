-- Token budgets: each turn's model usage, by user and school and (UTC) day. A model call first
-- reserves what it may use (its prompt plus the output allowance) under a per-school-per-day lock,
-- so concurrent turns cannot all pass a limit they together exceed; the call then settles the
-- reservation to what the model reported.
CREATE TABLE token_usage (
    school_id uuid NOT NULL REFERENCES schools (id) ON DELETE CASCADE,
    turn_id uuid NOT NULL,
    user_id uuid NOT NULL,
    day date NOT NULL,
    reserved_tokens bigint NOT NULL DEFAULT 0 CHECK (reserved_tokens >= 0),
    input_tokens bigint NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens bigint NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    model_calls integer NOT NULL DEFAULT 0,
    PRIMARY KEY (school_id, turn_id)
);
CREATE INDEX token_usage_day_idx ON token_usage (school_id, day, user_id);

SELECT rover_enable_tenant_rls('token_usage');
