-- Tenancy: schools, campuses, staff, role assignments and casbin policy rows; the one row-level
-- security policy every tenant table gets; the two narrow look-ups that run before a tenant is set.

-- Applies Rover's tenant policy to a table: row-level security ENABLEd and FORCEd (so not even the
-- table owner is exempt unless it bypasses RLS outright), and only rows of the school named in this
-- transaction's `app.school_id` are visible or writable. With no school set, no row is.
CREATE FUNCTION rover_enable_tenant_rls(tbl regclass, key_column text DEFAULT 'school_id')
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', tbl);
    EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', tbl);
    EXECUTE format(
        'CREATE POLICY tenant_isolation ON %1$s '
        'USING (%2$I = nullif(current_setting(''app.school_id'', true), '''')::uuid) '
        'WITH CHECK (%2$I = nullif(current_setting(''app.school_id'', true), '''')::uuid)',
        tbl, key_column);
END
$$;
REVOKE EXECUTE ON FUNCTION rover_enable_tenant_rls(regclass, text) FROM PUBLIC;

CREATE TABLE schools (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name text NOT NULL CHECK (btrim(name) <> ''),
    -- IANA zone: "today" and "the current term" are the school's, not the server's.
    time_zone text NOT NULL DEFAULT 'UTC',
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE campuses (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    school_id uuid NOT NULL REFERENCES schools (id),
    name text NOT NULL CHECK (btrim(name) <> ''),
    -- Target of composite foreign keys: whatever names a campus names one of its own school.
    UNIQUE (school_id, id)
);
CREATE UNIQUE INDEX campuses_name_key ON campuses (school_id, lower(name));

CREATE TABLE users (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    school_id uuid NOT NULL REFERENCES schools (id),
    -- NULL: school-wide staff.
    campus_id uuid,
    name text NOT NULL CHECK (btrim(name) <> ''),
    email text NOT NULL CHECK (email LIKE '%_@_%'),
    user_type text NOT NULL CHECK (user_type IN ('teacher', 'administrator', 'support')),
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (school_id, id),
    FOREIGN KEY (school_id, campus_id) REFERENCES campuses (school_id, id)
);
-- Login emails are unique across schools: the gateway learns a user's tenant from one.
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

CREATE TABLE profiles (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    school_id uuid NOT NULL,
    user_id uuid NOT NULL,
    title text,
    phone text,
    UNIQUE (school_id, user_id),
    FOREIGN KEY (school_id, user_id) REFERENCES users (school_id, id) ON DELETE CASCADE
);

-- casbin's grouping policy (`g, user, role, school`).
CREATE TABLE role_assignments (
    school_id uuid NOT NULL,
    user_id uuid NOT NULL,
    role text NOT NULL CHECK (role ~ '^[a-z][a-z_]*$'),
    PRIMARY KEY (school_id, user_id, role),
    FOREIGN KEY (school_id, user_id) REFERENCES users (school_id, id) ON DELETE CASCADE
);

-- casbin's policy (`p, role, school, subject, action`), per school; names as in
-- `rover_contracts::permission::{Action, Subject}`.
CREATE TABLE authz_policies (
    school_id uuid NOT NULL REFERENCES schools (id),
    role text NOT NULL CHECK (role ~ '^[a-z][a-z_]*$'),
    action text NOT NULL CHECK (action IN ('read', 'create', 'update', 'delete')),
    subject text NOT NULL CHECK (subject IN ('Campus', 'Department', 'Subject', 'Class', 'Student',
        'Staff', 'TeachingAssignment', 'Mark', 'Attendance', 'Role')),
    PRIMARY KEY (school_id, role, action, subject)
);

-- The only ways past row-level security: a user's tenant, by id or by login email, for the gateway
-- to set before anything else is read. They answer one uuid and nothing more.
CREATE FUNCTION rover_user_school(p_user_id uuid) RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT school_id FROM public.users WHERE id = p_user_id $$;

CREATE FUNCTION rover_user_school_by_email(p_email text) RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT school_id FROM public.users WHERE lower(email) = lower(p_email) $$;

REVOKE EXECUTE ON FUNCTION rover_user_school(uuid) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION rover_user_school_by_email(text) FROM PUBLIC;

SELECT rover_enable_tenant_rls('schools', 'id');
SELECT rover_enable_tenant_rls('campuses');
SELECT rover_enable_tenant_rls('users');
SELECT rover_enable_tenant_rls('profiles');
SELECT rover_enable_tenant_rls('role_assignments');
SELECT rover_enable_tenant_rls('authz_policies');
