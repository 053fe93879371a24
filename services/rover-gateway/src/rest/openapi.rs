//! The OpenAPI 3.1 document of the REST API, generated from the very types the endpoints use: the
//! contracts' argument and output types (draft 2020-12 schemas, which OpenAPI 3.1 takes as they
//! are), each endpoint's tool contract (operation id, description, permission) and the error body.

use std::sync::LazyLock;

use rover_contracts::ids::{CampusId, DepartmentId};
use rover_contracts::tools::{
    ClassList, CreateDepartmentArgs, Department, ListStaffArgs, RenamedDepartment, StaffList,
    StudentSummary, schema_for,
};
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

use crate::chats;

use super::{
    CREATE_DEPARTMENT, Endpoint, ErrorBody, FIND_STUDENTS, LIST_CLASSES, LIST_DEPARTMENTS,
    LIST_STAFF, RENAME_DEPARTMENT, RenameDepartmentBody,
};

/// The OpenAPI version the document declares.
pub(crate) const OPENAPI_VERSION: &str = "3.1.0";

/// The document, built once.
pub(crate) fn document() -> &'static Value {
    static DOCUMENT: LazyLock<Value> = LazyLock::new(build);
    &DOCUMENT
}

fn build() -> Value {
    let mut document = school_api();
    if let Some(paths) = document["paths"].as_object_mut() {
        paths.extend(chat_paths());
    }
    if let Some(tags) = document["tags"].as_array_mut() {
        tags.push(
            json!({ "name": "chats", "description": "The caller's chat history: list, \
            search, reopen, rename, delete, export, feedback; an admin's erasure." }),
        );
    }
    document
}

/// The school API's paths, components and tags.
#[expect(
    clippy::too_many_lines,
    reason = "the OpenAPI document as one literal, path by path"
)]
fn school_api() -> Value {
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
        "openapi": OPENAPI_VERSION,
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "Rover gateway REST API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The supervisor's department, class, student and staff tools as REST \
                endpoints. Each runs the same permission check, the same domain function and (for \
                writes) writes the same single audit row as its tool, named by the operation id.",
        },
        "paths": {
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
                    query_parameters(schema_for::<super::FindStudentsParams>()),
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
            "/api/openapi.json": {
                "get": {
                    "operationId": "openapi",
                    "summary": "This document",
                    "tags": ["meta"],
                    "security": [],
                    "responses": { "200": json_response(
                        "The OpenAPI 3.1 document.",
                        json!({ "type": "object" }),
                    ) },
                },
            },
        },
        "components": {
            "schemas": component_schemas(),
            "parameters": {
                "Campus": {
                    "name": "X-Rover-Campus",
                    "in": "header",
                    "required": false,
                    "description": "Act within this campus of your school. Campus-tied staff always \
                        act within their own campus; naming another is refused (403), naming one \
                        the school does not have is 404.",
                    "schema": bare_schema::<CampusId>(),
                },
            },
            "responses": error_responses(),
            "securitySchemes": {
                "bearer": { "type": "http", "scheme": "bearer", "bearerFormat": "JWT" },
            },
        },
        "security": [{ "bearer": [] }],
        "tags": [
            { "name": "school", "description": "School data, through the same checks as the tools." },
            { "name": "meta", "description": "Public descriptions of the API and the tools." },
        ],
    })
}

/// The error responses, by component name: (name, status, description).
const BAD_REQUEST: (&str, &str, &str) = (
    "BadRequest",
    "400",
    "The request is malformed (`invalid_request`) or its arguments do not fit \
     (`invalid_arguments`): an unknown or missing field, a wrong type, an empty name.",
);
const UNAUTHENTICATED: (&str, &str, &str) = (
    "Unauthenticated",
    "401",
    "No bearer token, or one that is invalid, expired or names no user (`unauthenticated`).",
);
const FORBIDDEN: (&str, &str, &str) = (
    "PermissionDenied",
    "403",
    "The caller's roles do not grant the endpoint's permission, or the campus is not theirs \
     (`permission_denied`). The message reads as the tool's: `Permission denied: create:Department`.",
);
const NOT_FOUND: (&str, &str, &str) = (
    "NotFound",
    "404",
    "No such row in the caller's scope — what another school's ids look like too (`not_found`).",
);
const CONFLICT: (&str, &str, &str) = (
    "Conflict",
    "409",
    "The change collides with existing data, such as a duplicate name (`conflict`).",
);
const TOO_LARGE: (&str, &str, &str) = (
    "TooLarge",
    "413",
    "The request body is over the size limit (`too_large`).",
);
const ERRORS: [(&str, &str, &str); 6] = [
    BAD_REQUEST,
    UNAUTHENTICATED,
    FORBIDDEN,
    NOT_FOUND,
    CONFLICT,
    TOO_LARGE,
];

