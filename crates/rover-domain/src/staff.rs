//! Staff: the list in scope, with roles and campus.

use rover_contracts::context::{CallScope, CampusRef, UserType};
use rover_contracts::ids::{CampusId, UserId};
use rover_contracts::tools::{ListStaffArgs, MAX_LIST_ROWS, StaffList, StaffMember, StaffRef};
use sqlx::FromRow;
use uuid::Uuid;

use crate::lookup::{clean_text, count, word_patterns};
use crate::policy::decode_error;
use crate::tenant::campus_of;
use crate::{Actor, DomainError, TenantTx};

#[derive(Debug, FromRow)]
struct StaffRow {
    id: Uuid,
    name: String,
    email: String,
    user_type: String,
    campus_id: Option<Uuid>,
    campus_name: Option<String>,
    roles: Vec<String>,
    /// How many rows match, before the limit.
    total: i64,
}

/// Staff in scope (in campus mode: school-wide staff and the campus's own), optionally those whose
/// name or email contains every word of the query; by name, at most [`MAX_LIST_ROWS`], with how
/// many match in all.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn list_staff(
    tx: &mut TenantTx,
    _actor: &Actor,
    scope: &CallScope,
    args: &ListStaffArgs,
) -> Result<StaffList, DomainError> {
    let campus = campus_of(tx, scope)?;
    let patterns = match &args.query {
        Some(query) => word_patterns(&clean_text(query, "search text", 100)?),
        None => Vec::new(),
    };
    let rows: Vec<StaffRow> = sqlx::query_as(
        "SELECT u.id, u.name, u.email, u.user_type, u.campus_id, c.name AS campus_name, \
                coalesce(array_agg(r.role ORDER BY r.role) FILTER (WHERE r.role IS NOT NULL), '{}') AS roles, \
                count(*) OVER () AS total \
         FROM users u \
         LEFT JOIN campuses c ON c.school_id = u.school_id AND c.id = u.campus_id \
         LEFT JOIN role_assignments r ON r.school_id = u.school_id AND r.user_id = u.id \
         WHERE ($1::uuid IS NULL OR u.campus_id IS NULL OR u.campus_id = $1) \
           AND NOT EXISTS (SELECT 1 FROM unnest($2::text[]) AS w(pattern) \
                           WHERE u.name NOT ILIKE w.pattern AND u.email NOT ILIKE w.pattern) \
         GROUP BY u.id, c.name ORDER BY u.name, u.id LIMIT $3",
    )
    .bind(campus)
    .bind(patterns)
    .bind(i64::from(MAX_LIST_ROWS))
    .fetch_all(tx.connection())
    .await?;
    let total = rows.first().map_or(0, |row| count(row.total));
    let staff = rows
        .into_iter()
        .map(|row| {
            Ok(StaffMember {
                staff: StaffRef {
                    id: UserId::from_uuid(row.id),
                    name: row.name,
                },
                email: row.email,
                user_type: parse_user_type(&row.user_type)?,
                campus: row
                    .campus_id
                    .zip(row.campus_name)
                    .map(|(id, name)| CampusRef {
                        id: CampusId::from_uuid(id),
                        name,
                    }),
                roles: row.roles,
            })
        })
        .collect::<Result<Vec<_>, DomainError>>()?;
    Ok(StaffList {
        truncated: count(staff.len()) < total,
        total,
        staff,
    })
}

/// A `users.user_type` value (the schema allows only these three).
pub(crate) fn parse_user_type(text: &str) -> Result<UserType, DomainError> {
    match text {
        "teacher" => Ok(UserType::Teacher),
        "administrator" => Ok(UserType::Administrator),
        "support" => Ok(UserType::Support),
        other => Err(decode_error(std::io::Error::other(format!(
            "unknown user type {other:?}"
        )))),
    }
}
