//! Routes a validated tool call to its domain function — the same function the REST API calls —
//! and turns the typed result into the envelope's `data` (plus, for writes, the audit change).

use rover_contracts::context::CallScope;
use rover_contracts::tools::{self, Tool, ToolContract};
use rover_domain::audit::{AuditChange, Written};
use rover_domain::call::OneTripRead;
use rover_domain::{Actor, DomainError, TenantTx};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

/// What a domain function produced.
#[derive(Debug)]
pub(crate) struct Executed {
    /// The output, as the model will read it: serialised once, as it goes into the reply.
    pub(crate) data: Box<RawValue>,
    /// What a write changed; `None` for reads.
    pub(crate) change: Option<AuditChange>,
}

fn parse<T: DeserializeOwned>(name: &str, args: Value) -> Result<T, DomainError> {
    // The schema already matched; this only fails on what schemas do not check (a malformed uuid).
    serde_json::from_value(args)
        .map_err(|e| DomainError::Invalid(format!("Invalid arguments for {name}: {e}.")))
}

/// `output` as the JSON text of the reply's `data` (no `Value` between it and the reply's bytes).
fn data<T: Serialize>(output: &T) -> Result<Box<RawValue>, DomainError> {
    serde_json::value::to_raw_value(output)
        .map_err(|e| DomainError::Invalid(format!("The result could not be encoded: {e}.")))
}

fn read<T: Serialize>(output: T) -> Result<Executed, DomainError> {
    Ok(Executed {
        data: data(&output)?,
        change: None,
    })
}

fn write<T: Serialize>(written: Written<T>) -> Result<Executed, DomainError> {
    Ok(Executed {
        data: data(&written.output)?,
        change: Some(written.change),
    })
}

/// Runs the domain function of `contract` with `args` (already checked against its schema).
pub(crate) async fn run(
    tx: &mut TenantTx,
    contract: &ToolContract,
    actor: &Actor,
    scope: &CallScope,
    args: Value,
) -> Result<Executed, DomainError> {
    use rover_domain as d;
    macro_rules! call {
        ($tool:ty, $function:path, $wrap:ident) => {{
            let args: <$tool as Tool>::Args = parse(contract.name, args)?;
            $wrap($function(tx, actor, scope, &args).await?)
        }};
    }
    match contract.name {
        "list_departments" => call!(tools::ListDepartments, d::list_departments, read),
        "create_department" => call!(tools::CreateDepartment, d::create_department, write),
        "rename_department" => call!(tools::RenameDepartment, d::rename_department, write),
        "list_classes" => call!(tools::ListClasses, d::list_classes, read),
        "find_students" => call!(tools::FindStudents, d::find_students, read),
        "get_enrollment_summary" => call!(tools::GetEnrollmentSummary, d::enrollment_summary, read),
        "list_staff" => call!(tools::ListStaff, d::list_staff, read),
        "get_class_roster" => call!(tools::GetClassRoster, d::class_roster, read),
        "record_attendance" => call!(tools::RecordAttendance, d::record_attendance, write),
        "list_my_classes" => call!(tools::ListMyClasses, d::list_my_classes, read),
        "record_marks" => call!(tools::RecordMarks, d::record_marks, write),
        "get_class_marks" => call!(tools::GetClassMarks, d::class_marks, read),
        "list_teaching_assignments" => call!(
            tools::ListTeachingAssignments,
            d::list_teaching_assignments,
            read
        ),
        "assign_subject_teacher" => call!(
            tools::AssignSubjectTeacher,
            d::assign_subject_teacher,
            write
        ),
        "get_results_summary" => call!(tools::GetResultsSummary, d::results_summary, read),
        other => Err(DomainError::Invalid(format!(
            "The tool server has no handler for {other}."
        ))),
    }
}

/// The read of `contract` as a [`OneTripRead`] — its query sent with the opening query in one
/// round trip — if it has that form (a read whose whole work is one query); `None` for every
/// other tool, which runs through [`run`].
pub(crate) fn one_trip(
    contract: &ToolContract,
    scope: &CallScope,
    args: Value,
) -> Option<Result<OneTripRead<Box<RawValue>>, DomainError>> {
    use rover_domain as d;
    macro_rules! one_trip {
        // A read that has the form only for some arguments (a class given by id, not by name).
        ($tool:ty, maybe $function:path) => {{
            match parse::<<$tool as Tool>::Args>(contract.name, args)
                .and_then(|args| $function(scope, &args))
            {
                Ok(None) => None,
                Ok(Some(read)) => Some(Ok(read.then(|output| data(&output)))),
                Err(error) => Some(Err(error)),
            }
        }};
        // A read whose arguments are checked as the read is made (a search text, say).
        ($tool:ty, try $function:path) => {{
            Some(
                parse::<<$tool as Tool>::Args>(contract.name, args)
                    .and_then(|args| $function(scope, &args))
                    .map(|read| read.then(|output| data(&output))),
            )
        }};
        ($tool:ty, $function:path) => {{
            Some(
                parse::<<$tool as Tool>::Args>(contract.name, args)
                    .map(|args| $function(scope, &args).then(|output| data(&output))),
            )
        }};
    }
    match contract.name {
        "list_departments" => one_trip!(tools::ListDepartments, d::list_departments_in_one_trip),
        "list_classes" => one_trip!(tools::ListClasses, d::list_classes_in_one_trip),
        "list_staff" => one_trip!(tools::ListStaff, try d::list_staff_in_one_trip),
        "find_students" => one_trip!(tools::FindStudents, maybe d::find_students_in_one_trip),
        _ => None,
    }
}
