//! The `Model` trait: one streaming call.

use std::pin::Pin;
use std::time::Duration;

use futures_util::Stream;
use subagents_messages::{ModelChunk, ModelRequest};

/// A model's streamed response: text deltas, whole tool calls and usage,
/// in the order the model produced them. Dropping the stream cancels the
/// call.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelChunk, ModelError>> + Send>>;

/// A language model. One method, streaming; no `Clone` supertrait — share
/// a model as `Arc<dyn Model>`.
///
/// Implementations must not block the thread: all waiting goes through
/// tokio (so a paused runtime drives them in virtual time). A panic in
/// `stream`, in the stream's poll or in its drop is contained: the call
/// fails with [`ModelError::Other`] naming it (a drop's is logged, and an
/// answer already read stands).
pub trait Model: Send + Sync + 'static {
    /// A name for logs and errors (e.g. `"qwen2.5-7b"`).
    fn name(&self) -> &str;

    /// Starts one call. The call runs as the stream is polled.
    fn stream(&self, request: ModelRequest) -> ModelStream;
}

/// Why a model call failed. Each variant reads as a sentence, because the
/// agent's result (which a parent model may read) carries it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The service refused the credentials (HTTP 401/403; the OpenAI
    /// adapter reads a 403 saying its input was flagged as a `Server`
    /// error).
    #[error("the model service refused the credentials (HTTP {status}): {message}")]
    Unauthorized {
        /// The HTTP status.
        status: u16,
        /// What the service said.
        message: String,
    },
    /// HTTP 404: the service does not know the model, or the URL is not
    /// its chat-completions endpoint.
    #[error(
        "the model `{model}` was not found at `{url}`: {message} (if the model name is right, check the base URL: it is the API root, usually ending in /v1)"
    )]
    ModelNotFound {
        /// The model asked for.
        model: String,
        /// The URL that answered 404.
        url: String,
        /// What the service said.
        message: String,
    },
    /// The service answered, then closed its stream without any output:
    /// it was reached and failed (its own log says why).
    #[error(
        "the model service at `{url}` accepted the request but its stream ended with no output (no text, no tool call, no finish): it was reached and failed; its log says why"
    )]
    EmptyAnswer {
        /// The URL called.
        url: String,
    },
    /// The service reported an error inside the stream (llama-server does
    /// when the model's output breaks its tool grammar).
    #[error("the model service reported an error mid-stream: {message}")]
    MidStream {
        /// What the service said.
        message: String,
    },
    /// Too many requests, still refused after the retries allowed.
    #[error("the model service is rate limiting (HTTP 429) and retries ran out: {message}")]
    RateLimited {
        /// What the service asked to wait, if it said.
        retry_after: Option<Duration>,
        /// What the service said.
        message: String,
    },
    /// The service failed (HTTP 5xx or another unexpected status).
    #[error("the model service failed (HTTP {status}): {message}")]
    Server {
        /// The HTTP status.
        status: u16,
        /// What the service said.
        message: String,
    },
    /// The response could not be understood.
    #[error("the model sent a malformed response: {0}")]
    Malformed(String),
    /// The service could not be reached, or the connection broke.
    #[error("could not reach the model service: {0}")]
    Connection(String),
    /// The call took too long.
    #[error("the model call timed out after {0:?}")]
    Timeout(Duration),
    /// Anything else (scripted errors use this).
    #[error("{0}")]
    Other(String),
}

/// A model's stream polled and dropped inside a panic guard, as a tool's
/// future is: a host's stream that panicked in `poll_next` crashed the
/// whole turn ("the agent's turn crashed"), and one whose `Drop` panicked
/// turned a finished answer, or a wall-clock cut, into that crash — both
/// at once aborted the process (a panic while unwinding). A panic in
/// `poll_next` is the call's error (`ModelError::Other`, naming it) and
/// ends the stream; one in `Drop` is logged.
pub(crate) struct Contained(Option<ModelStream>);

impl Contained {
    /// `model`'s stream for `request`; a panic starting it is its error.
    pub(crate) fn stream(model: &dyn Model, request: ModelRequest) -> Self {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| model.stream(request))) {
            Ok(stream) => Self(Some(stream)),
            Err(panic) => Self(Some(Box::pin(futures_util::stream::once(async move {
                Err(panicked(panic))
            })))),
        }
    }
}

fn panicked(panic: Box<dyn std::any::Any + Send>) -> ModelError {
    ModelError::Other(format!(
        "the model's stream panicked: {}",
        crate::panics::panic_text(panic)
    ))
}

impl Stream for Contained {
    type Item = Result<ModelChunk, ModelError>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let Some(stream) = self.0.as_mut() else {
            return std::task::Poll::Ready(None);
        };
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            stream.as_mut().poll_next(cx)
        }));
        match polled {
            Ok(polled) => polled,
            Err(panic) => {
                drop_contained(self.0.take());
                std::task::Poll::Ready(Some(Err(panicked(panic))))
            }
        }
    }
}

impl Drop for Contained {
    fn drop(&mut self) {
        drop_contained(self.0.take());
    }
}

fn drop_contained(stream: Option<ModelStream>) {
    crate::panics::drop_guarded(stream, "a model's stream");
}
