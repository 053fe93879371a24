//! The school calendar: today in the school's time zone, the current academic year (the latest
//! one that has started) and its terms.

use chrono::NaiveDate;
use rover_contracts::context::{Calendar, Term};
use rover_contracts::ids::{AcademicYearId, TermId};
use sqlx::FromRow;
use uuid::Uuid;

use crate::{DomainError, TenantTx};

/// An academic year, as the domain functions use it.
#[derive(Debug, Clone, FromRow)]
pub(crate) struct Year {
    pub(crate) id: Uuid,
    pub(crate) name: String,
}

/// A term, as the domain functions use it.
#[derive(Debug, Clone, FromRow)]
pub(crate) struct TermRow {
    pub(crate) id: Uuid,
    pub(crate) name: String,
    pub(crate) academic_year_id: Uuid,
}

/// The current academic year and its terms, for the runtime context.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn calendar(tx: &mut TenantTx) -> Result<Calendar, DomainError> {
    let year = current_year(tx).await?;
    let school = tx.school_uuid();
    let time_zone: String = sqlx::query_scalar("SELECT time_zone FROM schools WHERE id = $1")
        .bind(school)
        .fetch_one(tx.connection())
        .await?;
    let terms: Vec<(Uuid, String, NaiveDate, NaiveDate)> = sqlx::query_as(
        "SELECT id, name, starts_on, ends_on FROM terms WHERE academic_year_id = $1 ORDER BY starts_on",
    )
    .bind(year.id)
    .fetch_all(tx.connection())
    .await?;
    Ok(Calendar {
        time_zone,
        academic_year_id: AcademicYearId::from_uuid(year.id),
        academic_year: year.name,
        terms: terms
            .into_iter()
            .map(|(id, name, starts_on, ends_on)| Term {
                id: TermId::from_uuid(id),
                name,
                starts_on,
                ends_on,
            })
            .collect(),
    })
}

/// Today's date in the school's time zone.
pub(crate) async fn today(tx: &mut TenantTx) -> Result<NaiveDate, DomainError> {
    let school = tx.school_uuid();
    Ok(
        sqlx::query_scalar(
            "SELECT (now() AT TIME ZONE time_zone)::date FROM schools WHERE id = $1",
        )
        .bind(school)
        .fetch_one(tx.connection())
        .await?,
    )
}

/// Refuses `date` unless it falls in the current term (the latest term of the current academic
/// year that has started): a write never lands on a day outside it, such as a date a model made
/// up.
pub(crate) async fn ensure_in_current_term(
    tx: &mut TenantTx,
    date: NaiveDate,
) -> Result<(), DomainError> {
    let term: Option<(String, NaiveDate, NaiveDate)> = sqlx::query_as(
        "SELECT t.name, t.starts_on, t.ends_on FROM terms t \
         JOIN academic_years y ON y.school_id = t.school_id AND y.id = t.academic_year_id \
         JOIN schools s ON s.id = t.school_id \
         WHERE y.starts_on <= (now() AT TIME ZONE s.time_zone)::date \
           AND t.starts_on <= (now() AT TIME ZONE s.time_zone)::date \
         ORDER BY y.starts_on DESC, t.starts_on DESC LIMIT 1",
    )
    .fetch_optional(tx.connection())
    .await?;
    match term {
        Some((_, starts, ends)) if (starts..=ends).contains(&date) => Ok(()),
        Some((name, starts, ends)) => Err(DomainError::Invalid(format!(
            "Not done: {date} is not in the current term ({name}, {starts} to {ends}). Nothing \
             was recorded. Leave the date out for today, or ask the staff member which day they \
             meant."
        ))),
        None => Err(DomainError::Invalid(
            "Not done: no term of the current academic year has started, so nothing can be \
             recorded yet."
                .to_owned(),
        )),
    }
}

/// The current academic year, if the school has one.
pub(crate) async fn find_current_year(tx: &mut TenantTx) -> Result<Option<Year>, DomainError> {
    Ok(sqlx::query_as(
        "SELECT y.id, y.name FROM academic_years y JOIN schools s ON s.id = y.school_id \
         WHERE y.starts_on <= (now() AT TIME ZONE s.time_zone)::date \
         ORDER BY y.starts_on DESC LIMIT 1",
    )
    .fetch_optional(tx.connection())
    .await?)
}

/// The current academic year; an error when the school has none.
pub(crate) async fn current_year(tx: &mut TenantTx) -> Result<Year, DomainError> {
    find_current_year(tx)
        .await?
        .ok_or_else(|| DomainError::NotFound("The school has no current academic year.".to_owned()))
}

/// The term with this id, or the current term (the latest of `year` that has started) when `None`.
pub(crate) async fn term_or_current(
    tx: &mut TenantTx,
    year: &Year,
    term_id: Option<TermId>,
) -> Result<TermRow, DomainError> {
    match term_id {
        Some(id) => term(tx, id).await,
        None => sqlx::query_as(
            "SELECT t.id, t.name, t.academic_year_id FROM terms t JOIN schools s ON s.id = t.school_id \
             WHERE t.academic_year_id = $1 AND t.starts_on <= (now() AT TIME ZONE s.time_zone)::date \
             ORDER BY t.starts_on DESC LIMIT 1",
        )
        .bind(year.id)
        .fetch_optional(tx.connection())
        .await?
        .ok_or_else(|| {
            DomainError::NotFound(format!(
                "No term of the {} academic year has started yet.",
                year.name
            ))
        }),
    }
}

/// The term with this id, of any year.
async fn term(tx: &mut TenantTx, id: TermId) -> Result<TermRow, DomainError> {
    sqlx::query_as("SELECT id, name, academic_year_id FROM terms WHERE id = $1")
        .bind(id.as_uuid())
        .fetch_optional(tx.connection())
        .await?
        .ok_or_else(|| DomainError::not_found("term"))
}
