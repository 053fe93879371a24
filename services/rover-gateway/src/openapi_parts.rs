//! What every route module's part of the OpenAPI document is made of: JSON responses, references
//! to component schemas, a type's bare schema, path and query parameters, and the error responses
//! the operations name (the components themselves are `crate::openapi`'s).

use schemars::{JsonSchema, Schema};
use serde_json::{Value, json};

use rover_contracts::tools::schema_for;

/// The error responses, by component name: (name, status, description).
pub(crate) const BAD_REQUEST: (&str, &str, &str) = (
    "BadRequest",
    "400",
    "The request is malformed (`invalid_request`) or its arguments do not fit \
     (`invalid_arguments`): an unknown or missing field, a wrong type, an empty name.",
);
pub(crate) const UNAUTHENTICATED: (&str, &str, &str) = (
    "Unauthenticated",
    "401",
    "No bearer token, or one that is invalid, expired or names no user (`unauthenticated`).",
);
pub(crate) const FORBIDDEN: (&str, &str, &str) = (
    "PermissionDenied",
    "403",
    "The caller's roles do not grant the endpoint's permission, or the campus is not theirs \
     (`permission_denied`). The message reads as the tool's: `Permission denied: create:Department`.",
);
pub(crate) const NOT_FOUND: (&str, &str, &str) = (
    "NotFound",
    "404",
    "No such row in the caller's scope — what another school's ids look like too (`not_found`).",
);
pub(crate) const CONFLICT: (&str, &str, &str) = (
    "Conflict",
    "409",
    "The change collides with existing data, such as a duplicate name (`conflict`).",
);
pub(crate) const TOO_LARGE: (&str, &str, &str) = (
    "TooLarge",
    "413",
    "The request body is over the size limit (`too_large`).",
);

/// A JSON response described by `description`, of `schema`.
pub(crate) fn json_response(description: &str, schema: Value) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": schema } },
    })
}

/// A reference to the component schema `name`.
pub(crate) fn component(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// An array of the component schema `name`.
pub(crate) fn array_of(name: &str) -> Value {
    json!({ "type": "array", "items": component(name) })
}

/// `T`'s schema without its title and description (for parameters, which have their own).
pub(crate) fn bare_schema<T: JsonSchema>() -> Value {
    let mut schema = schema_for::<T>().to_value();
    if let Some(object) = schema.as_object_mut() {
        object.remove("title");
        object.remove("description");
    }
    schema
}

/// The path parameter `id`, of type `T`.
pub(crate) fn path_id<T: JsonSchema>(description: &str) -> Value {
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
pub(crate) fn query_parameters(schema: Schema) -> Vec<Value> {
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
