-- Approval rules per role. A school could say which write tools wait for approval, not whose:
-- "teachers' writes wait, the head's do not" was SQL nobody could write. A rule may now name a role
-- (`*`: any role), and the caller's most specific rule decides:
--
--   1. the caller's role and the tool;   2. the caller's role and any tool (`*`);
--   3. any role and the tool;            4. any role and any tool (the school's default);
--   no rule at all: every write waits for approval.
--
-- A caller holding several roles whose rules differ at the same level gets `never` (no approval):
-- the most trusted role they hold decides, as a head who also teaches writes as the head. One
-- function decides it for both doors that ask — the tool server's opening query
-- (`rover_open_call`, below) and the worker's approval gate (`rover_turnstore::approvals`) — so the
-- rule cannot differ between them. The rules are read live on every call (nothing caches them).

ALTER TABLE tool_approval_policy
    ADD COLUMN role text NOT NULL DEFAULT '*' CHECK (btrim(role) <> '' AND length(role) <= 100);
ALTER TABLE tool_approval_policy DROP CONSTRAINT tool_approval_policy_pkey;
ALTER TABLE tool_approval_policy ADD PRIMARY KEY (school_id, role, tool);

-- The approval mode of `p_tool` for `p_user` in the transaction's school (row-level security holds
-- it to `app.school_id`): `always`, `never`, or NULL when no rule applies (approval needed).
CREATE FUNCTION rover_approval_mode(p_tool text, p_user uuid) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT tp.mode FROM tool_approval_policy tp
     WHERE (tp.tool = p_tool OR tp.tool = '*')
       AND (tp.role = '*'
            OR tp.role IN (SELECT ra.role FROM role_assignments ra WHERE ra.user_id = p_user))
     ORDER BY (tp.role = '*'), (tp.tool = '*'), (tp.mode = 'always')
     LIMIT 1
$$;

CREATE OR REPLACE FUNCTION rover_open_call(
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
    v_mode text;
    v_approved boolean;
    v_reply jsonb;
    v_event text;
    v_actor uuid;
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
    IF p_call IS NULL AND p_tool IS NULL THEN
        -- A read: the school and the version; nothing of a write's.
        RETURN QUERY SELECT false, EXISTS (SELECT 1 FROM schools s), v_version, NULL::text,
            NULL::boolean, NULL::jsonb, NULL::text, NULL::uuid, NULL::boolean, NULL::text,
            NULL::text, NULL::text, NULL::uuid;
    ELSE
        -- A write: its approval (the caller's most specific rule, `rover_approval_mode`; an
        -- approved row bound to this very call) and the call id's stored reply, each its own lookup.
        IF p_tool IS NOT NULL THEN
            v_mode := rover_approval_mode(p_tool, p_user);
            v_approved := EXISTS (SELECT 1 FROM approvals a
                        WHERE a.consumer_turn_id = p_turn AND a.call_id = p_approval_call
                          AND a.state = 'approved' AND a.user_id = p_user
                          AND a.thread_id = p_thread AND a.input = p_input);
        END IF;
        IF p_call IS NOT NULL THEN
            SELECT i.reply, i.event, i.actor_user_id INTO v_reply, v_event, v_actor
              FROM tool_call_inbox i WHERE i.call_id = p_call;
        END IF;
        RETURN QUERY SELECT false, EXISTS (SELECT 1 FROM schools s), v_version, v_mode,
            v_approved, v_reply, v_event, v_actor, NULL::boolean, NULL::text,
            NULL::text, NULL::text, NULL::uuid;
    END IF;
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
