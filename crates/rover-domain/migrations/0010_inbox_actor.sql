-- A stored tool reply belongs to the user the call ran as: a repeated call id gets it back only
-- from the same actor and event (NULL on rows stored before this column existed: never served).
ALTER TABLE tool_call_inbox ADD COLUMN actor_user_id uuid;
