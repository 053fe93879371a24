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
/// only class). The day defaults to today in the school's time zone; it cannot be in the future,
/// nor outside the current term (a date the staff member did not say must never be written).
/// Students are looked for in the class only, after the ownership check.
///
/// On a day not yet recorded the named students are absent and every other student present. A
/// day already recorded is corrected, not replaced: `absent` adds absentees, `present` takes
/// students off them, and the rest stay as recorded, so "Mugisha was away too" is the call
/// `absent: ["Mugisha"]`. A call naming no one at all marks the whole class present, as on a
/// first recording. A student named both absent and present is refused.
///
/// The audit change is keyed by the class; `before` holds the day's earlier absentees, if the day
/// was recorded before, and `after` the day's absentees once written; `named` the words that
/// named the class and the students.
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
    let (named, named_present) = named_students(tx, &class, &students, args).await?;

    let ids: Vec<Uuid> = students.iter().map(|s| s.id.as_uuid()).collect();
    // The day's absentees as recorded before, if it was.
    let was_absent = recorded_absentees(tx, &ids, date).await?;
    // A day already recorded keeps its absentees unless the call names no one at all.
    let kept = match &was_absent {
        Some(_) if named.is_empty() && named_present.is_empty() => None,
        kept => kept.as_ref(),
    };
    let absent_ids: BTreeSet<Uuid> = named
        .iter()
        .map(|r| r.id)
        .chain(kept.into_iter().flatten().copied())
        .filter(|id| !named_present.iter().any(|p| p.id == *id))
        .collect();

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
    let before = was_absent.map(|absent| day_json(date, &absent.into_iter().collect::<Vec<_>>()));
    Ok(Written {
        change: AuditChange {
            subject_id: class.id.to_string(),
            before,
            after: day_json(date, &absent_ids.iter().copied().collect::<Vec<_>>()),
            named: Some(json!({
                "class": class_named.as_ref().map(Resolved::audit),
                "absent": named.iter().map(Resolved::audit).collect::<Vec<_>>(),
                "present": named_present.iter().map(Resolved::audit).collect::<Vec<_>>(),
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

/// The absentees recorded for `date` among `students`, or `None` when the day was not recorded.
async fn recorded_absentees(
    tx: &mut TenantTx,
    students: &[Uuid],
    date: NaiveDate,
) -> Result<Option<BTreeSet<Uuid>>, DomainError> {
    let rows: Vec<(Uuid, bool)> = sqlx::query_as(
        "SELECT student_id, present FROM attendance WHERE student_id = ANY($1) AND on_date = $2 \
         ORDER BY student_id",
    )
    .bind(students)
    .bind(date)
    .fetch_all(tx.connection())
    .await?;
    Ok((!rows.is_empty()).then(|| {
        rows.into_iter()
            .filter(|(_, present)| !present)
            .map(|(id, _)| id)
            .collect()
    }))
}

/// The students `args` names absent and present, each one of `students` (the class's), and none
/// named both ways.
async fn named_students(
    tx: &mut TenantTx,
    class: &crate::lookup::ClassRow,
    students: &[rover_contracts::tools::StudentRef],
    args: &RecordAttendanceArgs,
) -> Result<(Vec<Resolved>, Vec<Resolved>), DomainError> {
    let place = format!("in {}", class.name);
    let absent = resolve::students(tx, &[class.id], Some(&place), &args.absent).await?;
    let present = resolve::students(tx, &[class.id], Some(&place), &args.present).await?;
    if let Some(stranger) = absent
        .iter()
        .chain(&present)
        .find(|r| !students.iter().any(|s| s.id.as_uuid() == r.id))
    {
        return Err(DomainError::Invalid(format!(
            "Student {} is not in {}.",
            stranger.said, class.name
        )));
    }
    if let Some(both) = absent.iter().find(|a| present.iter().any(|p| p.id == a.id)) {
        return Err(DomainError::Invalid(format!(
            "Student {} was named both absent and present; say which.",
            both.said
        )));
    }
    Ok((absent, present))
}

fn day_json(date: NaiveDate, absent: &[Uuid]) -> serde_json::Value {
    json!({ "date": date, "absentStudentIds": absent })
}
