//! [`OpenAiCompatible`]: a [`Model`] that speaks the OpenAI
//! chat-completions wire format, streaming, with tool calls. It works with
//! any server that offers `POST /v1/chat/completions` with `stream: true`:
//! llama.cpp's `llama-server`, Ollama, vLLM, LM Studio, or OpenAI itself.
//!
//! Enabled by the `openai` cargo feature (of `subagents-actors`, or of the
//! `subagents` facade). That build speaks plain `http://` only and carries
//! no TLS stack; for `https://` base URLs enable `openai-rustls` instead
//! (rustls with the platform's certificate verifier).
//!
//! # Usage
//!
//! ```no_run
//! use std::time::Duration;
//! use subagents_actors::openai::OpenAiCompatible;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A local llama.cpp server (`llama-server -m model.gguf --port 8080 --jinja`).
//! let model = OpenAiCompatible::new("http://127.0.0.1:8080/v1", None, "qwen2.5-7b-instruct")?;
//!
//! // Ollama (`ollama serve`), with the knobs set.
//! let ollama = OpenAiCompatible::builder("http://127.0.0.1:11434/v1", "qwen2.5:7b")
//!     .max_retries(5)
//!     .connect_timeout(Duration::from_secs(5))
//!     .timeout(Duration::from_secs(120))
//!     .build()?;
//!
//! // Or from the environment (see below).
//! let from_env = OpenAiCompatible::from_env()?;
//!
//! // Share one as the model of an agent: `AgentBuilder::new(model.shared())`.
//! # let _ = (model, ollama, from_env);
//! # Ok(())
//! # }
//! ```
//!
//! # Environment
//!
//! [`OpenAiCompatible::from_env`] reads:
//!
//! | variable | required | meaning |
//! | --- | --- | --- |
//! | `SUBAGENTS_OPENAI_BASE_URL` | yes | the API root, up to and including `/v1`, e.g. `http://127.0.0.1:8080/v1` |
//! | `SUBAGENTS_OPENAI_MODEL` | yes | the model name sent in each request |
//! | `SUBAGENTS_OPENAI_API_KEY` | no | sent as `Authorization: Bearer …` when set and not empty |
//!
//! A missing required variable is an [`OpenAiConfigError::MissingVariable`].
//!
//! # Local servers
//!
//! * **llama.cpp**: `llama-server -m model.gguf --port 8080 --jinja` (the
//!   `--jinja` flag enables tool calls), base URL `http://127.0.0.1:8080/v1`.
//!   The model name is free-form; no API key unless started with `--api-key`.
//! * **Ollama**: `ollama serve`, base URL `http://127.0.0.1:11434/v1`, model
//!   name as pulled (e.g. `qwen2.5:7b`), no API key.
//!
//! # Behaviour
//!
//! * Text deltas are yielded as [`ModelChunk::Text`] as they arrive.
//! * Tool-call fragments are assembled by `index` (parallel calls may
//!   interleave) and yielded as whole [`ModelChunk::ToolCall`]s at the
//!   answer's end (`[DONE]`, or the stream's end after a `finish_reason`;
//!   output after a finish reopens the answer). A call with no id gets
//!   `call_<index>`; empty arguments, or `null` (older Ollama), become `{}`.
//! * Usage (requested with `stream_options.include_usage`) is yielded once,
//!   as [`ModelChunk::Usage`], at the end of the stream.
//! * HTTP 429 — and an unavailable service's 502, 503, 504 or 529 (a
//!   model still loading, an overload, a gateway whose service is away) —
//!   is retried up to [`OpenAiBuilder::max_retries`] times,
//!   waiting as `retry-after-ms` or `Retry-After` says (in seconds, or an
//!   HTTP date), or the body's `retryDelay` (Gemini), or else 1 s, 2 s, 4 s, …;
//!   all waiting is tokio time.
//! * Dropping the stream aborts the request: nothing is spawned.
//! * A query in the base URL (Azure's `?api-version=`) stays after the
//!   chat path; credentials in it (`user:password@`) are sent but never
//!   shown; redirects are not followed (docs/openai.md, "Base URLs and
//!   keys").
//!
//! # Errors
//!
//! | what happened | [`ModelError`] |
//! | --- | --- |
//! | HTTP 401 or 403 (a 403 saying its input was flagged: `Server`) | `Unauthorized` |
//! | HTTP 404 (the message names the URL: a wrong base path reads as one) | `ModelNotFound` |
//! | HTTP 429, still after the retries | `RateLimited` |
//! | HTTP 5xx (502, 503, 504 after the retries), a redirect, or another unexpected status | `Server` |
//! | an event that is not a chat-completion chunk | `Malformed` |
//! | a 200 whose stream ends with no output at all (llama-cpp-python's usual failure) | `EmptyAnswer` |
//! | connection refused, or broken mid-stream | `Connection` |
//! | connect, first byte or next event too slow | `Timeout` |
//! | an error event inside the stream (an overload before any output is retried first, as a 503) | `MidStream` |
//!
//! [`ModelError`]: crate::model::ModelError
//! [`ModelChunk::Text`]: subagents_messages::ModelChunk::Text
//! [`ModelChunk::ToolCall`]: subagents_messages::ModelChunk::ToolCall
//! [`ModelChunk::Usage`]: subagents_messages::ModelChunk::Usage

