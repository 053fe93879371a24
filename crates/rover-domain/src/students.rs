//! Students: search by name or admission number, and enrolment counts.

use rover_contracts::context::{CallScope, CampusRef, ClassRef};
use rover_contracts::ids::{CampusId, ClassId, StudentId};
use rover_contracts::named::{Named, Said};
use rover_contracts::tools::{
    Count, EnrollmentSummary, FindStudentsArgs, NoArgs, StudentRef, StudentSummary,
};
use sqlx::FromRow;
use uuid::Uuid;

use crate::call::{OneTripRead, ReadArg, campus_arg};
use crate::lookup::{count, word_patterns};
use crate::resolve;
use crate::tenant::campus_of;
use crate::text::clean_text;
use crate::{Actor, DomainError, TenantTx};

/// The most matches `find_students` returns.
const MAX_MATCHES: i64 = 50;

#[derive(Debug, FromRow)]
struct StudentRow {
    id: Uuid,
    name: String,
    admission_number: String,
    class_id: Uuid,
    class_name: String,
    campus_id: Uuid,
    campus_name: String,
}

/// Students in scope whose name or admission number contains every word of the query (in any
/// order, ignoring case), optionally within one class; at most 50, by name.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn find_students(
    tx: &mut TenantTx,
    _actor: &Actor,
    scope: &CallScope,
    args: &FindStudentsArgs,
) -> Result<Vec<StudentSummary>, DomainError> {
    let campus = campus_of(tx, scope)?;
    let patterns = student_patterns(args)?;
    let class = match &args.class {
        Some(named) => Some(resolve::class(tx, campus, named).await?.id),
        None => None,
    };
    let rows: Vec<StudentRow> = sqlx::query_as(&format!("{FIND_STUDENTS}($1, $2, $3, $4)"))
        .bind(patterns)
        .bind(class)
        .bind(campus)
        .bind(MAX_MATCHES)
        .fetch_all(tx.connection())
        .await?;
    Ok(student_summaries(rows))
}

/// [`find_students`] as a [`OneTripRead`]: the same function of migration `0044`, run with the
/// opening query in one round trip (the campus is the scope's: the transaction's school is the
/// scope's school). A search text that is not acceptable is refused before anything is sent.
/// `None` when the class is named by name: resolving it takes [`find_students`]' own round trip.
pub fn find_students_in_one_trip(
    scope: &CallScope,
    args: &FindStudentsArgs,
) -> Result<Option<OneTripRead<Vec<StudentSummary>>>, DomainError> {
    let class = match args.class.as_ref().map(Named::parse) {
        None => None,
        Some(Said::Id(id)) => Some(id.as_uuid()),
        Some(Said::Name(_)) => return Ok(None),
    };
    Ok(Some(OneTripRead::call(
        FIND_STUDENTS,
        vec![
            ReadArg::Texts(student_patterns(args)?),
            ReadArg::Uuid(class),
            campus_arg(scope),
            ReadArg::BigInt(MAX_MATCHES),
        ],
        |rows| {
            let rows = rows
                .iter()
                .map(StudentRow::from_row)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(student_summaries(rows))
        },
    )))
}

/// The query of [`find_students`], less its arguments.
const FIND_STUDENTS: &str = "SELECT id, name, admission_number, class_id, class_name, campus_id, \
     campus_name FROM rover_find_students";

/// One `ILIKE` pattern per word of the search text, which must be acceptable.
fn student_patterns(args: &FindStudentsArgs) -> Result<Vec<String>, DomainError> {
    Ok(word_patterns(&clean_text(&args.query, "search text", 100)?))
}

fn student_summaries(rows: Vec<StudentRow>) -> Vec<StudentSummary> {
    rows.into_iter()
        .map(|row| StudentSummary {
            student: StudentRef {
                id: StudentId::from_uuid(row.id),
                name: row.name,
            },
            admission_number: row.admission_number,
            class: ClassRef {
                id: ClassId::from_uuid(row.class_id),
                name: row.class_name,
            },
            campus: CampusRef {
                id: CampusId::from_uuid(row.campus_id),
                name: row.campus_name,
            },
        })
        .collect()
}

/// Students in scope: the total, per campus and per class (every campus and class in scope is
/// listed, empty ones with zero), by name.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn enrollment_summary(
    tx: &mut TenantTx,
    _actor: &Actor,
    scope: &CallScope,
    _args: &NoArgs,
) -> Result<EnrollmentSummary, DomainError> {
    let campus = campus_of(tx, scope)?;
    let by_campus: Vec<(String, i64)> = sqlx::query_as(
        "SELECT c.name, count(s.id) FROM campuses c \
         LEFT JOIN classes k ON k.school_id = c.school_id AND k.campus_id = c.id \
         LEFT JOIN students s ON s.school_id = k.school_id AND s.class_id = k.id \
         WHERE ($1::uuid IS NULL OR c.id = $1) \
         GROUP BY c.id, c.name ORDER BY c.name",
    )
    .bind(campus)
    .fetch_all(tx.connection())
    .await?;
    let by_class: Vec<(String, i64)> = sqlx::query_as(
        "SELECT k.name, count(s.id) FROM classes k \
         JOIN campuses c ON c.school_id = k.school_id AND c.id = k.campus_id \
         LEFT JOIN students s ON s.school_id = k.school_id AND s.class_id = k.id \
         WHERE ($1::uuid IS NULL OR k.campus_id = $1) \
         GROUP BY k.id, k.name, c.name ORDER BY c.name, k.name",
    )
    .bind(campus)
    .fetch_all(tx.connection())
    .await?;
    let counts = |rows: Vec<(String, i64)>| -> Vec<Count> {
        rows.into_iter()
            .map(|(name, students)| Count {
                name,
                students: count(students),
            })
            .collect()
    };
    let by_campus = counts(by_campus);
    Ok(EnrollmentSummary {
        total: by_campus.iter().map(|c| c.students).sum(),
        by_campus,
        by_class: counts(by_class),
    })
}
