//! Turning stream events into [`ModelChunk`]s: text deltas pass straight
//! through; tool-call fragments are assembled per `index` and yielded whole
//! at the answer's end; usage is kept and yielded once at the end.
//!
//! This part knows nothing of HTTP: it is fed the `event` name and `data`
//! of each server-sent event.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;
use subagents_messages::{ModelChunk, ToolCall, ToolUseId, Usage};

use super::error::truncate;
use super::wire::{ChunkWire, ToolCallDeltaWire, UsageWire};
use crate::model::ModelError;

/// What to do after an event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Yield these chunks and read on.
    Continue(Vec<ModelChunk>),
    /// Yield these chunks and end the stream (`[DONE]`).
    Done(Vec<ModelChunk>),
    /// `[DONE]` before any output or finish: the server was reached and
    /// failed (llama-cpp-python ends an interrupted completion this way:
    /// a role delta, then `[DONE]`).
    Empty,
    /// `[DONE]` after some of the answer but before its finish: the answer
    /// was cut (llama-cpp-python ends a completion interrupted mid-answer
    /// this way), as if the connection had closed there.
    Cut,
}

/// Where a tool call is assembled: the server's `index`, and a
/// generation under it (0 unless the server reused the index for another
/// call), so the calls drain in the order the server started them.
type Slot = (u32, u32);

/// A tool call being assembled from fragments.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
    /// Where its arguments' JSON stands, read as they grow.
    shape: fragment::Shape,
    /// The provider's own data on it, as first sent (its JSON).
    extra_content: Option<Box<str>>,
}

/// What a call holds beyond its text, counted as output the moment it is
/// held: one token's worth (four characters) for the call itself.
const CALL_CHARS: usize = 4;

/// Assembles one streamed answer.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    calls: BTreeMap<Slot, PartialCall>,
    /// Where each id's call is, for a server that sends no `index` (the
    /// first slot an id was given). A scan of `calls` for each fragment
    /// was N² steps inside one event, no await between: 400,000 calls in
    /// one event held a worker for minutes, past a stop and the wall
    /// clock. SipHash, not Fx: the ids are the server's.
    by_id: HashMap<String, Slot>,
    /// Lookups of `by_id` made (a test reads it: one per fragment).
    #[cfg(test)]
    id_lookups: usize,
    last_slot: Option<Slot>,
    finished: bool,
    /// The service's error said it is overloaded for now ([`transient`]).
    transient: bool,
    usage: Option<Usage>,
    /// Characters of the request, and of the answer so far: the usage
    /// estimate for a server that reports none.
    prompt_chars: usize,
    answer_chars: usize,
    /// Characters of hidden output (reasoning, arguments) not said yet as
    /// [`ModelChunk::Hidden`].
    hidden: usize,
    /// The names of the tools the request offered: a call's name streamed
    /// in pieces (`search`, then `_files`) is told from a second call by
    /// them.
    offered: Vec<String>,
}

/// Hidden output is said in steps of this many characters (≈ 256 tokens):
/// the budget sees a model writing where nothing is shown.
const HIDDEN_STEP: usize = 1024;

/// The `finish_reason`s that say the answer was cut short rather than
/// finished: the output-token limit (`length`, or `max_tokens` on some
/// servers), the content filter (OpenAI, Azure) and vLLM's repetition
/// detector (`repetition`), and Mistral's `model_length` (the model's
/// context window); as gateways pass the provider's own through (read in
/// any case): Gemini's `MAX_TOKENS`, `SAFETY`, `RECITATION`,
/// `PROHIBITED_CONTENT`, `BLOCKLIST`, `SPII`, Anthropic's `refusal` and
/// `model_context_window_exceeded`, Bedrock's `guardrail_intervened` and
/// `content_filtered`, Gemini's `LANGUAGE` (a block, as `SAFETY`) and its
/// blocks of an image answer (`IMAGE_SAFETY`, …, `NO_IMAGE`).
/// [`FAILED_REASONS`] say it failed. Any other reason (`stop`,
/// `tool_calls`, TGI's `eos_token`, …) is a finished answer.
const CUT_REASONS: [&str; 20] = [
    "length",
    "max_tokens",
    "content_filter",
    "repetition",
    "model_length",
    "safety",
    "recitation",
    "prohibited_content",
    "blocklist",
    "spii",
    "refusal",
    "model_context_window_exceeded",
    "guardrail_intervened",
    "content_filtered",
    "language",
    // Gemini's blocks of an image answer.
    "image_safety",
    "image_prohibited_content",
    "image_recitation",
    "image_other",
    "no_image",
];

