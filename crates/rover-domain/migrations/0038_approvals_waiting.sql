-- What the worker's `/metrics` reports of approvals waiting for staff: across every school, how
-- many are pending and how long the oldest has waited — two numbers, no school's details. Past
-- row-level security (SECURITY DEFINER) because the metric is for the operator, who pages on it;
-- which school and chat is read from the table itself (docs/runbook.md).
CREATE FUNCTION rover_approvals_waiting() RETURNS TABLE (waiting bigint, oldest_seconds double precision)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT count(*),
           coalesce(extract(epoch FROM now() - min(a.created_at))::double precision, 0)
      FROM public.approvals a
     WHERE a.state = 'pending'
$$;
REVOKE EXECUTE ON FUNCTION rover_approvals_waiting() FROM PUBLIC;
