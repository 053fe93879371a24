//! The OpenAPI 3.1 document of the gateway's REST API, served at `GET /api/openapi.json`: each
//! route module's part (`rest::openapi`, the school's tools; `history::openapi`, the chat history)
//! assembled with what the parts share — the campus header, the error responses and their body,
//! bearer authentication — and the tags.

use std::sync::LazyLock;

use axum::routing::get;
use axum::{Json, Router};
use rover_contracts::ids::CampusId;
use rover_contracts::tools::schema_for;
use schemars::Schema;
use serde_json::{Map, Value, json};

use crate::error::ErrorBody;
use crate::openapi_parts::{
    BAD_REQUEST, CONFLICT, FORBIDDEN, NOT_FOUND, TOO_LARGE, UNAUTHENTICATED, bare_schema,
    component, json_response,
};
use crate::state::AppState;
use crate::{approval_policy, history, rest};

/// The OpenAPI version the document declares.
pub(crate) const OPENAPI_VERSION: &str = "3.1.0";

/// `GET /api/openapi.json`.
pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/api/openapi.json", get(openapi_document))
}

/// `GET /api/openapi.json`: the OpenAPI 3.1 document of this API. Public.
async fn openapi_document() -> Json<Value> {
    Json(document().clone())
}

/// The document, built once.
pub(crate) fn document() -> &'static Value {
    static DOCUMENT: LazyLock<Value> = LazyLock::new(build);
    &DOCUMENT
}

/// The document: the parts' paths and schemas, and what they share.
fn build() -> Value {
    let mut paths = rest::openapi::paths();
    if let Some(paths) = paths.as_object_mut() {
        paths.insert(
            "/api/openapi.json".to_owned(),
            json!({
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
            }),
        );
        paths.extend(history::openapi::paths());
        paths.extend(approval_policy::paths());
    }
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
        "paths": paths,
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
            { "name": "chats", "description": "The caller's chat history: list, \
            search, reopen, rename, delete, export, feedback; an admin's erasure." },
            { "name": "settings", "description": "The school's settings for Rover: whose writes \
            wait for their approval." },
        ],
    })
}

/// Every part's component schemas, and the error body's.
fn component_schemas() -> Value {
    let mut schemas = Map::new();
    let mut add = |name: &str, schema: Schema| {
        schemas.insert(name.to_owned(), schema.to_value());
    };
    rest::openapi::schemas(&mut add);
    add("Error", schema_for::<ErrorBody>());
    history::openapi::schemas(&mut add);
    approval_policy::schemas(&mut add);
    schemas.into()
}

/// The error responses the operations name, as components.
const ERRORS: [(&str, &str, &str); 6] = [
    BAD_REQUEST,
    UNAUTHENTICATED,
    FORBIDDEN,
    NOT_FOUND,
    CONFLICT,
    TOO_LARGE,
];

/// [`ERRORS`] as response components, each with the error body.
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