/// The `finish_reason`s that say the service gave up on the answer: vLLM
/// ends a request it aborted (a pause for new weights, a shutdown) with
/// `abort` after the text so far, and a failed one with `error`; DeepSeek
/// one it interrupted for want of resources with
/// `insufficient_system_resource`; Gemini (through a gateway) one whose
/// call was no call with `MALFORMED_FUNCTION_CALL` or
/// `UNEXPECTED_TOOL_CALL` (or too many, `TOO_MANY_TOOL_CALLS`; or a
/// thought signature missing from the request, `MISSING_THOUGHT_SIGNATURE`),
/// Bedrock with `malformed_model_output` or `malformed_tool_use`. The half
/// answer is not a result.
const FAILED_REASONS: [&str; 9] = [
    "abort",
    "error",
    "insufficient_system_resource",
    "malformed_function_call",
    "unexpected_tool_call",
    "too_many_tool_calls",
    "missing_thought_signature",
    "malformed_model_output",
    "malformed_tool_use",
];

/// About four characters a token (OpenAI's rule of thumb for English):
/// rough, but it keeps a token budget meaningful on every server.
fn estimate_tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(4)
}

impl Assembler {
    /// An assembler for the answer to a request of `prompt_chars`
    /// characters (its JSON body).
    pub(crate) fn new(prompt_chars: usize) -> Self {
        Self {
            prompt_chars,
            ..Self::default()
        }
    }

    /// The same, for a request offering the tools `offered`.
    pub(crate) fn offering(mut self, offered: Vec<String>) -> Self {
        self.offered = offered;
        self
    }

