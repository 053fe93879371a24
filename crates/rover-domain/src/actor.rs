//! What the gateway reads to mint a turn's runtime context: the user's tenant (before any tenant
//! is set), their details, capabilities and teaching map, all from live rows.

use rover_contracts::context::{
    CampusRef, Capabilities, ClassRef, SchoolRef, TaughtClass, TeachingMap, UserDetails, UserType,
};
use rover_contracts::ids::{CampusId, ClassId, ProfileId, SchoolId, UserId};
use sqlx::{FromRow, PgPool};
use uuid::Uuid;

use crate::calendar::find_current_year;
use crate::staff::parse_user_type;
use crate::teaching::taught_classes;
use crate::{DomainError, TenantTx};

/// The school of a user, by user id: the one look-up allowed before a tenant is set (it runs the
/// `rover_user_school` security-definer function, which answers this and nothing else).
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", user_id = %user_id))]
pub async fn user_school(pool: &PgPool, user_id: UserId) -> Result<Option<SchoolId>, DomainError> {
    let school: Option<Uuid> = sqlx::query_scalar("SELECT rover_user_school($1)")
        .bind(user_id.as_uuid())
        .fetch_one(pool)
        .await?;
    Ok(school.map(SchoolId::from_uuid))
}

/// The school of a user, by login email (case-insensitive); see [`user_school`].
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn user_school_by_email(
    pool: &PgPool,
    email: &str,
) -> Result<Option<SchoolId>, DomainError> {
    let school: Option<Uuid> = sqlx::query_scalar("SELECT rover_user_school_by_email($1)")
        .bind(email)
        .fetch_one(pool)
        .await?;
    Ok(school.map(SchoolId::from_uuid))
}

const SELECT_USER: &str = "SELECT u.id, u.name, u.email, u.user_type, p.id AS profile_id, \
            s.id AS school_id, s.name AS school_name, c.id AS campus_id, c.name AS campus_name \
     FROM users u \
     JOIN profiles p ON p.school_id = u.school_id AND p.user_id = u.id \
     JOIN schools s ON s.id = u.school_id \
     LEFT JOIN campuses c ON c.school_id = u.school_id AND c.id = u.campus_id";

#[derive(Debug, FromRow)]
struct UserRow {
    id: Uuid,
    name: String,
    email: String,
    user_type: String,
    profile_id: Uuid,
    school_id: Uuid,
    school_name: String,
    campus_id: Option<Uuid>,
    campus_name: Option<String>,
}

/// A staff member of the current school, with profile, school and campus.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", user_id = %user_id))]
pub async fn load_user(tx: &mut TenantTx, user_id: UserId) -> Result<UserDetails, DomainError> {
    let row: Option<UserRow> = sqlx::query_as(&format!("{SELECT_USER} WHERE u.id = $1"))
        .bind(user_id.as_uuid())
        .fetch_optional(tx.connection())
        .await?;
    user_details(row)
}

/// A staff member of the current school, by login email (case-insensitive); see [`load_user`].
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn load_user_by_email(
    tx: &mut TenantTx,
    email: &str,
) -> Result<UserDetails, DomainError> {
    let row: Option<UserRow> =
        sqlx::query_as(&format!("{SELECT_USER} WHERE lower(u.email) = lower($1)"))
            .bind(email)
            .fetch_optional(tx.connection())
            .await?;
    user_details(row)
}

fn user_details(row: Option<UserRow>) -> Result<UserDetails, DomainError> {
    let row = row.ok_or_else(|| DomainError::not_found("staff member"))?;
    Ok(UserDetails {
        name: row.name,
        email: row.email,
        user_id: UserId::from_uuid(row.id),
        profile_id: ProfileId::from_uuid(row.profile_id),
        user_type: parse_user_type(&row.user_type)?,
        school: SchoolRef {
            id: SchoolId::from_uuid(row.school_id),
            name: row.school_name,
        },
        campus: row
            .campus_id
            .zip(row.campus_name)
            .map(|(id, name)| CampusRef {
                id: CampusId::from_uuid(id),
                name,
            }),
    })
}

/// Which role subagents exist for the user: class teacher of at least one class, a teaching
/// assignment this academic year, the `director_of_studies` role.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", user_id = %user_id))]
pub async fn capabilities(tx: &mut TenantTx, user_id: UserId) -> Result<Capabilities, DomainError> {
    let year = find_current_year(tx).await?.map(|y| y.id);
    let (class_teacher, subject_teacher, director_of_studies): (bool, bool, bool) = sqlx::query_as(
        "SELECT EXISTS (SELECT 1 FROM classes WHERE class_teacher_id = $1), \
                EXISTS (SELECT 1 FROM teaching_assignments WHERE teacher_id = $1 AND academic_year_id = $2), \
                EXISTS (SELECT 1 FROM role_assignments WHERE user_id = $1 AND role = 'director_of_studies')",
    )
    .bind(user_id.as_uuid())
    .bind(year)
    .fetch_one(tx.connection())
    .await?;
    Ok(Capabilities {
        class_teacher,
        subject_teacher,
        director_of_studies,
    })
}

/// The user's classes and subjects this academic year and the classes they are class teacher of:
/// `Some` for teachers (user type teacher, or anyone with such a relationship), `None` for everyone else.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql", user_id = %user_id))]
pub async fn teaching_map(
    tx: &mut TenantTx,
    user_id: UserId,
) -> Result<Option<TeachingMap>, DomainError> {
    let user = user_id.as_uuid();
    let user_type: String = sqlx::query_scalar("SELECT user_type FROM users WHERE id = $1")
        .bind(user)
        .fetch_optional(tx.connection())
        .await?
        .ok_or_else(|| DomainError::not_found("staff member"))?;
    let teaches = match find_current_year(tx).await? {
        Some(year) => taught_classes(tx, user, &year, None).await?,
        None => Vec::new(),
    };
    let class_teacher_of: Vec<(Uuid, String)> = sqlx::query_as(
        "SELECT id, name FROM classes WHERE class_teacher_id = $1 ORDER BY name, id",
    )
    .bind(user)
    .fetch_all(tx.connection())
    .await?;
    if parse_user_type(&user_type)? != UserType::Teacher
        && teaches.is_empty()
        && class_teacher_of.is_empty()
    {
        return Ok(None);
    }
    Ok(Some(TeachingMap {
        teaches: teaches
            .into_iter()
            .map(|c| TaughtClass {
                class: c.class,
                subjects: c.subjects,
            })
            .collect(),
        class_teacher_of: class_teacher_of
            .into_iter()
            .map(|(id, name)| ClassRef {
                id: ClassId::from_uuid(id),
                name,
            })
            .collect(),
    }))
}
