//! The model client: async-openai against an ordered list of OpenAI-compatible endpoints
//! (the primary, then `model.fallbacks`), streaming, with a deadline per request and per chunk
//! gap. Before the first chunk, an overloaded, broken or silent endpoint (429, 5xx, timeouts,
//! dropped connections) is retried with backoff, then the next endpoint is tried; a refusal
//! (401/403 and the other 4xx) fails at once, since asking again cannot change the answer.
//! Each attempt is its own `rover.model.attempt` span, so the trace shows every one. Chunks are
//! read as JSON and repaired (`compat`) before they are typed: real servers differ from OpenAI.

use std::pin::Pin;
use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::ReqwestService;
use async_openai::types::chat::CreateChatCompletionStreamResponse;
use futures::{Stream, StreamExt as _};
use serde_json::{Value, json};
use tracing::Instrument as _;

use crate::compat::ChunkNormalizer;

/// One OpenAI-compatible endpoint and the model to ask there.
#[derive(Debug, Clone)]
pub struct ModelEndpoint {
    /// Base URL ending in `/v1`.
    pub base_url: String,
    /// API key.
    pub api_key: String,
    /// Model name sent with each request.
    pub model: String,
    /// Recover tool calls this endpoint writes as text (`model.text_tool_calls = auto`).
    pub text_tool_calls: bool,
    /// Who serves it, as spans name it (`gen_ai.provider.name`: `openai`, or the server's own).
    pub provider: String,
}

/// Where the model is and how patient to be with it.
#[derive(Debug, Clone)]
pub struct ModelOptions {
    /// Base URL ending in `/v1`.
    pub base_url: String,
    /// API key.
    pub api_key: String,
    /// Model name sent with each request.
    pub model: String,
    /// Recover tool calls the primary endpoint writes as text (`model.text_tool_calls = auto`).
    pub text_tool_calls: bool,
    /// Who serves the primary endpoint (`gen_ai.provider.name`).
    pub provider: String,
    /// Endpoints tried, in order, when the one before failed before its first chunk.
    pub fallbacks: Vec<ModelEndpoint>,
    /// Deadline for the response to start, and for each gap between chunks.
    pub timeout: Duration,
    /// Attempts per endpoint on retryable failures before the first chunk (at least 1).
    pub attempts: u32,
    /// Wait before the second attempt; it doubles for each attempt after that (capped at 8×).
    pub backoff: Duration,
}

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The endpoint could not be reached or answered with an error worth retrying.
    #[error("the model endpoint failed: {0}")]
    Transport(String),
    /// The endpoint refused the request (authentication, a bad request): retrying cannot help.
    #[error("the model endpoint refused the request ({status}): {message}")]
    Refused {
        /// The HTTP status, or `4xx` when the response carried no readable status.
        status: String,
        /// What the endpoint said.
        message: String,
    },
    /// No chunk arrived within the deadline.
    #[error("the model did not answer within {0:?}")]
    Timeout(Duration),
    /// The stream ended early or carried something that is not a chat completion chunk.
    #[error("the model's output was malformed: {0}")]
    Malformed(String),
}

impl ModelError {
    /// Whether asking again (here or at the next endpoint) may succeed.
    fn retryable(&self) -> bool {
        matches!(
            self,
            Self::Transport(_) | Self::Timeout(_) | Self::Malformed(_)
        )
    }

    /// The `error.type` a span records for this failure.
    fn kind(&self) -> &'static str {
        match self {
            Self::Transport(_) => "transport",
            Self::Refused { .. } => "refused",
            Self::Timeout(_) => "timeout",
            Self::Malformed(_) => "malformed",
        }
    }
}

/// The stream of chunks of one model call.
pub type ChunkStream =
    Pin<Box<dyn Stream<Item = Result<CreateChatCompletionStreamResponse, ModelError>> + Send>>;

/// A started model call: its chunks, and which model is answering.
pub struct ModelStream {
    /// The chunks, the first of which has already arrived.
    pub chunks: ChunkStream,
    /// The model name of the endpoint that answered.
    pub model: String,
    /// Whether tool calls that endpoint writes as text are recovered.
    pub text_tool_calls: bool,
    /// Who serves that endpoint (`gen_ai.provider.name`).
    pub provider: String,
    /// A fallback answered: the primary (and any fallback before this one) failed.
    pub fallback: bool,
}

impl std::fmt::Debug for ModelStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelStream")
            .field("model", &self.model)
            .field("text_tool_calls", &self.text_tool_calls)
            .finish_non_exhaustive()
    }
}

