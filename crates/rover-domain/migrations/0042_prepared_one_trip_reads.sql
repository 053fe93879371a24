-- A one-trip read as ONE prepared statement instead of a simple-protocol batch of three. Sent as
-- text, `SET TRANSACTION READ ONLY; SELECT * FROM rover_open_call(<literals>); SELECT … FROM
-- rover_list_…(<literals>)` was lexed, parsed, analysed and planned on every call, and its row
-- descriptions sent back each time; prepared once per connection, the statement
--
--   SELECT o.*, q.* FROM rover_open_read($1, $2) o
--     LEFT JOIN LATERAL (SELECT true AS rover_row, r.* FROM (<the read's query>) r
--                         WHERE o.live OFFSET 0) q ON true
--
-- is only bound and executed (pgbench, 16 clients, 2 cores: 9,960 → 15,490 reads/s; 1 client:
-- 0.36 → 0.19 ms). One extended-protocol statement is still one implicit transaction.
--
-- `rover_open_read` does what the batch's first two statements did, in their order: refuse a role
-- that row-level security does not bind (reading nothing), make the transaction read-only, set
-- the school, then read whether the school exists and its policy version. The read's query runs
-- only after it and only when the answer will count (`live`: the school exists and its version is
-- the one the caller authorised on): the lateral reference to `o` makes Postgres run `o` first,
-- and `OFFSET 0` keeps `WHERE o.live` a gate on the subquery (a one-time filter) instead of a
-- filter on rows it already read. `transaction_read_only` may be turned on mid-transaction (only
-- turning it off after the first query is refused); every statement the read's functions run
-- after it is checked against it, as after `SET TRANSACTION READ ONLY`.

CREATE FUNCTION rover_open_read(p_school uuid, p_cached bigint)
RETURNS TABLE (bypasses_rls boolean, school_exists boolean, policy_version bigint, live boolean)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_version bigint;
    v_exists boolean;
BEGIN
    IF (SELECT r.rolsuper OR r.rolbypassrls FROM pg_roles r WHERE r.rolname = current_user) THEN
        RETURN QUERY SELECT true, NULL::boolean, NULL::bigint, false;
        RETURN;
    END IF;
    PERFORM set_config('transaction_read_only', 'on', true);
    PERFORM set_config('app.school_id', p_school::text, true);
    v_version := coalesce((SELECT pv.version FROM policy_versions pv), 0);
    v_exists := EXISTS (SELECT 1 FROM schools s);
    RETURN QUERY SELECT false, v_exists, v_version, v_exists AND v_version = p_cached;
END
$$;

-- Only the application role calls it (granted when the database is provisioned).
REVOKE EXECUTE ON FUNCTION rover_open_read(uuid, bigint) FROM PUBLIC;
