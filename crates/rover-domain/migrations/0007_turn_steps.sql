-- Durable turns: every completed part of a turn's agent loop, recorded before the loop moves on, so
-- a turn redelivered after a worker dies resumes from its last completed part instead of calling
-- the model or a tool again.
--   agent: '' for Rover, the `task` call id for a subagent's run;
--   step:  the agent's model step;
--   part:  'model' for the step's assistant message (text and tool calls), else the tool call id
--          whose result message this is.
CREATE TABLE turn_steps (
    school_id uuid NOT NULL,
    thread_id uuid NOT NULL,
    turn_id uuid NOT NULL,
    agent text NOT NULL,
    step integer NOT NULL CHECK (step >= 0),
    part text NOT NULL,
    record jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (school_id, turn_id, agent, step, part),
    FOREIGN KEY (school_id, thread_id) REFERENCES threads (school_id, id) ON DELETE CASCADE
);

SELECT rover_enable_tenant_rls('turn_steps');
