//! The wire format: async-openai parses every chunk and object, reassembles tool calls from
//! argument fragments, sees `[DONE]` end the stream, and gets usage when it asks.

use async_openai::types::chat::{FinishReason, Role};
use serde_json::json;

use crate::helpers::{Chat, WHOLE_SCHOOL, context, ids, ok, spawn_model, spawn_model_with_rules};

fn create_sciences() -> Chat {
    Chat::new(
        Some(&context("admin")),
        &["create_department", "list_departments"],
    )
    .user("Create a department called Sciences")
}

#[tokio::test]
async fn a_streamed_tool_call_reassembles_from_argument_fragments_with_usage_at_the_end() {
    let model = spawn_model().await;
    let turn = model
        .try_stream(&create_sciences(), true)
        .await
        .map_err(|(_, e)| e)
        .expect("the stream parses");

    assert_eq!(
        turn.first_role,
        Some(Role::Assistant),
        "the first chunk names the role"
    );
    let (name, args) = turn.only_call();
    assert_eq!(name, "create_department");
    assert_eq!(args, json!({"name": "Sciences"}));
    assert!(turn.calls[0].id.starts_with("call_"), "{:?}", turn.calls[0]);
    assert!(
        turn.argument_fragments[&0] >= 2,
        "arguments arrive in several fragments: {turn:#?}"
    );
    assert_eq!(turn.finish, Some(FinishReason::ToolCalls));
    let usage = turn.usage.as_ref().expect("a usage chunk when asked");
    assert!(
        turn.usage_chunk_had_no_choices,
        "the usage chunk has empty choices"
    );
    assert!(
        usage.prompt_tokens > 0 && usage.completion_tokens > 0,
        "{usage:?}"
    );
    assert_eq!(
        usage.total_tokens,
        usage.prompt_tokens + usage.completion_tokens
    );
}

#[tokio::test]
async fn the_stream_on_the_wire_is_openai_sse_ending_in_done() {
    let model = spawn_model().await;
    let body = create_sciences().request(true, false);
    let body = serde_json::to_value(&body).expect("request JSON");
    let (status, sse) = model
        .http("POST", "/v1/chat/completions", Some(&body))
        .await;
    assert_eq!(status, 200);
    assert!(sse.ends_with("data: [DONE]\n\n"), "{sse}");
    let chunks: Vec<serde_json::Value> = sse
        .split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).expect("each event is JSON"))
        .collect();
    for chunk in &chunks {
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["id"], chunks[0]["id"], "one id for every chunk");
        assert_eq!(chunk["model"], "gpt-test", "the requested model is echoed");
        assert!(chunk["created"].is_u64());
        assert!(chunk.get("usage").is_none(), "no usage unless asked");
    }
    // The first tool-call chunk names the call; the rest carry only argument fragments.
    let tool_chunks: Vec<&serde_json::Value> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
        .collect();
    assert_eq!(tool_chunks[0]["function"]["name"], "create_department");
    assert_eq!(tool_chunks[0]["type"], "function");
    assert_eq!(tool_chunks[0]["function"]["arguments"], "");
    assert!(
        tool_chunks[1..]
            .iter()
            .all(|c| c.get("id").is_none() && c["index"] == 0)
    );
    let last = chunks.last().expect("chunks");
    assert_eq!(last["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(last["choices"][0]["delta"], json!({}));
}

#[tokio::test]
async fn streamed_text_arrives_in_several_content_pieces() {
    let model = spawn_model().await;
    let mut chat = create_sciences();
    let call = model.stream(&chat).await;
    chat.answer(
        &call,
        &[ok(
            json!({"id": ids::SCIENCES, "name": "Sciences"}),
            WHOLE_SCHOOL,
        )],
    );
    let turn = model.stream(&chat).await;
    assert_eq!(
        turn.only_text(),
        "Done — I created the Sciences department across the whole school."
    );
    assert!(
        turn.content_pieces >= 5,
        "text is streamed word by word: {turn:#?}"
    );
    assert!(turn.usage.is_none(), "no usage chunk unless asked");
}

#[tokio::test]
async fn several_tool_calls_in_one_response_get_indexes_0_and_1() {
    let model = spawn_model_with_rules(
        r#"
        [[rule]]
        name = "both"
        when = "both"
        steps = [
          { call = [{ tool = "list_departments" }, { tool = "get_enrollment_summary", args = { note = "second" } }] },
          { say = "{{result.0.data|count}} departments, {{result.1.data.total}} students." },
        ]
        "#,
    )
    .await;
    let mut chat =
        Chat::new(None, &["list_departments", "get_enrollment_summary"]).user("Both, please");
    let turn = model.stream(&chat).await;
    let names: Vec<&str> = turn.calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["list_departments", "get_enrollment_summary"]);
    assert_eq!(turn.calls[1].args(), json!({"note": "second"}));
    assert_ne!(turn.calls[0].id, turn.calls[1].id, "distinct call ids");
    assert!(turn.argument_fragments[&1] >= 2, "{turn:#?}");

    chat.answer(
        &turn,
        &[
            ok(
                json!([{"id": ids::LANGUAGES, "name": "Languages"}]),
                WHOLE_SCHOOL,
            ),
            ok(json!({"total": 9}), WHOLE_SCHOOL),
        ],
    );
    let done = model.complete(&chat).await.expect("completes");
    assert_eq!(done.only_text(), "1 departments, 9 students.");
}

#[tokio::test]
async fn a_non_streamed_completion_carries_tool_calls_or_text_and_usage() {
    let model = spawn_model().await;
    let mut chat = create_sciences();
    let turn = model.complete(&chat).await.expect("completes");
    assert_eq!(turn.finish, Some(FinishReason::ToolCalls));
    assert_eq!(
        turn.only_call(),
        ("create_department", json!({"name": "Sciences"}))
    );
    let usage = turn.usage.clone().expect("usage");
    assert_eq!(
        usage.total_tokens,
        usage.prompt_tokens + usage.completion_tokens
    );

    chat.answer(
        &turn,
        &[ok(
            json!({"id": ids::SCIENCES, "name": "Sciences"}),
            WHOLE_SCHOOL,
        )],
    );
    let text = model.complete(&chat).await.expect("completes");
    assert_eq!(
        text.only_text(),
        "Done — I created the Sciences department across the whole school."
    );
}
