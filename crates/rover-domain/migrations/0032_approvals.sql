-- Approval before writes. A write tool call that its school's policy says needs approval pauses
-- its turn with a `pending` row; the staff member's answer (the next chat POST) flips the row once,
-- bound to the exact call, input, user and thread; the turn that continues the paused one runs the
-- call only if the row was approved *for that turn*. A new message on the thread expires what is
-- still pending, so an old approval can never run a call the conversation has moved past.
CREATE TABLE approvals (
    school_id uuid NOT NULL,
    approval_id uuid NOT NULL,
    thread_id uuid NOT NULL,
    -- The first turn of the chain of turns that paused and continued (its journal keys).
    root_turn_id uuid NOT NULL,
    -- The turn that paused on the call, and every turn of its chain (root first, it last).
    turn_id uuid NOT NULL,
    chain uuid[] NOT NULL,
    call_id text NOT NULL,
    tool text NOT NULL,
    input jsonb NOT NULL,
    user_id uuid NOT NULL,
    state text NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'approved', 'denied', 'expired')),
    reason text,
    -- The turn the answer was given to: the only one that may run an approved call.
    consumer_turn_id uuid,
    created_at timestamptz NOT NULL DEFAULT now(),
    decided_at timestamptz,
    PRIMARY KEY (school_id, root_turn_id, call_id),
    UNIQUE (school_id, approval_id),
    FOREIGN KEY (school_id, thread_id) REFERENCES threads (school_id, id) ON DELETE CASCADE
);
CREATE INDEX approvals_pending_idx ON approvals (school_id, thread_id) WHERE state = 'pending';

SELECT rover_enable_tenant_rls('approvals');

-- Which write tools need approval, per school: a row for the tool beats the school's `*` row;
-- with neither, every write needs approval. Read live on every call.
CREATE TABLE tool_approval_policy (
    school_id uuid NOT NULL REFERENCES schools (id) ON DELETE CASCADE,
    tool text NOT NULL CHECK (btrim(tool) <> ''),
    mode text NOT NULL CHECK (mode IN ('always', 'never')),
    PRIMARY KEY (school_id, tool)
);

SELECT rover_enable_tenant_rls('tool_approval_policy');
