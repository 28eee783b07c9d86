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
}

impl Assembler {
    /// Feeds one server-sent event.
    pub(crate) fn on_event(&mut self, event: &str, data: &str) -> Result<Step, ModelError> {
        let data = data.trim();
        if event == "error" {
            return Err(mid_stream_error(
                &serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.to_owned())),
            ));
        }
        if data == "[DONE]" {
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
                        out.push(ModelChunk::Text(text));
                    }
                }
                for fragment in delta.tool_calls.unwrap_or_default() {
                    self.merge(fragment);
                }
            }
            if choice.finish_reason.is_some() {
                self.finished = true;
                out.extend(self.drain_calls()?);
            }
        }
        Ok(Step::Continue(out))
    }

    /// The byte stream ended without `[DONE]`: fine if the answer had
    /// finished (some servers stop there), a broken connection otherwise.
    pub(crate) fn on_end(&mut self) -> Result<Vec<ModelChunk>, ModelError> {
        if self.finished {
            self.finish()
        } else {
            Err(ModelError::Connection(
                "the connection closed before the model finished its answer".to_owned(),
            ))
        }
    }

    /// Everything still held: assembled tool calls, then usage.
    fn finish(&mut self) -> Result<Vec<ModelChunk>, ModelError> {
        self.finished = true;
        let mut out = self.drain_calls()?;
        out.extend(self.usage.take().map(ModelChunk::Usage));
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
        match function.arguments {
            None | Some(Value::Null) => {}
            Some(Value::String(piece)) => call.arguments.push_str(&piece),
            Some(other) => call.arguments.push_str(&other.to_string()),
        }
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

/// An error the service reported inside the stream.
fn mid_stream_error(error: &Value) -> ModelError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| error.as_str().map(str::to_owned))
        .unwrap_or_else(|| error.to_string());
    ModelError::Other(format!(
        "the model service reported an error mid-stream: {}",
        truncate(&message, 500)
    ))
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
            vec![call("a", "f", r#"{"x":1}"#), call("b", "g", r#"{"y":2}"#)]
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
        assert!(matches!(end, Err(ModelError::Other(m)) if m.contains("context too long")));
        let mut asm = Assembler::default();
        let err = asm.on_event("error", "overloaded");
        assert!(matches!(err, Err(ModelError::Other(m)) if m.contains("overloaded")));
    }

    #[test]
    fn ending_before_the_finish_is_a_broken_connection() {
        let mut asm = Assembler::default();
        assert!(matches!(
            asm.on_event("message", r#"{"choices":[{"delta":{"content":"a"}}]}"#),
            Ok(Step::Continue(_))
        ));
        assert!(matches!(asm.on_end(), Err(ModelError::Connection(_))));
        let mut asm = Assembler::default();
        assert!(
            asm.on_event(
                "message",
                r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#
            )
            .is_ok()
        );
        assert_eq!(asm.on_end(), Ok(Vec::new()));
    }
}
