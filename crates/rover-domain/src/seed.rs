//! The demo data every doc, demo and test relies on: Kampala Hill School (campuses Naalya and
//! Kololo) and Lakeside College, with fixed names and ids derived from those names.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use rover_contracts::context::CampusRef;
use rover_contracts::ids::{
    AcademicYearId, CampusId, ClassId, DepartmentId, ProfileId, SchoolId, StudentId, SubjectId,
    TermId, UserId,
};
use serde_json::{Value, json};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::Actor;

mod data;

use data::{MonthDay, SCHOOLS, TERMS, role_permissions};

/// The first school's name.
pub const HILL: &str = "Kampala Hill School";
/// The second school's name: the other tenant.
pub const LAKESIDE: &str = "Lakeside College";

/// The demo users the README lists, one of each kind of caller: a school admin, a campus admin,
/// the director of studies, a class teacher who teaches, a teacher, the bursar, the other school's
/// admin. Tests, the eval and the bench go through all of them.
pub const DEMO_USERS: [&str; 7] = [
    "admin@hill.school",
    "kololo.admin@hill.school",
    "dos@hill.school",
    "amina@hill.school",
    "okello@hill.school",
    "bursar@hill.school",
    "admin@lakeside.college",
];

/// Demo ids are derived from names, so they are the same in every database and seeding twice
/// inserts nothing new.
fn demo_uuid(kind: &str, school: &str, name: &str) -> Uuid {
    const NAMESPACE: Uuid = Uuid::from_u128(0x8f6f_4c1e_52a3_4d0b_9a57_0c2d_5e61_7b30);
    Uuid::new_v5(&NAMESPACE, format!("{kind}/{school}/{name}").as_bytes())
}

/// The ids of the demo data, by name. Names are unique across both schools, so one name is enough.
/// The accessors panic on a name the demo data does not have: they are for demos and tests.
#[derive(Debug, Clone)]
pub struct DemoIds {
    /// Kampala Hill School.
    pub hill: SchoolId,
    /// Lakeside College.
    pub lakeside: SchoolId,
    /// The academic year's name (the calendar year it was seeded in, "2026").
    pub year: String,
    by_name: BTreeMap<(&'static str, &'static str), Uuid>,
    emails: BTreeMap<&'static str, &'static str>,
}

impl DemoIds {
    /// The ids of the demo data seeded for academic year `year`.
    pub fn new(year: i32) -> Self {
        let year = year.to_string();
        let mut by_name = BTreeMap::new();
        for school in &SCHOOLS {
            let mut add = |kind: &'static str, name: &'static str| {
                let previous = by_name.insert((kind, name), demo_uuid(kind, school.name, name));
                assert!(previous.is_none(), "demo {kind} {name:?} is not unique");
            };
            add("school", school.name);
            school.campuses.iter().for_each(|c| add("campus", c));
            school
                .departments
                .iter()
                .for_each(|d| add("department", d.0));
            school.subjects.iter().for_each(|s| add("subject", s.0));
            for staff in school.staff {
                add("user", staff.email);
                add("profile", staff.email);
            }
            for class in school.classes {
                add("class", class.name);
                class.students.iter().for_each(|s| add("student", s));
            }
            school
                .joined_later
                .iter()
                .for_each(|(s, _)| add("student", s));
        }
        let emails = SCHOOLS
            .iter()
            .flat_map(|s| s.staff.iter().map(move |u| (u.email, s.name)))
            .collect();
        DemoIds {
            hill: SchoolId::from_uuid(demo_uuid("school", HILL, HILL)),
            lakeside: SchoolId::from_uuid(demo_uuid("school", LAKESIDE, LAKESIDE)),
            year,
            by_name,
            emails,
        }
    }

    fn get(&self, kind: &str, name: &str) -> Uuid {
        *self
            .by_name
            .get(&(kind, name))
            .unwrap_or_else(|| panic!("the demo data has no {kind} named {name:?}"))
    }

    /// A campus ("Naalya", "Kololo", "Main").
    pub fn campus(&self, name: &str) -> CampusId {
        CampusId::from_uuid(self.get("campus", name))
    }

