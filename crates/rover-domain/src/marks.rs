//! Marks: a subject teacher records and reads the marks of a subject they teach to a class; the
//! director of studies reads averages.

use std::collections::BTreeMap;

use rover_contracts::context::{CallScope, ClassRef, SubjectRef};
use rover_contracts::ids::{ClassId, StudentId, SubjectId, TermId};
use rover_contracts::tools::{
    ClassMarks, GetClassMarksArgs, GetResultsSummaryArgs, MAX_LIST_ROWS, MarkRow, MarksRecorded,
    RecordMarksArgs, ResultsRow, ResultsSummary, StudentRef,
};
use serde_json::json;
use sqlx::FromRow;
use uuid::Uuid;

use crate::calendar::{TermRow, Year, current_year, term_or_current};
use crate::lookup::{
    ClassRow, SubjectRow, class_in_scope, clean_text, count, ensure_teaches, subject,
};
use crate::tenant::campus_of;
use crate::{Actor, AuditChange, DomainError, TenantTx, Written};

/// Records scores (0–100) for one assessment of a subject the actor teaches to the class this
/// academic year, in a term of this academic year (the current term by default). A student's
/// earlier score for the same assessment is replaced.
///
/// The audit change is keyed by the class; `before` holds the replaced scores, if any.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn record_marks(
    tx: &mut TenantTx,
    actor: &Actor,
    scope: &CallScope,
    args: &RecordMarksArgs,
) -> Result<Written<MarksRecorded>, DomainError> {
    let campus = campus_of(tx, scope)?;
    let assessment = clean_text(&args.assessment, "assessment name", 100)?;
    let scores = scores(args)?;
    let Taught {
        class,
        subject,
        term,
    } = taught(
        tx,
        actor,
        campus,
        args.class_id,
        args.subject_id,
        args.term_id,
    )
    .await?;

    let ids: Vec<Uuid> = scores.keys().copied().collect();
    let enrolled: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM students WHERE class_id = $1 AND id = ANY($2)")
            .bind(class.id)
            .bind(&ids)
            .fetch_all(tx.connection())
            .await?;
    if let Some(stranger) = ids.iter().find(|id| !enrolled.contains(id)) {
        return Err(DomainError::Invalid(format!(
            "Student {stranger} is not in {}.",
            class.name
        )));
    }

    let before: Vec<(Uuid, f64)> = sqlx::query_as(
        "SELECT student_id, score::float8 FROM marks \
         WHERE student_id = ANY($1) AND subject_id = $2 AND term_id = $3 AND assessment = $4",
    )
    .bind(&ids)
    .bind(subject.id)
    .bind(term.id)
    .bind(&assessment)
    .fetch_all(tx.connection())
    .await?;
    let school = tx.school_uuid();
    sqlx::query(
        "INSERT INTO marks (school_id, student_id, subject_id, term_id, assessment, score, recorded_by) \
         SELECT $1, m.student_id, $4, $5, $6, m.score, $7 \
         FROM unnest($2::uuid[], $3::float8[]) AS m(student_id, score) \
         ON CONFLICT (school_id, student_id, subject_id, term_id, assessment) \
         DO UPDATE SET score = excluded.score, recorded_by = excluded.recorded_by, recorded_at = now()",
    )
    .bind(school)
    .bind(&ids)
    .bind(scores.values().copied().collect::<Vec<f64>>())
    .bind(subject.id)
    .bind(term.id)
    .bind(&assessment)
    .bind(actor.uuid())
    .execute(tx.connection())
    .await?;

    let snapshot = |scores: &BTreeMap<Uuid, f64>| {
        json!({
            "subjectId": subject.id,
            "termId": term.id,
            "assessment": assessment,
            "scores": scores,
        })
    };
    Ok(Written {
        change: AuditChange {
            subject_id: class.id.to_string(),
            before: (!before.is_empty()).then(|| snapshot(&before.into_iter().collect())),
            after: snapshot(&scores),
        },
        output: MarksRecorded {
            class: class.to_ref(),
            subject: subject.to_ref(),
            term: term.name,
            assessment,
            recorded: count(scores.len()),
        },
    })
}

/// The marks of a subject the actor teaches to the class this academic year, for a term of this
/// academic year (the current term by default); by student and assessment, at most
/// [`MAX_LIST_ROWS`], with how many there are in all.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn class_marks(
    tx: &mut TenantTx,
    actor: &Actor,
    scope: &CallScope,
    args: &GetClassMarksArgs,
) -> Result<ClassMarks, DomainError> {
    let campus = campus_of(tx, scope)?;
    let Taught {
        class,
        subject,
        term,
    } = taught(
        tx,
        actor,
        campus,
        args.class_id,
        args.subject_id,
        args.term_id,
    )
    .await?;
    let rows: Vec<(Uuid, String, String, f64, i64)> = sqlx::query_as(
        "SELECT s.id, s.name, m.assessment, m.score::float8, count(*) OVER () FROM marks m \
         JOIN students s ON s.school_id = m.school_id AND s.id = m.student_id \
         WHERE s.class_id = $1 AND m.subject_id = $2 AND m.term_id = $3 \
         ORDER BY s.name, s.id, m.assessment LIMIT $4",
    )
    .bind(class.id)
    .bind(subject.id)
    .bind(term.id)
    .bind(i64::from(MAX_LIST_ROWS))
    .fetch_all(tx.connection())
    .await?;
    let total = rows.first().map_or(0, |row| count(row.4));
    Ok(ClassMarks {
        truncated: count(rows.len()) < total,
        total,
        class: class.to_ref(),
        subject: subject.to_ref(),
        term: term.name,
        marks: rows
            .into_iter()
            .map(|(id, name, assessment, score, _)| MarkRow {
                student: StudentRef {
                    id: StudentId::from_uuid(id),
                    name,
                },
                assessment,
                score,
            })
            .collect(),
    })
}

