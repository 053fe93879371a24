//! The runtime context's shape on the wire: what must be absent stays absent, what must not exist
//! cannot be read.

use rover_contracts::context::*;
use serde_json::json;

use crate::fixtures::teacher_context;

#[test]
fn campus_run_mode_without_a_campus_does_not_deserialise() {
    assert!(serde_json::from_value::<RunMode>(json!({ "mode": "campus" })).is_err());
    assert_eq!(
        serde_json::from_value::<RunMode>(json!({ "mode": "school" })).unwrap(),
        RunMode::School
    );
}

#[test]
fn teaching_map_is_absent_not_empty_for_non_teachers() {
    let mut context = teacher_context();
    context.teaching_map = None;
    let value = serde_json::to_value(&context).unwrap();
    assert!(
        value.get("teachingMap").is_none(),
        "teachingMap must be omitted: {value}"
    );

    let teacher = serde_json::to_value(teacher_context()).unwrap();
    assert_eq!(
        teacher["teachingMap"]["classTeacherOf"][0]["name"],
        "S1 Blue"
    );
}

#[test]
fn context_uses_the_seed_field_names_and_round_trips() {
    let context = teacher_context();
    let value = serde_json::to_value(&context).unwrap();
    for key in [
        "userDetails",
        "runMode",
        "userPermissions",
        "capabilities",
        "calendar",
        "attachments",
    ] {
        assert!(value.get(key).is_some(), "missing {key} in {value}");
    }
    assert_eq!(
        value["runMode"],
        json!({ "mode": "campus", "campus": { "id": context.run_mode.campus().unwrap().id, "name": "Naalya" } })
    );
    assert_eq!(value["userPermissions"], json!(["read:Department"]));
    assert_eq!(
        serde_json::from_value::<RuntimeContext>(value).unwrap(),
        context
    );
}

#[test]
fn identity_and_scope_come_from_the_context() {
    let context = teacher_context();
    let identity = context.identity();
    assert_eq!(identity.user_id, context.user_details.user_id);
    assert_eq!(identity.school_id, context.user_details.school.id);
    let scope = context.call_scope();
    assert_eq!(scope.school_id, context.user_details.school.id);
    assert_eq!(scope.describe(), "across your campus, Naalya");
    let whole = CallScope {
        run_mode: RunMode::School,
        ..scope
    };
    assert_eq!(whole.describe(), "across the whole school");
}

#[test]
fn capabilities_list_subagents_in_roster_order() {
    let caps = Capabilities {
        class_teacher: true,
        subject_teacher: false,
        director_of_studies: true,
    };
    assert_eq!(
        caps.subagents().collect::<Vec<_>>(),
        vec![Subagent::ClassTeacher, Subagent::DirectorOfStudies]
    );
    assert_eq!(Capabilities::default().subagents().count(), 0);
}

#[test]
fn calendar_finds_the_term_of_a_date() {
    let context = teacher_context();
    assert_eq!(
        context
            .calendar
            .term_on(crate::fixtures::date(2026, 12, 2))
            .unwrap()
            .name,
        "Term 3"
    );
    assert!(
        context
            .calendar
            .term_on(crate::fixtures::date(2026, 12, 20))
            .is_none()
    );
}
