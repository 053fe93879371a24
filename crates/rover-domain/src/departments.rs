//! Departments: list, create (school-wide, or on the chat's campus), rename.

use rover_contracts::context::{CallScope, CampusRef};
use rover_contracts::ids::{CampusId, DepartmentId};
use rover_contracts::tools::{
    CreateDepartmentArgs, Department, NoArgs, RenameDepartmentArgs, RenamedDepartment,
};
use sqlx::FromRow;
use uuid::Uuid;

use crate::call::{OneTripRead, campus_arg};
use crate::resolve;
use crate::tenant::campus_of;
use crate::text::clean_text;
use crate::{Actor, AuditChange, DomainError, TenantTx, Written};

const SELECT_DEPARTMENT: &str = "SELECT d.id, d.name, d.campus_id, c.name AS campus_name \
     FROM departments d LEFT JOIN campuses c ON c.school_id = d.school_id AND c.id = d.campus_id";

/// The longest department name accepted (the schema's limit too).
const MAX_NAME: usize = 100;

#[derive(Debug, FromRow)]
struct DepartmentRow {
    id: Uuid,
    name: String,
    campus_id: Option<Uuid>,
    campus_name: Option<String>,
}

impl From<DepartmentRow> for Department {
    fn from(row: DepartmentRow) -> Self {
        Department {
            id: DepartmentId::from_uuid(row.id),
            name: row.name,
            campus: row
                .campus_id
                .zip(row.campus_name)
                .map(|(id, name)| CampusRef {
                    id: CampusId::from_uuid(id),
                    name,
                }),
        }
    }
}

/// The departments in scope: all of them in school mode; the school-wide ones and the campus's
/// own in campus mode. Ordered by name.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn list_departments(
    tx: &mut TenantTx,
    _actor: &Actor,
    scope: &CallScope,
    _args: &NoArgs,
) -> Result<Vec<Department>, DomainError> {
    let campus = campus_of(tx, scope)?;
    let rows: Vec<DepartmentRow> = sqlx::query_as(&format!("{LIST_DEPARTMENTS}($1)"))
        .bind(campus)
        .fetch_all(tx.connection())
        .await?;
    Ok(rows.into_iter().map(Department::from).collect())
}

/// [`list_departments`] as a [`OneTripRead`]: the same function of migration `0041`, run with
/// the opening query in one round trip (the campus is the scope's: the transaction's school is
/// the scope's school).
pub fn list_departments_in_one_trip(
    scope: &CallScope,
    _args: &NoArgs,
) -> OneTripRead<Vec<Department>> {
    OneTripRead::call(LIST_DEPARTMENTS, vec![campus_arg(scope)], |rows| {
        rows.iter()
            .map(|row| DepartmentRow::from_row(row).map(Department::from))
            .collect::<Result<_, _>>()
            .map_err(DomainError::from)
    })
}

/// The query of [`list_departments`], less its argument.
const LIST_DEPARTMENTS: &str =
    "SELECT id, name, campus_id, campus_name FROM rover_list_departments";

/// Creates a department: school-wide in school mode, on the chat's campus in campus mode.
/// A name already used in the same scope (ignoring case) is a [`DomainError::Conflict`], and the
/// transaction stays usable.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn create_department(
    tx: &mut TenantTx,
    _actor: &Actor,
    scope: &CallScope,
    args: &CreateDepartmentArgs,
) -> Result<Written<Department>, DomainError> {
    let campus = campus_of(tx, scope)?;
    let name = clean_text(&args.name, "department name", MAX_NAME)?;
    let school = tx.school_uuid();
    // One round trip: the insert and the row as the caller sees it (with its campus's name).
    let row: Option<DepartmentRow> = sqlx::query_as(
        "WITH d AS (INSERT INTO departments (school_id, campus_id, name) VALUES ($1, $2, $3) \
         ON CONFLICT (school_id, coalesce(campus_id, '00000000-0000-0000-0000-000000000000'::uuid), lower(name)) \
         DO NOTHING RETURNING school_id, id, name, campus_id) \
         SELECT d.id, d.name, d.campus_id, c.name AS campus_name \
         FROM d LEFT JOIN campuses c ON c.school_id = d.school_id AND c.id = d.campus_id",
    )
    .bind(school)
    .bind(campus)
    .bind(&name)
    .fetch_optional(tx.connection())
    .await?;
    let Some(row) = row else {
        return Err(duplicate(&name, scope));
    };
    let id = row.id;
    let department = Department::from(row);
    Ok(Written {
        change: AuditChange {
            subject_id: id.to_string(),
            before: None,
            after: serde_json::to_value(&department).unwrap_or_default(),
            named: None,
        },
        output: department,
    })
}

/// Renames a department in scope. In campus mode only the campus's own departments can be renamed:
/// another campus's are not found, school-wide ones are refused.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn rename_department(
    tx: &mut TenantTx,
    _actor: &Actor,
    scope: &CallScope,
    args: &RenameDepartmentArgs,
) -> Result<Written<RenamedDepartment>, DomainError> {
    let campus = campus_of(tx, scope)?;
    let new_name = clean_text(&args.new_name, "department name", MAX_NAME)?;
    let named = resolve::department(tx, campus, &args.department).await?;
    let current: DepartmentRow = sqlx::query_as(&format!(
        "{SELECT_DEPARTMENT} WHERE d.id = $1 \
         AND ($2::uuid IS NULL OR d.campus_id IS NULL OR d.campus_id = $2) FOR UPDATE OF d"
    ))
    .bind(named.id)
    .bind(campus)
    .fetch_optional(tx.connection())
    .await?
    .ok_or_else(|| DomainError::not_found("department"))?;
    if let (Some(chat_campus), None) = (scope.run_mode.campus(), current.campus_id) {
        return Err(DomainError::Denied(format!(
            "{} is a school-wide department, and this chat can only change departments of the {} campus",
            current.name, chat_campus.name
        )));
    }

    let taken: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM departments WHERE id <> $1 \
         AND campus_id IS NOT DISTINCT FROM $2 AND lower(name) = lower($3))",
    )
    .bind(current.id)
    .bind(current.campus_id)
    .bind(&new_name)
    .fetch_one(tx.connection())
    .await?;
    if taken {
        return Err(duplicate(&new_name, scope));
    }
    sqlx::query("UPDATE departments SET name = $2 WHERE id = $1")
        .bind(current.id)
        .bind(&new_name)
        .execute(tx.connection())
        .await?;

    let before = Department::from(current);
    let department = Department {
        name: new_name,
        ..before.clone()
    };
    Ok(Written {
        change: AuditChange {
            subject_id: department.id.to_string(),
            before: Some(serde_json::to_value(&before).unwrap_or_default()),
            after: serde_json::to_value(&department).unwrap_or_default(),
            named: Some(serde_json::json!({ "department": named.audit() })),
        },
        output: RenamedDepartment {
            department,
            previous_name: before.name,
        },
    })
}

fn duplicate(name: &str, scope: &CallScope) -> DomainError {
    DomainError::Conflict(match scope.run_mode.campus() {
        Some(campus) => format!(
            "A department named \"{name}\" already exists on the {} campus.",
            campus.name
        ),
        None => format!("A school-wide department named \"{name}\" already exists."),
    })
}
