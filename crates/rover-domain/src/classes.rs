//! Classes: the list in scope, and a class teacher's roster.

use rover_contracts::context::{CallScope, CampusRef, ClassRef};
use rover_contracts::ids::{CampusId, ClassId, StudentId, UserId};
use rover_contracts::tools::{
    ClassList, ClassRoster, ClassSummary, GetClassRosterArgs, MAX_LIST_ROWS, NoArgs, StaffRef,
    StudentRef,
};
use sqlx::FromRow;
use uuid::Uuid;

use crate::call::{OneTripRead, ReadArg, campus_arg};
use crate::lookup::{count, own_class};
use crate::tenant::campus_of;
use crate::{Actor, DomainError, TenantTx};

#[derive(Debug, FromRow)]
struct ClassSummaryRow {
    id: Uuid,
    name: String,
    campus_id: Uuid,
    campus_name: String,
    class_teacher_id: Option<Uuid>,
    class_teacher_name: Option<String>,
    student_count: i64,
    /// How many classes are in scope, before the limit.
    total: i64,
}

/// The classes in scope (the campus's in campus mode), with campus, class teacher and size,
/// ordered by campus and name; at most [`MAX_LIST_ROWS`], with how many there are in all.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn list_classes(
    tx: &mut TenantTx,
    _actor: &Actor,
    scope: &CallScope,
    _args: &NoArgs,
) -> Result<ClassList, DomainError> {
    let campus = campus_of(tx, scope)?;
    let rows: Vec<ClassSummaryRow> = sqlx::query_as(&format!("{LIST_CLASSES}($1, $2)"))
        .bind(campus)
        .bind(i64::from(MAX_LIST_ROWS))
        .fetch_all(tx.connection())
        .await?;
    Ok(class_list(rows))
}

/// [`list_classes`] as a [`OneTripRead`]: the same function of migration `0041`, run with the
/// opening query in one round trip (the campus is the scope's: the transaction's school is the
/// scope's school).
pub fn list_classes_in_one_trip(scope: &CallScope, _args: &NoArgs) -> OneTripRead<ClassList> {
    OneTripRead::call(
        LIST_CLASSES,
        vec![campus_arg(scope), ReadArg::BigInt(i64::from(MAX_LIST_ROWS))],
        |rows| {
            let rows = rows
                .iter()
                .map(ClassSummaryRow::from_row)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(class_list(rows))
        },
    )
}

/// The query of [`list_classes`], less its arguments.
const LIST_CLASSES: &str = "SELECT id, name, campus_id, campus_name, class_teacher_id, \
     class_teacher_name, student_count, total FROM rover_list_classes";

fn class_list(rows: Vec<ClassSummaryRow>) -> ClassList {
    let total = rows.first().map_or(0, |row| count(row.total));
    let classes: Vec<ClassSummary> =
        rows.into_iter()
            .map(|row| ClassSummary {
                class: ClassRef {
                    id: ClassId::from_uuid(row.id),
                    name: row.name,
                },
                campus: CampusRef {
                    id: CampusId::from_uuid(row.campus_id),
                    name: row.campus_name,
                },
                class_teacher: row.class_teacher_id.zip(row.class_teacher_name).map(
                    |(id, name)| StaffRef {
                        id: UserId::from_uuid(id),
                        name,
                    },
                ),
                student_count: count(row.student_count),
            })
            .collect();
    ClassList {
        truncated: count(classes.len()) < total,
        total,
        classes,
    }
}

/// The students of a class (the one named, or the caller's only class), by name. Only its class
/// teacher may see it.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn class_roster(
    tx: &mut TenantTx,
    actor: &Actor,
    scope: &CallScope,
    args: &GetClassRosterArgs,
) -> Result<ClassRoster, DomainError> {
    let campus = campus_of(tx, scope)?;
    let (class, _) = own_class(tx, actor, campus, args.class.as_ref()).await?;
    let students = students_of(tx, class.id).await?;
    Ok(ClassRoster {
        class: class.to_ref(),
        students,
    })
}

/// The students of a class, by name.
pub(crate) async fn students_of(
    tx: &mut TenantTx,
    class_id: Uuid,
) -> Result<Vec<StudentRef>, DomainError> {
    let rows: Vec<(Uuid, String)> =
        sqlx::query_as("SELECT id, name FROM students WHERE class_id = $1 ORDER BY name, id")
            .bind(class_id)
            .fetch_all(tx.connection())
            .await?;
    Ok(rows
        .into_iter()
        .map(|(id, name)| StudentRef {
            id: StudentId::from_uuid(id),
            name,
        })
        .collect())
}
