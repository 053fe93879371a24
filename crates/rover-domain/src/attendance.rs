//! Attendance: a class teacher records a day for their class (who was absent; everyone else present).

use std::collections::BTreeSet;

use chrono::NaiveDate;
use rover_contracts::context::CallScope;
use rover_contracts::tools::{AttendanceRecorded, RecordAttendanceArgs};
use serde_json::json;
use uuid::Uuid;

use crate::calendar::{ensure_in_current_term, today};
use crate::classes::students_of;
use crate::lookup::{count, own_class};
use crate::resolve::{self, Resolved};
use crate::tenant::campus_of;
use crate::{Actor, AuditChange, DomainError, TenantTx, Written};

/// Records one day's attendance for a class the actor is class teacher of (the one named, or their
/// only class): the named students absent, every other student of the class present. The day
/// defaults to today in the school's time zone; it cannot be in the future, nor outside the
/// current term (a date the staff member did not say must never be written). Recording a day
/// again replaces it. Students are looked for in the class only, after the ownership check.
///
/// The audit change is keyed by the class; `before` holds the day's earlier absentees, if the day
/// was recorded before; `named` the words that named the class and the absentees.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn record_attendance(
    tx: &mut TenantTx,
    actor: &Actor,
    scope: &CallScope,
    args: &RecordAttendanceArgs,
) -> Result<Written<AttendanceRecorded>, DomainError> {
    let campus = campus_of(tx, scope)?;
    let (class, class_named) = own_class(tx, actor, campus, args.class.as_ref()).await?;
    let today = today(tx).await?;
    let date = args.date.unwrap_or(today);
    if date > today {
        return Err(DomainError::Invalid(format!(
            "Attendance cannot be recorded for {date}: that day has not happened yet."
        )));
    }
    ensure_in_current_term(tx, date).await?;

    let students = students_of(tx, class.id).await?;
    let place = format!("in {}", class.name);
    let named = resolve::students(tx, &[class.id], Some(&place), &args.absent).await?;
    if let Some(stranger) = named
        .iter()
        .find(|r| !students.iter().any(|s| s.id.as_uuid() == r.id))
    {
        return Err(DomainError::Invalid(format!(
            "Student {} is not in {}.",
            stranger.said, class.name
        )));
    }
    let absent_ids: BTreeSet<Uuid> = named.iter().map(|r| r.id).collect();

    let ids: Vec<Uuid> = students.iter().map(|s| s.id.as_uuid()).collect();
    let before: Vec<(Uuid, bool)> = sqlx::query_as(
        "SELECT student_id, present FROM attendance WHERE student_id = ANY($1) AND on_date = $2 \
         ORDER BY student_id",
    )
    .bind(&ids)
    .bind(date)
    .fetch_all(tx.connection())
    .await?;
    let school = tx.school_uuid();
    sqlx::query(
        "INSERT INTO attendance (school_id, student_id, on_date, present, recorded_by) \
         SELECT $1, s.id, $3, NOT (s.id = ANY($4)), $5 FROM unnest($2::uuid[]) AS s(id) \
         ON CONFLICT (school_id, student_id, on_date) \
         DO UPDATE SET present = excluded.present, recorded_by = excluded.recorded_by, recorded_at = now()",
    )
    .bind(school)
    .bind(&ids)
    .bind(date)
    .bind(absent_ids.iter().copied().collect::<Vec<_>>())
    .bind(actor.uuid())
    .execute(tx.connection())
    .await?;

    let absent: Vec<_> = students
        .iter()
        .filter(|s| absent_ids.contains(&s.id.as_uuid()))
        .cloned()
        .collect();
    let present = count(students.len() - absent.len());
    let before = (!before.is_empty()).then(|| {
        let absent: Vec<Uuid> = before
            .iter()
            .filter(|(_, p)| !p)
            .map(|(id, _)| *id)
            .collect();
        day_json(date, &absent)
    });
    Ok(Written {
        change: AuditChange {
            subject_id: class.id.to_string(),
            before,
            after: day_json(date, &absent_ids.iter().copied().collect::<Vec<_>>()),
            named: Some(json!({
                "class": class_named.as_ref().map(Resolved::audit),
                "absent": named.iter().map(Resolved::audit).collect::<Vec<_>>(),
                "date": args.date,
            })),
        },
        output: AttendanceRecorded {
            class: class.to_ref(),
            date,
            present,
            absent,
        },
    })
}

fn day_json(date: NaiveDate, absent: &[Uuid]) -> serde_json::Value {
    json!({ "date": date, "absentStudentIds": absent })
}
