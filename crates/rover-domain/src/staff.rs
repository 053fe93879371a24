//! Staff: the list in scope, with roles and campus.

use rover_contracts::context::{CallScope, CampusRef, UserType};
use rover_contracts::ids::{CampusId, UserId};
use rover_contracts::tools::{ListStaffArgs, MAX_LIST_ROWS, StaffList, StaffMember, StaffRef};
use sqlx::FromRow;
use uuid::Uuid;

use crate::call::{OneTripRead, ReadArg, campus_arg};
use crate::lookup::{count, word_patterns};
use crate::policy::decode_error;
use crate::tenant::campus_of;
use crate::text::clean_text;
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
    let patterns = staff_patterns(args)?;
    let rows: Vec<StaffRow> = sqlx::query_as(&format!("{LIST_STAFF}($1, $2, $3)"))
        .bind(campus)
        .bind(patterns)
        .bind(i64::from(MAX_LIST_ROWS))
        .fetch_all(tx.connection())
        .await?;
    staff_list(rows)
}

/// [`list_staff`] as a [`OneTripRead`]: the same function of migration `0044`, run with the
/// opening query in one round trip (the campus is the scope's: the transaction's school is the
/// scope's school). A search text that is not acceptable is refused before anything is sent.
pub fn list_staff_in_one_trip(
    scope: &CallScope,
    args: &ListStaffArgs,
) -> Result<OneTripRead<StaffList>, DomainError> {
    Ok(OneTripRead::call(
        LIST_STAFF,
        vec![
            campus_arg(scope),
            ReadArg::Texts(staff_patterns(args)?),
            ReadArg::BigInt(i64::from(MAX_LIST_ROWS)),
        ],
        |rows| {
            let rows = rows
                .iter()
                .map(StaffRow::from_row)
                .collect::<Result<Vec<_>, _>>()?;
            staff_list(rows)
        },
    ))
}

/// The query of [`list_staff`], less its arguments.
const LIST_STAFF: &str =
    "SELECT id, name, email, user_type, campus_id, campus_name, roles, total FROM rover_list_staff";

/// One `ILIKE` pattern per word of the search text; none without one.
fn staff_patterns(args: &ListStaffArgs) -> Result<Vec<String>, DomainError> {
    Ok(match &args.query {
        Some(query) => word_patterns(&clean_text(query, "search text", 100)?),
        None => Vec::new(),
    })
}

fn staff_list(rows: Vec<StaffRow>) -> Result<StaffList, DomainError> {
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
