-- Read tools whose whole database work is one query, as PL/pgSQL functions: the tool server sends
-- such a read as ONE simple-protocol batch — `SET TRANSACTION READ ONLY`, `rover_open_call(…)`
-- (tenant, school, policy version), then `SELECT … FROM rover_list_…(<literals>)` — one round
-- trip in one implicit, read-only transaction that ends with the batch, where it took three
-- (`BEGIN` + the opening, the query, `ROLLBACK`). A query sent as text is parsed and planned on
-- every call (pgbench: about half the throughput of the same query prepared); inside a function
-- PL/pgSQL keeps its plan for the session. The Rust domain functions call the same functions
-- (REST, and the tool server's two-step path), so each query has one text.
--
-- SECURITY INVOKER and STABLE: they run as the application role under row-level security and
-- cannot write. Every column is qualified by its table's alias, because the result columns are
-- variables inside the function.

-- The departments in scope: all in school mode (p_campus NULL); the school-wide ones and the
-- campus's own in campus mode. Ordered by name.
CREATE FUNCTION rover_list_departments(p_campus uuid)
RETURNS TABLE (id uuid, name text, campus_id uuid, campus_name text)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT d.id, d.name, d.campus_id, c.name
      FROM departments d
      LEFT JOIN campuses c ON c.school_id = d.school_id AND c.id = d.campus_id
     WHERE p_campus IS NULL OR d.campus_id IS NULL OR d.campus_id = p_campus
     ORDER BY lower(d.name), c.name NULLS FIRST;
END
$$;

-- The classes in scope (the campus's in campus mode), with campus, class teacher and size,
-- ordered by campus and name; at most p_limit, each row with how many there are in all.
CREATE FUNCTION rover_list_classes(p_campus uuid, p_limit bigint)
RETURNS TABLE (
    id uuid,
    name text,
    campus_id uuid,
    campus_name text,
    class_teacher_id uuid,
    class_teacher_name text,
    student_count bigint,
    total bigint
) LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT k.id, k.name, k.campus_id, c.name, k.class_teacher_id, u.name,
           (SELECT count(*) FROM students s WHERE s.class_id = k.id),
           count(*) OVER ()
      FROM classes k
      JOIN campuses c ON c.school_id = k.school_id AND c.id = k.campus_id
      LEFT JOIN users u ON u.school_id = k.school_id AND u.id = k.class_teacher_id
     WHERE p_campus IS NULL OR k.campus_id = p_campus
     ORDER BY c.name, k.name, k.id
     LIMIT p_limit;
END
$$;

REVOKE EXECUTE ON FUNCTION rover_list_departments(uuid) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION rover_list_classes(uuid, bigint) FROM PUBLIC;
