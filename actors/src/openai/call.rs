//! One model call over HTTP: send (retrying 429s), check the status, then
//! read the event stream. Everything runs inside the returned stream as it
//! is polled — nothing is spawned — so dropping the stream drops the
//! request or the response body and aborts the call.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::{Stream, StreamExt, stream};
use reqwest::header::{ACCEPT, CONTENT_TYPE, RETRY_AFTER};
use serde_json::Value;
use subagents_messages::{ModelChunk, ModelRequest};

use super::amend::{amend, refused_field};
use super::error::{Timeouts, out_of_quota, status_error, transport_error, truncate};
use super::redact::service_text;
use super::retry::{Attempt, RetryPolicy, parse_retry_after, parse_retry_after_ms, with_retries};
use super::stream::{Assembler, Step};
use super::wire::ChatRequest;
use crate::model::{ModelError, ModelStream};

/// What every call of one adapter shares.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) client: reqwest::Client,
    /// `{base_url}/chat/completions`, the base URL's query after it.
    pub(crate) url: reqwest::Url,
    /// `url` as errors show it: no credentials (`endpoint::shown_url`).
    pub(crate) shown: String,
    pub(crate) api_key: Option<String>,
    pub(crate) model: String,
    pub(crate) retry: RetryPolicy,
    pub(crate) timeouts: Timeouts,
    /// The fields this adapter's server refused and how they were
    /// amended (`amend`), in the order learnt: every later call is sent
    /// amended at once (each call paid a refused request first — two
    /// requests a call against a per-request rate limit).
    pub(crate) refused: std::sync::Mutex<Vec<&'static str>>,
    /// What a `Retry-After` date is read against.
    pub(crate) clock: super::retry::DateClock,
}

type Events = Pin<Box<dyn Stream<Item = Result<super::sse::Event, BodyError>> + Send>>;

/// Why the response body gave no more bytes.
#[derive(Debug)]
enum BodyError {
    /// The transport failed.
    Transport(reqwest::Error),
    /// The server sent nothing for the read timeout.
    Silent,
    /// A line of the stream went past `lines::MAX_LINE` bytes.
    LineTooLong,
}

enum Phase {
    /// Not sent yet (or to be sent again).
    Start,
    /// Reading the answer.
    Reading(Events, Assembler),
    /// Over.
    Done,
}

struct Call {
    settings: Arc<Settings>,
    /// The request's body.
    body: Value,
    phase: Phase,
    out: VecDeque<Result<ModelChunk, ModelError>>,
    /// Times the request went again after the service failed it inside
    /// its stream, before the answer began.
    retried: u32,
}

/// Starts a call; it runs as the stream is polled.
pub(crate) fn start(settings: Arc<Settings>, request: &ModelRequest) -> ModelStream {
    let mut out = VecDeque::new();
    let (body, phase) = match serde_json::to_value(ChatRequest::new(&settings.model, request)) {
        Ok(body) => (body, Phase::Start),
        Err(e) => {
            out.push_back(Err(ModelError::Other(format!(
                "the request could not be encoded as JSON: {e}"
            ))));
            (Value::Null, Phase::Done)
        }
    };
    let call = Call {
        settings,
        body,
        phase,
        out,
        retried: 0,
    };
    Box::pin(stream::unfold(call, Call::next))
}

/// The names of the tools a request's body offers.
fn offered(body: &Value) -> Vec<String> {
    body.get("tools")
        .and_then(|tools| tools.as_array())
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| tool.pointer("/function/name")?.as_str())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