fn error_responses() -> Value {
    ERRORS
        .iter()
        .map(|(name, _, description)| {
            (
                (*name).to_owned(),
                json_response(description, component("Error")),
            )
        })
        .collect::<Map<_, _>>()
        .into()
}

fn component_schemas() -> Value {
    let mut schemas = Map::new();
    let mut add = |name: &str, schema: Schema| {
        schemas.insert(name.to_owned(), schema.to_value());
    };
    add("Department", schema_for::<Department>());
    add("RenamedDepartment", schema_for::<RenamedDepartment>());
    add("ClassList", schema_for::<ClassList>());
    add("StudentSummary", schema_for::<StudentSummary>());
    add("StaffList", schema_for::<StaffList>());
    add("CreateDepartmentArgs", schema_for::<CreateDepartmentArgs>());
    add("RenameDepartmentBody", schema_for::<RenameDepartmentBody>());
    add("Error", schema_for::<ErrorBody>());
    add("ChatSummary", schema_for::<chats::ChatSummary>());
    add("ChatList", schema_for::<chats::ChatList>());
    add("ChatDetail", schema_for::<chats::ChatDetail>());
    add("ChatExport", schema_for::<chats::ChatExport>());
    add("RenameChatBody", schema_for::<chats::RenameChatBody>());
    add("FeedbackBody", schema_for::<chats::FeedbackBody>());
    add("Erased", schema_for::<chats::Erased>());
    add("Rating", schema_for::<chats::Rating>());
    schemas.into()
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

fn json_response(description: &str, schema: Value) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": schema } },
    })
}

fn component(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn array_of(name: &str) -> Value {
    json!({ "type": "array", "items": component(name) })
}

/// `T`'s schema without its title and description (for parameters, which have their own).
fn bare_schema<T: JsonSchema>() -> Value {
    let mut schema = schema_for::<T>().to_value();
    if let Some(object) = schema.as_object_mut() {
        object.remove("title");
        object.remove("description");
    }
    schema
}

fn path_id<T: JsonSchema>(description: &str) -> Value {
    json!({
        "name": "id",
        "in": "path",
        "required": true,
        "description": description,
        "schema": bare_schema::<T>(),
    })
}

/// One query parameter per property of an argument type's schema, required as the schema says,
/// described by the field's doc comment.
fn query_parameters(schema: Schema) -> Vec<Value> {
    let schema = schema.to_value();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema["properties"].as_object() else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, property)| {
            let mut property = property.clone();
            let description = property
                .as_object_mut()
                .and_then(|p| p.remove("description"))
                .unwrap_or(Value::Null);
            let mut parameter = json!({
                "name": name,
                "in": "query",
                "required": required.contains(&name.as_str()),
                "schema": property,
            });
            if !description.is_null() {
                parameter["description"] = description;
            }
            parameter
        })
        .collect()
}

/// An operation of the chat history API: `id` names it, `errors` are its error responses.
fn chat_operation(
    id: &str,
    summary: &str,
    description: &str,
    parameters: &[Value],
    request: Option<Value>,
    (status, response): (&str, Option<Value>),
    errors: &[(&str, &str, &str)],
) -> Value {
    let mut responses = Map::new();
    responses.insert(
        status.to_owned(),
        match response {
            Some(schema) => json_response(summary, schema),
            None => json!({ "description": summary }),
        },
    );
    for (name, code, _) in errors {
        responses.insert(
            (*code).to_owned(),
            json!({ "$ref": format!("#/components/responses/{name}") }),
        );
    }
    let mut operation = json!({
        "operationId": id,
        "summary": summary,
        "description": description,
        "tags": ["chats"],
        "parameters": parameters,
        "responses": responses,
    });
    if let Some(schema) = request {
        operation["requestBody"] = json!({
            "required": true,
            "content": { "application/json": { "schema": schema } },
        });
    }
    operation
}

