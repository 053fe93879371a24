//! Teaching assignments (teacher × class × subject × academic year): a teacher's own classes, the
//! director of studies' list, and assigning a subject teacher.

use rover_contracts::context::{CallScope, ClassRef, SubjectRef};
use rover_contracts::ids::{ClassId, SubjectId, TeachingAssignmentId, UserId};
use rover_contracts::tools::{
    AssignSubjectTeacherArgs, ListTeachingAssignmentsArgs, MyClass, NoArgs, StaffRef,
    TeachingAssignment,
};
use sqlx::FromRow;
use uuid::Uuid;

use crate::calendar::{Year, current_year};
use crate::lookup::{named_class, named_subject};
use crate::resolve;
use crate::tenant::campus_of;
use crate::{Actor, AuditChange, DomainError, TenantTx, Written};

const SELECT_ASSIGNMENT: &str = "SELECT t.id, u.id AS teacher_id, u.name AS teacher_name, \
            k.id AS class_id, k.name AS class_name, sj.id AS subject_id, sj.name AS subject_name, \
            y.name AS academic_year \
     FROM teaching_assignments t \
     JOIN users u ON u.school_id = t.school_id AND u.id = t.teacher_id \
     JOIN classes k ON k.school_id = t.school_id AND k.id = t.class_id \
     JOIN subjects sj ON sj.school_id = t.school_id AND sj.id = t.subject_id \
     JOIN academic_years y ON y.school_id = t.school_id AND y.id = t.academic_year_id";

#[derive(Debug, FromRow)]
struct AssignmentRow {
    id: Uuid,
    teacher_id: Uuid,
    teacher_name: String,
    class_id: Uuid,
    class_name: String,
    subject_id: Uuid,
    subject_name: String,
    academic_year: String,
}

impl From<AssignmentRow> for TeachingAssignment {
    fn from(row: AssignmentRow) -> Self {
        TeachingAssignment {
            id: TeachingAssignmentId::from_uuid(row.id),
            teacher: StaffRef {
                id: UserId::from_uuid(row.teacher_id),
                name: row.teacher_name,
            },
            class: ClassRef {
                id: ClassId::from_uuid(row.class_id),
                name: row.class_name,
            },
            subject: SubjectRef {
                id: SubjectId::from_uuid(row.subject_id),
                name: row.subject_name,
            },
            academic_year: row.academic_year,
        }
    }
}

/// The classes the actor teaches this academic year (in scope), each with the subjects taught,
/// whether the actor is also its class teacher, and its students; by class name.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn list_my_classes(
    tx: &mut TenantTx,
    actor: &Actor,
    scope: &CallScope,
    _args: &NoArgs,
) -> Result<Vec<MyClass>, DomainError> {
    let campus = campus_of(tx, scope)?;
    let year = current_year(tx).await?;
    let mut classes = taught_classes(tx, actor.uuid(), &year, campus).await?;
    for class in &mut classes {
        class.students = crate::classes::students_of(tx, class.class.id.as_uuid()).await?;
    }
    Ok(classes)
}

/// The classes `teacher` teaches in `year` (on `campus`, if given), with their subjects.
pub(crate) async fn taught_classes(
    tx: &mut TenantTx,
    teacher: Uuid,
    year: &Year,
    campus: Option<Uuid>,
) -> Result<Vec<MyClass>, DomainError> {
    let rows: Vec<(Uuid, String, Uuid, String, bool)> = sqlx::query_as(
        "SELECT k.id, k.name, sj.id, sj.name, k.class_teacher_id IS NOT DISTINCT FROM $1 \
         FROM teaching_assignments t \
         JOIN classes k ON k.school_id = t.school_id AND k.id = t.class_id \
         JOIN subjects sj ON sj.school_id = t.school_id AND sj.id = t.subject_id \
         WHERE t.teacher_id = $1 AND t.academic_year_id = $2 AND ($3::uuid IS NULL OR k.campus_id = $3) \
         ORDER BY k.name, k.id, sj.name",
    )
    .bind(teacher)
    .bind(year.id)
    .bind(campus)
    .fetch_all(tx.connection())
    .await?;
    let mut classes: Vec<MyClass> = Vec::new();
    for (class_id, class_name, subject_id, subject_name, is_class_teacher) in rows {
        let subject = SubjectRef {
            id: SubjectId::from_uuid(subject_id),
            name: subject_name,
        };
        match classes.last_mut() {
            Some(last) if last.class.id.as_uuid() == class_id => last.subjects.push(subject),
            _ => classes.push(MyClass {
                class: ClassRef {
                    id: ClassId::from_uuid(class_id),
                    name: class_name,
                },
                subjects: vec![subject],
                is_class_teacher,
                students: Vec::new(),
            }),
        }
    }
    Ok(classes)
}