    /// A campus as the run mode names it.
    pub fn campus_ref(&self, name: &str) -> CampusRef {
        CampusRef {
            id: self.campus(name),
            name: name.to_owned(),
        }
    }

    /// A staff member, by email.
    pub fn user(&self, email: &str) -> UserId {
        UserId::from_uuid(self.get("user", email))
    }

    /// A staff member's profile, by email.
    pub fn profile(&self, email: &str) -> ProfileId {
        ProfileId::from_uuid(self.get("profile", email))
    }

    /// A staff member as the acting user of a domain call.
    pub fn actor(&self, email: &str) -> Actor {
        Actor {
            user_id: self.user(email),
            email: email.to_owned(),
        }
    }

    /// The school a staff member belongs to.
    pub fn school_of(&self, email: &str) -> SchoolId {
        match self.emails.get(email) {
            Some(&HILL) => self.hill,
            Some(_) => self.lakeside,
            None => panic!("the demo data has no user {email:?}"),
        }
    }

    /// A department ("Languages", "Kololo Arts", Lakeside's "Sciences").
    pub fn department(&self, name: &str) -> DepartmentId {
        DepartmentId::from_uuid(self.get("department", name))
    }

    /// A subject ("Mathematics", "Physics").
    pub fn subject(&self, name: &str) -> SubjectId {
        SubjectId::from_uuid(self.get("subject", name))
    }

    /// A class ("S1 Blue", Lakeside's "Form 1").
    pub fn class(&self, name: &str) -> ClassId {
        ClassId::from_uuid(self.get("class", name))
    }

    /// A student ("Nakato Sarah").
    pub fn student(&self, name: &str) -> StudentId {
        StudentId::from_uuid(self.get("student", name))
    }

    /// A school's academic year.
    pub fn academic_year(&self, school: SchoolId) -> AcademicYearId {
        AcademicYearId::from_uuid(demo_uuid("academic-year", &school.to_string(), &self.year))
    }

    /// A term ("Term 1") of a school's academic year.
    pub fn term(&self, school: SchoolId, name: &str) -> TermId {
        assert!(
            TERMS.iter().any(|t| t.0 == name),
            "the demo data has no term named {name:?}"
        );
        TermId::from_uuid(demo_uuid(
            "term",
            &school.to_string(),
            &format!("{}/{name}", self.year),
        ))
    }
}

/// Seeds the demo data into a migrated database, through a pool connected as the schema owner
/// (it writes two schools, which only the owner may). The academic year is the current calendar
/// year in the schools' time zone, with three terms covering all of it.
///
/// Idempotent: rows are keyed by ids derived from their names, and existing rows are left alone,
/// so seeding again changes nothing (in a new year it adds that year's calendar and teaching).
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn seed_demo(owner_pool: &PgPool) -> Result<DemoIds, sqlx::Error> {
    let mut tx = owner_pool.begin().await?;
    let year: i32 =
        sqlx::query_scalar("SELECT extract(year FROM now() AT TIME ZONE 'Africa/Kampala')::int4")
            .fetch_one(&mut *tx)
            .await?;
    let ids = DemoIds::new(year);
    for (table, columns, rows) in demo_rows(&ids, year) {
        insert(&mut tx, table, columns, rows).await?;
    }
    tx.commit().await?;
    Ok(ids)
}

/// `INSERT … ON CONFLICT DO NOTHING` of JSON rows, one statement per table.
async fn insert(
    conn: &mut PgConnection,
    table: &str,
    columns: &str,
    rows: Vec<Value>,
) -> Result<(), sqlx::Error> {
    let names: Vec<&str> = columns
        .split(',')
        .filter_map(|c| c.split_whitespace().next())
        .collect();
    let names = names.join(", ");
    sqlx::query(&format!(
        "INSERT INTO {table} ({names}) SELECT {names} FROM jsonb_to_recordset($1) AS r({columns}) \
         ON CONFLICT DO NOTHING"
    ))
    .bind(Value::Array(rows))
    .execute(conn)
    .await?;
    Ok(())
}

