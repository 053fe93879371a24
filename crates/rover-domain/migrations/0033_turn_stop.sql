-- Stop and double-texting. `stop_requested_at` is set by `POST /api/chat/{id}/stop` (or by a newer
-- message that interrupts the turn) on the thread's open turns, in the gateway's transaction,
-- before the gateway tells the workers over the control exchange: a worker that misses the
-- message still sees the row at its next recorded step (and a redelivered turn at its start), so
-- a stop is never lost, only the live cut of a model stream can be. `position` orders a thread's
-- open turns: a turn that was queued behind another (the enqueue and interrupt policies) runs
-- once every turn of its thread with a smaller position has closed.
ALTER TABLE open_turns ADD COLUMN stop_requested_at timestamptz;
ALTER TABLE open_turns ADD COLUMN position bigint GENERATED ALWAYS AS IDENTITY;
