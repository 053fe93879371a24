//! `@kind:name` in an argument check: a row of the eval's own database, which a call may name by
//! its id or the way staff say it ("S1 Blue", "Nakato", "Maths"). The rows are read before each
//! turn (a department created by one turn of a chat is named by the next), and a name is matched
//! with the resolver the tool server uses (`rover_domain::resolve::pick`): the same name, a unique
//! word or beginning of it, a plural's stem, initials, or a choice said back with its detail.

use std::collections::HashMap;

use rover_domain::resolve::{Candidate, pick};
use rover_domain::seed::DemoIds;
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

/// The kinds a check may name, and the resolver's word for each.
const KINDS: [(&str, &str); 9] = [
    ("department", "department"),
    ("subject", "subject"),
    ("class", "class"),
    ("student", "student"),
    ("user", "teacher"),
    ("teacher", "teacher"),
    ("staff", "teacher"),
    ("term", "term"),
    ("campus", "campus"),
];

/// One row of the database, as the resolver compares it.
#[derive(Debug, Clone)]
struct Entry {
    /// `department`, `subject`, `class`, `student`, `user`, `term`, `campus`.
    kind: &'static str,
    school: Uuid,
    candidate: Candidate,
    /// A student's class.
    class: Option<Uuid>,
}

/// The rows a name may mean, read from the eval's database.
#[derive(Debug, Clone, Default)]
pub struct Directory {
    entries: Vec<Entry>,
}

/// One row as read: (kind, school, id, name, detail, alias, class).
type RawRow = (
    String,
    Uuid,
    Uuid,
    String,
    String,
    Option<String>,
    Option<Uuid>,
);

/// Every named row of every school, with what tells it apart (as `rover_domain::resolve`
/// words it: a class's campus, a student's class and admission number, a teacher's email).
const ROWS: &str = "\
SELECT 'campus', school_id, id, name, '', NULL::text, NULL::uuid FROM campuses
UNION ALL
SELECT 'department', d.school_id, d.id, d.name, coalesce(c.name || ' campus', 'school-wide'), NULL, NULL
  FROM departments d LEFT JOIN campuses c ON c.school_id = d.school_id AND c.id = d.campus_id
UNION ALL
SELECT 'subject', s.school_id, s.id, s.name, d.name || ' department', NULL, NULL
  FROM subjects s JOIN departments d ON d.school_id = s.school_id AND d.id = s.department_id
UNION ALL
SELECT 'class', k.school_id, k.id, k.name, c.name, NULL, NULL
  FROM classes k JOIN campuses c ON c.school_id = k.school_id AND c.id = k.campus_id
UNION ALL
SELECT 'student', s.school_id, s.id, s.name, k.name || ', ' || s.admission_number,
       s.admission_number, s.class_id
  FROM students s JOIN classes k ON k.school_id = s.school_id AND k.id = s.class_id
UNION ALL
SELECT 'user', school_id, id, name, email, email, NULL FROM users
UNION ALL
SELECT 'term', school_id, id, name,
       to_char(starts_on, 'DD Mon') || ' to ' || to_char(ends_on, 'DD Mon YYYY'), NULL, NULL
  FROM terms";

impl Directory {
    /// Reads every row (through a pool that sees every school: the owner's).
    pub async fn load(pool: &PgPool) -> Result<Directory, sqlx::Error> {
        let rows: Vec<RawRow> = sqlx::query_as(ROWS).fetch_all(pool).await?;
        let entries = rows
            .into_iter()
            .filter_map(|(kind, school, id, name, detail, alias, class)| {
                let kind = KINDS.iter().find(|(k, _)| *k == kind)?.0;
                Some(Entry {
                    kind,
                    school,
                    candidate: Candidate {
                        id,
                        name,
                        detail,
                        alias,
                    },
                    class,
                })
            })
            .collect();
        Ok(Directory { entries })
    }

    /// Builds a directory from rows: (kind, school, id, name, detail, alias, class). For tests.
    pub fn from_rows(rows: Vec<RawRow>) -> Directory {
        Directory {
            entries: rows
                .into_iter()
                .filter_map(|(kind, school, id, name, detail, alias, class)| {
                    Some(Entry {
                        kind: KINDS.iter().find(|(k, _)| *k == kind)?.0,
                        school,
                        candidate: Candidate {
                            id,
                            name,
                            detail,
                            alias,
                        },
                        class,
                    })
                })
                .collect(),
        }
    }