/// This academic year's teaching assignments in scope, optionally of one class or one teacher;
/// by class, subject and teacher.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn list_teaching_assignments(
    tx: &mut TenantTx,
    _actor: &Actor,
    scope: &CallScope,
    args: &ListTeachingAssignmentsArgs,
) -> Result<Vec<TeachingAssignment>, DomainError> {
    let campus = campus_of(tx, scope)?;
    let year = current_year(tx).await?;
    let class = match &args.class {
        Some(named) => Some(resolve::class(tx, campus, named).await?.id),
        None => None,
    };
    let teacher = match &args.teacher {
        Some(named) => Some(resolve::staff(tx, campus, named).await?.id),
        None => None,
    };
    let rows: Vec<AssignmentRow> = sqlx::query_as(&format!(
        "{SELECT_ASSIGNMENT} WHERE t.academic_year_id = $1 \
           AND ($2::uuid IS NULL OR t.class_id = $2) AND ($3::uuid IS NULL OR t.teacher_id = $3) \
           AND ($4::uuid IS NULL OR k.campus_id = $4) \
         ORDER BY k.name, sj.name, u.name, t.id"
    ))
    .bind(year.id)
    .bind(class)
    .bind(teacher)
    .bind(campus)
    .fetch_all(tx.connection())
    .await?;
    Ok(rows.into_iter().map(TeachingAssignment::from).collect())
}

/// Assigns a teacher (a staff member of type teacher, in scope) to teach a subject (of a
/// school-wide department or one of the campus) to a class in scope for the current academic year. Assigning the same teacher again changes nothing and
/// returns the existing assignment; its audit change then has `before` equal to `after`.
#[tracing::instrument(skip_all, fields(db.system.name = "postgresql"))]
pub async fn assign_subject_teacher(
    tx: &mut TenantTx,
    _actor: &Actor,
    scope: &CallScope,
    args: &AssignSubjectTeacherArgs,
) -> Result<Written<TeachingAssignment>, DomainError> {
    let campus = campus_of(tx, scope)?;
    let (class, said_class) = named_class(tx, campus, &args.class).await?;
    let (subject, said_subject) = named_subject(tx, campus, &args.subject).await?;
    let said_teacher = resolve::staff(tx, campus, &args.teacher).await?;
    let teacher = said_teacher.id;
    let (teacher_name, user_type): (String, String) = sqlx::query_as(
        "SELECT name, user_type FROM users \
         WHERE id = $1 AND ($2::uuid IS NULL OR campus_id IS NULL OR campus_id = $2)",
    )
    .bind(teacher)
    .bind(campus)
    .fetch_optional(tx.connection())
    .await?
    .ok_or_else(|| DomainError::not_found("staff member"))?;
    if user_type != "teacher" {
        return Err(DomainError::Invalid(format!(
            "{teacher_name} is not a teacher, so cannot be assigned a subject."
        )));
    }
    let year = current_year(tx).await?;

    let school = tx.school_uuid();
    let inserted: Option<Uuid> = sqlx::query_scalar(
        "INSERT INTO teaching_assignments (school_id, teacher_id, class_id, subject_id, academic_year_id) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING id",
    )
    .bind(school)
    .bind(teacher)
    .bind(class.id)
    .bind(subject.id)
    .bind(year.id)
    .fetch_optional(tx.connection())
    .await?;
    let row: AssignmentRow = sqlx::query_as(&format!(
        "{SELECT_ASSIGNMENT} WHERE t.teacher_id = $1 AND t.class_id = $2 AND t.subject_id = $3 \
           AND t.academic_year_id = $4"
    ))
    .bind(teacher)
    .bind(class.id)
    .bind(subject.id)
    .bind(year.id)
    .fetch_one(tx.connection())
    .await?;
    let assignment = TeachingAssignment::from(row);
    let after = serde_json::to_value(&assignment).unwrap_or_default();
    Ok(Written {
        change: AuditChange {
            subject_id: assignment.id.to_string(),
            before: inserted.is_none().then(|| after.clone()),
            after,
            named: Some(serde_json::json!({
                "teacher": said_teacher.audit(),
                "class": said_class.audit(),
                "subject": said_subject.audit(),
            })),
        },
        output: assignment,
    })
}
