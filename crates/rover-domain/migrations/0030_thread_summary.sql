-- Compaction: a long thread's oldest turns folded by the model into one summary, which stands for
-- the first `summary_covers` messages of the thread's conversation_log (they stay stored in full).
ALTER TABLE threads
    ADD COLUMN summary text,
    ADD COLUMN summary_covers integer NOT NULL DEFAULT 0 CHECK (summary_covers >= 0);
