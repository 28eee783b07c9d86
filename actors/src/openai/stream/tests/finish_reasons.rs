//! Every `finish_reason` docs/openai.md names as a cut or a failure reads
//! so.

use super::*;

/// The documented reasons, then any the list has that the docs do not
/// name yet (so an entry added later is covered too).
fn documented_and(documented: &[&'static str], list: &[&'static str]) -> Vec<&'static str> {
    let mut all = documented.to_vec();
    all.extend(list.iter().filter(|r| !documented.contains(r)));
    all
}

/// docs/openai.md: `length` (or `max_tokens`, on some servers), the
/// content filter, vLLM's `repetition` and Mistral's `model_length`
/// are a cut answer — `Truncated`, before the calls, so a call in a cut
/// answer never runs. No test sent `max_tokens`, so dropping it from
/// the cut reasons passed: a server naming the cut so had its half
/// answer complete the turn as whole, and a call whose arguments
/// happened to be complete JSON ran.
#[test]
fn every_cut_reason_says_truncated_before_the_calls() {
    let reasons = documented_and(
        &[
            "length",
            "max_tokens",
            "content_filter",
            "repetition",
            "model_length",
            // Passed through by gateways, in the provider's own case.
            "MAX_TOKENS",
            "SAFETY",
            "RECITATION",
            "PROHIBITED_CONTENT",
            "BLOCKLIST",
            "SPII",
            "refusal",
            "model_context_window_exceeded",
            "guardrail_intervened",
            "content_filtered",
            "LANGUAGE",
            "IMAGE_SAFETY",
            "IMAGE_PROHIBITED_CONTENT",
            "IMAGE_RECITATION",
            "IMAGE_OTHER",
            "NO_IMAGE",
        ],
        &CUT_REASONS,
    );
    for reason in reasons {
        let event = format!(
            r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":0,"id":"a","function":{{"name":"f","arguments":"{{}}"}}}}]}},"finish_reason":"{reason}"}}]}}"#
        );
        let (out, end) = feed(&[&event]);
        assert_eq!(end, Ok(false), "{reason}");
        assert_eq!(
            out,
            vec![ModelChunk::Truncated(reason.into()), call("a", "f", "{}")],
            "`{reason}` is a cut, said before the call"
        );
    }
}

/// docs/openai.md: vLLM's `abort` and `error`, and DeepSeek's
/// `insufficient_system_resource`, end the call as `MidStream` — the
/// text before them is half an answer, not a result. No test sent
/// `error`, so dropping it from the failed reasons passed: vLLM's failed
/// request completed the turn with its half answer as the child's
/// result.
#[test]
fn every_failed_reason_ends_the_call_mid_stream() {
    let reasons = documented_and(
        &[
            "abort",
            "error",
            "insufficient_system_resource",
            "MALFORMED_FUNCTION_CALL",
            "UNEXPECTED_TOOL_CALL",
            // Their siblings (diff review, thirty-fourth session): a whole
            // answer, and an empty one completed a child `done` with "".
            "TOO_MANY_TOOL_CALLS",
            "MISSING_THOUGHT_SIGNATURE",
            "malformed_model_output",
            "malformed_tool_use",
        ],
        &FAILED_REASONS,
    );
    for reason in reasons {
        let finish = format!(r#"{{"choices":[{{"delta":{{}},"finish_reason":"{reason}"}}]}}"#);
        let (out, end) = feed(&[r#"{"choices":[{"delta":{"content":"half"}}]}"#, &finish]);
        assert_eq!(out, vec![ModelChunk::Text("half".into())], "{reason}");
        assert!(
            matches!(&end, Err(ModelError::MidStream { message }) if message.contains(&format!("`finish_reason: {reason}`"))),
            "`{reason}` fails the call mid-stream, naming it: {end:?}"
        );
    }
}

/// Foreign input: OpenAI and Azure end an answer their content filter cut
/// with `finish_reason: "content_filter"`. The partial text completed the
/// turn and its calls ran.
#[test]
fn a_content_filter_finish_says_the_answer_was_cut_before_its_calls() {
    let (out, end) = feed(&[
        r#"{"choices":[{"delta":{"content":"Here is","tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"content_filter"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(end, Ok(true));
    assert_eq!(
        &out[..3],
        &[
            ModelChunk::Text("Here is".into()),
            ModelChunk::Truncated("content_filter".into()),
            call("a", "f", "{}"),
        ]
    );
    // A finish a server names its own way is a finish (TGI).
    let (out, _) = feed(&[
        r#"{"choices":[{"delta":{"content":"done"},"finish_reason":"eos_token"}]}"#,
        "[DONE]",
    ]);
    assert!(
        !out.iter().any(|c| matches!(c, ModelChunk::Truncated(_))),
        "{out:?}"
    );
}

/// Foreign server (review: model servers' streams): a relay that sends a
/// finish after every chunk (Open WebUI in front of vLLM) ended a call at
/// its first piece: `bash({})` drained, the next piece a call with no
/// name — every call failed `Malformed`. Calls are drained at the answer's
/// end; output after a finish goes on, and a cut after it is no whole
/// answer.
#[test]
fn a_finish_before_the_answers_end_ends_nothing() {
    let stop = r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#;
    let (out, end) = feed(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"bash","arguments":""}}]}}]}"#,
        stop,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"command\":\"ls\"}"}}]}}]}"#,
        stop,
        "[DONE]",
    ]);
    assert_eq!(end, Ok(true));
    assert_eq!(out[0], call("a", "bash", r#"{"command":"ls"}"#), "{out:?}");
    assert!(
        matches!(out[1..], [ModelChunk::UsageEstimate(_)]),
        "{out:?}"
    );
    // Text, a finish, more text, then the body cut: no whole answer.
    let mut asm = Assembler::default();
    for data in [
        r#"{"choices":[{"delta":{"content":"a"}}]}"#,
        stop,
        r#"{"choices":[{"delta":{"content":"b"}}]}"#,
    ] {
        assert!(matches!(
            asm.on_event("message", data),
            Ok(Step::Continue(_))
        ));
    }
    assert!(!asm.is_finished());
    assert!(matches!(asm.on_end("u"), Err(ModelError::Connection(_))));
    // A call's piece after a finish reopens it too: cut there, no call runs.
    let mut asm = Assembler::default();
    for data in [
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"bash","arguments":"{"}}]}}]}"#,
        stop,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"command\""}}]}}]}"#,
    ] {
        assert!(matches!(
            asm.on_event("message", data),
            Ok(Step::Continue(_))
        ));
    }
    assert!(matches!(asm.on_end("u"), Err(ModelError::Connection(_))));
}

