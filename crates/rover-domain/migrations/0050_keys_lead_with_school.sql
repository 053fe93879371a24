-- Tables that shard by school (docs/design/sharding.md). A table distributed by `school_id` (Citus,
-- the usual engine for multi-tenant Postgres) can enforce a primary key or unique constraint only
-- when it contains `school_id`, and a foreign key between two such tables only when both sides
-- carry it. Twelve tables had a primary key of `id` alone (and a second, `UNIQUE (school_id, id)`,
-- that every foreign key pointed at), and `threads` had none since 0009. Each gets the primary key
-- `(school_id, id)` in place of both; the foreign keys that used the old unique constraint are
-- dropped and made again, with the same names and definitions, on the new key (re-adding one
-- checks every row against it, so a row pointing into another school would fail this migration
-- rather than slip through). No row is written or removed.
--
-- `reference_tables` names the tables that are not per school — every node of a sharded cluster
-- keeps a whole copy of them — each with its reason. The catalog test
-- (crates/rover-domain/tests/it/shard_keys.rs) holds every other table to the rules: a
-- `school_id` column, a primary key and every unique constraint or index leading with it, every
-- foreign key to another tenant table matching `school_id` to `school_id`, and no foreign key from
-- a reference table into a tenant table. A new table that is global is added here by a migration:
-- `INSERT INTO reference_tables VALUES ('<table>', '<why it is not per school>')`.

CREATE TABLE reference_tables (
    table_name regclass PRIMARY KEY,
    reason text NOT NULL CHECK (btrim(reason) <> '')
);
INSERT INTO reference_tables (table_name, reason) VALUES
    ('schools', 'the tenants themselves: every tenant table''s school_id points at one of its rows'),
    ('reference_tables', 'this list, read by the catalog test and the sharding plan');

-- Re-keys one table by (school_id, id), keeping every foreign key that points at it.
CREATE FUNCTION pg_temp.rover_key_by_school(tbl regclass) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    fk record;
    fks text[] := '{}';
    old_unique name;
BEGIN
    -- The unique constraint on exactly (school_id, id), if any: the foreign keys' target until now.
    SELECT c.conname INTO old_unique
      FROM pg_constraint c
     WHERE c.conrelid = tbl AND c.contype = 'u'
       AND (SELECT array_agg(a.attname::text ORDER BY k.ord)
              FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, ord)
              JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum)
           = ARRAY['school_id', 'id'];
    FOR fk IN
        SELECT c.conrelid::regclass AS child, c.conname, pg_get_constraintdef(c.oid) AS def
          FROM pg_constraint c
         WHERE c.contype = 'f' AND c.confrelid = tbl
         ORDER BY c.conrelid::regclass::text, c.conname
    LOOP
        fks := fks || format('ALTER TABLE %s ADD CONSTRAINT %I %s', fk.child, fk.conname, fk.def);
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', fk.child, fk.conname);
    END LOOP;
    EXECUTE format('ALTER TABLE %s DROP CONSTRAINT IF EXISTS %I', tbl, tbl::text || '_pkey');
    IF old_unique IS NOT NULL THEN
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', tbl, old_unique);
    END IF;
    EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I PRIMARY KEY (school_id, id)',
                   tbl, tbl::text || '_pkey');
    FOR i IN 1 .. coalesce(array_length(fks, 1), 0) LOOP
        EXECUTE fks[i];
    END LOOP;
END
$$;

-- Parents before children is not needed (each call keeps its own foreign keys), but it reads so.
SELECT pg_temp.rover_key_by_school(t) FROM (VALUES
    ('campuses'::regclass), ('users'), ('profiles'), ('academic_years'), ('terms'),
    ('departments'), ('subjects'), ('classes'), ('students'), ('teaching_assignments'),
    ('audit_log'), ('threads'), ('artifacts')) AS v(t);

DROP FUNCTION pg_temp.rover_key_by_school(regclass);

-- `rover_list_staff` (0044) grouped by `u.id`, which stood for every column of `users` while `id`
-- was its primary key; under the key (school_id, id) it groups by both. Otherwise as in 0044;
-- `CREATE OR REPLACE` keeps its grant.
CREATE OR REPLACE FUNCTION rover_list_staff(p_campus uuid, p_patterns text[], p_limit bigint)
RETURNS TABLE (
    id uuid,
    name text,
    email text,
    user_type text,
    campus_id uuid,
    campus_name text,
    roles text[],
    total bigint
) LANGUAGE sql STABLE AS $$
    SELECT u.id, u.name, u.email, u.user_type, u.campus_id, c.name,
           coalesce(array_agg(r.role ORDER BY r.role) FILTER (WHERE r.role IS NOT NULL), '{}'),
           count(*) OVER ()
      FROM users u
      LEFT JOIN campuses c ON c.school_id = u.school_id AND c.id = u.campus_id
      LEFT JOIN role_assignments r ON r.school_id = u.school_id AND r.user_id = u.id
     WHERE (p_campus IS NULL OR u.campus_id IS NULL OR u.campus_id = p_campus)
       AND NOT EXISTS (SELECT 1 FROM unnest(p_patterns) AS w(pattern)
                        WHERE u.name NOT ILIKE w.pattern AND u.email NOT ILIKE w.pattern)
     GROUP BY u.school_id, u.id, c.name
     ORDER BY u.name, u.id
     LIMIT p_limit
$$;
