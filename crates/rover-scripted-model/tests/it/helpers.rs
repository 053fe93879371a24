//! Test support: the test double in-process on port 0, driven by the real async-openai client;
//! conversations built as JSON; demo runtime contexts; a tiny raw HTTP client for the non-OpenAI
//! routes and for looking at the exact bytes on the wire.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::chat::{
    ChatCompletionMessageToolCalls, CompletionUsage, CreateChatCompletionRequest, FinishReason,
    Role,
};
use futures::StreamExt as _;
use rover_scripted_model::{Config, Rules};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::oneshot;

/// A running test double and a client pointed at it. Dropping it shuts the server down.
#[derive(Debug)]
pub(crate) struct TestModel {
    pub(crate) addr: SocketAddr,
    pub(crate) client: Client<OpenAIConfig>,
    _shutdown: oneshot::Sender<()>,
}

/// The default rules, no delays.
pub(crate) async fn spawn_model() -> TestModel {
    spawn_model_with(Config::default()).await
}

/// A test double with these rules.
pub(crate) async fn spawn_model_with_rules(rules: &str) -> TestModel {
    spawn_model_with(Config::new(Rules::parse(rules).expect("test rules parse"))).await
}

pub(crate) async fn spawn_model_with(config: Config) -> TestModel {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind port 0");
    let addr = listener.local_addr().expect("local addr");
    let (shutdown, stopped) = oneshot::channel::<()>();
    tokio::spawn(rover_scripted_model::serve(listener, config, async {
        let _ = stopped.await;
    }));
    let client = Client::with_config(
        OpenAIConfig::new()
            .with_api_base(format!("http://{addr}/v1"))
            .with_api_key("test"),
    );
    TestModel {
        addr,
        client,
        _shutdown: shutdown,
    }
}

/// One tool call as the client reassembled it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) arguments: String,
}

impl Call {
    pub(crate) fn args(&self) -> Value {
        serde_json::from_str(&self.arguments).expect("tool arguments are JSON")
    }
}

/// One model response, streamed or not.
#[derive(Debug, Default)]
pub(crate) struct Turn {
    pub(crate) text: String,
    pub(crate) calls: Vec<Call>,
    pub(crate) finish: Option<FinishReason>,
    pub(crate) usage: Option<CompletionUsage>,
    /// Chunks received (streaming only).
    pub(crate) chunks: usize,
    /// Chunks that carried content (streaming only).
    pub(crate) content_pieces: usize,
    /// Per tool-call index, how many chunks carried argument fragments (streaming only).
    pub(crate) argument_fragments: BTreeMap<u32, usize>,
    /// The role of the first chunk's delta (streaming only).
    pub(crate) first_role: Option<Role>,
    /// Whether the usage chunk came with empty `choices` (streaming only).
    pub(crate) usage_chunk_had_no_choices: bool,
    /// Time from sending the request to the first chunk (streaming only).
    pub(crate) first_chunk_after: Option<Duration>,
}

impl Turn {
    /// The single tool call of this turn, as (name, arguments).
    pub(crate) fn only_call(&self) -> (&str, Value) {
        assert_eq!(
            self.calls.len(),
            1,
            "expected exactly one tool call, got {self:#?}"
        );
        (self.calls[0].name.as_str(), self.calls[0].args())
    }

    /// The text of a turn that must not call tools.
    pub(crate) fn only_text(&self) -> &str {
        assert!(self.calls.is_empty(), "expected text only, got {self:#?}");
        assert_eq!(self.finish, Some(FinishReason::Stop), "{self:#?}");
        &self.text
    }
}

impl TestModel {
    /// Streams a response and reassembles it with async-openai's stream types.
    pub(crate) async fn stream(&self, chat: &Chat) -> Turn {
        self.try_stream(chat, false).await.expect("stream succeeds")
    }