/// Foreign input (TGI 3.2 and later, its own snapshot
/// `test_flash_llama_grammar_tools_openai.json`): a tool call's answer
/// carries no `finish_reason` at all — the token that would, after the
/// call's JSON closed, is not sent — only the usage, then `[DONE]`. Read
/// as a cut: every tool call on TGI failed as a lost connection. The
/// count alone after output ends the answer; without it (llama-cpp-python
/// never sends one) a `[DONE]` before a finish is still a cut.
#[test]
fn a_usage_alone_after_the_output_ends_the_answer() {
    let fragment = |piece: &str| {
        format!(
            r#"{{"choices":[{{"delta":{{"role":"assistant","content":null,"tool_calls":[{{"function":{{"arguments":{piece},"name":null}},"id":"0","index":0,"type":"function"}}]}},"finish_reason":null,"index":0}}],"object":"chat.completion.chunk"}}"#
        )
    };
    let first = r#"{"choices":[{"delta":{"role":"assistant","content":null,"tool_calls":[{"function":{"arguments":"{","name":"get_weather"},"id":"0","index":0,"type":"function"}]},"finish_reason":null,"index":0}],"object":"chat.completion.chunk"}"#;
    let (x, close) = (fragment(r#""\"x\": 1""#), fragment(r#""}""#));
    let usage = r#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15},"object":"chat.completion.chunk"}"#;
    let (out, end) = feed(&[first, &x, &close, usage, "[DONE]"]);
    assert_eq!(end, Ok(true));
    assert_eq!(
        out,
        vec![
            call("0", "get_weather", r#"{"x": 1}"#),
            ModelChunk::Usage(Usage {
                prompt_tokens: 10,
                completion_tokens: 5
            })
        ]
    );
    // Output after the count opens the answer again: cut at `[DONE]`.
    let more = r#"{"choices":[{"delta":{"content":"and"}}]}"#;
    let (_, end) = feed(&[first, &close, usage, more, "[DONE]"]);
    assert_eq!(end, Err(ModelError::Connection("cut".into())));
    // A count before any output ends nothing: `[DONE]` says nothing came.
    let (_, end) = feed(&[usage, "[DONE]"]);
    assert!(
        matches!(end, Err(ModelError::EmptyAnswer { .. })),
        "{end:?}"
    );
}

/// Foreign input (TGI before 3.2): a delta's `tool_calls` is one
/// fragment, not a list of them — read as a list only, every chunk of a
/// tool call failed the answer as `Malformed`.
#[test]
fn a_call_fragment_not_in_a_list_is_read_as_one() {
    let (out, end) = feed(&[
        r#"{"choices":[{"delta":{"role":"assistant","tool_calls":{"index":0,"id":"","type":"function","function":{"name":"get_weather","arguments":"{\"x\":"}}}}]}"#,
        r#"{"choices":[{"delta":{"role":"assistant","tool_calls":{"index":0,"id":"","type":"function","function":{"name":null,"arguments":"1}"}}},"finish_reason":"eos_token"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(end, Ok(true));
    assert_eq!(out[0], call("call_0", "get_weather", r#"{"x":1}"#));
    // A fragment of another type still names what was wrong.
    let (_, end) = feed(&[r#"{"choices":[{"delta":{"tool_calls":7}}]}"#]);
    assert!(matches!(end, Err(ModelError::Malformed(_))), "{end:?}");
}

/// Foreign server (review: gateways): Microsoft Foundry Local (to 0.7.117)
/// numbers its one choice 0, 1, 2, … on successive chunks; every chunk
/// after the first was dropped as another choice's, and `[DONE]` read
/// the answer as cut — a lost connection. One choice is the answer's,
/// whatever its index; of several, the first's.
#[test]
fn a_chunks_one_choice_is_the_answers_whatever_its_index() {
    let (out, end) = feed(&[
        r#"{"choices":[{"index":0,"delta":{"content":"Wh"}}]}"#,
        r#"{"choices":[{"index":1,"delta":{"content":"y"},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(end, Ok(true));
    assert_eq!(
        &out[..2],
        [ModelChunk::Text("Wh".into()), ModelChunk::Text("y".into())]
    );
    let (out, _) = feed(&[
        r#"{"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}"#,
    ]);
    assert_eq!(out, [ModelChunk::Text("a".into())]);
}

/// Foreign server (review: gateways): a service's error inside the
/// stream kept only its `message` — OpenRouter's "Provider returned
/// error" without the provider's words (`metadata.raw`, read so in an
/// error body), Groq's pointing at a `failed_generation` the model never
/// got. Read as an error body is.
#[test]
fn an_error_inside_the_stream_is_read_as_an_error_body_is() {
    let (_, end) = feed(&[
        r#"{"error":{"message":"Provider returned error","code":400,"metadata":{"raw":"tool_use ids must be unique","provider_name":"Anthropic"}}}"#,
    ]);
    assert!(
        matches!(&end, Err(ModelError::MidStream { message }) if message == "Provider returned error: tool_use ids must be unique"),
        "{end:?}"
    );
    let (_, end) = feed(&[
        r#"{"error":{"message":"Failed to call a function. See 'failed_generation' for more details.","type":"invalid_request_error","code":"tool_use_failed","failed_generation":"<function=search>{\"q\": 1}"}}"#,
    ]);
    assert!(
        matches!(&end, Err(ModelError::MidStream { message }) if message.contains("(failed_generation: <function=search>")),
        "{end:?}"
    );
}

/// An error inside the stream is sent again by the status it says, as
/// the same status before the stream is (review: real servers' answers,
/// thirty-seventh session — a gateway's 502 or 504 inside a 200 failed
/// the turn, though the same status as the response's was waited out);
/// a 500 is not (llama-server's, for an answer that is no tool call).
#[test]
fn an_error_inside_the_stream_is_retried_by_the_status_it_says() {
    for (status, retried) in [
        (429, true),
        (502, true),
        (503, true),
        (504, true),
        (529, true),
        (500, false),
        (400, false),
    ] {
        let error = serde_json::json!({"error": {"code": status, "message": "upstream"}});
        assert_eq!(super::super::transient(&error), retried, "{status}");
    }
}

/// Foreign input (review: real model servers, thirty-ninth session): an
/// overload said inside the stream, as real proxies and servers write
/// it, failed the turn at once though the same overload before the
/// stream is waited out — TGI's `"Model is overloaded"` with its
/// `http_status_code` 422 (its 429 before the stream), LiteLLM's proxy's
/// status as a string (`"code": "429"`, Anthropic's `"529"` relayed), and
/// Cloudflare's 520 to 524 in front of OpenRouter or Groq. A string that
/// is no number still reads as a type or code; 422 alone is no overload.
#[test]
fn an_overload_said_as_real_proxies_say_it_is_retried() {
    use serde_json::json;
    let transient = super::super::transient;
    let tgi = json!({"error": {"message": "Model is overloaded", "http_status_code": 422}});
    assert!(transient(&tgi));
    for (code, retried) in [
        ("429", true),
        ("529", true),
        (" 503 ", true),
        ("500", false),
    ] {
        let litellm =
            json!({"error": {"message": "litellm.RateLimitError: x", "type": null, "code": code}});
        assert_eq!(transient(&litellm), retried, "{code}");
    }
    for status in [520, 521, 522, 523, 524] {
        assert!(transient(&json!({"error": {"code": status}})), "{status}");
    }
    assert!(transient(
        &json!({"error": {"code": "rate_limit_exceeded"}})
    ));
    assert!(!transient(
        &json!({"error": {"message": "bad", "http_status_code": 422}})
    ));
}
