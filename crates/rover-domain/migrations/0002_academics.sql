-- The academic domain: calendar, departments, subjects, classes, students, teaching, marks, attendance.
-- Every reference is a composite key with school_id, so no row can point into another school.

CREATE TABLE academic_years (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    school_id uuid NOT NULL REFERENCES schools (id),
    name text NOT NULL CHECK (btrim(name) <> ''),
    starts_on date NOT NULL,
    ends_on date NOT NULL,
    CHECK (starts_on <= ends_on),
    UNIQUE (school_id, id),
    UNIQUE (school_id, name)
);

CREATE TABLE terms (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    school_id uuid NOT NULL,
    academic_year_id uuid NOT NULL,
    name text NOT NULL CHECK (btrim(name) <> ''),
    starts_on date NOT NULL,
    ends_on date NOT NULL,
    CHECK (starts_on <= ends_on),
    UNIQUE (school_id, id),
    UNIQUE (school_id, academic_year_id, name),
    FOREIGN KEY (school_id, academic_year_id) REFERENCES academic_years (school_id, id) ON DELETE CASCADE
);

CREATE TABLE departments (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    school_id uuid NOT NULL REFERENCES schools (id),
    -- NULL: school-wide.
    campus_id uuid,
    name text NOT NULL CHECK (btrim(name) <> '' AND length(name) <= 100),
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (school_id, id),
    FOREIGN KEY (school_id, campus_id) REFERENCES campuses (school_id, id)
);
-- One name per scope (school-wide departments share the nil campus), case-insensitively.
CREATE UNIQUE INDEX departments_name_key ON departments
    (school_id, coalesce(campus_id, '00000000-0000-0000-0000-000000000000'::uuid), lower(name));

CREATE TABLE subjects (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    school_id uuid NOT NULL,
    department_id uuid NOT NULL,
    name text NOT NULL CHECK (btrim(name) <> ''),
    UNIQUE (school_id, id),
    FOREIGN KEY (school_id, department_id) REFERENCES departments (school_id, id)
);
CREATE UNIQUE INDEX subjects_name_key ON subjects (school_id, lower(name));

CREATE TABLE classes (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    school_id uuid NOT NULL,
    campus_id uuid NOT NULL,
    name text NOT NULL CHECK (btrim(name) <> ''),
    class_teacher_id uuid,
    UNIQUE (school_id, id),
    FOREIGN KEY (school_id, campus_id) REFERENCES campuses (school_id, id),
    FOREIGN KEY (school_id, class_teacher_id) REFERENCES users (school_id, id)
);
CREATE UNIQUE INDEX classes_name_key ON classes (school_id, campus_id, lower(name));

CREATE TABLE students (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    school_id uuid NOT NULL,
    class_id uuid NOT NULL,
    name text NOT NULL CHECK (btrim(name) <> ''),
    admission_number text NOT NULL CHECK (btrim(admission_number) <> ''),
    UNIQUE (school_id, id),
    UNIQUE (school_id, admission_number),
    FOREIGN KEY (school_id, class_id) REFERENCES classes (school_id, id)
);
CREATE INDEX students_class_idx ON students (school_id, class_id);

CREATE TABLE teaching_assignments (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    school_id uuid NOT NULL,
    teacher_id uuid NOT NULL,
    class_id uuid NOT NULL,
    subject_id uuid NOT NULL,
    academic_year_id uuid NOT NULL,
    UNIQUE (school_id, academic_year_id, class_id, subject_id, teacher_id),
    FOREIGN KEY (school_id, teacher_id) REFERENCES users (school_id, id),
    FOREIGN KEY (school_id, class_id) REFERENCES classes (school_id, id),
    FOREIGN KEY (school_id, subject_id) REFERENCES subjects (school_id, id),
    FOREIGN KEY (school_id, academic_year_id) REFERENCES academic_years (school_id, id)
);
CREATE INDEX teaching_assignments_teacher_idx ON teaching_assignments (school_id, teacher_id);

CREATE TABLE marks (
    school_id uuid NOT NULL,
    student_id uuid NOT NULL,
    subject_id uuid NOT NULL,
    term_id uuid NOT NULL,
    assessment text NOT NULL CHECK (btrim(assessment) <> '' AND length(assessment) <= 100),
    score numeric(5, 2) NOT NULL CHECK (score BETWEEN 0 AND 100),
    recorded_by uuid NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (school_id, student_id, subject_id, term_id, assessment),
    FOREIGN KEY (school_id, student_id) REFERENCES students (school_id, id) ON DELETE CASCADE,
    FOREIGN KEY (school_id, subject_id) REFERENCES subjects (school_id, id),
    FOREIGN KEY (school_id, term_id) REFERENCES terms (school_id, id),
    FOREIGN KEY (school_id, recorded_by) REFERENCES users (school_id, id)
);
CREATE INDEX marks_term_idx ON marks (school_id, term_id, subject_id);

CREATE TABLE attendance (
    school_id uuid NOT NULL,
    student_id uuid NOT NULL,
    on_date date NOT NULL,
    present boolean NOT NULL,
    recorded_by uuid NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (school_id, student_id, on_date),
    FOREIGN KEY (school_id, student_id) REFERENCES students (school_id, id) ON DELETE CASCADE,
    FOREIGN KEY (school_id, recorded_by) REFERENCES users (school_id, id)
);

SELECT rover_enable_tenant_rls('academic_years');
SELECT rover_enable_tenant_rls('terms');
SELECT rover_enable_tenant_rls('departments');
SELECT rover_enable_tenant_rls('subjects');
SELECT rover_enable_tenant_rls('classes');
SELECT rover_enable_tenant_rls('students');
SELECT rover_enable_tenant_rls('teaching_assignments');
SELECT rover_enable_tenant_rls('marks');
SELECT rover_enable_tenant_rls('attendance');
