-- `messages` (0004) was never written: a thread's messages live in `conversation_log` (the
-- model-level conversation) and `turn_events` (what the Hub was sent). Dropped so the schema says
-- only what Rover keeps.
DROP TABLE messages;
