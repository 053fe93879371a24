-- Conversations: threads, their messages, each turn's events (the replay and resume log) and
-- the artifacts a thread produced.

CREATE TABLE threads (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    school_id uuid NOT NULL,
    user_id uuid NOT NULL,
    title text,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (school_id, id),
    FOREIGN KEY (school_id, user_id) REFERENCES users (school_id, id)
);
CREATE INDEX threads_user_idx ON threads (school_id, user_id, created_at DESC);

CREATE TABLE messages (
    school_id uuid NOT NULL,
    thread_id uuid NOT NULL,
    -- The UI message's own id (a client-chosen string).
    id text NOT NULL CHECK (length(id) BETWEEN 1 AND 200),
    role text NOT NULL CHECK (role IN ('user', 'assistant', 'system')),
    message jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (school_id, thread_id, id),
    FOREIGN KEY (school_id, thread_id) REFERENCES threads (school_id, id) ON DELETE CASCADE
);
CREATE INDEX messages_thread_idx ON messages (school_id, thread_id, created_at);

CREATE TABLE turn_events (
    school_id uuid NOT NULL,
    thread_id uuid NOT NULL,
    turn_id uuid NOT NULL,
    seq integer NOT NULL CHECK (seq >= 0),
    payload jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (school_id, turn_id, seq),
    FOREIGN KEY (school_id, thread_id) REFERENCES threads (school_id, id) ON DELETE CASCADE
);

CREATE TABLE artifacts (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    school_id uuid NOT NULL,
    thread_id uuid NOT NULL,
    filename text NOT NULL CHECK (btrim(filename) <> ''),
    media_type text NOT NULL,
    size_bytes bigint NOT NULL CHECK (size_bytes >= 0),
    content bytea NOT NULL,
    created_by uuid NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (school_id, id),
    FOREIGN KEY (school_id, thread_id) REFERENCES threads (school_id, id) ON DELETE CASCADE,
    FOREIGN KEY (school_id, created_by) REFERENCES users (school_id, id)
);

SELECT rover_enable_tenant_rls('threads');
SELECT rover_enable_tenant_rls('messages');
SELECT rover_enable_tenant_rls('turn_events');
SELECT rover_enable_tenant_rls('artifacts');