    /// Feeds one server-sent event.
    pub(crate) fn on_event(&mut self, event: &str, data: &str) -> Result<Step, ModelError> {
        let data = data.trim();
        // A keep-alive under a name of its own (sse-starlette before 1.4,
        // gateways in front of Anthropic): the server speaking, no part of
        // the answer — it failed the call as `Malformed`.
        if event == "ping" {
            return Ok(Step::Continue(Vec::new()));
        }
        if event == "error" {
            return Err(self.failed(
                &serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.to_owned())),
            ));
        }
        if data == "[DONE]" {
            if self.said_nothing() {
                return Ok(Step::Empty);
            }
            if !self.finished {
                return Ok(Step::Cut);
            }
            return self.finish().map(Step::Done);
        }
        if data.is_empty() {
            return Ok(Step::Continue(Vec::new()));
        }
        let chunk: ChunkWire = serde_json::from_str(data).map_err(|e| {
            ModelError::Malformed(format!(
                "a stream event is not a chat-completion chunk ({e}): {}",
                truncate(data, 200)
            ))
        })?;
        let said = (chunk.base_resp.as_ref()).and_then(super::error::base_resp_error);
        if let Some(error) = chunk.error.filter(|e| !e.is_null()).or(said) {
            return Err(self.failed(&error));
        }
        // Anthropic's compatibility endpoint pings between chunks.
        let ping = chunk.kind.as_ref().and_then(Value::as_str) == Some("ping");
        if ping && chunk.choices.is_none() && chunk.usage.is_none() {
            return Ok(Step::Continue(Vec::new()));
        }
        match chunk.object.as_deref() {
            Some("error") => {
                let error = serde_json::from_str(data).unwrap_or(Value::Null);
                return Err(self.failed(&error));
            }
            Some("chat.completion.chunk") => {}
            // Nothing a chunk has: not read as an empty one (its meaning,
            // whatever it was, would be lost without a word).
            _ if chunk.choices.is_none() && chunk.usage.is_none() => {
                return Err(ModelError::Malformed(format!(
                    "a stream event is not a chat-completion chunk (no `choices`, `usage` or `error`): {}",
                    truncate(data, 200)
                )));
            }
            _ => {}
        }
        // A usage that is no count (a negative, a fraction) is not read:
        // the last readable one counts, else the estimate. Nor one that
        // counts nothing (`{}`, or every count 0 — LocalAI's with tools
        // on): no call is sent without a prompt, so it is no reading, and
        // taken as one every call cost 0 and the token budget never held.
        if let Some(usage) = chunk
            .usage
            .as_ref()
            .and_then(UsageWire::read)
            .filter(|u| u.prompt_tokens > 0 || u.completion_tokens > 0)
        {
            self.usage = Some(usage);
        }
        // A count alone after output: the answer ended. TGI sends no finish
        // for a tool call (the token that carries it, after the call's
        // JSON closed, is not sent) — its usage, then `[DONE]`: read as a
        // cut, every call failed. Output after it opens the answer again.
        if chunk.usage.is_some() && chunk.choices.as_ref().is_none_or(Vec::is_empty) {
            self.finished |= !self.said_nothing();
        }
        let mut out = Vec::new();
        let choices = chunk.choices.unwrap_or_default();
        // One choice is the answer's whatever its index (no `n` is sent):
        // Foundry Local numbered its one choice 0, 1, 2, … — every chunk
        // after the first was dropped, and the answer read as cut.
        let one = choices.len() == 1;
        for choice in choices {
            if !one && choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(mut delta) = choice.delta {
                // The functions API's shape (functionary's server before
                // 2024, ChatGLM3's demo) read only where `tool_calls` says
                // nothing: its call was dropped and the answer read as a
                // finished empty one.
                let calls = match delta.tool_calls.take().filter(|c| !c.is_empty()) {
                    Some(calls) => calls,
                    None => (delta.function_call().into_iter())
                        .map(|function| ToolCallDeltaWire {
                            index: Some(0),
                            function: Some(function),
                            ..Default::default()
                        })
                        .collect(),
                };
                if let Some(reasoning) = delta
                    .reasoning_content
                    .as_ref()
                    .or(delta.reasoning.as_ref())
                {
                    let n = reasoning.0;
                    self.answer_chars += n;
                    self.hidden += n;
                }
                let content = delta.content.map(|content| {
                    self.answer_chars += content.thought_chars;
                    self.hidden += content.thought_chars;
                    content.text
                });
                for text in [content, delta.refusal].into_iter().flatten() {
                    if !text.is_empty() {
                        self.answer_chars += text.chars().count();
                        out.push(ModelChunk::Text(text));
                        self.finished = false;
                    }
                }
                // Output after a finish (a relay's after every chunk): the
                // answer goes on, a cut after it is no whole answer.
                for fragment in calls {
                    self.merge(fragment);
                    self.finished = false;
                }
            }
            // A blank reason is no finish: SGLang and some gateways send
            // `""` where others send `null`, on every chunk.
            if let Some(reason) = choice.finish_reason.filter(|r| !r.trim().is_empty()) {
                // In any case: a gateway passing Gemini's own through
                // (`MAX_TOKENS`, `SAFETY`) had a cut answer read as whole.
                let said = reason.trim().to_ascii_lowercase();
                if FAILED_REASONS.contains(&said.as_str()) {
                    return Err(ModelError::MidStream {
                        message: format!(
                            "the service gave up on the answer (`finish_reason: {reason}`)"
                        ),
                    });
                }
                self.finished = true;
                // Cut by the output-token limit or the server's content
                // filter: said before the calls, which may be incomplete
                // and must not run.
                if CUT_REASONS.contains(&said.as_str()) {
                    out.push(ModelChunk::Truncated(reason));
                    // A call cut before its name came can never run:
                    // left out, not a malformed answer (the cut is).
                    self.calls.retain(|_, call| !call.name.is_empty());
                }
                // Calls are drained at the answer's end: here, a relay's
                // finish after each piece made each piece a call.
            }
        }
        if self.hidden >= HIDDEN_STEP {
            out.push(ModelChunk::Hidden(std::mem::take(&mut self.hidden) as u64));
        }
        Ok(Step::Continue(out))
    }

    /// The byte stream ended without `[DONE]`: fine if the answer had
    /// finished (some servers stop there); a server that sent nothing at
    /// all was reached and failed; one cut mid-answer is a broken
    /// connection.
    pub(crate) fn on_end(&mut self, url: &str) -> Result<Vec<ModelChunk>, ModelError> {
        if self.finished {
            self.finish()
        } else if self.said_nothing() {
            Err(ModelError::EmptyAnswer {
                url: url.to_owned(),
            })
        } else {
            Err(ModelError::Connection(format!(
                "the stream from `{url}` closed before the model finished its answer"
            )))
        }
    }

    /// The service's error inside the stream; whether it says the
    /// service is overloaded for now is kept ([`Assembler::retryable`]).
    fn failed(&mut self, error: &Value) -> ModelError {
        self.transient = transient(error);
        mid_stream_error(error)
    }

    /// The service failed the call for now (overloaded, a server error,
    /// a rate limit) before any output: the same request may go again.
    pub(crate) fn retryable(&self) -> bool {
        self.transient && self.said_nothing()
    }

    /// A finish (or a usage alone after output) came and no output since:
    /// the answer is whole.
    pub(crate) fn is_finished(&self) -> bool {
        self.finished
    }

    /// No text, no tool call and no finish so far.
    fn said_nothing(&self) -> bool {
        !self.finished && self.answer_chars == 0 && self.calls.is_empty()
    }

    /// Everything still held: assembled tool calls, then usage.
    fn finish(&mut self) -> Result<Vec<ModelChunk>, ModelError> {
        self.finished = true;
        let mut out = self.drain_calls()?;
        out.push(match self.usage.take() {
            Some(usage) => ModelChunk::Usage(usage),
            None => ModelChunk::UsageEstimate(Usage {
                prompt_tokens: estimate_tokens(self.prompt_chars),
                completion_tokens: estimate_tokens(self.answer_chars),
            }),
        });
        Ok(out)
    }

    /// The assembled calls in `index` order.
    fn drain_calls(&mut self) -> Result<Vec<ModelChunk>, ModelError> {
        self.last_slot = None;
        self.by_id.clear();
        std::mem::take(&mut self.calls)
            .into_iter()
            .map(|((index, _), call)| {
                if call.name.is_empty() {
                    return Err(ModelError::Malformed(format!(
                        "tool call {index} (id `{}`) has no function name",
                        call.id
                    )));
                }
                let id = if call.id.is_empty() {
                    format!("call_{index}")
                } else {
                    call.id
                };
                // None written, or written `null` (older Ollama's nil map).
                let arguments = if matches!(call.arguments.trim(), "" | "null") {
                    "{}".to_owned()
                } else {
                    call.arguments
                };
                Ok(ModelChunk::ToolCall(Box::new(ToolCall {
                    id: ToolUseId::new(id),
                    name: call.name,
                    arguments,
                    extra_content: call.extra_content,
                })))
            })
            .collect()
    }
}

