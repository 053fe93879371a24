-- A tool call's database work as two PL/pgSQL functions, so that Postgres plans it once per
-- connection instead of on every call. Before, the opening query was a multi-statement text query
-- (the tenant, the role check, the school, the policy version, the policy rows, a write's lock,
-- stored reply and approval): parsed, rewritten under row-level security and planned each time —
-- about 0.3 ms of Postgres's CPU per call, more than the domain query itself. PL/pgSQL keeps each
-- statement's plan for the session (re-planned when a table or policy changes), so a call now
-- pays for parsing one function call.
--
-- Both are SECURITY INVOKER: they run as the application role, under row-level security, with
-- nothing it could not do itself. Every column is qualified by its table's alias, because the
-- result columns are variables inside the function.

-- Opens a tool call's tenant frame, in the caller's transaction: sets `app.school_id` for the rest
-- of the transaction, takes a write's call-id lock, and returns
--   * one context row (`is_policy` NULL): whether the role bypasses row-level security (if it
--     does, nothing else: the caller refuses to go on), whether the school exists, its policy version (p_policy), the
--     tool's approval mode and whether an approved row is bound to this very call (p_tool), the
--     call id's stored reply (p_call);
--   * then, with p_policy, the policy rows and role assignments — only when the version is not
--     p_cached (read after the version, so never older than it).
CREATE FUNCTION rover_open_call(
    p_school uuid,
    p_policy boolean,
    p_cached bigint,
    p_call text,
    p_tool text,
    p_approval_call text,
    p_turn uuid,
    p_user uuid,
    p_thread uuid,
    p_input jsonb
) RETURNS TABLE (
    bypasses_rls boolean,
    school_exists boolean,
    policy_version bigint,
    approval_mode text,
    approved boolean,
    stored_reply jsonb,
    stored_event text,
    stored_actor uuid,
    is_policy boolean,
    role text,
    action text,
    subject text,
    user_id uuid
) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_version bigint;
BEGIN
    -- A role row-level security does not bind would see every school: say so, read nothing.
    IF (SELECT r.rolsuper OR r.rolbypassrls FROM pg_roles r WHERE r.rolname = current_user) THEN
        RETURN QUERY SELECT true, NULL::boolean, NULL::bigint, NULL::text, NULL::boolean,
            NULL::jsonb, NULL::text, NULL::uuid, NULL::boolean, NULL::text, NULL::text, NULL::text,
            NULL::uuid;
        RETURN;
    END IF;
    PERFORM set_config('app.school_id', p_school::text, true);
    IF p_call IS NOT NULL THEN
        -- The same key as the inbox's own lookup, so both serialise one call id.
        PERFORM pg_advisory_xact_lock(hashtextextended(p_school::text || '/' || p_call, 0));
    END IF;
    IF p_policy THEN
        v_version := coalesce((SELECT pv.version FROM policy_versions pv), 0);
    END IF;
    RETURN QUERY
    SELECT false,
           EXISTS (SELECT 1 FROM schools s),
           v_version,
           CASE WHEN p_tool IS NOT NULL THEN
               (SELECT tp.mode FROM tool_approval_policy tp
                 WHERE tp.tool = p_tool OR tp.tool = '*' ORDER BY (tp.tool = '*') LIMIT 1)
           END,
           CASE WHEN p_tool IS NOT NULL THEN
               EXISTS (SELECT 1 FROM approvals a
                        WHERE a.consumer_turn_id = p_turn AND a.call_id = p_approval_call
                          AND a.state = 'approved' AND a.user_id = p_user
                          AND a.thread_id = p_thread AND a.input = p_input)
           END,
           i.reply, i.event, i.actor_user_id,
           NULL::boolean, NULL::text, NULL::text, NULL::text, NULL::uuid
      FROM (SELECT 1) AS one
      LEFT JOIN tool_call_inbox i ON p_call IS NOT NULL AND i.call_id = p_call;
    IF p_policy AND v_version IS DISTINCT FROM p_cached THEN
        RETURN QUERY
        SELECT NULL::boolean, NULL::boolean, NULL::bigint, NULL::text, NULL::boolean,
               NULL::jsonb, NULL::text, NULL::uuid,
               rows.is_policy, rows.role, rows.action, rows.subject, rows.user_id
          FROM (SELECT true AS is_policy, ap.role, ap.action, ap.subject, NULL::uuid AS user_id
                  FROM authz_policies ap
                UNION ALL
                SELECT false, ra.role, NULL, NULL, ra.user_id FROM role_assignments ra) AS rows
         ORDER BY rows.is_policy DESC, rows.user_id, rows.role, rows.action, rows.subject;
    END IF;
END
$$;

-- Records a successful write's audit row and its inbox row (the reply to return to a repeat, the
-- event and the actor) in the write's transaction; the caller sends `COMMIT` in the same query.
CREATE FUNCTION rover_finish_write(
    p_school uuid,
    p_campus uuid,
    p_actor uuid,
    p_email text,
    p_event text,
    p_subject text,
    p_call text,
    p_trace text,
    p_before jsonb,
    p_after jsonb,
    p_reply jsonb
) RETURNS void LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    INSERT INTO audit_log (school_id, campus_id, actor_user_id, actor_email, event, subject_id,
                           call_id, trace_id, before, after)
    VALUES (p_school, p_campus, p_actor, p_email, p_event, p_subject, p_call, p_trace, p_before,
            p_after);
    INSERT INTO tool_call_inbox (school_id, call_id, event, reply, actor_user_id)
    VALUES (p_school, p_call, p_event, p_reply, p_actor);
END
$$;

-- Only the application role calls them (granted when the database is provisioned).
REVOKE EXECUTE ON FUNCTION rover_open_call(uuid, boolean, bigint, text, text, text, uuid, uuid, uuid, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION rover_finish_write(uuid, uuid, uuid, text, text, text, text, text, jsonb, jsonb, jsonb) FROM PUBLIC;
