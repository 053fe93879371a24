-- The turn a thread is running (or ran last), so a reconnecting client can resume its stream.
ALTER TABLE threads ADD COLUMN last_turn_id uuid;