impl Call {
    async fn next(mut self) -> Option<(Result<ModelChunk, ModelError>, Self)> {
        loop {
            if let Some(item) = self.out.pop_front() {
                // Every error leaves without the key (the service's own
                // words mid-stream too: they reached the parent model).
                let key = self.settings.api_key.as_deref();
                let item = item.map_err(|e| super::redact::scrub(e, key));
                return Some((item, self));
            }
            match std::mem::replace(&mut self.phase, Phase::Done) {
                Phase::Done => return None,
                Phase::Start => match open(&self.settings, &self.body).await {
                    Ok(events) => {
                        let prompt_chars = self.body.to_string().chars().count();
                        let assembler = Assembler::new(prompt_chars).offering(offered(&self.body));
                        self.phase = Phase::Reading(events, assembler);
                    }
                    Err(e) => self.out.push_back(Err(e)),
                },
                Phase::Reading(mut events, mut assembler) => {
                    // The server's silence is timed where the bytes arrive
                    // (`lines`): a keep-alive comment yields no event here.
                    let timeouts = self.settings.timeouts;
                    match events.next().await {
                        None => match assembler.on_end(&self.settings.shown) {
                            Ok(chunks) => self.out.extend(chunks.into_iter().map(Ok)),
                            Err(e) => self.out.push_back(Err(e)),
                        },
                        // The answer was whole (its finish came): a
                        // connection broken or gone quiet after it, before
                        // `[DONE]`, ends it as the body's end does — it
                        // failed the turn, its tool calls never run.
                        Some(Err(e)) if assembler.is_finished() => {
                            let e = event_error(e, timeouts);
                            tracing::debug!(error = %e, "the stream broke after the answer finished");
                            match assembler.on_end(&self.settings.shown) {
                                Ok(chunks) => self.out.extend(chunks.into_iter().map(Ok)),
                                Err(e) => self.out.push_back(Err(e)),
                            }
                        }
                        Some(Err(e)) => self.out.push_back(Err(event_error(e, timeouts))),
                        Some(Ok(event)) => {
                            match assembler.on_event(&event.event, &event.data) {
                                Ok(Step::Continue(chunks)) => {
                                    self.out.extend(chunks.into_iter().map(Ok));
                                    self.phase = Phase::Reading(events, assembler);
                                }
                                Ok(Step::Done(chunks)) => {
                                    self.out.extend(chunks.into_iter().map(Ok));
                                }
                                Ok(Step::Empty) => {
                                    self.out.push_back(Err(ModelError::EmptyAnswer {
                                        url: self.settings.shown.clone(),
                                    }))
                                }
                                Ok(Step::Cut) => {
                                    self.out.push_back(Err(ModelError::Connection(format!(
                                        "the stream from `{}` ended (`[DONE]`) before the model finished its answer",
                                        self.settings.shown
                                    ))))
                                }
                                // Overloaded (a server error, a rate limit)
                                // inside a 200, before the answer began: as
                                // the same status before the stream is.
                                Err(e) if assembler.retryable() => self.again(e).await,
                                Err(e) => self.out.push_back(Err(e)),
                            }
                        }
                    }
                }
            }
        }
    }
}

impl Call {
    /// The service failed the call inside its stream, transiently, before
    /// the answer began: the request goes again after the backoff a 503
    /// gets, while retries are left (it failed the turn at once, where
    /// the same overload sent as a status was waited out).
    async fn again(&mut self, error: ModelError) {
        let policy = self.settings.retry;
        let wait = super::retry::backoff(policy, self.retried);
        if self.retried >= policy.max_retries || wait > policy.max_wait {
            return self.out.push_back(Err(error));
        }
        self.retried += 1;
        tracing::warn!(retry = self.retried, ?wait, %error, "the model service failed the call before its answer began; retrying");
        tokio::time::sleep(wait).await;
        self.phase = Phase::Start;
    }
}