    fn of(&self, kind: &str, school: Uuid) -> impl Iterator<Item = &Entry> {
        self.entries
            .iter()
            .filter(move |e| e.kind == kind && e.school == school)
    }

    /// The school of the user with this email.
    pub fn school_of(&self, email: &str) -> Option<Uuid> {
        self.entries
            .iter()
            .find(|e| {
                e.kind == "user"
                    && e.candidate
                        .alias
                        .as_deref()
                        .is_some_and(|a| a.eq_ignore_ascii_case(email))
            })
            .map(|e| e.school)
    }
}

/// What an `@kind:name` check accepts: the row's id, or a name that picks this row among the
/// rows of its kind in its school (a student among those of the class the call names, when it
/// names one, as the tool would).
#[derive(Debug, Clone)]
pub struct Row {
    /// The check as written (`@class:S1 Blue`).
    pub reference: String,
    /// The resolver's word for the kind (`class`, `teacher`, …).
    kind: &'static str,
    pub id: Uuid,
    candidates: Vec<Candidate>,
    /// Students only: the school's classes, and each student's class.
    classes: Vec<Candidate>,
    class_of: HashMap<Uuid, Uuid>,
}

impl Row {
    /// Whether `said` (a value at the checked path) names this row in `call` (the call's
    /// arguments).
    pub fn accepts(&self, said: &Value, call: &Value) -> bool {
        let Some(said) = said.as_str().map(str::trim) else {
            return false;
        };
        if said.eq_ignore_ascii_case(&self.id.to_string()) {
            return true;
        }
        let in_class;
        let candidates = match self.class_named(call) {
            Some(class) => {
                in_class = self
                    .candidates
                    .iter()
                    .filter(|c| self.class_of.get(&c.id) == Some(&class))
                    .cloned()
                    .collect::<Vec<_>>();
                &in_class
            }
            None => &self.candidates,
        };
        pick(self.kind, said, None, candidates).is_ok_and(|c| c.id == self.id)
    }

    /// The class a call names in its `class` argument, when this row is a student and the name
    /// or id is one class.
    fn class_named(&self, call: &Value) -> Option<Uuid> {
        if self.classes.is_empty() {
            return None;
        }
        let said = call.get("class")?.as_str()?.trim();
        if let Ok(id) = Uuid::parse_str(said) {
            return self.classes.iter().find(|c| c.id == id).map(|c| c.id);
        }
        pick("class", said, None, &self.classes).ok().map(|c| c.id)
    }
}

/// `@kind:name` → the row, among the rows of `directory` in the school of the case's speaker
/// (`profile` still comes from the demo ids: no tool names a profile).
#[derive(Debug)]
pub struct Names<'a> {
    pub directory: &'a Directory,
    pub ids: &'a DemoIds,
    /// The speaker's school.
    pub school: Option<Uuid>,
}

impl Names<'_> {
    fn row(&self, kind: &str, name: &str, reference: &str) -> Result<Row, ResolveError> {
        let unknown = || ResolveError::Unknown {
            kind: kind.to_owned(),
            name: name.to_owned(),
        };
        let (table, word) =
            *KINDS
                .iter()
                .find(|(k, _)| *k == kind)
                .ok_or_else(|| ResolveError::UnknownKind {
                    kind: kind.to_owned(),
                    reference: reference.to_owned(),
                })?;
        let table = if word == "teacher" { "user" } else { table };
        // The speaker's school first; a row only another school has (a Lakeside department
        // named in a check of a Hill case) is still found.
        let mut schools: Vec<Uuid> = self.directory.entries.iter().map(|e| e.school).collect();
        schools.sort();
        schools.dedup();
        if let Some(own) = self.school {
            schools.retain(|s| *s != own);
            schools.insert(0, own);
        }
        let found = schools.iter().find_map(|school| {
            let rows: Vec<&Entry> = self.directory.of(table, *school).collect();
            let named = |e: &&Entry| {
                e.candidate.name.eq_ignore_ascii_case(name.trim())
                    || e.candidate
                        .alias
                        .as_deref()
                        .is_some_and(|a| a.eq_ignore_ascii_case(name.trim()))
            };
            let entry = rows.iter().copied().find(named).or_else(|| {
                let candidates: Vec<Candidate> = rows.iter().map(|e| e.candidate.clone()).collect();
                let picked = pick(word, name, None, &candidates).ok()?;
                rows.iter().copied().find(|e| e.candidate.id == picked.id)
            })?;
            Some((*school, entry))
        });
        let (school, entry) = found.ok_or_else(unknown)?;
        let candidates = self
            .directory
            .of(table, school)
            .map(|e| e.candidate.clone())
            .collect();
        let (classes, class_of) = if table == "student" {
            (
                self.directory
                    .of("class", school)
                    .map(|e| e.candidate.clone())
                    .collect(),
                self.directory
                    .of("student", school)
                    .filter_map(|e| Some((e.candidate.id, e.class?)))
                    .collect(),
            )
        } else {
            (Vec::new(), HashMap::new())
        };
        Ok(Row {
            reference: reference.to_owned(),
            kind: word,
            id: entry.candidate.id,
            candidates,
            classes,
            class_of,
        })
    }
}

