-- Sign-in by email, when users shard by school. A sign-in (the console's, `rover-gateway token`)
-- knows an email before it knows a school, and a bearer token names a user id: both are looked up
-- before any tenant is set. `users_email_key` made email unique across schools, which a table
-- distributed by school cannot enforce (a unique index there must contain school_id), and a
-- look-up by email or id alone would ask every shard. So the look-up gets a home that stays
-- global: `user_directory`, one row per user (lower-cased email → school, user), a reference
-- table (every node keeps all of it). Its primary key keeps email unique across schools, its
-- unique user id keeps a token's subject naming one user; `users` keeps email unique within its
-- school.
--
-- A trigger on `users` keeps it right on every path — an insert, a change of email, school or id,
-- a delete, a cascade, a TRUNCATE — in the very transaction that changes the user: there is no
-- user without its directory row, no row without its user, and a second user with an email taken
-- in any school fails with `user_directory_pkey`, as it failed with `users_email_key` before.
-- Row-level security binds it like any table with a school_id: the application role sees and
-- writes only its school's rows; the two security-definer look-ups below read all of it.

CREATE TABLE user_directory (
    email text PRIMARY KEY CHECK (email = lower(email) AND email LIKE '%_@_%'),
    school_id uuid NOT NULL REFERENCES schools (id),
    user_id uuid NOT NULL UNIQUE
);
INSERT INTO reference_tables (table_name, reason) VALUES ('user_directory',
    'sign-in: an email''s or a user id''s school, read before any school is known; keeps email unique across schools');

INSERT INTO user_directory (email, school_id, user_id)
SELECT lower(u.email), u.school_id, u.id FROM users u;

CREATE FUNCTION rover_user_directory_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        DELETE FROM user_directory d WHERE d.user_id = OLD.id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO user_directory (email, school_id, user_id)
        VALUES (lower(NEW.email), NEW.school_id, NEW.id);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER users_directory AFTER INSERT OR DELETE OR UPDATE OF email, school_id, id ON users
    FOR EACH ROW EXECUTE FUNCTION rover_user_directory_sync();

CREATE FUNCTION rover_user_directory_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM user_directory;
    RETURN NULL;
END
$$;
CREATE TRIGGER users_directory_truncate AFTER TRUNCATE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION rover_user_directory_truncated();

SELECT rover_enable_tenant_rls('user_directory');

-- Email stays unique within a school on `users` itself (and the in-school look-up by email,
-- `actor::load_user_by_email`, keeps an index).
DROP INDEX users_email_key;
CREATE UNIQUE INDEX users_email_key ON users (school_id, lower(email));

-- The two look-ups past row-level security now read the directory: one row by its key, on one
-- node, instead of every school's users. `CREATE OR REPLACE` keeps their grants.
CREATE OR REPLACE FUNCTION rover_user_school(p_user_id uuid) RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT school_id FROM public.user_directory WHERE user_id = p_user_id $$;

CREATE OR REPLACE FUNCTION rover_user_school_by_email(p_email text) RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT school_id FROM public.user_directory WHERE email = lower(p_email) $$;
