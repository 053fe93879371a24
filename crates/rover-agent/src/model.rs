//! The model client: async-openai against any OpenAI-compatible endpoint, streaming, with a
//! deadline per request and bounded retries on transport errors before anything was streamed.

use std::pin::Pin;
use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::chat::CreateChatCompletionStreamResponse;
use futures::{Stream, StreamExt as _};
use serde_json::{Value, json};

/// Where the model is and how patient to be with it.
#[derive(Debug, Clone)]
pub struct ModelOptions {
    /// Base URL ending in `/v1`.
    pub base_url: String,
    /// API key.
    pub api_key: String,
    /// Model name sent with each request.
    pub model: String,
    /// Deadline for the response to start, and for each gap between chunks.
    pub timeout: Duration,
    /// Attempts on transport errors before the first chunk (at least 1).
    pub attempts: u32,
}

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The endpoint could not be reached or answered with an error.
    #[error("the model endpoint failed: {0}")]
    Transport(String),
    /// No chunk arrived within the deadline.
    #[error("the model did not answer within {0:?}")]
    Timeout(Duration),
    /// The stream ended early or carried something that is not a chat completion chunk.
    #[error("the model's output was malformed: {0}")]
    Malformed(String),
    /// The turn's progress could not be recorded, so it stopped rather than run unrecorded.
    #[error("the turn's progress could not be recorded: {0}")]
    Journal(String),
}

/// The stream of chunks of one model call.
pub type ChunkStream =
    Pin<Box<dyn Stream<Item = Result<CreateChatCompletionStreamResponse, ModelError>> + Send>>;

/// A cheap-to-clone client for one model endpoint.
#[derive(Debug, Clone)]
pub struct ModelClient {
    client: Client<OpenAIConfig>,
    options: ModelOptions,
}

impl ModelClient {
    /// A client for the endpoint in `options`.
    pub fn new(options: ModelOptions) -> Self {
        let config = OpenAIConfig::new()
            .with_api_base(options.base_url.clone())
            .with_api_key(options.api_key.clone());
        Self {
            client: Client::with_config(config),
            options,
        }
    }

    /// The model name requests carry.
    pub fn model(&self) -> &str {
        &self.options.model
    }

    /// Starts a streaming chat completion of `messages` offering `tools`; retries transport
    /// failures up to the configured attempts; every gap between chunks is bounded by the timeout.
    pub async fn stream(
        &self,
        messages: &[Value],
        tools: &[Value],
    ) -> Result<ChunkStream, ModelError> {
        let mut request = json!({
            "model": self.options.model,
            "messages": messages,
            "stream": true,
            "stream_options": { "include_usage": true },
        });
        if !tools.is_empty() {
            request["tools"] = Value::Array(tools.to_vec());
        }
        let attempts = self.options.attempts.max(1);
        let mut last = ModelError::Transport("no attempt was made".to_owned());
        for attempt in 1..=attempts {
            let started = tokio::time::timeout(
                self.options.timeout,
                self.client
                    .chat()
                    .create_stream_byot::<_, CreateChatCompletionStreamResponse>(request.clone()),
            )
            .await;
            match started {
                Ok(Ok(stream)) => return Ok(self.bounded(stream)),
                Ok(Err(error)) => last = ModelError::Transport(describe(&error)),
                Err(_) => last = ModelError::Timeout(self.options.timeout),
            }
            tracing::warn!(attempt, attempts, error = %last, "model call failed");
        }
        Err(last)
    }

    fn bounded(
        &self,
        stream: Pin<
            Box<dyn Stream<Item = Result<CreateChatCompletionStreamResponse, OpenAIError>> + Send>,
        >,
    ) -> ChunkStream {
        let timeout = self.options.timeout;
        Box::pin(futures::stream::unfold(
            Some(stream),
            move |state| async move {
                let mut stream = state?;
                match tokio::time::timeout(timeout, stream.next()).await {
                    Ok(Some(Ok(chunk))) => Some((Ok(chunk), Some(stream))),
                    Ok(Some(Err(error))) => {
                        Some((Err(ModelError::Malformed(describe(&error))), None))
                    }
                    Ok(None) => None,
                    Err(_) => Some((Err(ModelError::Timeout(timeout)), None)),
                }
            },
        ))
    }
}

fn describe(error: &OpenAIError) -> String {
    error.to_string().chars().take(300).collect()
}