#[derive(Debug, FromRow)]
struct ResultsDbRow {
    class_id: Uuid,
    class_name: String,
    subject_id: Uuid,
    subject_name: String,
    marks: i64,
    average: f64,
}

/// Average marks per class and subject in scope for a term (the current term by default; any term
/// of the school by id), optionally of one class or subject; by class and subject.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn results_summary(
    tx: &mut TenantTx,
    _actor: &Actor,
    scope: &CallScope,
    args: &GetResultsSummaryArgs,
) -> Result<ResultsSummary, DomainError> {
    let campus = campus_of(tx, scope)?;
    let year = current_year(tx).await?;
    let term = term_or_current(tx, &year, args.term_id).await?;
    let rows: Vec<ResultsDbRow> = sqlx::query_as(
        "SELECT k.id AS class_id, k.name AS class_name, sj.id AS subject_id, sj.name AS subject_name, \
                count(*) AS marks, round(avg(m.score), 2)::float8 AS average \
         FROM marks m \
         JOIN students s ON s.school_id = m.school_id AND s.id = m.student_id \
         JOIN classes k ON k.school_id = s.school_id AND k.id = s.class_id \
         JOIN subjects sj ON sj.school_id = m.school_id AND sj.id = m.subject_id \
         WHERE m.term_id = $1 AND ($2::uuid IS NULL OR k.id = $2) \
           AND ($3::uuid IS NULL OR sj.id = $3) AND ($4::uuid IS NULL OR k.campus_id = $4) \
         GROUP BY k.id, k.name, sj.id, sj.name ORDER BY k.name, sj.name",
    )
    .bind(term.id)
    .bind(args.class_id.map(|id| id.as_uuid()))
    .bind(args.subject_id.map(|id| id.as_uuid()))
    .bind(campus)
    .fetch_all(tx.connection())
    .await?;
    Ok(ResultsSummary {
        term: term.name,
        rows: rows
            .into_iter()
            .map(|row| ResultsRow {
                class: ClassRef {
                    id: ClassId::from_uuid(row.class_id),
                    name: row.class_name,
                },
                subject: SubjectRef {
                    id: SubjectId::from_uuid(row.subject_id),
                    name: row.subject_name,
                },
                marks: count(row.marks),
                average: row.average,
            })
            .collect(),
    })
}

/// A class, a subject the actor teaches it this year, and a term of this year.
struct Taught {
    class: ClassRow,
    subject: SubjectRow,
    term: TermRow,
}

/// Resolves and checks the relationship of the subject-teacher tools.
async fn taught(
    tx: &mut TenantTx,
    actor: &Actor,
    campus: Option<Uuid>,
    class_id: ClassId,
    subject_id: SubjectId,
    term_id: Option<TermId>,
) -> Result<Taught, DomainError> {
    let class = class_in_scope(tx, campus, class_id).await?;
    let subject = subject(tx, subject_id).await?;
    let year = current_year(tx).await?;
    ensure_teaches(tx, actor, &class, &subject, &year).await?;
    let term = term_or_current(tx, &year, term_id).await?;
    ensure_in_year(&term, &year)?;
    Ok(Taught {
        class,
        subject,
        term,
    })
}

fn ensure_in_year(term: &TermRow, year: &Year) -> Result<(), DomainError> {
    if term.academic_year_id == year.id {
        Ok(())
    } else {
        Err(DomainError::Invalid(format!(
            "{} is not a term of the current academic year ({}).",
            term.name, year.name
        )))
    }
}

/// The scores by student, refusing an empty list, a repeated student or a score outside 0–100.
fn scores(args: &RecordMarksArgs) -> Result<BTreeMap<Uuid, f64>, DomainError> {
    if args.marks.is_empty() {
        return Err(DomainError::Invalid("Give at least one mark.".to_owned()));
    }
    let mut scores = BTreeMap::new();
    for entry in &args.marks {
        if !(0.0..=100.0).contains(&entry.score) {
            return Err(DomainError::Invalid(format!(
                "Scores are out of 100; {} is not between 0 and 100.",
                entry.score
            )));
        }
        if scores
            .insert(entry.student_id.as_uuid(), entry.score)
            .is_some()
        {
            return Err(DomainError::Invalid(format!(
                "Student {} is listed more than once.",
                entry.student_id
            )));
        }
    }
    Ok(scores)
}