/// An error the service reported inside the stream: its `message`, or
/// its `error`'s (`{"error": {"message": …}}` as an `error` event's data).
/// An error object that says the service cannot take the call for now:
/// an overload (Anthropic's `overloaded_error`), a server error (OpenAI's
/// `server_error`, Anthropic's `api_error`), a rate limit — by its HTTP
/// status where it says one (429, [`super::retry::UNAVAILABLE`], as before the
/// stream), else by its type or code.
fn transient(error: &Value) -> bool {
    let inner = error
        .get("error")
        .filter(|e| e.is_object())
        .unwrap_or(error);
    let said = |key: &str| inner.get(key).and_then(Value::as_str).unwrap_or_default();
    // A number, or a number written as a string (LiteLLM's proxy says
    // `"code": "429"`: its status as a string).
    let number = |v: &Value| {
        v.as_u64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
    };
    let status = ["code", "status", "http_status_code"]
        .iter()
        .find_map(|key| inner.get(*key).and_then(number));
    // TGI says its overload (HTTP 429 before the stream) inside it with
    // `http_status_code` 422: "Model is overloaded".
    let message = said("message");
    if message.eq_ignore_ascii_case("model is overloaded") {
        return true;
    }
    // A status, where one is said, decides: as a status before the
    // stream is retried (llama-server's `server_error` for an answer that
    // does not parse as its tool-call format is a 500, and would fail
    // again).
    match status {
        Some(status) => {
            u16::try_from(status).is_ok_and(|s| s == 429 || super::retry::UNAVAILABLE.contains(&s))
        }
        None => TRANSIENT.contains(&said("type")) || TRANSIENT.contains(&said("code")),
    }
}

/// The error types and codes of [`transient`].
const TRANSIENT: [&str; 7] = [
    "overloaded_error",
    "overloaded",
    "server_error",
    "api_error",
    "rate_limit_error",
    "rate_limit_exceeded",
    "service_unavailable",
];

/// The service's error inside the stream, read as an error body is (its
/// message, a gateway's provider words in `metadata.raw`, a generation
/// that failed): only `message` was read, and OpenRouter's "Provider
/// returned error" came without the provider's words, Groq's pointed at a
/// `failed_generation` the model never got.
fn mid_stream_error(error: &Value) -> ModelError {
    let body = match error.get("error") {
        Some(_) => error.clone(),
        None => serde_json::json!({ "error": error }),
    };
    ModelError::MidStream {
        message: super::error::service_message(&body.to_string()),
    }
}

mod fragment;
#[cfg(test)]
mod tests;
