//! Errors: what can go wrong setting the adapter up, and how HTTP and
//! transport failures map onto [`ModelError`].

use std::error::Error as _;
use std::time::Duration;

use serde_json::Value;

use crate::model::ModelError;

/// Why an [`OpenAiCompatible`](super::OpenAiCompatible) could not be set
/// up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenAiConfigError {
    /// A required environment variable is not set (or is empty).
    #[error("the environment variable `{name}` is not set: {hint}")]
    MissingVariable {
        /// The variable's name.
        name: &'static str,
        /// What it should hold.
        hint: &'static str,
    },
    /// An environment variable is set but unusable (e.g. not UTF-8).
    #[error("the environment variable `{name}` is unusable: {reason}")]
    InvalidVariable {
        /// The variable's name.
        name: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The base URL is not an `http://` or `https://` URL.
    #[error("the base URL `{url}` is not usable: {reason}")]
    InvalidBaseUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An `https://` base URL was given but no TLS stack is compiled in.
    #[error(
        "the base URL `{url}` uses https, but this build has no TLS: enable the `openai-rustls` feature"
    )]
    TlsNotEnabled {
        /// The URL given.
        url: String,
    },
    /// The API key cannot be sent as an HTTP header value (a line break
    /// or another control character inside it, after trimming).
    #[error("the API key cannot be sent in an HTTP header: {reason}")]
    InvalidApiKey {
        /// What is wrong with it (the key itself is never shown).
        reason: String,
    },
    /// The model name is empty.
    #[error("no model name was given")]
    MissingModel,
    /// A timeout of zero: every call would fail (a zero-length wait ends
    /// at its first look, before any server can answer).
    #[error("`{setting}` is 0: every call would time out before the server could answer")]
    ZeroTimeout {
        /// Which setting: `timeout` or `connect_timeout`.
        setting: &'static str,
    },
    /// The HTTP client could not be built.
    #[error("the HTTP client could not be built: {0}")]
    Client(String),
}

/// How long an error message from the service may be before it is cut.
const MAX_MESSAGE_CHARS: usize = 500;

/// The readable part of an error body: `error.message`, `error` (a string,
/// as Ollama sends), `message`, `detail` (FastAPI servers such as
/// llama-cpp-python: a string, or a list of `{"loc", "msg"}`; Mistral's
/// API puts it in `message`), else the body itself, cut to a few hundred
/// characters.
pub(crate) fn service_message(body: &str) -> String {
    let from_json = serde_json::from_str::<Value>(body)
        .ok()
        .map(unwrapped)
        .and_then(|v| {
            let error = v.get("error");
            let message = error
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .or_else(|| error.and_then(Value::as_str))
                .or_else(|| v.get("message").and_then(Value::as_str))
                .map(str::to_owned)
                .or_else(|| detail(v.get("detail")?))
                .or_else(|| detail(v.get("message")?.get("detail")?))
                .or_else(|| listed(v.get("errors").or(error)?))?;
            // A gateway's wrapper (OpenRouter: "Provider returned error") with
            // the provider's own words in `metadata.raw`: said after it, or a
            // model read only that the provider failed.
            let raw = error
                .and_then(|e| e.get("metadata")?.get("raw"))
                .map(|raw| raw.as_str().map_or_else(|| raw.to_string(), str::to_owned))
                .filter(|raw| !raw.trim().is_empty())
                .map(|raw| service_message(&raw));
            // Groq's generation that failed its tool-call format: the
            // message points at it ("See 'failed_generation'").
            let failed = error
                .and_then(|e| e.get("failed_generation")?.as_str())
                .filter(|text| !text.trim().is_empty());
            let message = match raw {
                Some(raw) if raw != message => format!("{message}: {raw}"),
                _ => message,
            };
            Some(match failed {
                Some(text) => format!("{message} (failed_generation: {text})"),
                None => message,
            })
        });
    let text = from_json.unwrap_or_else(|| body.trim().to_owned());
    if text.is_empty() {
        "(no message)".to_owned()
    } else {
        truncate(&text, MAX_MESSAGE_CHARS)
    }
}

/// Cloudflare's envelope (`{"errors": [{"message": …, "code": …}],
/// "success": false}`; its AI Gateway's own under `error`): each error's
/// message, joined — read as no message, a model read the raw JSON.
fn listed(errors: &Value) -> Option<String> {
    let said: Vec<&str> = errors
        .as_array()?
        .iter()
        .filter_map(|e| e.get("message")?.as_str())
        .collect();
    (!said.is_empty()).then(|| said.join("; "))
}

