-- Tools take names as staff say them ("S1 Blue", "Nakato"), resolved on the server. The audit row
-- keeps the words the caller used beside the ids they resolved to: `named` is
-- {"class": {"said": "S1 Blue", "id": "…"}, "absent": [{"said": "Nakato", "id": "…"}], …}, NULL
-- when the write named nothing.
ALTER TABLE audit_log ADD COLUMN named jsonb;

DROP FUNCTION rover_finish_write(uuid, uuid, uuid, text, text, text, text, text, jsonb, jsonb, jsonb);

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
    p_named jsonb,
    p_reply jsonb
) RETURNS void LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    INSERT INTO audit_log (school_id, campus_id, actor_user_id, actor_email, event, subject_id,
                           call_id, trace_id, before, after, named)
    VALUES (p_school, p_campus, p_actor, p_email, p_event, p_subject, p_call, p_trace, p_before,
            p_after, p_named);
    INSERT INTO tool_call_inbox (school_id, call_id, event, reply, actor_user_id)
    VALUES (p_school, p_call, p_event, p_reply, p_actor);
END
$$;

REVOKE EXECUTE ON FUNCTION rover_finish_write(uuid, uuid, uuid, text, text, text, text, text, jsonb, jsonb, jsonb, jsonb) FROM PUBLIC;
