-- Chats a Hub can read back: each thread remembers the client's chat id (the thread id is derived
-- from it and the user, so the id itself could not be listed), the campus it was opened in, a
-- title and its last activity; each turn remembers what the staff member sent with it, so
-- `GET /api/chats/{id}` rebuilds the UI messages a client held. Feedback on a reply, and a
-- per-school retention period.

ALTER TABLE threads
    ADD COLUMN chat_id text CHECK (chat_id ~ '^[A-Za-z0-9_-]{1,200}$'),
    ADD COLUMN campus_id uuid,
    ADD COLUMN last_activity_at timestamptz NOT NULL DEFAULT now(),
    ADD FOREIGN KEY (school_id, campus_id) REFERENCES campuses (school_id, id);
-- The sidebar's order (newest activity first, keyset-paginated) and the retention sweep's scan.
CREATE INDEX threads_activity_idx ON threads (school_id, user_id, last_activity_at DESC, id DESC);
CREATE INDEX threads_retention_idx ON threads (school_id, last_activity_at);
-- Searching titles: full-text, on an index.
CREATE INDEX threads_title_search_idx ON threads
    USING gin (to_tsvector('english', coalesce(title, '')));
-- Searching message text: the staff member's and Rover's words (not tool results, which hold
-- the school's records rather than the conversation), on an index the query's predicate matches.
CREATE INDEX conversation_log_search_idx ON conversation_log
    USING gin (to_tsvector('english', coalesce(message->>'content', '')))
    WHERE message->>'role' IN ('user', 'assistant');

-- One row per turn a chat POST opened, in the order they were opened: the user's message as the
-- client sent it (id, parts, metadata), or the answers a continuation carried (approvals, an
-- `ask_user` answer), and the trace the POST ran in.
CREATE TABLE chat_turns (
    position bigint GENERATED ALWAYS AS IDENTITY,
    school_id uuid NOT NULL,
    thread_id uuid NOT NULL,
    turn_id uuid NOT NULL,
    sent jsonb,
    answers jsonb,
    trace_id text,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (school_id, position),
    UNIQUE (school_id, turn_id),
    FOREIGN KEY (school_id, thread_id) REFERENCES threads (school_id, id) ON DELETE CASCADE
);
CREATE INDEX chat_turns_thread_idx ON chat_turns (school_id, thread_id, position);

-- A staff member's rating of one reply (an assistant message), kept with the turn that wrote it
-- and its trace, so a rated turn can be found in the traces and turned into an evaluation case.
CREATE TABLE chat_feedback (
    school_id uuid NOT NULL,
    thread_id uuid NOT NULL,
    message_id text NOT NULL CHECK (length(message_id) BETWEEN 1 AND 200),
    turn_id uuid NOT NULL,
    user_id uuid NOT NULL,
    rating text NOT NULL CHECK (rating IN ('up', 'down')),
    comment text CHECK (length(comment) <= 2000),
    trace_id text,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (school_id, thread_id, message_id),
    FOREIGN KEY (school_id, thread_id) REFERENCES threads (school_id, id) ON DELETE CASCADE
);
CREATE INDEX chat_feedback_created_idx ON chat_feedback (school_id, created_at);

-- How long a school keeps chats after their last activity. No row (the default): kept.
CREATE TABLE chat_retention (
    school_id uuid PRIMARY KEY REFERENCES schools (id) ON DELETE CASCADE,
    keep_days integer NOT NULL CHECK (keep_days >= 1)
);

-- Deleted threads, by id only (no content): a turn of a deleted chat still queued (or redelivered)
-- finds its thread gone and ends unrun instead of creating the thread again. Written by trigger,
-- so every way a thread goes (delete, erasure, retention) leaves one; swept once no turn identity
-- issued before the deletion can still be alive.
CREATE TABLE deleted_threads (
    school_id uuid NOT NULL,
    thread_id uuid NOT NULL,
    deleted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (school_id, thread_id)
);
CREATE FUNCTION rover_thread_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO deleted_threads (school_id, thread_id) VALUES (OLD.school_id, OLD.id)
    ON CONFLICT (school_id, thread_id) DO UPDATE SET deleted_at = now();
    RETURN OLD;
END
$$;
CREATE TRIGGER threads_deleted AFTER DELETE ON threads
    FOR EACH ROW EXECUTE FUNCTION rover_thread_deleted();

SELECT rover_enable_tenant_rls('deleted_threads');
SELECT rover_enable_tenant_rls('chat_turns');
SELECT rover_enable_tenant_rls('chat_feedback');
SELECT rover_enable_tenant_rls('chat_retention');

-- The retention sweep runs for every school that set a period, before any tenant is set: this is
-- the one narrow look-up it needs past row-level security (the schools and their periods).
CREATE FUNCTION rover_chat_retention() RETURNS TABLE (school_id uuid, keep_days integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT school_id, keep_days FROM public.chat_retention $$;
REVOKE EXECUTE ON FUNCTION rover_chat_retention() FROM PUBLIC;

-- Tombstones outlive every turn identity issued before their deletion, then go: the sweep calls
-- this (past row-level security, for every school at once; it removes ids, nothing else).
CREATE FUNCTION rover_forget_deleted_threads(p_older_than interval) RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    WITH gone AS (DELETE FROM public.deleted_threads WHERE deleted_at < now() - p_older_than
        RETURNING 1)
    SELECT count(*) FROM gone
$$;
REVOKE EXECUTE ON FUNCTION rover_forget_deleted_threads(interval) FROM PUBLIC;

-- Searching a user's chats. Row-level security applies its tenant condition before any
-- condition of the query that is not leakproof, and full-text matching (`@@`) is not: under the
-- policy the planner may not use the indexes above and scans the school's rows instead. So the
-- search runs here, past row-level security, with the very condition the policy adds — the
-- transaction's `app.school_id` — spelled out, and the caller's user: it returns thread ids of that
-- user in the caller's school, nothing else. The list then reads those threads under the policy.
CREATE FUNCTION rover_search_threads(uuid, text) RETURNS SETOF uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT t.id FROM public.threads t
    WHERE t.school_id = nullif(current_setting('app.school_id', true), '')::uuid
      AND t.user_id = $1
      AND to_tsvector('english', coalesce(t.title, '')) @@ websearch_to_tsquery('english', $2)
    UNION
    SELECT t.id FROM public.conversation_log c
    JOIN public.threads t ON t.school_id = c.school_id AND t.id = c.thread_id
    WHERE c.school_id = nullif(current_setting('app.school_id', true), '')::uuid
      AND t.user_id = $1
      AND c.message->>'role' IN ('user', 'assistant')
      AND to_tsvector('english', coalesce(c.message->>'content', ''))
          @@ websearch_to_tsquery('english', $2)
$$;
REVOKE EXECUTE ON FUNCTION rover_search_threads(uuid, text) FROM PUBLIC;