/// A FastAPI `detail`: its text, or each validation error's `msg` with
/// where it was (`loc`), joined.
fn detail(detail: &Value) -> Option<String> {
    if let Some(text) = detail.as_str() {
        return Some(text.to_owned());
    }
    let errors: Vec<String> = detail
        .as_array()?
        .iter()
        .filter_map(|e| {
            let msg = e.get("msg")?.as_str()?;
            let at: Vec<String> = e
                .get("loc")
                .and_then(Value::as_array)
                .map(|loc| {
                    loc.iter()
                        .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            Some(if at.is_empty() {
                msg.to_owned()
            } else {
                format!("{}: {msg}", at.join("."))
            })
        })
        .collect();
    (!errors.is_empty()).then(|| errors.join("; "))
}

/// A 429's body says the account is out of quota (OpenAI:
/// `{"error": {"code": "insufficient_quota", …}}`, or as its `type`):
/// waiting does not help.
pub(crate) fn out_of_quota(body: &str) -> bool {
    let Ok(value) = serde_json::from_str::<Value>(body).map(unwrapped) else {
        return false;
    };
    let error = value.get("error").unwrap_or(&value);
    ["code", "type"]
        .iter()
        .any(|key| error.get(key).and_then(Value::as_str) == Some("insufficient_quota"))
}

/// An error body's one object: Gemini's compatible endpoint wraps it in a
/// list (`[{"error": {…}}]`) — read as it came, the message a model read
/// was the raw JSON.
fn unwrapped(value: Value) -> Value {
    match value {
        Value::Array(mut items) if items.len() == 1 => items.pop().unwrap_or_default(),
        value => value,
    }
}

/// The wait a 429's body names where its headers name none: Google's
/// `RetryInfo` (`"retryDelay": "30.5s"` among the error's `details`, no
/// `Retry-After`) — backed off 1, 2, 4 s instead, the retries were spent
/// inside a window the service said lasts half a minute.
pub(crate) fn retry_delay(body: &str) -> Option<Duration> {
    let value = unwrapped(serde_json::from_str::<Value>(body).ok()?);
    let error = value.get("error").unwrap_or(&value);
    error.get("details")?.as_array()?.iter().find_map(|detail| {
        let delay = detail
            .get("retryDelay")?
            .as_str()?
            .trim()
            .strip_suffix('s')?;
        let secs = delay.parse::<f64>().ok()?;
        // A day at most: past it, as good as never (and no overflow).
        (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
    })
}

/// `text` cut to `max` characters, with an ellipsis if cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// The error for an unsuccessful status other than 429 (which retries).
pub(crate) fn status_error(status: u16, model: &str, url: &str, message: String) -> ModelError {
    match status {
        // OpenRouter's 403 for input its moderation flagged: the request,
        // not the credentials ("the model service refused the
        // credentials" sent a host to its keys).
        403 if message.contains("flagged") => ModelError::Server { status, message },
        401 | 403 => ModelError::Unauthorized { status, message },
        404 => ModelError::ModelNotFound {
            model: model.to_owned(),
            url: url.to_owned(),
            message,
        },
        429 => ModelError::RateLimited {
            retry_after: None,
            message,
        },
        _ => ModelError::Server { status, message },
    }
}

/// The timeouts a call runs under, to name the one that ran out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    pub(crate) connect: Duration,
    pub(crate) read: Duration,
}

/// A transport failure as a [`ModelError`]: timeouts are `Timeout`,
/// everything else (refused, reset, broken mid-body) is `Connection`.
pub(crate) fn transport_error(error: &reqwest::Error, timeouts: Timeouts) -> ModelError {
    if error.is_timeout() {
        if error.is_connect() {
            ModelError::Timeout(timeouts.connect)
        } else {
            ModelError::Timeout(timeouts.read)
        }
    } else {
        ModelError::Connection(error_chain(error))
    }
}

/// An error and its sources, joined: `"error sending request …: client
/// error (Connect): tcp connect error: Connection refused (os error 111)"`.
/// reqwest names the URL (`for url (…)`) with its query whole: a key
/// written there (Azure's `api-key=`) is shown as the base URL is, as
/// `<redacted>`.
pub(crate) fn error_chain(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    match error.url() {
        Some(url) => text.replace(url.as_str(), &super::endpoint::shown_url(url)),
        None => text,
    }
}

/// MiniMax's status (`base_resp`, in its answers and chunks: `status_code`
/// 0 when the call went through) as an error object, read as the same
/// failure said in an `error`: 1002 (its rate limit) and 1039 (its token
/// rate) as a 429, 1000, 1001 and 1013 (an unknown error, a timeout, an
/// internal error) as a 503 — waited out as those statuses are — and any
/// other code as it is. `None` for 0, or no code.
pub(crate) fn base_resp_error(base_resp: &serde_json::Value) -> Option<serde_json::Value> {
    let code = (base_resp.get("status_code"))
        .and_then(serde_json::Value::as_i64)
        .filter(|code| *code != 0)?;
    let said = (base_resp.get("status_msg"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or("");
    let status = match code {
        1002 | 1039 => 429,
        1000 | 1001 | 1013 => 503,
        other => other,
    };
    let message = format!("{said} (MiniMax status {code})");
    Some(serde_json::json!({"error": {"code": status, "message": message.trim_start()}}))
}

/// A JSON answer that is a failure (`{"error": …}`, MiniMax's `base_resp`
/// with a code), as some services answer with HTTP 200: read as the same
/// failure inside the stream is.
pub(crate) fn says_failure(text: &str) -> bool {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return false;
    };
    value.get("error").is_some_and(|e| !e.is_null())
        || value.get("base_resp").and_then(base_resp_error).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_messages_are_found_in_the_usual_places() {
        assert_eq!(
            service_message(r#"{"error":{"message":"bad key","type":"auth"}}"#),
            "bad key"
        );
        assert_eq!(
            service_message(r#"{"error":"model 'x' not found"}"#),
            "model 'x' not found"
        );
        assert_eq!(service_message(r#"{"message":"nope"}"#), "nope");
        // FastAPI servers (llama-cpp-python) say it in `detail`: the raw
        // JSON was shown.
        assert_eq!(
            service_message(r#"{"detail":"Invalid API key"}"#),
            "Invalid API key"
        );
        assert_eq!(
            service_message(
                r#"{"detail":[{"loc":["body","messages",0,"content"],"msg":"field required","type":"missing"},{"loc":["body","model"],"msg":"not a string"}]}"#
            ),
            "body.messages.0.content: field required; body.model: not a string"
        );
        // Cloudflare's envelope (review: model servers' streams): the raw
        // JSON was the message.
        assert_eq!(
            service_message(
                r#"{"errors":[{"message":"AiError: Capacity temporarily exceeded","code":3040}],"success":false,"result":null,"messages":[]}"#
            ),
            "AiError: Capacity temporarily exceeded"
        );
        // Its AI Gateway's own, under `error` (review: gateways).
        assert_eq!(
            service_message(
                r#"{"success":false,"result":[],"messages":[],"error":[{"code":2009,"message":"Unauthorized"}],"name":"AiGatewayError"}"#
            ),
            "Unauthorized"
        );
        assert_eq!(service_message("  plain text\n"), "plain text");
        assert_eq!(service_message(""), "(no message)");
        let long = "é".repeat(600);
        assert_eq!(
            service_message(&long).chars().count(),
            MAX_MESSAGE_CHARS + 1
        );
    }

    #[test]
    fn statuses_map_to_model_errors() {
        assert!(matches!(
            status_error(401, "m", "u", "x".into()),
            ModelError::Unauthorized { status: 401, .. }
        ));
        assert!(matches!(
            status_error(403, "m", "u", "x".into()),
            ModelError::Unauthorized { status: 403, .. }
        ));
        assert_eq!(
            status_error(404, "m", "u", "x".into()),
            ModelError::ModelNotFound {
                model: "m".into(),
                url: "u".into(),
                message: "x".into()
            }
        );
        assert!(matches!(
            status_error(503, "m", "u", "x".into()),
            ModelError::Server { status: 503, .. }
        ));
        assert!(matches!(
            status_error(400, "m", "u", "x".into()),
            ModelError::Server { status: 400, .. }
        ));
    }

    /// Foreign server (review: model servers' streams): OpenRouter wraps a
    /// provider's failure as "Provider returned error", its words in
    /// `metadata.raw` (often JSON of its own): a model read only that the
    /// provider failed. And its 403 for input its moderation flagged read
    /// as refused credentials, sending a host to its keys.
    #[test]
    fn a_gateways_wrapped_error_says_the_providers_words() {
        let body = r#"{"error":{"code":400,"message":"Provider returned error","metadata":{"raw":"{\"error\":{\"message\":\"tool_use ids must be unique\"}}","provider_name":"Anthropic"}}}"#;
        assert_eq!(
            service_message(body),
            "Provider returned error: tool_use ids must be unique"
        );
        let text = r#"{"error":{"message":"Provider returned error","metadata":{"raw":"upstream timed out"}}}"#;
        assert_eq!(
            service_message(text),
            "Provider returned error: upstream timed out"
        );
        let flagged = "Input flagged by moderation (violence)".to_owned();
        assert!(matches!(
            status_error(403, "m", "u", flagged),
            ModelError::Server { status: 403, .. }
        ));
    }

    /// Gemini's list-wrapped error (review of this session's tests: only
    /// its message was read through the list): its out-of-quota and its
    /// `retryDelay` are read through it too; a delay that is no duration
    /// is none.
    #[test]
    fn a_list_wrapped_error_is_read_whole() {
        let quota = r#"[{"error":{"code":"insufficient_quota","message":"out"}}]"#;
        assert!(out_of_quota(quota));
        let delay = |d: &str| {
            retry_delay(&format!(
                r#"[{{"error":{{"details":[{{"retryDelay":"{d}"}}]}}}}]"#
            ))
        };
        assert_eq!(delay("2s"), Some(Duration::from_secs(2)));
        assert_eq!(delay("0.5s"), Some(Duration::from_millis(500)));
        assert_eq!(delay("1e300s"), Some(Duration::from_secs(86_400)));
        assert_eq!(delay("-1s"), None);
        assert_eq!(delay("soon"), None);
        let same = r#"{"error":{"message":"x","metadata":{"raw":"x"}}}"#;
        assert_eq!(service_message(same), "x", "said once");
    }
}
