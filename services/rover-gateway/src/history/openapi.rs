//! The chat history API's part of the OpenAPI document (`crate::openapi` assembles the whole): its
//! paths and operations, and the schemas of its request and response types.

use rover_contracts::tools::schema_for;
use schemars::Schema;
use serde_json::{Map, Value, json};

use super::api::{
    ChatDetail, ChatExport, ChatList, ChatSummary, ERASE_EVENT, ERASE_PERMISSION, Erased,
    FeedbackBody, ListParams, Rating, RenameChatBody, ToolLabel,
};
use crate::openapi_parts::{
    BAD_REQUEST, FORBIDDEN, NOT_FOUND, TOO_LARGE, UNAUTHENTICATED, component, json_response,
    path_id, query_parameters,
};

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
pub(crate) fn paths() -> Map<String, Value> {
    let campus = json!({ "$ref": "#/components/parameters/Campus" });
    let id = chat_id_parameter();
    let read_errors = [BAD_REQUEST, UNAUTHENTICATED, NOT_FOUND];
    let write_errors = [BAD_REQUEST, UNAUTHENTICATED, NOT_FOUND, TOO_LARGE];
    let mut list_parameters = query_parameters(schema_for::<ListParams>());
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
    erase["x-rover-permission"] = ERASE_PERMISSION.to_string().into();
    erase["x-rover-audit-event"] = ERASE_EVENT.into();
    paths.insert(
        "/api/staff/{id}/chats".to_owned(),
        json!({ "delete": erase }),
    );
    paths
}

/// The component schemas the chat history API's operations refer to.
pub(crate) fn schemas(add: &mut impl FnMut(&str, Schema)) {
    add("ChatSummary", schema_for::<ChatSummary>());
    add("ChatList", schema_for::<ChatList>());
    add("ChatDetail", schema_for::<ChatDetail>());
    add("ChatExport", schema_for::<ChatExport>());
    add("RenameChatBody", schema_for::<RenameChatBody>());
    add("FeedbackBody", schema_for::<FeedbackBody>());
    add("Erased", schema_for::<Erased>());
    add("Rating", schema_for::<Rating>());
    add("ToolLabel", schema_for::<ToolLabel>());
}
