-- The model-level conversation of each thread (user, assistant and tool messages in the OpenAI
-- chat format), kept server-side so a client can never inject assistant or tool history.

CREATE TABLE conversation_log (
    position bigint GENERATED ALWAYS AS IDENTITY,
    school_id uuid NOT NULL,
    thread_id uuid NOT NULL,
    turn_id uuid NOT NULL,
    message jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (school_id, position),
    FOREIGN KEY (school_id, thread_id) REFERENCES threads (school_id, id) ON DELETE CASCADE
);
CREATE INDEX conversation_log_thread_idx ON conversation_log (school_id, thread_id, position);

SELECT rover_enable_tenant_rls('conversation_log');
