-- A per-school policy version, bumped in the very transaction that changes a policy row or a role
-- assignment (by trigger, so no writer can forget). A tool call's opening query reads the version
-- and the rows only when the version differs from the one the tool server last built its check
-- from: a revoked permission is still refused on the very next call, and an unchanged policy is not
-- read again on every call.
CREATE TABLE policy_versions (
    school_id uuid PRIMARY KEY REFERENCES schools (id) ON DELETE CASCADE,
    version bigint NOT NULL DEFAULT 1
);
INSERT INTO policy_versions (school_id) SELECT id FROM schools;

CREATE FUNCTION rover_bump_policy_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO policy_versions AS p (school_id)
    VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.school_id ELSE NEW.school_id END)
    ON CONFLICT (school_id) DO UPDATE SET version = p.version + 1;
    IF TG_OP = 'UPDATE' AND OLD.school_id IS DISTINCT FROM NEW.school_id THEN
        INSERT INTO policy_versions AS p (school_id) VALUES (OLD.school_id)
        ON CONFLICT (school_id) DO UPDATE SET version = p.version + 1;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER authz_policies_version AFTER INSERT OR UPDATE OR DELETE ON authz_policies
    FOR EACH ROW EXECUTE FUNCTION rover_bump_policy_version();
CREATE TRIGGER role_assignments_version AFTER INSERT OR UPDATE OR DELETE ON role_assignments
    FOR EACH ROW EXECUTE FUNCTION rover_bump_policy_version();

SELECT rover_enable_tenant_rls('policy_versions');