/// A cheap-to-clone client for the configured endpoints.
#[derive(Debug, Clone)]
pub struct ModelClient {
    endpoints: Vec<(Client<OpenAIConfig>, ModelEndpoint)>,
    timeout: Duration,
    attempts: u32,
    backoff: Duration,
}

impl ModelClient {
    /// A client for the endpoints in `options`: the primary first, then the fallbacks.
    pub fn new(options: ModelOptions) -> Self {
        let primary = ModelEndpoint {
            base_url: options.base_url,
            api_key: options.api_key,
            model: options.model,
            text_tool_calls: options.text_tool_calls,
            provider: options.provider,
        };
        // async-openai's default executor retries 429 and 5xx on its own, unseen and unbounded
        // by our settings; a plain service leaves every attempt (and its span) to `stream`.
        let http = reqwest::Client::new();
        let endpoints = std::iter::once(primary)
            .chain(options.fallbacks)
            .map(|endpoint| {
                let config = OpenAIConfig::new()
                    .with_api_base(endpoint.base_url.clone())
                    .with_api_key(endpoint.api_key.clone());
                let client = Client::with_config(config)
                    .with_http_service(ReqwestService::new(http.clone()));
                (client, endpoint)
            })
            .collect();
        Self {
            endpoints,
            timeout: options.timeout,
            attempts: options.attempts.max(1),
            backoff: options.backoff,
        }
    }

    /// The primary model's name.
    pub fn model(&self) -> &str {
        &self.endpoints[0].1.model
    }

    /// Who serves the primary model (`gen_ai.provider.name`).
    pub fn provider(&self) -> &str {
        &self.endpoints[0].1.provider
    }

    /// Starts a streaming chat completion of `messages` offering `tools`, waiting for its first
    /// chunk: retryable failures are retried with backoff, then the next endpoint is tried; a
    /// refusal fails at once. Every gap between chunks after the first is bounded by the timeout.
    pub async fn stream(
        &self,
        messages: &[Value],
        tools: &[&Value],
    ) -> Result<ModelStream, ModelError> {
        let mut last = ModelError::Transport("no attempt was made".to_owned());
        let mut tried = 0u32;
        // A retry waits `backoff`, then twice, four and at most eight times as long.
        let mut backoff = rover_settings::Backoff::new(self.backoff, self.backoff * 8);
        for (index, (client, endpoint)) in self.endpoints.iter().enumerate() {
            let request = StreamRequest {
                model: &endpoint.model,
                messages,
                stream: true,
                stream_options: StreamOptions {
                    include_usage: true,
                },
                tools,
            };
            for attempt in 1..=self.attempts {
                if tried > 0 {
                    tokio::time::sleep(backoff.next_delay()).await;
                }
                tried += 1;
                let span = tracing::info_span!(
                    "rover.model.attempt",
                    gen_ai.request.model = endpoint.model.as_str(),
                    gen_ai.provider.name = endpoint.provider.as_str(),
                    server.address = host(&endpoint.base_url),
                    rover.model.endpoint = index,
                    rover.model.attempt = attempt,
                    error.type = tracing::field::Empty,
                );
                match self.start(client, &request).instrument(span.clone()).await {
                    Ok((chunks, answered)) => {
                        return Ok(ModelStream {
                            chunks,
                            // The name the response gave (a server may name a snapshot of
                            // what was asked for), else the one asked for.
                            model: if answered.is_empty() {
                                endpoint.model.clone()
                            } else {
                                answered
                            },
                            text_tool_calls: endpoint.text_tool_calls,
                            provider: endpoint.provider.clone(),
                            fallback: index > 0,
                        });
                    }
                    Err(error) => {
                        span.record("error.type", error.kind());
                        tracing::warn!(
                            parent: &span,
                            endpoint = index,
                            attempt,
                            attempts = self.attempts,
                            %error,
                            "model call failed before its first chunk"
                        );
                        if !error.retryable() {
                            return Err(error);
                        }
                        last = error;
                    }
                }
            }
        }
        Err(last)
    }

    /// Asks the primary endpoint, once (no retry, no fallback) and within the deadline, for at
    /// most one token after `messages`, not streamed: a server that caches prompt prefixes keeps
    /// what it read (`model.warm_prompt_cache`). What it answers is dropped.
    pub async fn warm(&self, messages: &[Value]) -> Result<(), ModelError> {
        let (client, endpoint) = &self.endpoints[0];
        let request = json!({
            "model": endpoint.model,
            "messages": messages,
            "max_tokens": 1,
            "stream": false,
        });
        let answered =
            tokio::time::timeout(self.timeout, client.chat().create_byot::<_, Value>(request))
                .await;
        match answered {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(classify(&error)),
            Err(_) => Err(ModelError::Timeout(self.timeout)),
        }
    }

