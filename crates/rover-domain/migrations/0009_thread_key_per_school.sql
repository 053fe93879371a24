-- A thread is keyed by (school, id), not by its id alone: a client-chosen chat id names a thread of
-- the caller's school, so a user of one school can no longer take an id (and so block it) for
-- every other school. Everything referencing threads already does so by (school_id, id).
ALTER TABLE threads DROP CONSTRAINT threads_pkey;