fn chat_id_parameter() -> Value {
    json!({
        "name": "id",
        "in": "path",
        "required": true,
        "description": "The client's chat id (1–200 letters, digits, `-` or `_`).",
        "schema": { "type": "string", "pattern": "^[A-Za-z0-9_-]{1,200}$" },
    })
}

/// The chat history API's paths.
#[expect(
    clippy::too_many_lines,
    reason = "the OpenAPI document as one literal, path by path"
)]
fn chat_paths() -> Map<String, Value> {
    let campus = json!({ "$ref": "#/components/parameters/Campus" });
    let id = chat_id_parameter();
    let read_errors = [BAD_REQUEST, UNAUTHENTICATED, NOT_FOUND];
    let write_errors = [BAD_REQUEST, UNAUTHENTICATED, NOT_FOUND, TOO_LARGE];
    let mut list_parameters = query_parameters(schema_for::<chats::ListParams>());
    list_parameters.push(campus.clone());
    let mut paths = Map::new();
    paths.insert(
        "/api/chats".to_owned(),
        json!({ "get": chat_operation(
            "list_chats",
            "List your chats",
            "Your chats in your school (within your campus scope), newest activity first, a page \
             at a time (`limit`, `cursor`); `q` searches titles and message text (Postgres \
             full-text search, English).",
            &list_parameters,
            None,
            ("200", Some(component("ChatList"))),
            &read_errors,
        ) }),
    );
    paths.insert(
        "/api/chats/export".to_owned(),
        json!({ "get": chat_operation(
            "export_chats",
            "Export your chats",
            "Every chat of yours with its messages, as one JSON file.",
            &[],
            None,
            ("200", Some(component("ChatExport"))),
            &[UNAUTHENTICATED],
        ) }),
    );
    paths.insert(
        "/api/chats/{id}".to_owned(),
        json!({
            "get": chat_operation(
                "read_chat",
                "Reopen a chat",
                "The chat and its messages as AI SDK `UIMessage`s, exactly as a client holds \
                 them after streaming: pass them to `useChat({ id, messages })` to continue.",
                std::slice::from_ref(&id),
                None,
                ("200", Some(component("ChatDetail"))),
                &read_errors,
            ),
            "patch": chat_operation(
                "rename_chat",
                "Rename a chat",
                "A new title for the chat.",
                std::slice::from_ref(&id),
                Some(component("RenameChatBody")),
                ("200", Some(component("ChatSummary"))),
                &write_errors,
            ),
            "delete": chat_operation(
                "delete_chat",
                "Delete a chat",
                "Stops a running reply, then removes the chat and everything it owns (messages, \
                 steps, events, artifacts, approvals, feedback); token usage stays, without \
                 content. Audited as `delete.chat`.",
                std::slice::from_ref(&id),
                None,
                ("204", None),
                &read_errors,
            ),
        }),
    );
    paths.insert(
        "/api/chats/{id}/messages/{messageId}/feedback".to_owned(),
        json!({ "post": chat_operation(
            "rate_reply",
            "Rate a reply",
            "Your rating (up or down, with an optional comment) of one assistant message, kept \
             with the turn that wrote it and its trace id. Rating again replaces it.",
            &[
                id.clone(),
                json!({
                    "name": "messageId",
                    "in": "path",
                    "required": true,
                    "description": "The assistant message's id.",
                    "schema": { "type": "string", "minLength": 1, "maxLength": 200 },
                }),
            ],
            Some(component("FeedbackBody")),
            ("204", None),
            &write_errors,
        ) }),
    );
    let mut erase = chat_operation(
        "erase_staff_chats",
        "Erase a staff member's chats",
        "Removes every chat of one staff member of your school (within your campus scope); their \
         running replies are stopped. Requires `delete:Staff`. Audited as `erase.chats`.",
        &[
            path_id::<rover_contracts::ids::UserId>("The staff member's id."),
            campus,
        ],
        None,
        ("200", Some(component("Erased"))),
        &[BAD_REQUEST, UNAUTHENTICATED, FORBIDDEN, NOT_FOUND],
    );
    erase["x-rover-permission"] = chats::ERASE_PERMISSION.to_string().into();
    erase["x-rover-audit-event"] = chats::ERASE_EVENT.into();
    paths.insert(
        "/api/staff/{id}/chats".to_owned(),
        json!({ "delete": erase }),
    );
    paths
}
