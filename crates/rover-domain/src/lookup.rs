//! Look-ups and checks the domain functions share: a class or subject (in scope), the two
//! relationship assertions, and argument clean-up (text itself is checked by [`crate::text`]).

use rover_contracts::context::{ClassRef, SubjectRef};
use rover_contracts::ids::{ClassId, SubjectId};
use rover_contracts::named::Named;
use sqlx::FromRow;
use uuid::Uuid;

use crate::calendar::Year;
use crate::resolve::{self, Resolved, Unresolved};
use crate::{Actor, DomainError, TenantTx};

/// A class, with what the checks need.
#[derive(Debug, Clone, FromRow)]
pub(crate) struct ClassRow {
    pub(crate) id: Uuid,
    pub(crate) name: String,
    pub(crate) class_teacher_id: Option<Uuid>,
}

impl ClassRow {
    pub(crate) fn to_ref(&self) -> ClassRef {
        ClassRef {
            id: ClassId::from_uuid(self.id),
            name: self.name.clone(),
        }
    }
}

/// A subject.
#[derive(Debug, Clone, FromRow)]
pub(crate) struct SubjectRow {
    pub(crate) id: Uuid,
    pub(crate) name: String,
}

impl SubjectRow {
    pub(crate) fn to_ref(&self) -> SubjectRef {
        SubjectRef {
            id: SubjectId::from_uuid(self.id),
            name: self.name.clone(),
        }
    }
}

/// The class with this id, if it is in the school and (in campus mode) on the campus.
pub(crate) async fn class_in_scope(
    tx: &mut TenantTx,
    campus: Option<Uuid>,
    id: ClassId,
) -> Result<ClassRow, DomainError> {
    sqlx::query_as(
        "SELECT id, name, class_teacher_id FROM classes \
         WHERE id = $1 AND ($2::uuid IS NULL OR campus_id = $2)",
    )
    .bind(id.as_uuid())
    .bind(campus)
    .fetch_optional(tx.connection())
    .await?
    .ok_or_else(|| DomainError::not_found("class"))
}

/// The class `named` names (a name as staff say it, or an id), if it is in scope; with what
/// named it.
pub(crate) async fn named_class(
    tx: &mut TenantTx,
    campus: Option<Uuid>,
    named: &Named<ClassId>,
) -> Result<(ClassRow, Resolved), DomainError> {
    let resolved = resolve::class(tx, campus, named).await?;
    let class = class_in_scope(tx, campus, ClassId::from_uuid(resolved.id)).await?;
    let resolved = Resolved {
        name: class.name.clone(),
        ..resolved
    };
    Ok((class, resolved))
}

/// The class a class teacher means: the one `named`, which must be theirs; or, named by no one,
/// the one class they are class teacher of (in scope). Several: which one is asked.
pub(crate) async fn own_class(
    tx: &mut TenantTx,
    actor: &Actor,
    campus: Option<Uuid>,
    named: Option<&Named<ClassId>>,
) -> Result<(ClassRow, Option<Resolved>), DomainError> {
    if let Some(named) = named {
        let (class, resolved) = named_class(tx, campus, named).await?;
        ensure_class_teacher(actor, &class)?;
        return Ok((class, Some(resolved)));
    }
    let mut own: Vec<ClassRow> = sqlx::query_as(
        "SELECT id, name, class_teacher_id FROM classes \
         WHERE class_teacher_id = $1 AND ($2::uuid IS NULL OR campus_id = $2) ORDER BY name, id",
    )
    .bind(actor.uuid())
    .bind(campus)
    .fetch_all(tx.connection())
    .await?;
    match own.len() {
        0 => Err(DomainError::Denied(
            "you are not the class teacher of any class".to_owned(),
        )),
        1 => Ok((own.remove(0), None)),
        _ => Err(DomainError::Unresolved(Unresolved {
            kind: "class",
            said: "your class".to_owned(),
            place: None,
            choices: own.iter().map(|c| c.name.clone()).collect(),
            ambiguous: true,
        })),
    }
}