/// Sends the request (retrying 429s) and opens the event stream.
async fn open(settings: &Settings, body: &Value) -> Result<Events, ModelError> {
    let known: Vec<&'static str> = settings
        .refused
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    // One copy of the body, amended in place, only for a server that
    // refused a field before.
    let mut amended = (!known.is_empty()).then(|| {
        let mut copy = body.clone();
        for field in &known {
            amend(&mut copy, field);
        }
        copy
    });
    // Learnt on this call: remembered once the amended request went
    // through (a refusal read wrongly is not kept for every later call).
    let mut learnt: Vec<&'static str> = Vec::new();
    let response = loop {
        let sent = amended.as_ref().unwrap_or(body);
        match with_retries(settings.retry, || attempt(settings, sent)).await {
            // A 400 (Mistral: 422, a field its schema forbids) that names a
            // field a server does not take, and that has a known answer:
            // sent once more with that field amended, and so from now on.
            Err(ModelError::Server {
                status: status @ (400 | 422),
                message,
            }) => match refused_field(sent, &message) {
                Some(field) => {
                    let mut next = sent.clone();
                    amend(&mut next, field);
                    learnt.push(field);
                    amended = Some(next);
                }
                None => return Err(ModelError::Server { status, message }),
            },
            answered => break answered?,
        }
    };
    if !learnt.is_empty() {
        let mut refused = settings
            .refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for field in learnt {
            if !refused.contains(&field) {
                refused.push(field);
            }
        }
    }
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    // No encoding is asked for (none is decoded here), but a server may
    // send one anyway: read as events, a gzipped body was lines of
    // U+FFFD, an empty answer whose log "says why". Only a coding is
    // refused: `none` (an SSE idiom against a proxy's buffering) and a
    // charset sent there by mistake (`UTF-8`) are no coding.
    if let Some(encoding) = response
        .headers()
        .get(reqwest::header::CONTENT_ENCODING)
        .map(|v| {
            String::from_utf8_lossy(v.as_bytes())
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|e| e.split(',').any(|coding| CODINGS.contains(&coding.trim())))
    {
        return Err(ModelError::Malformed(format!(
            "the service encoded its answer (`content-encoding: {}`), which this client does not decode; \
             turn the server's or the proxy's compression off for this endpoint",
            truncate(&encoding, 40)
        )));
    }
    let mut body = response.bytes_stream();
    // A body is told by what it begins with, not its label: a JSON answer
    // (no streaming) or a web page (a login page a proxy put in the way, a
    // base URL that is not the API's) is said with what it says, not read
    // as an event stream that yields nothing; events under another label
    // are read as events. Labelled as events too: a gateway that sent its
    // stream's headers before the service failed answers `{"error": …}`
    // under `text/event-stream` (read as events, a line of no field: an
    // empty answer, its words lost, its 429 never retried).
    let (taken, head) = super::body::head(&mut body, settings.timeouts.read).await;
    if let super::body::Head::Silent = head {
        return Err(ModelError::Timeout(settings.timeouts.read));
    }
    if let super::body::Head::Not(not_events) = head {
        let text = super::body::read_capped(taken, body, settings.timeouts.read).await;
        // A failure answered with a 200 (MiniMax's rate limit, a
        // proxy's `{"error": …}`): read as the same failure inside the
        // stream — retried when it says the service is overloaded for
        // now — not as an answer that is no stream.
        if super::error::says_failure(text.trim()) {
            let data = text.trim().to_owned();
            let event = super::sse::Event {
                event: String::new(),
                data,
            };
            return Ok(Box::pin(stream::iter([Ok(event)])));
        }
        let said = match text.trim() {
            "" => String::new(),
            text => format!(
                ": {}",
                truncate(&service_text(text, settings.api_key.as_deref()), 200)
            ),
        };
        let label = match content_type.as_str() {
            "" => "no content type".to_owned(),
            label => format!("`{label}`"),
        };
        return Err(ModelError::Malformed(format!(
            "expected an event stream but the service answered with {label} ({}){said}",
            not_events.why()
        )));
    }
    let body = stream::iter(taken)
        .chain(body)
        .map(|r| r.map_err(BodyError::Transport));
    Ok(Box::pin(super::sse::events(
        super::lines::error_lines_as_events(body, settings.timeouts.read, |fault| match fault {
            super::lines::Fault::Silent => BodyError::Silent,
            super::lines::Fault::LineTooLong => BodyError::LineTooLong,
        }),
    )))
}

/// The content codings a body may come in (IANA's registry): one of them
/// in `Content-Encoding` means the body is not the events as written.
const CODINGS: &[&str] = &[
    "gzip",
    "x-gzip",
    "deflate",
    "br",
    "zstd",
    "compress",
    "x-compress",
    "dcb",
    "dcz",
    "exi",
    "pack200-gzip",
    "aes128gcm",
];

/// One attempt: the response if the status is a success, a retry if 429,
/// else the status's error.
async fn attempt(
    settings: &Settings,
    body: &Value,
) -> Result<Attempt<reqwest::Response>, ModelError> {
    let timeouts = settings.timeouts;
    let send = || {
        let mut request = settings
            .client
            .post(settings.url.clone())
            .header(ACCEPT, "text/event-stream")
            .json(body);
        if let Some(key) = &settings.api_key {
            request = request.bearer_auth(key);
        }
        tokio::time::timeout(timeouts.read, request.send())
    };
    // A request that failed with no byte of an answer, on a connection
    // that was made (not refused, not timed out): most often a pooled one
    // the server closed as it went out (llama-server's and uvicorn's 5 s
    // keep-alive, an agent's call after a tool of a few seconds) — sent
    // once more, on a new connection. Nothing was shown or held, so
    // nothing can be doubled; the turn failed on it.
    let mut sent = send().await;
    if let Ok(Err(e)) = &sent
        && !e.is_connect()
        && !e.is_timeout()
    {
        tracing::debug!(error = %super::error::error_chain(e), "no answer on a pooled connection; sent again");
        sent = send().await;
    }
    let response = match sent {
        Err(_) => return Err(ModelError::Timeout(timeouts.read)),
        Ok(Err(e)) => return Err(transport_error(&e, timeouts)),
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    if status.is_success() {
        return Ok(Attempt::Done(response));
    }
    // OpenAI and Azure say it in milliseconds too (`retry-after-ms`), the
    // finer of the two.
    let header = |name| response.headers().get(name).and_then(|v| v.to_str().ok());
    let retry_after = header("retry-after-ms")
        .and_then(parse_retry_after_ms)
        .or_else(|| {
            let now_ms = settings.clock.0.now_ms();
            header(RETRY_AFTER.as_str()).and_then(|v| parse_retry_after(v, now_ms))
        });
    // Not followed (see `build`): where it points is what to fix.
    if status.is_redirection() {
        let to = header(reqwest::header::LOCATION.as_str()).unwrap_or("(no `Location`)");
        return Err(ModelError::Server {
            status: status.as_u16(),
            message: format!(
                "the service redirects to `{}`: use that as the base URL (without `/chat/completions`)",
                truncate(&super::endpoint::shown(to), 200)
            ),
        });
    }
    let text = super::body::read_capped(
        Vec::<reqwest::Result<_>>::new(),
        response.bytes_stream(),
        timeouts.read,
    )
    .await;
    let message = if text.trim().is_empty() {
        status
            .canonical_reason()
            .unwrap_or("(no message)")
            .to_owned()
    } else {
        service_text(&text, settings.api_key.as_deref())
    };
    // Else the wait the body names (Gemini's, which sends no header).
    let retry_after = retry_after.or_else(|| super::error::retry_delay(&text));
    if status.as_u16() == 429 {
        // Out of quota (OpenAI's `insufficient_quota`): no wait brings it
        // back, so it fails at once instead of after every retry.
        if out_of_quota(&text) {
            return Err(ModelError::RateLimited {
                retry_after: None,
                message,
            });
        }
        return Ok(Attempt::RateLimited {
            retry_after,
            message,
        });
    }
    // Unavailable for now: waited out as a rate limit is.
    if super::retry::UNAVAILABLE.contains(&status.as_u16()) {
        return Ok(Attempt::Unavailable {
            status: status.as_u16(),
            retry_after,
            message,
        });
    }
    Err(status_error(
        status.as_u16(),
        &settings.model,
        &settings.shown,
        message,
    ))
}

/// A failure while reading the event stream.
fn event_error(error: BodyError, timeouts: Timeouts) -> ModelError {
    match error {
        BodyError::Silent => ModelError::Timeout(timeouts.read),
        BodyError::LineTooLong => ModelError::Malformed(format!(
            "a line or an event of the event stream went past {} MiB without ending",
            super::lines::MAX_LINE >> 20
        )),
        BodyError::Transport(e) => match transport_error(&e, timeouts) {
            ModelError::Connection(text) => {
                ModelError::Connection(format!("the connection broke mid-stream: {text}"))
            }
            other => other,
        },
    }
}
