//! The assembler's unit tests: events in, chunks out.

use super::*;

fn feed(events: &[&str]) -> (Vec<ModelChunk>, Result<bool, ModelError>) {
    feed_offering(&[], events)
}

/// [`feed`] for a request that offered the tools `offered`.
fn feed_offering(offered: &[&str], events: &[&str]) -> (Vec<ModelChunk>, Result<bool, ModelError>) {
    let offered = offered.iter().map(|t| (*t).to_owned()).collect();
    let mut asm = Assembler::default().offering(offered);
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
            Ok(Step::Cut) => {
                return (out, Err(ModelError::Connection("cut".into())));
            }
            Err(e) => return (out, Err(e)),
        }
    }
    // The body's end without `[DONE]`: a finished answer's calls (its
    // usage left out: the tests that read it send `[DONE]`).
    if asm.is_finished() {
        match asm.drain_calls() {
            Ok(calls) => out.extend(calls),
            Err(e) => return (out, Err(e)),
        }
    }
    (out, Ok(false))
}

fn call(id: &str, name: &str, arguments: &str) -> ModelChunk {
    ModelChunk::ToolCall(Box::new(ToolCall {
        id: ToolUseId::new(id),
        name: name.into(),
        arguments: arguments.into(),
        extra_content: None,
    }))
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
            // No usage reported: 14 characters of arguments, 2 of names,
            // 2 of ids and 4 for each call held, ~7 tokens.
            ModelChunk::UsageEstimate(Usage {
                prompt_tokens: 0,
                completion_tokens: 7
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

/// Foreign (a server): a call cut by the length finish before its name
/// came failed the whole answer as malformed (`has no function name`),
/// its text and the cut lost; the cut says why, and the nameless call,
/// which could never run, is left out.
#[test]
fn a_length_finish_before_a_calls_name_is_a_cut_not_a_malformed_answer() {
    let (out, end) = feed(&[
        r#"{"choices":[{"delta":{"content":"hi","tool_calls":[{"index":0,"id":"a"}]},"finish_reason":"length"}]}"#,
    ]);
    assert!(end.is_ok(), "{end:?}");
    assert_eq!(
        out,
        vec![
            ModelChunk::Text("hi".into()),
            ModelChunk::Truncated("length".into())
        ]
    );
}

/// Foreign (a server): a call at the largest index, then one with no
/// index and a new id — "after the last" overflowed `u32` (a panic in a
/// debug build, the calls out of order in a release one).
#[test]
fn a_call_after_one_at_the_largest_index_comes_after_it() {
    let (out, end) = feed(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":4294967295,"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
    ]);
    assert!(end.is_ok(), "{end:?}");
    assert_eq!(out[..2], [call("a", "f", "{}"), call("b", "g", "{}")]);
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
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
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
        r#"{"choices":[{"delta":{"content":"b"},"finish_reason":"stop"}],"usage":null}"#,
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
    assert!(matches!(end, Err(ModelError::MidStream { message }) if message == "context too long"));
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
        r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    assert!(matches!(end, Ok(true)), "{end:?}");
    let (_, end) = feed(&[
        r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}"#,
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

/// Foreign input: Ollama gives every parallel tool call `index: 0`, each
/// whole in one fragment (ollama/ollama#15457). They were merged into one
/// call with the first id and name and both arguments run together.
#[test]
fn calls_that_share_an_index_under_new_ids_are_separate_calls() {
    let first = r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"w","arguments":"{\"p\":1}"}}]}}]}"#;
    let second = r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"w","arguments":"{\"p\":2}"}}]}}]}"#;
    let both = r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"w","arguments":"{\"p\":1}"}},{"index":0,"id":"b","function":{"name":"v","arguments":"{}"}}]}}]}"#;
    let finish = r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#;
    let (out, end) = feed(&[first, second, finish, "[DONE]"]);
    assert_eq!(end, Ok(true));
    assert_eq!(
        &out[..2],
        &[call("a", "w", r#"{"p":1}"#), call("b", "w", r#"{"p":2}"#)]
    );
    let (out, _) = feed(&[both, finish]);
    assert_eq!(
        out,
        vec![call("a", "w", r#"{"p":1}"#), call("b", "v", "{}")]
    );
    // A later fragment with no id continues the newest call under that
    // index; one repeating its id (llama-cpp-python) continues its own.
    let (out, _) = feed(&[
        first,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"w","arguments":"{\"p\""}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":":2}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"arguments":""}}]}}]}"#,
        finish,
    ]);
    assert_eq!(
        out,
        vec![call("a", "w", r#"{"p":1}"#), call("b", "w", r#"{"p":2}"#)]
    );
}

/// Foreign input: SGLang and some gateways send `"finish_reason": ""` on
/// every chunk. It read as the end of the answer: a tool call was drained
/// at its first fragment (with `{}` arguments) and its next fragment
/// failed for want of a name.
#[test]
fn a_blank_finish_reason_is_no_finish() {
    let (out, end) = feed(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":""}}]},"finish_reason":""}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\":1}"}}]},"finish_reason":" "}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(end, Ok(true));
    assert_eq!(out[0], call("a", "f", r#"{"x":1}"#));
    assert_eq!(out.len(), 2, "{out:?}");
    // Text only: a blank reason is no finish, so a cut after it is a cut.
    let mut asm = Assembler::default();
    asm.on_event(
        "message",
        r#"{"choices":[{"delta":{"content":"a"},"finish_reason":""}]}"#,
    )
    .unwrap();
    assert!(matches!(asm.on_end("u"), Err(ModelError::Connection(_))));
}

/// Foreign input: llama-cpp-python interrupts a completion when another
/// request waits and ends it with `[DONE]`, finish or not. After part of
/// the answer that read as a whole one: the half-written text completed
/// the turn, a half-built call ran with cut arguments.
#[test]
fn done_after_part_of_the_answer_without_a_finish_is_a_cut() {
    let (out, end) = feed(&[r#"{"choices":[{"delta":{"content":"partial"}}]}"#, "[DONE]"]);
    assert_eq!(out, vec![ModelChunk::Text("partial".into())]);
    assert_eq!(end, Err(ModelError::Connection("cut".into())));
    let (out, end) = feed(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x"}}]}}]}"#,
        "[DONE]",
    ]);
    assert_eq!(out, vec![], "no call comes out of a cut answer");
    assert_eq!(end, Err(ModelError::Connection("cut".into())));
}

/// Foreign input: a usage count that is no token count failed the chunk
/// ("not a chat-completion chunk"), so a complete answer failed. It is
/// not read: the last readable usage counts, else the estimate.
#[test]
fn an_unreadable_usage_leaves_the_answer_whole() {
    let (out, end) = feed(&[
        r#"{"choices":[{"delta":{"content":"abcd"},"finish_reason":"stop"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":-1,"completion_tokens":3}}"#,
        "[DONE]",
    ]);
    assert_eq!(end, Ok(true));
    assert_eq!(
        out,
        vec![
            ModelChunk::Text("abcd".into()),
            ModelChunk::UsageEstimate(Usage {
                prompt_tokens: 0,
                completion_tokens: 1
            })
        ]
    );
    earlier_reading_stands(r#"{"prompt_tokens":5,"completion_tokens":1e20}"#);
}

/// A reading of 5 + 1 tokens, then `later` as the last usage: the first
/// reading is the call's.
fn earlier_reading_stands(later: &str) {
    let (out, _) = feed(&[
        r#"{"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1}}"#,
        &format!(r#"{{"choices":[],"usage":{later}}}"#),
        "[DONE]",
    ]);
    assert_eq!(
        out.last(),
        Some(&ModelChunk::Usage(Usage {
            prompt_tokens: 5,
            completion_tokens: 1
        })),
        "{later}"
    );
}

/// Foreign input: a thinking model streams its reasoning first
/// (`reasoning_content`, or `reasoning`), which is not passed on. A stream
/// cut during it read as "the server was reached and sent nothing"
/// (`EmptyAnswer`), and its usage estimate left the reasoning out. It is
/// output: a cut there is a cut, and it counts.
#[test]
fn reasoning_is_output_though_not_passed_on() {
    let mut asm = Assembler::default();
    let step = asm.on_event(
        "message",
        r#"{"choices":[{"delta":{"reasoning_content":"Let me think."}}]}"#,
    );
    assert_eq!(step, Ok(Step::Continue(Vec::new())));
    assert!(matches!(asm.on_end("u"), Err(ModelError::Connection(_))));
    let (out, end) = feed(&[
        r#"{"choices":[{"delta":{"reasoning":"abcdefgh"}}]}"#,
        r#"{"choices":[{"delta":{"content":"ok"},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(end, Ok(true));
    assert_eq!(
        out,
        vec![
            ModelChunk::Text("ok".into()),
            ModelChunk::UsageEstimate(Usage {
                prompt_tokens: 0,
                completion_tokens: 3
            })
        ]
    );
}

/// Foreign (a proxy, AxonHub and others): a delta with the reasoning under
/// both names (`reasoning_content` and `reasoning`, the same text, or
/// `null`s beside the answer) was a duplicate field to serde's alias, so
/// the chunk was `Malformed` and every call that reasoned failed. Both
/// keys are read; the text counts once.
#[test]
fn reasoning_sent_under_both_names_is_read_once() {
    let (out, end) = feed(&[
        r#"{"choices":[{"delta":{"reasoning_content":"abcdefgh","reasoning":"abcdefgh"}}]}"#,
        r#"{"choices":[{"delta":{"content":"ok","reasoning":null,"reasoning_content":null},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(end, Ok(true));
    assert_eq!(
        out,
        vec![
            ModelChunk::Text("ok".into()),
            ModelChunk::UsageEstimate(Usage {
                prompt_tokens: 0,
                completion_tokens: 3
            })
        ]
    );
}

/// Foreign input (Mistral's Magistral models): a delta's `content` came
/// as a list of parts — a thinking part, then text — and every chunk was
/// `Malformed` ("invalid type: sequence, expected a string"): no answer
/// got through. Text parts are the answer; thinking parts count as
/// reasoning (output, not passed on).
#[test]
fn content_as_a_list_of_parts_is_read() {
    let (out, end) = feed(&[
        r#"{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"Let me"}]}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"Hi"}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"delta":{"content":" there"},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(end, Ok(true), "{out:?}");
    let text: Vec<&ModelChunk> = out
        .iter()
        .filter(|c| matches!(c, ModelChunk::Text(_)))
        .collect();
    assert_eq!(
        text,
        [
            &ModelChunk::Text("Hi".into()),
            &ModelChunk::Text(" there".into())
        ]
    );
}

mod finish_reasons;
mod fragments;