/// The subject `named` names, if it is in scope (its department school-wide or the campus's).
pub(crate) async fn named_subject(
    tx: &mut TenantTx,
    campus: Option<Uuid>,
    named: &Named<SubjectId>,
) -> Result<(SubjectRow, Resolved), DomainError> {
    let resolved = resolve::subject(tx, campus, named).await?;
    let subject = subject_in_scope(tx, campus, SubjectId::from_uuid(resolved.id)).await?;
    let resolved = Resolved {
        name: subject.name.clone(),
        ..resolved
    };
    Ok((subject, resolved))
}

/// The subject with this id.
pub(crate) async fn subject(tx: &mut TenantTx, id: SubjectId) -> Result<SubjectRow, DomainError> {
    sqlx::query_as("SELECT id, name FROM subjects WHERE id = $1")
        .bind(id.as_uuid())
        .fetch_optional(tx.connection())
        .await?
        .ok_or_else(|| DomainError::not_found("subject"))
}

/// The subject with this id, if (in campus mode) its department is school-wide or on the campus:
/// another campus's subject looks exactly like one that does not exist.
pub(crate) async fn subject_in_scope(
    tx: &mut TenantTx,
    campus: Option<Uuid>,
    id: SubjectId,
) -> Result<SubjectRow, DomainError> {
    sqlx::query_as(
        "SELECT s.id, s.name FROM subjects s \
         JOIN departments d ON d.school_id = s.school_id AND d.id = s.department_id \
         WHERE s.id = $1 AND ($2::uuid IS NULL OR d.campus_id IS NULL OR d.campus_id = $2)",
    )
    .bind(id.as_uuid())
    .bind(campus)
    .fetch_optional(tx.connection())
    .await?
    .ok_or_else(|| DomainError::not_found("subject"))
}

/// Refuses unless the actor is the class teacher of `class`.
pub(crate) fn ensure_class_teacher(actor: &Actor, class: &ClassRow) -> Result<(), DomainError> {
    if class.class_teacher_id == Some(actor.uuid()) {
        Ok(())
    } else {
        Err(DomainError::Denied(format!(
            "you are not the class teacher of {}",
            class.name
        )))
    }
}

/// Refuses unless the actor teaches `subject` to `class` in `year`.
pub(crate) async fn ensure_teaches(
    tx: &mut TenantTx,
    actor: &Actor,
    class: &ClassRow,
    subject: &SubjectRow,
    year: &Year,
) -> Result<(), DomainError> {
    let teaches: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM teaching_assignments \
         WHERE teacher_id = $1 AND class_id = $2 AND subject_id = $3 AND academic_year_id = $4)",
    )
    .bind(actor.uuid())
    .bind(class.id)
    .bind(subject.id)
    .bind(year.id)
    .fetch_one(tx.connection())
    .await?;
    if teaches {
        Ok(())
    } else {
        Err(DomainError::Denied(format!(
            "you do not teach {} to {} this academic year",
            subject.name, class.name
        )))
    }
}

/// One `ILIKE` pattern per word of `query`: each word must occur somewhere.
pub(crate) fn word_patterns(query: &str) -> Vec<String> {
    query
        .split_whitespace()
        .map(|word| {
            let escaped = word
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_");
            format!("%{escaped}%")
        })
        .collect()
}

/// A count (SQL `int8`, a `len()`) as the contracts' `u32`.
pub(crate) fn count(n: impl TryInto<u32>) -> u32 {
    n.try_into().unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn patterns_escape_wildcards() {
        assert_eq!(word_patterns(" Nakato  S "), ["%Nakato%", "%S%"]);
        assert_eq!(word_patterns("50%_a\\"), ["%50\\%\\_a\\\\%"]);
    }
}
