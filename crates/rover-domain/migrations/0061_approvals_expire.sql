-- Approvals expire. A pending approval can be answered until `expires_at`: the worker sets it
-- when the turn pauses (`agent.approval_ttl_secs`, 24 hours by default); the column's default is
-- the same 24 hours, for rows made before this migration and by anyone else. Past it, an answer
-- is refused and nothing runs; the worker's sweep then marks the row `expired`. A row expired
-- because it timed out has `decided_at >= expires_at`; one the conversation moved past (a new
-- message) was expired before its time.
ALTER TABLE approvals ADD COLUMN expires_at timestamptz;
UPDATE approvals SET expires_at = created_at + interval '24 hours';
ALTER TABLE approvals
    ALTER COLUMN expires_at SET DEFAULT now() + interval '24 hours',
    ALTER COLUMN expires_at SET NOT NULL;
CREATE INDEX approvals_expiry_idx ON approvals (expires_at) WHERE state = 'pending';

-- The sweep's one statement, across every school (past row-level security, like
-- `rover_approvals_waiting`): pending approvals past their time become `expired`. It returns how
-- many, and names no school.
CREATE FUNCTION rover_expire_approvals() RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH expired AS (
        UPDATE public.approvals SET state = 'expired', decided_at = now()
         WHERE state = 'pending' AND expires_at <= now()
        RETURNING 1)
    SELECT count(*) FROM expired
$$;
REVOKE EXECUTE ON FUNCTION rover_expire_approvals() FROM PUBLIC;

-- `RoverApprovalsWaiting` pages only for approvals that can still be answered.
CREATE OR REPLACE FUNCTION rover_approvals_waiting() RETURNS TABLE (waiting bigint, oldest_seconds double precision)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT count(*),
           coalesce(extract(epoch FROM now() - min(a.created_at))::double precision, 0)
      FROM public.approvals a
     WHERE a.state = 'pending' AND a.expires_at > now()
$$;