type TableRows = (&'static str, &'static str, Vec<Value>);

/// Every demo row, per table, in foreign-key order.
#[expect(
    clippy::too_many_lines,
    reason = "the demo school as data: one table after another, read top to bottom"
)]
fn demo_rows(ids: &DemoIds, year: i32) -> Vec<TableRows> {
    let date = |(month, day): MonthDay| NaiveDate::from_ymd_opt(year, month, day);
    let permissions = role_permissions();
    let mut t: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for s in &SCHOOLS {
        let school = ids.get("school", s.name);
        let mut push = |table, row| t.entry(table).or_default().push(row);
        push(
            "schools",
            json!({ "id": school, "name": s.name, "time_zone": s.time_zone }),
        );
        // The demo schools let writes run without approval (the demo turn and the fault suites take
        // the straight path); a school with no policy rows needs approval for every write.
        push(
            "tool_approval_policy",
            json!({ "school_id": school, "tool": "*", "mode": "never" }),
        );
        for campus in s.campuses {
            push(
                "campuses",
                json!({ "id": ids.campus(campus), "school_id": school, "name": campus }),
            );
        }
        for staff in s.staff {
            let user = ids.user(staff.email);
            push(
                "users",
                json!({ "id": user, "school_id": school, "campus_id": staff.campus.map(|c| ids.campus(c)),
                        "name": staff.name, "email": staff.email, "user_type": staff.user_type }),
            );
            push(
                "profiles",
                json!({ "id": ids.profile(staff.email), "school_id": school, "user_id": user, "title": staff.title }),
            );
            push(
                "role_assignments",
                json!({ "school_id": school, "user_id": user, "role": staff.role }),
            );
        }
        for (role, action, subject) in &permissions {
            push(
                "authz_policies",
                json!({ "school_id": school, "role": role, "action": action.as_str(), "subject": subject.as_str() }),
            );
        }
        let school_id = SchoolId::from_uuid(school);
        let academic_year = ids.academic_year(school_id);
        push(
            "academic_years",
            json!({ "id": academic_year, "school_id": school, "name": ids.year,
                    "starts_on": date((1, 1)), "ends_on": date((12, 31)) }),
        );
        for (name, starts, ends) in TERMS {
            push(
                "terms",
                json!({ "id": ids.term(school_id, name), "school_id": school, "academic_year_id": academic_year,
                        "name": name, "starts_on": date(starts), "ends_on": date(ends) }),
            );
        }
        for (name, campus) in s.departments {
            push(
                "departments",
                json!({ "id": ids.department(name), "school_id": school,
                        "campus_id": campus.map(|c| ids.campus(c)), "name": name }),
            );
        }
        for (name, department) in s.subjects {
            push(
                "subjects",
                json!({ "id": ids.subject(name), "school_id": school,
                        "department_id": ids.department(department), "name": name }),
            );
        }
        let mut admission = 0;
        for class in s.classes {
            push(
                "classes",
                json!({ "id": ids.class(class.name), "school_id": school, "campus_id": ids.campus(class.campus),
                        "name": class.name, "class_teacher_id": class.class_teacher.map(|e| ids.user(e)) }),
            );
            for student in class.students {
                admission += 1;
                push(
                    "students",
                    json!({ "id": ids.student(student), "school_id": school, "class_id": ids.class(class.name),
                            "name": student, "admission_number": format!("{}/{admission:04}", s.admission_prefix) }),
                );
            }
        }
        for (student, class) in s.joined_later {
            admission += 1;
            push(
                "students",
                json!({ "id": ids.student(student), "school_id": school, "class_id": ids.class(class),
                        "name": student, "admission_number": format!("{}/{admission:04}", s.admission_prefix) }),
            );
        }
        for (email, class, subject) in s.teaching {
            push(
                "teaching_assignments",
                json!({ "id": demo_uuid("teaching", s.name, &format!("{}/{email}/{class}/{subject}", ids.year)),
                        "school_id": school, "teacher_id": ids.user(email), "class_id": ids.class(class),
                        "subject_id": ids.subject(subject), "academic_year_id": academic_year }),
            );
        }
    }
    let mut take = |table| t.remove(table).unwrap_or_default();
    vec![
        (
            "schools",
            "id uuid, name text, time_zone text",
            take("schools"),
        ),
        (
            "campuses",
            "id uuid, school_id uuid, name text",
            take("campuses"),
        ),
        (
            "tool_approval_policy",
            "school_id uuid, tool text, mode text",
            take("tool_approval_policy"),
        ),
        (
            "users",
            "id uuid, school_id uuid, campus_id uuid, name text, email text, user_type text",
            take("users"),
        ),
        (
            "profiles",
            "id uuid, school_id uuid, user_id uuid, title text",
            take("profiles"),
        ),
        (
            "role_assignments",
            "school_id uuid, user_id uuid, role text",
            take("role_assignments"),
        ),
        (
            "authz_policies",
            "school_id uuid, role text, action text, subject text",
            take("authz_policies"),
        ),
        (
            "academic_years",
            "id uuid, school_id uuid, name text, starts_on date, ends_on date",
            take("academic_years"),
        ),
        (
            "terms",
            "id uuid, school_id uuid, academic_year_id uuid, name text, starts_on date, ends_on date",
            take("terms"),
        ),
        (
            "departments",
            "id uuid, school_id uuid, campus_id uuid, name text",
            take("departments"),
        ),
        (
            "subjects",
            "id uuid, school_id uuid, department_id uuid, name text",
            take("subjects"),
        ),
        (
            "classes",
            "id uuid, school_id uuid, campus_id uuid, name text, class_teacher_id uuid",
            take("classes"),
        ),
        (
            "students",
            "id uuid, school_id uuid, class_id uuid, name text, admission_number text",
            take("students"),
        ),
        (
            "teaching_assignments",
            "id uuid, school_id uuid, teacher_id uuid, class_id uuid, subject_id uuid, academic_year_id uuid",
            take("teaching_assignments"),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_names_are_unique_and_ids_stable() {
        let ids = DemoIds::new(2026);
        for email in DEMO_USERS {
            ids.user(email);
        }
        assert_eq!(ids.school_of("amina@hill.school"), ids.hill);
        assert_eq!(ids.school_of("admin@lakeside.college"), ids.lakeside);
        assert_eq!(DemoIds::new(2026).class("S1 Blue"), ids.class("S1 Blue"));
        assert_ne!(
            ids.term(ids.hill, "Term 1"),
            ids.term(ids.lakeside, "Term 1")
        );
        assert_ne!(
            ids.academic_year(ids.hill),
            DemoIds::new(2027).academic_year(ids.hill)
        );
    }

    /// A small model copies an example from a tool's schema into its call: offered `e.g.
    /// "Nakato"` and `e.g. "Mid-term test"`, Qwen2.5-Coder-1.5B wrote `student: "Nakito"` for
    /// "Namuli 58" and an assessment nobody named. So no schema gives a demo student's name.
    #[test]
    fn no_tool_schema_gives_a_demo_students_name_as_an_example() {
        let words: Vec<&str> = SCHOOLS
            .iter()
            .flat_map(|school| school.classes)
            .flat_map(|class| class.students)
            .flat_map(|name| name.split_whitespace())
            .collect();
        for contract in rover_contracts::tools::REGISTRY {
            let text = serde_json::to_string(&(contract.args_schema)()).unwrap();
            let text = format!("{} {text}", contract.description);
            for word in &words {
                assert!(
                    !text.contains(word),
                    "{} names the demo student {word:?}",
                    contract.name
                );
            }
        }
    }

    #[test]
    fn every_table_gets_rows_and_hill_has_no_sciences() {
        let ids = DemoIds::new(2026);
        let rows = demo_rows(&ids, 2026);
        assert!(rows.iter().all(|(_, _, r)| !r.is_empty()));
        let hill_departments: Vec<_> = SCHOOLS[0].departments.iter().map(|d| d.0).collect();
        assert!(!hill_departments.contains(&"Sciences"));
    }
}