mod amend;
mod body;
mod call;
mod endpoint;
mod error;
mod lines;
mod redact;
mod retry;
mod sse;
mod stream;
mod wire;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use subagents_messages::ModelRequest;

pub use self::error::OpenAiConfigError;
use self::error::Timeouts;
use self::retry::RetryPolicy;
use crate::model::{Model, ModelStream};

/// A model served over the OpenAI chat-completions API. See the [module
/// docs](self). Cheap to share as `Arc<dyn Model>` ([`Self::shared`]).
pub struct OpenAiCompatible {
    base_url: String,
    settings: Arc<call::Settings>,
}

impl fmt::Debug for OpenAiCompatible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiCompatible")
            .field("base_url", &self.base_url)
            .field("model", &self.settings.model)
            .field(
                "api_key",
                &self.settings.api_key.as_ref().map(|_| "<redacted>"),
            )
            .field("retry", &self.settings.retry)
            .field("timeouts", &self.settings.timeouts)
            .finish()
    }
}

impl OpenAiCompatible {
    /// The variable naming the API root (e.g. `http://127.0.0.1:8080/v1`).
    pub const ENV_BASE_URL: &str = "SUBAGENTS_OPENAI_BASE_URL";
    /// The variable holding the API key (optional).
    pub const ENV_API_KEY: &str = "SUBAGENTS_OPENAI_API_KEY";
    /// The variable naming the model.
    pub const ENV_MODEL: &str = "SUBAGENTS_OPENAI_MODEL";

    /// An adapter for `model` at `base_url` (the API root, up to and
    /// including `/v1`), with the default knobs. An empty key counts as
    /// none.
    pub fn new(
        base_url: impl Into<String>,
        api_key: Option<String>,
        model: impl Into<String>,
    ) -> Result<Self, OpenAiConfigError> {
        Self::builder(base_url, model).api_key(api_key).build()
    }

    /// Starts configuring an adapter for `model` at `base_url`.
    pub fn builder(base_url: impl Into<String>, model: impl Into<String>) -> OpenAiBuilder {
        OpenAiBuilder {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            max_retries: 3,
            max_retry_wait: Duration::from_secs(60),
            clock: retry::DateClock(Arc::new(crate::clock::SystemClock)),
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(300),
        }
    }

    /// An adapter configured from `SUBAGENTS_OPENAI_BASE_URL`,
    /// `SUBAGENTS_OPENAI_MODEL` and (optionally) `SUBAGENTS_OPENAI_API_KEY`.
    pub fn from_env() -> Result<Self, OpenAiConfigError> {
        OpenAiBuilder::from_env()?.build()
    }

    /// The API root the adapter posts to (without a trailing `/`), as
    /// shown: without credentials, and with a query parameter naming a
    /// key, token or secret redacted.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The model name sent in each request.
    pub fn model(&self) -> &str {
        &self.settings.model
    }

    /// Wraps the adapter for sharing.
    pub fn shared(self) -> Arc<dyn Model> {
        Arc::new(self)
    }
}

impl Model for OpenAiCompatible {
    fn name(&self) -> &str {
        &self.settings.model
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        call::start(self.settings.clone(), &request)
    }
}

/// Configures an [`OpenAiCompatible`]; made by
/// [`OpenAiCompatible::builder`] or [`OpenAiBuilder::from_env`].
#[derive(Clone)]
pub struct OpenAiBuilder {
    base_url: String,
    api_key: Option<String>,
    model: String,
    max_retries: u32,
    max_retry_wait: Duration,
    connect_timeout: Duration,
    timeout: Duration,
    clock: retry::DateClock,
}

