-- Turns that are queued or running: the durable count behind the per-user and per-school turn
-- limits, and the rule that a thread runs one turn at a time. The gateway adds a row (in the
-- transaction that starts the turn, before publishing it); the worker removes it by turn id in the
-- transaction that records the turn's `finish` — whatever the outcome, and once however often the
-- turn was delivered. A row whose turn never ends (a gateway that died before publishing, a turn
-- dead-lettered undecoded) stops counting at `expires_at`, the end of the turn identity's life,
-- after which the turn could not act anyway.
CREATE TABLE open_turns (
    school_id uuid NOT NULL,
    turn_id uuid NOT NULL,
    thread_id uuid NOT NULL,
    user_id uuid NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (school_id, turn_id),
    FOREIGN KEY (school_id, thread_id) REFERENCES threads (school_id, id) ON DELETE CASCADE
);
CREATE INDEX open_turns_user_idx ON open_turns (school_id, user_id);
CREATE INDEX open_turns_thread_idx ON open_turns (school_id, thread_id);

SELECT rover_enable_tenant_rls('open_turns');