impl Resolve for Names<'_> {
    fn resolve(&self, value: &Value) -> Result<Want, ResolveError> {
        let Some(reference) = value.as_str().and_then(|s| s.strip_prefix('@')) else {
            return Ok(Want::Value(value.clone()));
        };
        let (kind, name) = reference
            .split_once(':')
            .ok_or_else(|| ResolveError::Malformed(reference.to_owned()))?;
        if kind == "profile" {
            let ids = self.ids;
            let id = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ids.profile(name)))
                .map_err(|_| ResolveError::Unknown {
                kind: kind.to_owned(),
                name: name.to_owned(),
            })?;
            return Ok(Want::Value(Value::String(id.to_string())));
        }
        self.row(kind, name, &format!("@{reference}"))
            .map(Box::new)
            .map(Want::Row)
    }
}

/// What an argument check compares with.
#[derive(Debug, Clone)]
pub enum Want {
    /// A value as written.
    Value(Value),
    /// A row (`@kind:name`): its id, or a name that picks it.
    Row(Box<Row>),
}

/// Resolves `@kind:name` values to the rows they name; anything else stays as it is.
pub trait Resolve {
    fn resolve(&self, value: &Value) -> Result<Want, ResolveError>;
}

/// Why a `@kind:name` reference names no row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// Not of the form `@kind:name`.
    #[error("{0:?} is not @kind:name")]
    Malformed(String),
    /// A kind the checks do not know.
    #[error("unknown kind {kind:?} in @{reference}")]
    UnknownKind { kind: String, reference: String },
    /// The database has no such row.
    #[error("the demo data has no {kind} named {name:?}")]
    Unknown { kind: String, name: String },
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    type Fixture = (Directory, Uuid, HashMap<&'static str, Uuid>);

    /// Hill's classes and students as the demo seeds them (Nakato twice), a subject, a teacher,
    /// and a department only Lakeside has; with each row's id by name.
    fn directory() -> Fixture {
        type Seed = (
            &'static str,
            bool,
            &'static str,
            &'static str,
            Option<&'static str>,
            Option<&'static str>,
        );
        // (kind, in Hill, name, detail, alias, class)
        const ROWS: [Seed; 10] = [
            ("class", true, "S1 Blue", "Naalya", None, None),
            ("class", true, "S2 Green", "Naalya", None, None),
            ("class", true, "S1 Gold", "Kololo", None, None),
            (
                "student",
                true,
                "Nakato Sarah",
                "S1 Blue, KHS001",
                Some("KHS001"),
                Some("S1 Blue"),
            ),
            (
                "student",
                true,
                "Mugisha Brian",
                "S1 Blue, KHS002",
                Some("KHS002"),
                Some("S1 Blue"),
            ),
            (
                "student",
                true,
                "Nakato Mary",
                "S2 Green, KHS016",
                Some("KHS016"),
                Some("S2 Green"),
            ),
            (
                "subject",
                true,
                "Mathematics",
                "Mathematics department",
                None,
                None,
            ),
            (
                "subject",
                true,
                "Physics",
                "Mathematics department",
                None,
                None,
            ),
            (
                "user",
                true,
                "James Okello",
                "okello@hill.school",
                Some("okello@hill.school"),
                None,
            ),
            ("department", false, "Sciences", "school-wide", None, None),
        ];
        let (hill, lakeside) = (Uuid::new_v4(), Uuid::new_v4());
        let mut ids: HashMap<&'static str, Uuid> = HashMap::new();
        let mut id = |name| *ids.entry(name).or_insert_with(Uuid::new_v4);
        let rows = ROWS
            .iter()
            .map(|(kind, in_hill, name, detail, alias, class)| {
                (
                    (*kind).to_owned(),
                    if *in_hill { hill } else { lakeside },
                    id(name),
                    (*name).to_owned(),
                    (*detail).to_owned(),
                    alias.map(str::to_owned),
                    class.map(&mut id),
                )
            })
            .collect();
        (Directory::from_rows(rows), hill, ids)
    }

    fn row(fixture: &Fixture, reference: &str) -> Row {
        let (directory, hill, _) = fixture;
        let (directory, hill) = (directory, *hill);
        let ids = DemoIds::new(2026);
        let names = Names {
            directory,
            ids: &ids,
            school: Some(hill),
        };
        match names.resolve(&json!(reference)).unwrap() {
            Want::Row(row) => *row,
            Want::Value(v) => panic!("{reference} resolved to the value {v}"),
        }
    }

    #[test]
    fn a_class_is_named_by_its_id_or_as_staff_say_it() {
        let fixture = directory();
        let ids = &fixture.2;
        let blue = row(&fixture, "@class:S1 Blue");
        let none = json!({});
        for said in [
            json!(ids["S1 Blue"].to_string()),
            json!(ids["S1 Blue"].to_string().to_uppercase()),
            json!("S1 Blue"),
            json!(" s1 blue "),
            json!("S1-Blue"),
            json!("blue"),
            json!("S1 Blue (Naalya)"),
        ] {
            assert!(blue.accepts(&said, &none), "{said}");
        }
        for said in [
            json!(ids["S2 Green"].to_string()),
            json!("S1"),
            json!("S1 Gold"),
            json!("Sarah"),
            json!(3),
        ] {
            assert!(!blue.accepts(&said, &none), "{said}");
        }
    }

    #[test]
    fn a_subject_by_nickname_and_a_teacher_by_a_word_of_their_name() {
        let fixture = directory();
        let maths = row(&fixture, "@subject:Mathematics");
        for said in ["Maths", "math", "mathematics"] {
            assert!(maths.accepts(&json!(said), &json!({})), "{said}");
        }
        assert!(!maths.accepts(&json!("Physics"), &json!({})));
        let okello = row(&fixture, "@user:okello@hill.school");
        for said in ["Okello", "James Okello", "okello@hill.school"] {
            assert!(okello.accepts(&json!(said), &json!({})), "{said}");
        }
        assert_eq!(row(&fixture, "@teacher:Okello").id, okello.id);
    }

    #[test]
    fn a_student_is_narrowed_to_the_class_the_call_names() {
        let fixture = directory();
        let ids = &fixture.2;
        let sarah = row(&fixture, "@student:Nakato Sarah");
        // "Nakato" alone fits two students of the school…
        assert!(!sarah.accepts(&json!("Nakato"), &json!({})));
        // …one of S1 Blue, by name or id.
        assert!(sarah.accepts(&json!("Nakato"), &json!({ "class": "S1 Blue" })));
        assert!(sarah.accepts(
            &json!("Nakato"),
            &json!({ "class": ids["S1 Blue"].to_string() })
        ));
        assert!(!sarah.accepts(&json!("Nakato"), &json!({ "class": "S2 Green" })));
        // The choice said back with its detail, and the full name, need no class.
        assert!(sarah.accepts(&json!("Nakato Sarah (S1 Blue, KHS001)"), &json!({})));
        assert!(sarah.accepts(&json!("nakato sarah"), &json!({})));
        assert!(sarah.accepts(&json!("KHS001"), &json!({})));
        assert!(!sarah.accepts(&json!("Nakato Mary (S2 Green, KHS016)"), &json!({})));
    }

    #[test]
    fn unknown_rows_and_kinds_are_errors_and_other_values_stay_as_they_are() {
        let (directory, hill, _) = directory();
        let ids = DemoIds::new(2026);
        let names = Names {
            directory: &directory,
            ids: &ids,
            school: Some(hill),
        };
        assert!(matches!(
            names.resolve(&json!("@class:S9 Purple")),
            Err(ResolveError::Unknown { .. })
        ));
        assert!(matches!(
            names.resolve(&json!("@house:Red")),
            Err(ResolveError::UnknownKind { .. })
        ));
        assert!(matches!(
            names.resolve(&json!("@nokind")),
            Err(ResolveError::Malformed(_))
        ));
        assert!(matches!(
            names.resolve(&json!("Sciences")),
            Ok(Want::Value(v)) if v == "Sciences"
        ));
        // Only Lakeside has a department "Sciences" here: found all the same.
        assert!(matches!(
            names.resolve(&json!("@department:Sciences")),
            Ok(Want::Row(_))
        ));
    }
}
