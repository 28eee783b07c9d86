//! Usage that counts nothing, and calls glued under one index.

use super::*;

/// Foreign (LocalAI with tools on, its issue 9927): the last usage chunk
/// counted nothing (`{0,0,0}`), or had no count at all (`{}`). It was
/// taken as the call's real cost: each call cost 0 tokens, the turn never
/// estimated, and the token budget never held. A usage that counts
/// nothing is no reading: the estimate stands (or an earlier reading).
#[test]
fn a_usage_that_counts_nothing_leaves_the_estimate() {
    for usage in [
        r#"{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}"#,
        "{}",
    ] {
        let mut asm = Assembler::new(400);
        asm.on_event(
            "message",
            r#"{"choices":[{"delta":{"content":"abcdefgh"},"finish_reason":"stop"}]}"#,
        )
        .unwrap();
        asm.on_event("message", &format!(r#"{{"choices":[],"usage":{usage}}}"#))
            .unwrap();
        let done = asm.on_event("message", "[DONE]");
        assert_eq!(
            done,
            Ok(Step::Done(vec![ModelChunk::UsageEstimate(Usage {
                prompt_tokens: 100,
                completion_tokens: 2
            })])),
            "{usage}"
        );
    }
    // An earlier reading stands against a later empty one.
    earlier_reading_stands(r#"{"prompt_tokens":0,"completion_tokens":0}"#);
}

/// Foreign (gateways that give every parallel call `index: 0` and no id,
/// or one id for all): a second fragment naming another function was
/// glued onto the first call — one call whose arguments were no JSON
/// (never run), and the second lost without a word. A fragment naming
/// another function than the held call's starts a new call.
#[test]
fn a_fragment_naming_another_function_under_a_held_index_is_a_new_call() {
    let finish = r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#;
    for id in ["", r#""id":"x","#] {
        let first = format!(
            r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":0,{id}"function":{{"name":"read_file","arguments":"{{\"path\":\"p0\"}}"}}}}]}}}}]}}"#
        );
        let second = format!(
            r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":0,{id}"function":{{"name":"write_file","arguments":"{{\"path\":\"p1\"}}"}}}}]}}}}]}}"#
        );
        let (out, end) = feed(&[&first, &second, finish, "[DONE]"]);
        assert_eq!(end, Ok(true), "{id}");
        let shown = if id.is_empty() { "call_0" } else { "x" };
        assert_eq!(
            &out[..2],
            &[
                call(shown, "read_file", r#"{"path":"p0"}"#),
                call(shown, "write_file", r#"{"path":"p1"}"#)
            ],
            "{id}"
        );
    }
    // The same function's name repeated on a later fragment (some servers
    // repeat it) continues the call.
    let (out, _) = feed(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"a\""}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":":1}"}}]}}]}"#,
        finish,
    ]);
    assert_eq!(out, vec![call("call_0", "f", r#"{"a":1}"#)]);
}
