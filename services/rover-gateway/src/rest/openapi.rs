//! The REST API's part of the OpenAPI document (`crate::openapi` assembles the whole): its paths,
//! each endpoint's operation generated from its tool contract (operation id, description,
//! permission), and the schemas of the contracts' argument and output types (draft 2020-12
//! schemas, which OpenAPI 3.1 takes as they are).

use rover_contracts::ids::DepartmentId;
use rover_contracts::tools::{
    ClassList, CreateDepartmentArgs, Department, ListStaffArgs, RenamedDepartment, StaffList,
    StudentSummary, schema_for,
};
use schemars::Schema;
use serde_json::{Map, Value, json};

use super::endpoints::{
    CREATE_DEPARTMENT, Endpoint, FIND_STUDENTS, FindStudentsParams, LIST_CLASSES, LIST_DEPARTMENTS,
    LIST_STAFF, RENAME_DEPARTMENT, RenameDepartmentBody,
};
use crate::openapi_parts::{
    BAD_REQUEST, CONFLICT, FORBIDDEN, NOT_FOUND, TOO_LARGE, UNAUTHENTICATED, array_of, component,
    json_response, path_id, query_parameters,
};

/// The REST API's paths: the school's tools, the label registry and the write tools' schemas.
pub(crate) fn paths() -> Value {
    let mut paths = tool_paths();
    if let (Some(all), Value::Object(meta)) = (paths.as_object_mut(), meta_paths()) {
        all.extend(meta);
    }
    paths
}

/// The paths of the school's tools.
fn tool_paths() -> Value {
    let rename = operation(
        &RENAME_DEPARTMENT,
        "Rename a department",
        vec![path_id::<DepartmentId>("The department's id.")],
        Some(component("RenameDepartmentBody")),
        ("200", component("RenamedDepartment")),
        &[
            BAD_REQUEST,
            UNAUTHENTICATED,
            FORBIDDEN,
            NOT_FOUND,
            CONFLICT,
            TOO_LARGE,
        ],
    );
    json!({
        "/api/departments": {
            "get": operation(
                &LIST_DEPARTMENTS,
                "List departments",
                Vec::new(),
                None,
                ("200", array_of("Department")),
                &[BAD_REQUEST, UNAUTHENTICATED, FORBIDDEN, NOT_FOUND],
            ),
            "post": operation(
                &CREATE_DEPARTMENT,
                "Create a department",
                Vec::new(),
                Some(component("CreateDepartmentArgs")),
                ("201", component("Department")),
                &[BAD_REQUEST, UNAUTHENTICATED, FORBIDDEN, NOT_FOUND, CONFLICT, TOO_LARGE],
            ),
        },
        "/api/departments/{id}": { "patch": rename },
        "/api/classes": {
            "get": operation(
                &LIST_CLASSES,
                "List classes",
                Vec::new(),
                None,
                ("200", component("ClassList")),
                &[BAD_REQUEST, UNAUTHENTICATED, FORBIDDEN, NOT_FOUND],
            ),
        },
        "/api/students": {
            "get": operation(
                &FIND_STUDENTS,
                "Search students",
                query_parameters(schema_for::<FindStudentsParams>()),
                None,
                ("200", array_of("StudentSummary")),
                &[BAD_REQUEST, UNAUTHENTICATED, FORBIDDEN, NOT_FOUND],
            ),
        },
        "/api/staff": {
            "get": operation(
                &LIST_STAFF,
                "List staff",
                query_parameters(schema_for::<ListStaffArgs>()),
                None,
                ("200", component("StaffList")),
                &[BAD_REQUEST, UNAUTHENTICATED, FORBIDDEN, NOT_FOUND],
            ),
        },
    })
}

/// The paths that describe the tools themselves: labels and argument schemas.
fn meta_paths() -> Value {
    json!({
        "/api/tool-labels": {
            "get": {
                "operationId": "tool_labels",
                "summary": "The Hub's activity labels",
                "description": "Every tool's activity label, by tool name, for the Hub to \
                    draw while a tool runs.",
                "tags": ["meta"],
                "security": [],
                "responses": { "200": json_response(
                    "Tool name → label.",
                    json!({ "type": "object", "additionalProperties": { "type": "string" } }),
                ) },
            },
        },
        "/api/tool-schemas": {
            "get": {
                "operationId": "tool_schemas",
                "summary": "The write tools' argument schemas",
                "description": "Every write tool's argument JSON Schema, by tool name, for the \
                    Hub's approval card to build its edit form from. An edited input is checked \
                    against the same schema when the answer arrives.",
                "tags": ["meta"],
                "security": [],
                "responses": { "200": json_response(
                    "Tool name → argument schema.",
                    json!({ "type": "object", "additionalProperties": { "type": "object" } }),
                ) },
            },
        },
    })
}

/// The component schemas the REST API's operations refer to.
pub(crate) fn schemas(add: &mut impl FnMut(&str, Schema)) {
    add("Department", schema_for::<Department>());
    add("RenamedDepartment", schema_for::<RenamedDepartment>());
    add("ClassList", schema_for::<ClassList>());
    add("StudentSummary", schema_for::<StudentSummary>());
    add("StaffList", schema_for::<StaffList>());
    add("CreateDepartmentArgs", schema_for::<CreateDepartmentArgs>());
    add("RenameDepartmentBody", schema_for::<RenameDepartmentBody>());
}

/// An operation mirroring `endpoint`'s tool: its name is the operation id, its description and
/// permission are the contract's.
fn operation(
    endpoint: &Endpoint,
    summary: &str,
    mut parameters: Vec<Value>,
    request: Option<Value>,
    (status, response): (&str, Value),
    errors: &[(&str, &str, &str)],
) -> Value {
    let contract = endpoint.contract;
    parameters.push(json!({ "$ref": "#/components/parameters/Campus" }));
    let mut responses = Map::new();
    responses.insert(status.to_owned(), json_response(summary, response));
    for (name, code, _) in errors {
        responses.insert(
            (*code).to_owned(),
            json!({ "$ref": format!("#/components/responses/{name}") }),
        );
    }
    let mut operation = json!({
        "operationId": contract.name,
        "summary": summary,
        "description": format!(
            "{} Requires the `{}` permission; the `{}` tool does the same.",
            contract.description, endpoint.permission, contract.name
        ),
        "tags": ["school"],
        "parameters": parameters,
        "responses": responses,
        "x-rover-tool": contract.name,
        "x-rover-permission": endpoint.permission.to_string(),
    });
    if let Some(schema) = request {
        operation["requestBody"] = json!({
            "required": true,
            "content": { "application/json": { "schema": schema } },
        });
    }
    if contract.effect == rover_contracts::tools::Effect::Write {
        operation["x-rover-audit-event"] = endpoint.event.into();
    }
    operation
}
