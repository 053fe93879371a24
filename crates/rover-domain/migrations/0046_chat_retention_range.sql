-- A school's chat retention period is 1 to 36,500 days (100 years). Longer ones made the sweep's
-- date arithmetic (`now() - make_interval(days => keep_days)`) overflow, and that school's error
-- stopped the sweep for every school after it. A longer period is kept as the longest (nothing
-- that old exists); the sweep also isolates each school's errors (`rover-worker`'s retention.rs).
UPDATE chat_retention SET keep_days = 36500 WHERE keep_days > 36500;
ALTER TABLE chat_retention DROP CONSTRAINT chat_retention_keep_days_check;
ALTER TABLE chat_retention ADD CONSTRAINT chat_retention_keep_days_check
    CHECK (keep_days BETWEEN 1 AND 36500);