    pub(crate) async fn try_stream(
        &self,
        chat: &Chat,
        include_usage: bool,
    ) -> Result<Turn, (Turn, OpenAIError)> {
        let started = Instant::now();
        let mut stream = match self
            .client
            .chat()
            .create_stream(chat.request(true, include_usage))
            .await
        {
            Ok(stream) => stream,
            Err(error) => return Err((Turn::default(), error)),
        };
        let mut turn = Turn::default();
        let mut calls: BTreeMap<u32, Call> = BTreeMap::new();
        while let Some(chunk) = stream.next().await {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                Err(error) => return Err((turn, error)),
            };
            if turn.chunks == 0 {
                turn.first_chunk_after = Some(started.elapsed());
                turn.first_role = chunk.choices.first().and_then(|c| c.delta.role);
            }
            turn.chunks += 1;
            if let Some(usage) = chunk.usage {
                turn.usage_chunk_had_no_choices = chunk.choices.is_empty();
                turn.usage = Some(usage);
            }
            for choice in chunk.choices {
                if let Some(content) = choice.delta.content.filter(|c| !c.is_empty()) {
                    turn.content_pieces += 1;
                    turn.text.push_str(&content);
                }
                for piece in choice.delta.tool_calls.unwrap_or_default() {
                    let call = calls.entry(piece.index).or_insert_with(|| Call {
                        id: String::new(),
                        name: String::new(),
                        arguments: String::new(),
                    });
                    if let Some(id) = piece.id {
                        call.id = id;
                    }
                    if let Some(function) = piece.function {
                        if let Some(name) = function.name {
                            call.name.push_str(&name);
                        }
                        if let Some(fragment) = function.arguments.filter(|a| !a.is_empty()) {
                            call.arguments.push_str(&fragment);
                            *turn.argument_fragments.entry(piece.index).or_default() += 1;
                        }
                    }
                }
                if choice.finish_reason.is_some() {
                    turn.finish = choice.finish_reason;
                }
            }
        }
        turn.calls = calls.into_values().collect();
        Ok(turn)
    }

    /// A non-streaming response.
    pub(crate) async fn complete(&self, chat: &Chat) -> Result<Turn, OpenAIError> {
        let response = self
            .client
            .chat()
            .create(chat.request(false, false))
            .await?;
        assert_eq!(response.object, "chat.completion");
        let choice = response.choices.into_iter().next().expect("one choice");
        Ok(Turn {
            text: choice.message.content.unwrap_or_default(),
            calls: choice
                .message
                .tool_calls
                .unwrap_or_default()
                .into_iter()
                .map(|call| match call {
                    ChatCompletionMessageToolCalls::Function(call) => Call {
                        id: call.id,
                        name: call.function.name,
                        arguments: call.function.arguments,
                    },
                    ChatCompletionMessageToolCalls::Custom(other) => {
                        panic!("unexpected custom tool call {other:?}")
                    }
                })
                .collect(),
            finish: choice.finish_reason,
            usage: response.usage,
            ..Turn::default()
        })
    }

    /// A raw HTTP request; returns the status and the (de-chunked) body.
    pub(crate) async fn http(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, String) {
        raw_http(self.addr, method, path, body).await
    }
}

/// HTTP/1.1 over a plain socket, `Connection: close`, chunked bodies decoded.
pub(crate) async fn raw_http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, String) {
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(request.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    // A dropped connection may end in a reset; keep what arrived.
    let _ = socket.read_to_end(&mut raw).await;
    let raw = String::from_utf8(raw).expect("UTF-8 response");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a full head");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status code");
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    (
        status,
        if chunked {
            dechunk(body)
        } else {
            body.to_owned()
        },
    )
}

/// Decodes a chunked body; stops quietly at a truncated end.
fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || after.len() < size {
            out.push_str(&after[..after.len().min(size)]);
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].strip_prefix("\r\n").unwrap_or(&after[size..]);
    }
    out
}

/// A conversation as the worker would send it.
#[derive(Debug, Clone)]
pub(crate) struct Chat {
    messages: Vec<Value>,
    tools: Vec<Value>,
}

impl Chat {
    /// A system prompt holding `context` (when given) and the offered tools.
    pub(crate) fn new(context: Option<&Value>, tools: &[&str]) -> Self {
        let mut system = "You are Rover, the school assistant.".to_owned();
        if let Some(context) = context {
            system.push_str("\n\n<runtime_context>\n");
            system.push_str(&serde_json::to_string_pretty(context).expect("context JSON"));
            system.push_str("\n</runtime_context>\n");
        }
        Self {
            messages: vec![json!({"role": "system", "content": system})],
            tools: tools
                .iter()
                .map(|name| {
                    json!({"type": "function", "function": {
                        "name": name,
                        "description": format!("The {name} tool."),
                        "parameters": {"type": "object", "properties": {}},
                    }})
                })
                .collect(),
        }
    }

    pub(crate) fn user(mut self, text: &str) -> Self {
        self.messages.push(json!({"role": "user", "content": text}));
        self
    }

