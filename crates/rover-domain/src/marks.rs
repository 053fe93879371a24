//! Marks: a subject teacher records and reads the marks of a subject they teach to a class; the
//! director of studies reads averages.

use std::collections::BTreeMap;

use rover_contracts::context::{CallScope, ClassRef, SubjectRef};
use rover_contracts::ids::{ClassId, StudentId, SubjectId, TermId};
use rover_contracts::named::Named;
use rover_contracts::tools::{
    ClassMarks, GetClassMarksArgs, GetResultsSummaryArgs, MAX_LIST_ROWS, MarkRow, MarksRecorded,
    RecordMarksArgs, ResultsRow, ResultsSummary, StudentRef,
};
use serde_json::json;
use sqlx::FromRow;
use uuid::Uuid;

use crate::calendar::{TermRow, Year, current_year, term_or_current};
use crate::lookup::{ClassRow, SubjectRow, count, ensure_teaches, named_class, subject};
use crate::resolve::{self, Resolved};
use crate::tenant::campus_of;
use crate::text::clean_text;
use crate::{Actor, AuditChange, DomainError, TenantTx, Written};

/// Records scores (0–100) for one assessment of a subject the actor teaches to the class this
/// academic year, in a term of this academic year (the current term by default). The class is
/// the one named or, when none is, the one class of the actor's for that subject that holds the
/// named students. A student's earlier score for the same assessment is replaced.
///
/// The audit change is keyed by the class; `before` holds the replaced scores, if any; `named`
/// the words that named the class, subject, term and students.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn record_marks(
    tx: &mut TenantTx,
    actor: &Actor,
    scope: &CallScope,
    args: &RecordMarksArgs,
) -> Result<Written<MarksRecorded>, DomainError> {
    let campus = campus_of(tx, scope)?;
    let assessment = clean_text(&args.assessment, "assessment name", 100)?;
    check_scores(args)?;
    let students: Vec<_> = args.marks.iter().map(|m| m.student.clone()).collect();
    let (
        Taught {
            class,
            subject,
            term,
        },
        named,
    ) = taught(
        tx,
        actor,
        campus,
        Teaching {
            class: args.class.as_ref(),
            subject: args.subject.as_ref(),
            term: args.term.as_ref(),
            students: &students,
        },
    )
    .await?;
    let scores = scores(args, &named.students)?;

    let ids: Vec<Uuid> = scores.keys().copied().collect();
    let enrolled: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM students WHERE class_id = $1 AND id = ANY($2)")
            .bind(class.id)
            .bind(&ids)
            .fetch_all(tx.connection())
            .await?;
    if let Some(stranger) = named.students.iter().find(|r| !enrolled.contains(&r.id)) {
        return Err(DomainError::Invalid(format!(
            "Student {} is not in {}.",
            stranger.said, class.name
        )));
    }

    let before = replace_marks(tx, actor, &subject, &term, &assessment, &scores).await?;

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
            named: Some(named.audit()),
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

/// Stores `scores` for the assessment, replacing a student's earlier score; returns the scores
/// replaced.
async fn replace_marks(
    tx: &mut TenantTx,
    actor: &Actor,
    subject: &SubjectRow,
    term: &TermRow,
    assessment: &str,
    scores: &BTreeMap<Uuid, f64>,
) -> Result<Vec<(Uuid, f64)>, DomainError> {
    let ids: Vec<Uuid> = scores.keys().copied().collect();
    let before: Vec<(Uuid, f64)> = sqlx::query_as(
        "SELECT student_id, score::float8 FROM marks \
         WHERE student_id = ANY($1) AND subject_id = $2 AND term_id = $3 AND assessment = $4",
    )
    .bind(&ids)
    .bind(subject.id)
    .bind(term.id)
    .bind(assessment)
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
    .bind(assessment)
    .bind(actor.uuid())
    .execute(tx.connection())
    .await?;
    Ok(before)
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
    let (
        Taught {
            class,
            subject,
            term,
        },
        _,
    ) = taught(
        tx,
        actor,
        campus,
        Teaching {
            class: Some(&args.class),
            subject: Some(&args.subject),
            term: args.term.as_ref(),
            students: &[],
        },
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
    let term = named_term(tx, &year, args.term.as_ref()).await?.0;
    let class = match &args.class {
        Some(named) => Some(resolve::class(tx, campus, named).await?.id),
        None => None,
    };
    let subject = match &args.subject {
        Some(named) => Some(resolve::subject(tx, campus, named).await?.id),
        None => None,
    };
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
    .bind(class)
    .bind(subject)
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

/// What the subject-teacher tools name: a class (or none: the students' tell it), a subject, a
/// term (or none: the current one) and students.
struct Teaching<'a> {
    class: Option<&'a Named<ClassId>>,
    /// `None` (marks only): the one subject the actor teaches this year.
    subject: Option<&'a Named<SubjectId>>,
    term: Option<&'a Named<TermId>>,
    students: &'a [Named<StudentId>],
}

/// What each named argument resolved to, for the audit row.
struct NamedTeaching {
    class: Option<Resolved>,
    subject: Resolved,
    term: Option<Resolved>,
    students: Vec<Resolved>,
}

impl NamedTeaching {
    fn audit(&self) -> serde_json::Value {
        json!({
            "class": self.class.as_ref().map(Resolved::audit),
            "subject": self.subject.audit(),
            "term": self.term.as_ref().map(Resolved::audit),
            "students": self.students.iter().map(Resolved::audit).collect::<Vec<_>>(),
        })
    }
}

/// Resolves and checks the relationship of the subject-teacher tools: the actor must teach the
/// subject to the class this year. Students are looked for only in classes the actor teaches the
/// subject to — the named class, or, with none named, all of them — after that check.
async fn taught(
    tx: &mut TenantTx,
    actor: &Actor,
    campus: Option<Uuid>,
    named: Teaching<'_>,
) -> Result<(Taught, NamedTeaching), DomainError> {
    let year = current_year(tx).await?;
    let said_subject = match named.subject {
        Some(said) => resolve::subject(tx, campus, said).await?,
        None => only_subject(tx, actor, &year).await?,
    };
    let subject = subject(tx, SubjectId::from_uuid(said_subject.id)).await?;
    let (class, said_class, students) = match named.class {
        Some(said) => {
            let (class, resolved) = named_class(tx, campus, said).await?;
            ensure_teaches(tx, actor, &class, &subject, &year).await?;
            let place = format!("in {}", class.name);
            let students = resolve::students(tx, &[class.id], Some(&place), named.students).await?;
            (class, Some(resolved), students)
        }
        None => {
            let (class, students) =
                class_of_students(tx, actor, campus, &subject, &year, named.students).await?;
            (class, None, students)
        }
    };
    let (term, said_term) = named_term(tx, &year, named.term).await?;
    ensure_in_year(&term, &year)?;
    Ok((
        Taught {
            class,
            subject,
            term,
        },
        NamedTeaching {
            class: said_class,
            subject: said_subject,
            term: said_term,
            students,
        },
    ))
}

/// With no subject named: the one subject the actor teaches this year (several: which one is
/// asked; none: refused).
async fn only_subject(
    tx: &mut TenantTx,
    actor: &Actor,
    year: &Year,
) -> Result<Resolved, DomainError> {
    let subjects: Vec<(Uuid, String)> = sqlx::query_as(
        "SELECT DISTINCT sj.id, sj.name FROM teaching_assignments t \
         JOIN subjects sj ON sj.school_id = t.school_id AND sj.id = t.subject_id \
         WHERE t.teacher_id = $1 AND t.academic_year_id = $2 ORDER BY sj.name",
    )
    .bind(actor.uuid())
    .bind(year.id)
    .fetch_all(tx.connection())
    .await?;
    match subjects.as_slice() {
        [(id, name)] => Ok(Resolved {
            id: *id,
            name: name.clone(),
            said: String::new(),
        }),
        [] => Err(DomainError::Denied(
            "you teach no subject this academic year".to_owned(),
        )),
        many => Err(DomainError::Unresolved(resolve::Unresolved {
            kind: "subject",
            said: "the subject".to_owned(),
            place: None,
            choices: many.iter().map(|(_, name)| name.clone()).collect(),
            ambiguous: true,
        })),
    }
}

/// With no class named: the class of the actor's for `subject` (this year, in scope) that holds
/// every named student — their only one, or the one the students are in.
async fn class_of_students(
    tx: &mut TenantTx,
    actor: &Actor,
    campus: Option<Uuid>,
    subject: &SubjectRow,
    year: &Year,
    named: &[Named<StudentId>],
) -> Result<(ClassRow, Vec<Resolved>), DomainError> {
    let classes: Vec<ClassRow> = sqlx::query_as(
        "SELECT k.id, k.name, k.class_teacher_id FROM teaching_assignments t \
         JOIN classes k ON k.school_id = t.school_id AND k.id = t.class_id \
         WHERE t.teacher_id = $1 AND t.subject_id = $2 AND t.academic_year_id = $3 \
           AND ($4::uuid IS NULL OR k.campus_id = $4) ORDER BY k.name, k.id",
    )
    .bind(actor.uuid())
    .bind(subject.id)
    .bind(year.id)
    .bind(campus)
    .fetch_all(tx.connection())
    .await?;
    if classes.is_empty() {
        return Err(DomainError::Denied(format!(
            "you do not teach {} to any class this academic year",
            subject.name
        )));
    }
    let ids: Vec<Uuid> = classes.iter().map(|c| c.id).collect();
    let place = format!("in your {} classes", subject.name);
    let students = resolve::students(tx, &ids, Some(&place), named).await?;
    let homes: Vec<Uuid> = sqlx::query_scalar(
        "SELECT DISTINCT class_id FROM students WHERE id = ANY($1) AND class_id = ANY($2)",
    )
    .bind(students.iter().map(|s| s.id).collect::<Vec<_>>())
    .bind(&ids)
    .fetch_all(tx.connection())
    .await?;
    let class = match (homes.as_slice(), classes.as_slice()) {
        ([home], _) => classes.iter().find(|c| c.id == *home).cloned(),
        ([], [only]) => Some(only.clone()),
        _ => None,
    };
    class.map(|class| (class, students)).ok_or_else(|| {
        let names: Vec<&str> = classes.iter().map(|c| c.name.as_str()).collect();
        DomainError::Invalid(format!(
            "Not done: say which class the marks are for ({}); each call records one class.",
            names.join(", ")
        ))
    })
}

/// The term `named` names (none, or "this term": the current one) of `year`, with what named it.
async fn named_term(
    tx: &mut TenantTx,
    year: &Year,
    named: Option<&Named<TermId>>,
) -> Result<(TermRow, Option<Resolved>), DomainError> {
    match named {
        Some(named) if !resolve::means_current_term(named) => {
            let resolved = resolve::term(tx, year.id, named).await?;
            let term = term_or_current(tx, year, Some(TermId::from_uuid(resolved.id))).await?;
            Ok((term, Some(resolved)))
        }
        _ => Ok((term_or_current(tx, year, None).await?, None)),
    }
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

/// Refuses an empty list or a score outside 0–100.
fn check_scores(args: &RecordMarksArgs) -> Result<(), DomainError> {
    if args.marks.is_empty() {
        return Err(DomainError::Invalid("Give at least one mark.".to_owned()));
    }
    match args
        .marks
        .iter()
        .find(|entry| !(0.0..=100.0).contains(&entry.score))
    {
        Some(entry) => Err(DomainError::Invalid(format!(
            "Scores are out of 100; {} is not between 0 and 100.",
            entry.score
        ))),
        None => Ok(()),
    }
}

/// The scores by student (`students` are the entries' students, resolved, in order), refusing a
/// student listed twice.
fn scores(
    args: &RecordMarksArgs,
    students: &[Resolved],
) -> Result<BTreeMap<Uuid, f64>, DomainError> {
    let mut scores = BTreeMap::new();
    for (entry, student) in args.marks.iter().zip(students) {
        if scores.insert(student.id, entry.score).is_some() {
            return Err(DomainError::Invalid(format!(
                "Student {} is listed more than once.",
                entry.student.said()
            )));
        }
    }
    Ok(scores)
}
