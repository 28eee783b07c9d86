//! Turning stream events into [`ModelChunk`]s: text deltas pass straight
//! through; tool-call fragments are assembled per `index` and yielded whole
//! when the answer finishes; usage is kept and yielded once at the end.
//!
//! This part knows nothing of HTTP: it is fed the `event` name and `data`
//! of each server-sent event.

use std::collections::BTreeMap;

use serde_json::Value;
use subagents_messages::{ModelChunk, ToolCall, ToolUseId, Usage};

use super::error::truncate;
use super::wire::{ChunkWire, ToolCallDeltaWire};
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
}

/// A tool call being assembled from fragments.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Assembles one streamed answer.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    calls: BTreeMap<u32, PartialCall>,
    last_index: Option<u32>,
    finished: bool,
    usage: Option<Usage>,
    /// Characters of the request, and of the answer so far: the usage
    /// estimate for a server that reports none.
    prompt_chars: usize,
    answer_chars: usize,
}

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

    /// Feeds one server-sent event.
    pub(crate) fn on_event(&mut self, event: &str, data: &str) -> Result<Step, ModelError> {
        let data = data.trim();
        if event == "error" {
            return Err(mid_stream_error(
                &serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.to_owned())),
            ));
        }
        if data == "[DONE]" {
            if self.said_nothing() {
                return Ok(Step::Empty);
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
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            return Err(mid_stream_error(&error));
        }
        match chunk.object.as_deref() {
            Some("error") => {
                let error = serde_json::from_str(data).unwrap_or(Value::Null);
                return Err(mid_stream_error(&error));
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
        if let Some(usage) = chunk.usage {
            self.usage = Some(Usage {
                prompt_tokens: usage.prompt_tokens.unwrap_or(0),
                completion_tokens: usage.completion_tokens.unwrap_or(0),
            });
        }
        let mut out = Vec::new();
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                for text in [delta.content, delta.refusal].into_iter().flatten() {
                    if !text.is_empty() {
                        self.answer_chars += text.chars().count();
                        out.push(ModelChunk::Text(text));
                    }
                }
                for fragment in delta.tool_calls.unwrap_or_default() {
                    self.merge(fragment);
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finished = true;
                // Cut by the output-token limit: said before the calls,
                // which may be incomplete and must not run.
                if reason == "length" || reason == "max_tokens" {
                    out.push(ModelChunk::Truncated(reason));
                }
                out.extend(self.drain_calls()?);
            }
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

    /// Adds one fragment to the call it belongs to. The call is named by
    /// `index`; a server that omits it is followed by id (a new id starts a
    /// new call) or else the fragment continues the last call.
    fn merge(&mut self, fragment: ToolCallDeltaWire) {
        let id = fragment.id.filter(|id| !id.is_empty());
        let index = fragment.index.unwrap_or_else(|| match &id {
            Some(id) => self
                .calls
                .iter()
                .find(|(_, call)| &call.id == id)
                .map(|(index, _)| *index)
                .unwrap_or_else(|| self.calls.keys().next_back().map_or(0, |last| last + 1)),
            None => self.last_index.unwrap_or(0),
        });
        self.last_index = Some(index);
        let call = self.calls.entry(index).or_default();
        if let Some(id) = id
            && call.id.is_empty()
        {
            call.id = id;
        }
        let Some(function) = fragment.function else {
            return;
        };
        if let Some(name) = function.name.filter(|n| !n.is_empty())
            && call.name.is_empty()
        {
            call.name = name;
        }
        let added = match function.arguments {
            None | Some(Value::Null) => 0,
            Some(Value::String(piece)) => {
                call.arguments.push_str(&piece);
                piece.chars().count()
            }
            Some(other) => {
                let piece = other.to_string();
                call.arguments.push_str(&piece);
                piece.chars().count()
            }
        };
        self.answer_chars += added;
    }

    /// The assembled calls in `index` order.
    fn drain_calls(&mut self) -> Result<Vec<ModelChunk>, ModelError> {
        self.last_index = None;
        std::mem::take(&mut self.calls)
            .into_iter()
            .map(|(index, call)| {
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
                let arguments = if call.arguments.trim().is_empty() {
                    "{}".to_owned()
                } else {
                    call.arguments
                };
                Ok(ModelChunk::ToolCall(ToolCall {
                    id: ToolUseId::new(id),
                    name: call.name,
                    arguments,
                }))
            })
            .collect()
    }
}

/// An error the service reported inside the stream: its `message`, or
/// its `error`'s (`{"error": {"message": …}}` as an `error` event's data).
fn mid_stream_error(error: &Value) -> ModelError {
    let error = error
        .get("error")
        .filter(|inner| inner.get("message").is_some() || inner.is_string())
        .unwrap_or(error);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| error.as_str().map(str::to_owned))
        .unwrap_or_else(|| error.to_string());
    ModelError::MidStream {
        message: truncate(&message, 500),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(events: &[&str]) -> (Vec<ModelChunk>, Result<bool, ModelError>) {
        let mut asm = Assembler::default();
        let mut out = Vec::new();
        for data in events {
            match asm.on_event("message", data) {
                Ok(Step::Continue(chunks)) => out.extend(chunks),
                Ok(Step::Done(chunks)) => {
                    out.extend(chunks);
                    return (out, Ok(true));
                }
                Ok(Step::Empty) => {
                    return (out, Err(ModelError::EmptyAnswer { url: "u".into() }));
                }
                Err(e) => return (out, Err(e)),
            }
        }
        (out, Ok(false))
    }

    fn call(id: &str, name: &str, arguments: &str) -> ModelChunk {
        ModelChunk::ToolCall(ToolCall {
            id: ToolUseId::new(id),
            name: name.into(),
            arguments: arguments.into(),
        })
    }

    #[test]
    fn fragments_without_index_follow_ids_then_the_last_call() {
        let (out, end) = feed(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"g","arguments":{"y":2}}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        assert_eq!(end, Ok(true));
        assert_eq!(
            out,
            vec![
                call("a", "f", r#"{"x":1}"#),
                call("b", "g", r#"{"y":2}"#),
                // No usage reported: 14 characters of arguments, ~4 tokens.
                ModelChunk::UsageEstimate(Usage {
                    prompt_tokens: 0,
                    completion_tokens: 4
                })
            ]
        );
    }

    #[test]
    fn without_usage_the_answer_and_the_request_are_estimated() {
        let mut asm = Assembler::new(400);
        asm.on_event(
            "message",
            r#"{"choices":[{"delta":{"content":"abcdefghi"}}]}"#,
        )
        .unwrap();
        let done = asm
            .on_event(
                "message",
                r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            )
            .and_then(|_| asm.on_event("message", "[DONE]"));
        assert_eq!(
            done,
            Ok(Step::Done(vec![ModelChunk::UsageEstimate(Usage {
                prompt_tokens: 100,
                completion_tokens: 3
            })]))
        );
    }

    #[test]
    fn a_length_finish_says_the_answer_was_cut_before_its_calls() {
        let (out, _) = feed(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{\"ci"}}]},"finish_reason":"length"}]}"#,
        ]);
        assert_eq!(
            out,
            vec![
                ModelChunk::Truncated("length".into()),
                call("a", "f", r#"{"ci"#)
            ]
        );
    }

    #[test]
    fn missing_ids_and_arguments_are_filled_in() {
        let (out, _) = feed(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f"}}]},"finish_reason":"tool_calls"}]}"#,
        ]);
        assert_eq!(out, vec![call("call_0", "f", "{}")]);
    }

    #[test]
    fn a_call_without_a_name_is_malformed() {
        let (_, end) = feed(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"arguments":"{}"}}]}}]}"#,
            "[DONE]",
        ]);
        assert!(matches!(end, Err(ModelError::Malformed(m)) if m.contains("no function name")));
    }

    #[test]
    fn other_choices_and_empty_text_are_ignored() {
        let (out, _) = feed(&[
            r#"{"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"mine","role":"assistant"}}]}"#,
        ]);
        assert_eq!(out, vec![ModelChunk::Text("mine".into())]);
    }

    #[test]
    fn usage_is_kept_until_the_end_and_only_the_last_counts() {
        let (out, end) = feed(&[
            r#"{"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
            r#"{"choices":[{"delta":{"content":"b"}}],"usage":null}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}"#,
            "[DONE]",
        ]);
        assert_eq!(end, Ok(true));
        assert_eq!(
            out,
            vec![
                ModelChunk::Text("a".into()),
                ModelChunk::Text("b".into()),
                ModelChunk::Usage(Usage {
                    prompt_tokens: 1,
                    completion_tokens: 2
                })
            ]
        );
    }

    #[test]
    fn errors_inside_the_stream_are_reported() {
        let (_, end) = feed(&[r#"{"error":{"message":"context too long"}}"#]);
        assert!(
            matches!(end, Err(ModelError::MidStream { message }) if message == "context too long")
        );
        let mut asm = Assembler::default();
        let err = asm.on_event("error", "overloaded");
        assert!(matches!(err, Err(ModelError::MidStream { message }) if message == "overloaded"));
    }

    /// Foreign input: JSON that is no chat-completion chunk was read as an
    /// empty one — `data: {}` then `[DONE]` ended as an empty answer, and
    /// vLLM's in-stream error (`"object": "error"`) lost its message; an
    /// `error` event wrapping its error object reported the raw JSON.
    #[test]
    fn json_that_is_no_chunk_is_malformed_and_errors_keep_their_words() {
        let (_, end) = feed(&["{}", "[DONE]"]);
        assert!(
            matches!(&end, Err(ModelError::Malformed(why)) if why.contains("not a chat-completion chunk")),
            "{end:?}"
        );
        let (_, end) =
            feed(&[r#"{"object":"error","message":"boom","type":"BadRequestError","code":400}"#]);
        assert!(
            matches!(&end, Err(ModelError::MidStream { message }) if message == "boom"),
            "{end:?}"
        );
        let err = Assembler::default().on_event("error", r#"{"error":{"message":"overloaded"}}"#);
        assert!(
            matches!(&err, Err(ModelError::MidStream { message }) if message == "overloaded"),
            "{err:?}"
        );
        // A chunk says so, or has what a chunk has: read as before.
        let (_, end) = feed(&[
            r#"{"object":"chat.completion.chunk","id":"x"}"#,
            r#"{"choices":[{"delta":{"content":"hi"}}]}"#,
            "[DONE]",
        ]);
        assert!(matches!(end, Ok(true)), "{end:?}");
        let (_, end) = feed(&[
            r#"{"choices":[{"delta":{"content":"hi"}}]}"#,
            r#"{"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
            "[DONE]",
        ]);
        assert!(matches!(end, Ok(true)), "{end:?}");
    }

    #[test]
    fn ending_before_the_finish_is_a_broken_connection() {
        let mut asm = Assembler::default();
        assert!(matches!(
            asm.on_event("message", r#"{"choices":[{"delta":{"content":"a"}}]}"#),
            Ok(Step::Continue(_))
        ));
        assert!(
            matches!(asm.on_end("u"), Err(ModelError::Connection(m)) if m.contains("`u` closed before"))
        );
        // Nothing at all: reached, and failed.
        assert_eq!(
            Assembler::default().on_end("u"),
            Err(ModelError::EmptyAnswer { url: "u".into() })
        );
        let mut asm = Assembler::default();
        assert!(
            asm.on_event(
                "message",
                r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#
            )
            .is_ok()
        );
        assert_eq!(
            asm.on_end("u"),
            Ok(vec![ModelChunk::UsageEstimate(Usage::default())])
        );
    }
}