    /// Appends the assistant's tool calls of `turn` and one tool message per result.
    pub(crate) fn answer(&mut self, turn: &Turn, results: &[Value]) {
        assert_eq!(turn.calls.len(), results.len(), "one result per call");
        self.messages.push(json!({
            "role": "assistant",
            "tool_calls": turn.calls.iter().map(|c| json!({
                "id": c.id, "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            })).collect::<Vec<_>>(),
        }));
        for (call, result) in turn.calls.iter().zip(results) {
            self.messages.push(json!({
                "role": "tool", "tool_call_id": call.id, "content": result.to_string(),
            }));
        }
    }

    pub(crate) fn request(&self, stream: bool, include_usage: bool) -> CreateChatCompletionRequest {
        let mut body = json!({
            "model": "gpt-test",
            "messages": self.messages,
        });
        if !self.tools.is_empty() {
            body["tools"] = Value::Array(self.tools.clone());
        }
        if stream {
            body["stream"] = json!(true);
            if include_usage {
                body["stream_options"] = json!({"include_usage": true});
            }
        }
        serde_json::from_value(body).expect("a valid async-openai request")
    }
}

/// `{"data": data, "scopeContext": scope}`.
pub(crate) fn ok(data: Value, scope: &str) -> Value {
    json!({"data": data, "scopeContext": scope})
}

pub(crate) const WHOLE_SCHOOL: &str = "across the whole school";
pub(crate) const KOLOLO: &str = "across your campus, Kololo";

/// Ids of the demo rows the contexts and fake results use.
pub(crate) mod ids {
    pub(crate) const SCHOOL: &str = "0b5e7f3c-1d2a-4e6b-9c8d-000000000001";
    pub(crate) const NAALYA: &str = "0b5e7f3c-1d2a-4e6b-9c8d-00000000000a";
    pub(crate) const KOLOLO: &str = "0b5e7f3c-1d2a-4e6b-9c8d-00000000000b";
    pub(crate) const S1_BLUE: &str = "6a1c2d3e-4f50-4a61-8b72-000000000101";
    pub(crate) const S2_RED: &str = "6a1c2d3e-4f50-4a61-8b72-000000000102";
    pub(crate) const MATHEMATICS: &str = "7b2d3e4f-5061-4b72-8c83-000000000201";
    pub(crate) const PHYSICS: &str = "7b2d3e4f-5061-4b72-8c83-000000000202";
    pub(crate) const NAKATO: &str = "8c3e4f50-6172-4c83-9d94-000000000301";
    pub(crate) const MUGISHA: &str = "8c3e4f50-6172-4c83-9d94-000000000302";
    pub(crate) const OKELLO: &str = "9d4f5061-7283-4d94-8ea5-000000000402";
    pub(crate) const LANGUAGES: &str = "ae506172-8394-4ea5-9fb6-000000000501";
    pub(crate) const SCIENCES: &str = "ae506172-8394-4ea5-9fb6-000000000502";
}

/// The runtime context of a demo user, as the gateway would mint it.
pub(crate) fn context(user: &str) -> Value {
    let calendar = json!({
        "timeZone": "Africa/Kampala",
        "academicYearId": "c0ffee00-0000-4000-8000-000000002026",
        "academicYear": "2026",
        "terms": [{"id": "c0ffee00-0000-4000-8000-000000000001", "name": "Term 1",
                   "startsOn": "2026-02-02", "endsOn": "2026-04-30"}],
    });
    let school = json!({"id": ids::SCHOOL, "name": "Kampala Hill School"});
    let naalya = json!({"id": ids::NAALYA, "name": "Naalya"});
    let kololo = json!({"id": ids::KOLOLO, "name": "Kololo"});
    let s1_blue = json!({"id": ids::S1_BLUE, "name": "S1 Blue"});
    let s2_red = json!({"id": ids::S2_RED, "name": "S2 Red"});
    let (name, campus, permissions, capabilities, teaching_map) = match user {
        "admin" => (
            "Grace Admin",
            None,
            json!([
                "create:Department",
                "read:Department",
                "update:Department",
                "read:Student"
            ]),
            json!({"classTeacher": false, "subjectTeacher": false, "directorOfStudies": false}),
            None,
        ),
        "dos" => (
            "David Dos",
            None,
            json!([
                "read:TeachingAssignment",
                "create:TeachingAssignment",
                "read:Mark"
            ]),
            json!({"classTeacher": false, "subjectTeacher": false, "directorOfStudies": true}),
            None,
        ),
        "amina" => (
            "Amina Nambi",
            Some(naalya.clone()),
            json!(["read:Student"]),
            json!({"classTeacher": true, "subjectTeacher": true, "directorOfStudies": false}),
            Some(json!({
                "teaches": [{"class": s1_blue, "subjects": [{"id": ids::MATHEMATICS, "name": "Mathematics"}]}],
                "classTeacherOf": [s1_blue],
            })),
        ),
        "okello" => (
            "Okello John",
            Some(kololo.clone()),
            json!(["read:Student"]),
            json!({"classTeacher": false, "subjectTeacher": true, "directorOfStudies": false}),
            Some(json!({
                "teaches": [{"class": s2_red, "subjects": [{"id": ids::PHYSICS, "name": "Physics"}]}],
                "classTeacherOf": [],
            })),
        ),
        "bursar" => (
            "Betty Bursar",
            None,
            json!([]),
            json!({"classTeacher": false, "subjectTeacher": false, "directorOfStudies": false}),
            None,
        ),
        other => panic!("no demo user {other}"),
    };
    let mut user_details = json!({
        "name": name,
        "email": format!("{user}@hill.school"),
        "userId": "d0d0d0d0-0000-4000-8000-000000000001",
        "profileId": "d0d0d0d0-0000-4000-8000-000000000002",
        "userType": if teaching_map.is_some() { "teacher" } else { "administrator" },
        "school": school,
    });
    let run_mode = match &campus {
        Some(campus) => {
            user_details["campus"] = campus.clone();
            json!({"mode": "campus", "campus": campus})
        }
        None => json!({"mode": "school"}),
    };
    let mut context = json!({
        "userDetails": user_details,
        "runMode": run_mode,
        "userPermissions": permissions,
        "capabilities": capabilities,
        "calendar": calendar,
        "attachments": [],
    });
    if let Some(map) = teaching_map {
        context["teachingMap"] = map;
    }
    context
}
