-- `list_staff` and `find_students` become one-trip reads too (ARCHITECTURE.md, *Round trips*): their
-- one query each moves into a SQL function, which the tool server's one prepared statement inlines
-- (migration `0043`) and the Rust domain functions call as well (REST and the two-step path), so
-- each query keeps one text. `p_patterns` are `ILIKE` patterns, one per word of the search text,
-- made and escaped in Rust (`lookup::word_patterns`); a row matches when every word is in one of
-- its two searched columns. STABLE and SECURITY INVOKER: they run as the application role under
-- row-level security and cannot write.

-- Staff in scope (in campus mode, p_campus: the school-wide ones and the campus's own) matching
-- every pattern in name or email, with their roles; by name, at most p_limit, each row with how
-- many match in all.
CREATE FUNCTION rover_list_staff(p_campus uuid, p_patterns text[], p_limit bigint)
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
     GROUP BY u.id, c.name
     ORDER BY u.name, u.id
     LIMIT p_limit
$$;

-- Students in scope (p_campus: that campus's) matching every pattern in name or admission
-- number, within class p_class when given; by name, at most p_limit.
CREATE FUNCTION rover_find_students(p_patterns text[], p_class uuid, p_campus uuid, p_limit bigint)
RETURNS TABLE (
    id uuid,
    name text,
    admission_number text,
    class_id uuid,
    class_name text,
    campus_id uuid,
    campus_name text
) LANGUAGE sql STABLE AS $$
    SELECT s.id, s.name, s.admission_number, k.id, k.name, c.id, c.name
      FROM students s
      JOIN classes k ON k.school_id = s.school_id AND k.id = s.class_id
      JOIN campuses c ON c.school_id = k.school_id AND c.id = k.campus_id
     WHERE NOT EXISTS (SELECT 1 FROM unnest(p_patterns) AS w(pattern)
                        WHERE s.name NOT ILIKE w.pattern AND s.admission_number NOT ILIKE w.pattern)
       AND (p_class IS NULL OR s.class_id = p_class)
       AND (p_campus IS NULL OR k.campus_id = p_campus)
     ORDER BY s.name, s.id
     LIMIT p_limit
$$;

REVOKE EXECUTE ON FUNCTION rover_list_staff(uuid, text[], bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION rover_find_students(text[], uuid, uuid, bigint) FROM PUBLIC;
