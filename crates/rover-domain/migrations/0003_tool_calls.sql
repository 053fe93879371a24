-- What the tool server keeps per call: the audit log of writes, and the inbox that makes a
-- repeated call id return its stored reply instead of running again.

CREATE TABLE audit_log (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    school_id uuid NOT NULL REFERENCES schools (id),
    campus_id uuid,
    -- No foreign key to users: the record outlives the account.
    actor_user_id uuid NOT NULL,
    actor_email text NOT NULL,
    event text NOT NULL,
    subject_id text NOT NULL,
    call_id text,
    trace_id text,
    before jsonb,
    after jsonb,
    at timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (school_id, campus_id) REFERENCES campuses (school_id, id)
);
-- One audit row per tool call, however often it is delivered.
CREATE UNIQUE INDEX audit_log_call_key ON audit_log (school_id, call_id) WHERE call_id IS NOT NULL;
CREATE INDEX audit_log_at_idx ON audit_log (school_id, at);

CREATE TABLE tool_call_inbox (
    school_id uuid NOT NULL REFERENCES schools (id),
    call_id text NOT NULL CHECK (length(call_id) BETWEEN 1 AND 200),
    event text NOT NULL,
    reply jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (school_id, call_id)
);

SELECT rover_enable_tenant_rls('audit_log');
SELECT rover_enable_tenant_rls('tool_call_inbox');