impl fmt::Debug for OpenAiBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiBuilder")
            .field("base_url", &endpoint::shown(&self.base_url))
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("max_retries", &self.max_retries)
            .field("max_retry_wait", &self.max_retry_wait)
            .field("connect_timeout", &self.connect_timeout)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl OpenAiBuilder {
    /// A builder with base URL, model and key from the environment (see
    /// the [module docs](self#environment)); the other knobs at their
    /// defaults.
    pub fn from_env() -> Result<Self, OpenAiConfigError> {
        Self::from_lookup(|name| match std::env::var(name) {
            Ok(value) => Ok(Some(value)),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err("it is not valid UTF-8".to_owned()),
        })
    }

    /// [`Self::from_env`] over any source of variables.
    fn from_lookup(
        lookup: impl Fn(&'static str) -> Result<Option<String>, String>,
    ) -> Result<Self, OpenAiConfigError> {
        let read = |name: &'static str| -> Result<Option<String>, OpenAiConfigError> {
            lookup(name)
                .map(|v| v.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()))
                .map_err(|reason| OpenAiConfigError::InvalidVariable { name, reason })
        };
        let base_url =
            read(OpenAiCompatible::ENV_BASE_URL)?.ok_or(OpenAiConfigError::MissingVariable {
                name: OpenAiCompatible::ENV_BASE_URL,
                hint: "set it to the API root, e.g. http://127.0.0.1:8080/v1",
            })?;
        let model =
            read(OpenAiCompatible::ENV_MODEL)?.ok_or(OpenAiConfigError::MissingVariable {
                name: OpenAiCompatible::ENV_MODEL,
                hint: "set it to the model name the server knows",
            })?;
        let api_key = read(OpenAiCompatible::ENV_API_KEY)?;
        Ok(OpenAiCompatible::builder(base_url, model).api_key(api_key))
    }

    /// The API key, sent as `Authorization: Bearer <key>` (none by
    /// default; trimmed, and an empty key counts as none).
    pub fn api_key(mut self, api_key: Option<String>) -> Self {
        self.api_key = api_key.filter(|k| !k.is_empty());
        self
    }

    /// How many times a rate-limited (HTTP 429) or unavailable (502, 503,
    /// 504, 520 to 524, 529) call is retried before it fails with
    /// `RateLimited` or `Server` (default 3). A gateway's 504 for a prompt
    /// slower than its own timeout comes back each time: each retry reads
    /// the prompt again — 0 for a local server behind such a gateway. A
    /// 503 saying the model is still loading is waited for apart, up to
    /// [`timeout`](Self::timeout) in all (0 retries: not at all).
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// The longest wait before a retry (default 60 s): a `Retry-After`
    /// longer than this fails the call at once instead of waiting.
    pub fn max_retry_wait(mut self, wait: Duration) -> Self {
        self.max_retry_wait = wait;
        self
    }

    /// The clock a `Retry-After` given as an HTTP date is read against
    /// (default the system's): one of a simulation's time for a mock
    /// server that dates its answers in it (docs/simulation.md). Read by
    /// the system's, the wait depended on the host's calendar.
    pub fn clock(mut self, clock: Arc<dyn crate::clock::Clock>) -> Self {
        self.clock = retry::DateClock(crate::clock::guarded(clock));
        self
    }

    /// How long connecting to the server may take (default 10 s); 0 is
    /// refused at [`build`](Self::build).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long the server may stay silent: before the response starts,
    /// and between two reads of the stream — any bytes, a keep-alive
    /// comment included (default 300 s). It does not bound a whole answer
    /// that keeps streaming; an agent's wall clock does. 0 is refused at
    /// [`build`](Self::build).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Checks the settings and builds the adapter: the base URL (`http`,
    /// or `https` with TLS built in; no fragment; a query such as Azure's
    /// `?api-version=` kept after the chat path; credentials written in
    /// it, `user:password@`, sent as basic auth but never shown), the model
    /// name and the key (trimmed; one that cannot be a header is refused
    /// here, not at the first call).
    pub fn build(self) -> Result<OpenAiCompatible, OpenAiConfigError> {
        let endpoint = endpoint::endpoint(&self.base_url, cfg!(feature = "openai-rustls"))?;
        let api_key = self
            .api_key
            .map(|k| k.trim().to_owned())
            .filter(|k| !k.is_empty());
        if let Some(key) = &api_key {
            if reqwest::header::HeaderValue::from_str(&format!("Bearer {key}")).is_err() {
                return Err(OpenAiConfigError::InvalidApiKey {
                    reason: "it holds a line break or another control character".to_owned(),
                });
            }
            if endpoint.has_credentials {
                return Err(OpenAiConfigError::InvalidBaseUrl {
                    url: endpoint.root,
                    reason: "it carries credentials (`user:password@`) and an API key is set \
                             too: both would be sent as `Authorization`; give one"
                        .to_owned(),
                });
            }
        }
        let model = self.model.trim().to_owned();
        if model.is_empty() {
            return Err(OpenAiConfigError::MissingModel);
        }
        // Zero made every call fail `Timeout(0s)`, as zero limits and
        // `max_tokens` 0, refused too, would fail every turn.
        for (setting, timeout) in [
            ("timeout", self.timeout),
            ("connect_timeout", self.connect_timeout),
        ] {
            if timeout.is_zero() {
                return Err(OpenAiConfigError::ZeroTimeout { setting });
            }
        }
        // A redirect is not followed: reqwest would send the POST again as
        // a GET without its body, and drop the key on another host — the
        // service's answer would then be about a request never made. It is
        // an error that names where to go (`call::attempt`).
        let client = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| OpenAiConfigError::Client(e.to_string()))?;
        let settings = call::Settings {
            client,
            url: endpoint.url,
            shown: endpoint.shown,
            api_key,
            model,
            retry: RetryPolicy {
                max_retries: self.max_retries,
                max_wait: self.max_retry_wait,
                base_backoff: Duration::from_secs(1),
                loading_budget: self.timeout,
            },
            timeouts: Timeouts {
                connect: self.connect_timeout,
                read: self.timeout,
            },
            refused: std::sync::Mutex::new(Vec::new()),
            clock: self.clock,
        };
        Ok(OpenAiCompatible {
            base_url: endpoint.root,
            settings: Arc::new(settings),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(
        vars: &'static [(&'static str, &'static str)],
    ) -> impl Fn(&'static str) -> Result<Option<String>, String> {
        move |name| {
            Ok(vars
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned()))
        }
    }

    #[test]
    fn the_environment_names_url_model_and_key() {
        let built = OpenAiBuilder::from_lookup(lookup(&[
            (OpenAiCompatible::ENV_BASE_URL, "http://127.0.0.1:8080/v1/"),
            (OpenAiCompatible::ENV_MODEL, " qwen "),
            (OpenAiCompatible::ENV_API_KEY, "sk-1"),
        ]))
        .and_then(OpenAiBuilder::build);
        let Ok(model) = built else {
            panic!("expected a model, got {built:?}");
        };
        assert_eq!(model.base_url(), "http://127.0.0.1:8080/v1");
        assert_eq!(model.name(), "qwen");
        assert_eq!(
            model.settings.url.as_str(),
            "http://127.0.0.1:8080/v1/chat/completions"
        );
        assert_eq!(model.settings.api_key.as_deref(), Some("sk-1"));
        assert!(!format!("{model:?}").contains("sk-1"));
    }

    #[test]
    fn the_key_is_optional_and_empty_counts_as_unset() {
        let built = OpenAiBuilder::from_lookup(lookup(&[
            (OpenAiCompatible::ENV_BASE_URL, "http://127.0.0.1:11434/v1"),
            (OpenAiCompatible::ENV_MODEL, "m"),
            (OpenAiCompatible::ENV_API_KEY, ""),
        ]));
        assert!(built.is_ok_and(|b| b.api_key.is_none()));
    }

    #[test]
    fn missing_variables_are_named() {
        let err = OpenAiBuilder::from_lookup(lookup(&[(OpenAiCompatible::ENV_MODEL, "m")])).err();
        assert!(matches!(
            err,
            Some(OpenAiConfigError::MissingVariable {
                name: OpenAiCompatible::ENV_BASE_URL,
                ..
            })
        ));
        let err =
            OpenAiBuilder::from_lookup(lookup(&[(OpenAiCompatible::ENV_BASE_URL, "http://x/v1")]))
                .err();
        let Some(err) = err else {
            panic!("expected an error");
        };
        assert!(err.to_string().contains("SUBAGENTS_OPENAI_MODEL"), "{err}");
        let err = OpenAiBuilder::from_lookup(|_| Err("it is not valid UTF-8".into())).err();
        assert!(matches!(
            err,
            Some(OpenAiConfigError::InvalidVariable {
                name: OpenAiCompatible::ENV_BASE_URL,
                ..
            })
        ));
    }

    #[test]
    fn base_urls_are_checked() {
        assert!(matches!(
            OpenAiCompatible::new("not a url", None, "m"),
            Err(OpenAiConfigError::InvalidBaseUrl { .. })
        ));
        assert!(matches!(
            OpenAiCompatible::new("ftp://host/v1", None, "m"),
            Err(OpenAiConfigError::InvalidBaseUrl { .. })
        ));
        assert!(matches!(
            OpenAiCompatible::new("http://host/v1", None, "  "),
            Err(OpenAiConfigError::MissingModel)
        ));
        let https = OpenAiCompatible::new("https://api.example.invalid/v1", None, "m");
        if cfg!(feature = "openai-rustls") {
            assert!(https.is_ok());
        } else {
            assert!(matches!(
                https,
                Err(OpenAiConfigError::TlsNotEnabled { .. })
            ));
        }
    }
}