    /// One attempt: the request, then its first chunk, each within the deadline. Answers the
    /// chunks and the model name the first one carries (empty when it carries none).
    async fn start(
        &self,
        client: &Client<OpenAIConfig>,
        request: &StreamRequest<'_>,
    ) -> Result<(ChunkStream, String), ModelError> {
        let started = tokio::time::timeout(
            self.timeout,
            client.chat().create_stream_byot::<_, Value>(request),
        )
        .await;
        let mut stream = match started {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => return Err(classify(&error)),
            Err(_) => return Err(ModelError::Timeout(self.timeout)),
        };
        let mut normalizer = ChunkNormalizer::default();
        match tokio::time::timeout(self.timeout, stream.next()).await {
            Ok(Some(Ok(first))) => {
                let first = normalizer
                    .normalize(first)
                    .map_err(|why| ModelError::Malformed(why.to_string()))?;
                let answered = first.model.clone();
                let chunks: ChunkStream =
                    Box::pin(futures::stream::once(async { Ok(first) }).chain(bounded(
                        stream,
                        normalizer,
                        self.timeout,
                    )));
                Ok((chunks, answered))
            }
            Ok(Some(Err(error))) => Err(ModelError::Transport(describe(&error))),
            Ok(None) => Err(ModelError::Malformed(
                "the stream ended before its first chunk".to_owned(),
            )),
            Err(_) => Err(ModelError::Timeout(self.timeout)),
        }
    }
}

/// A streamed chat completion request, as sent: borrowed from the conversation and the tool
/// definitions, and serialised once per attempt straight from them (no copy of either).
#[derive(Debug, serde::Serialize)]
struct StreamRequest<'a> {
    model: &'a str,
    messages: &'a [Value],
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tools: &'a [&'a Value],
}

/// `stream_options`: the usage comes in the stream's last chunk.
#[derive(Debug, serde::Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// The rest of a stream, each gap between chunks bounded by `timeout`.
fn bounded(
    stream: Pin<Box<dyn Stream<Item = Result<Value, OpenAIError>> + Send>>,
    normalizer: ChunkNormalizer,
    timeout: Duration,
) -> ChunkStream {
    Box::pin(futures::stream::unfold(
        Some((stream, normalizer)),
        move |state| async move {
            let (mut stream, mut normalizer) = state?;
            match tokio::time::timeout(timeout, stream.next()).await {
                Ok(Some(Ok(chunk))) => match normalizer.normalize(chunk) {
                    Ok(chunk) => Some((Ok(chunk), Some((stream, normalizer)))),
                    Err(why) => Some((Err(ModelError::Malformed(why.to_string())), None)),
                },
                Ok(Some(Err(error))) => Some((Err(ModelError::Malformed(describe(&error))), None)),
                Ok(None) => None,
                Err(_) => Some((Err(ModelError::Timeout(timeout)), None)),
            }
        },
    ))
}

/// Sorts a failure to start a stream into worth retrying or not.
fn classify(error: &OpenAIError) -> ModelError {
    let refused = |status: String| ModelError::Refused {
        status,
        message: describe(error),
    };
    match error {
        OpenAIError::ApiError(api) => match api.status_code.as_u16() {
            408 | 409 | 429 | 500..=599 => ModelError::Transport(describe(error)),
            _ => refused(api.status_code.to_string()),
        },
        OpenAIError::Reqwest(cause) => match cause.status() {
            Some(status) if status.is_client_error() && !matches!(status.as_u16(), 408 | 429) => {
                refused(status.to_string())
            }
            _ => ModelError::Transport(describe(error)),
        },
        // async-openai reads a 5xx body as text; a body it cannot read as the error object
        // therefore came with another non-success status, a 4xx.
        OpenAIError::JSONDeserialize(..) => refused("4xx".to_owned()),
        OpenAIError::InvalidArgument(_) => refused("invalid request".to_owned()),
        _ => ModelError::Transport(describe(error)),
    }
}

/// The host part of a base URL, for `server.address`.
fn host(base_url: &str) -> &str {
    let rest = base_url
        .split_once("://")
        .map_or(base_url, |(_, rest)| rest);
    rest.split(['/', '?']).next().unwrap_or(rest)
}

fn describe(error: &OpenAIError) -> String {
    error.to_string().chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::host;

    #[test]
    fn the_server_address_is_the_host_and_port_of_the_base_url() {
        assert_eq!(host("http://127.0.0.1:8090/v1"), "127.0.0.1:8090");
        assert_eq!(host("https://api.example.org/v1?x=1"), "api.example.org");
        assert_eq!(host("localhost:1/v1"), "localhost:1");
    }
}
