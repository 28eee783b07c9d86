//! Usage that counts nothing, calls glued under one index or none, and
//! a name streamed in pieces.

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

/// One event of `n` calls with no `index`, each under an id of its own.
fn calls_without_index(n: usize) -> String {
    let calls: Vec<String> = (0..n)
        .map(|i| format!(r#"{{"id":"c{i}","function":{{"name":"f","arguments":"{{}}"}}}}"#))
        .collect();
    format!(
        r#"{{"choices":[{{"delta":{{"tool_calls":[{}]}}}}]}}"#,
        calls.join(",")
    )
}

/// A loop no limit cuts (review: cost that grows faster than its input):
/// a fragment without an `index` was matched to its call by a scan of
/// every call held — N²/2 steps inside one event, no await between: one
/// event of 400,000 such calls (within the 16 MiB an event may have) held
/// a worker for minutes, past a stop and the wall clock. An id's call is
/// looked up once per fragment.
#[test]
fn calls_without_an_index_are_matched_in_one_lookup_each() {
    let n = 20_000;
    let mut asm = Assembler::default();
    asm.on_event("message", &calls_without_index(n)).unwrap();
    // A second fragment of the first and the last call, by id.
    asm.on_event(
        "message",
        r#"{"choices":[{"delta":{"tool_calls":[{"id":"c0","function":{"arguments":" "}},{"id":"c19999","function":{"arguments":" "}}]}}]}"#,
    )
    .unwrap();
    assert!(
        asm.id_lookups <= n + 2,
        "{} lookups for {} fragments",
        asm.id_lookups,
        n + 2
    );
    let finish = r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#;
    assert!(matches!(
        asm.on_event("message", finish),
        Ok(Step::Continue(_))
    ));
    // Drained at the answer's end.
    let Ok(Step::Done(chunks)) = asm.on_event("message", "[DONE]") else {
        panic!("no end")
    };
    let calls: Vec<&ToolCall> = chunks
        .iter()
        .filter_map(|c| match c {
            ModelChunk::ToolCall(call) => Some(&**call),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), n);
    assert_eq!(calls[0].id.as_str(), "c0");
    assert_eq!(calls[0].arguments, "{} ");
    assert_eq!(calls[n - 1].id.as_str(), "c19999");
    assert_eq!(calls[n - 1].arguments, "{} ");
    assert!(
        calls
            .windows(2)
            .all(|w| w[0].id.as_str() != w[1].id.as_str())
    );
}

/// Held, uncounted (review: cost that grows faster than its input): only
/// a call's arguments counted as output while it was assembled — calls
/// with none (`{"index":N}`, or a long name each) were held until the
/// answer's finish, none said to the budget: a server sending them and
/// never finishing grew the process by 12 bytes for each byte it sent,
/// until the wall clock. What a call holds (itself, its name, id and
/// provider data) is said as hidden output as it is held.
#[test]
fn calls_held_without_arguments_count_as_output() {
    let mut asm = Assembler::default();
    let mut hidden = 0u64;
    let name = "n".repeat(1_000);
    for i in 0..2_000 {
        let event = format!(
            r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":{i},"id":"c{i}","function":{{"name":"{name}"}}}}]}}}}]}}"#
        );
        let Ok(Step::Continue(chunks)) = asm.on_event("message", &event) else {
            panic!("event {i} not read")
        };
        for chunk in chunks {
            if let ModelChunk::Hidden(chars) = chunk {
                hidden += chars;
            }
        }
    }
    assert!(hidden >= 2_000 * 1_000, "{hidden} characters said");
    // Bare slots: a call itself is one token's worth.
    let mut asm = Assembler::default();
    let bare: Vec<String> = (0..1_000).map(|i| format!(r#"{{"index":{i}}}"#)).collect();
    let event = format!(
        r#"{{"choices":[{{"delta":{{"tool_calls":[{}]}}}}]}}"#,
        bare.join(",")
    );
    let Ok(Step::Continue(chunks)) = asm.on_event("message", &event) else {
        panic!("not read")
    };
    assert_eq!(chunks, vec![ModelChunk::Hidden(4_000)]);
}

/// A fragment of a call: its index (or none), id (or none), name (or none)
/// and arguments, as one event.
fn fragment(index: Option<u32>, id: Option<&str>, name: Option<&str>, arguments: &str) -> String {
    let mut call = serde_json::Map::new();
    if let Some(index) = index {
        call.insert("index".into(), index.into());
    }
    if let Some(id) = id {
        call.insert("id".into(), id.into());
    }
    let mut function = serde_json::Map::new();
    if let Some(name) = name {
        function.insert("name".into(), name.into());
    }
    function.insert("arguments".into(), arguments.into());
    call.insert("function".into(), function.into());
    serde_json::json!({"choices": [{"delta": {"tool_calls": [call]}}]}).to_string()
}

const FINISH: &str = r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#;

/// Foreign (a gateway that omits `index` and blanks or repeats ids — a
/// Gemini proxy sends `"id":""`): the fix above held only under an index.
/// With none, a fragment naming another function continued the last
/// call: `read_file` with both calls' arguments (no JSON, refused) and
/// `write_file` lost — or, the first call's arguments empty, `list_dir`
/// run with the arguments written for `delete_file`.
#[test]
fn a_fragment_without_an_index_naming_another_function_is_a_new_call() {
    for id in [None, Some(""), Some("x")] {
        let (out, end) = feed(&[
            &fragment(None, id, Some("read_file"), r#"{"path":"p0"}"#),
            &fragment(None, id, Some("write_file"), r#"{"path":"p1"}"#),
            FINISH,
            "[DONE]",
        ]);
        assert_eq!(end, Ok(true), "{id:?}");
        let (a, b) = if id == Some("x") {
            ("x", "x")
        } else {
            ("call_0", "call_1")
        };
        assert_eq!(
            &out[..2],
            &[
                call(a, "read_file", r#"{"path":"p0"}"#),
                call(b, "write_file", r#"{"path":"p1"}"#)
            ],
            "{id:?}"
        );
        let (out, _) = feed(&[
            &fragment(None, id, Some("list_dir"), ""),
            &fragment(None, id, Some("delete_file"), r#"{"path":"build"}"#),
            FINISH,
        ]);
        assert_eq!(
            &out[..2],
            &[
                call(a, "list_dir", "{}"),
                call(b, "delete_file", r#"{"path":"build"}"#)
            ],
            "{id:?}"
        );
    }
}

/// Foreign (a name streamed in pieces — openai-python's accumulator joins
/// them, Gemini has sent `edit_ex` then `isting_file`): under an index,
/// `search` then `_files` was two calls, `search` run with `{}` and
/// `_files` an unknown tool; with none, `_files` was dropped and
/// `search` ran with the arguments meant for `search_files`. A piece that
/// continues the name to an offered tool's, before any arguments, is
/// part of the name; two whole calls with no arguments stay two.
#[test]
fn a_name_streamed_in_pieces_is_one_call() {
    let offered = ["search", "search_files", "get_time", "list"];
    for index in [Some(0), None] {
        let (out, end) = feed_offering(
            &offered,
            &[
                &fragment(index, Some("a"), Some("sea"), ""),
                &fragment(index, None, Some("rch"), ""),
                &fragment(index, None, Some("_files"), ""),
                &fragment(index, None, None, r#"{"q":"x"}"#),
                FINISH,
                "[DONE]",
            ],
        );
        assert_eq!(end, Ok(true), "{index:?}");
        assert_eq!(
            &out[..1],
            &[call("a", "search_files", r#"{"q":"x"}"#)],
            "{index:?}: {out:?}"
        );
        let (out, _) = feed_offering(
            &offered,
            &[
                &fragment(index, None, Some("get_time"), ""),
                &fragment(index, None, Some("list"), ""),
                FINISH,
            ],
        );
        let names: Vec<&str> = out
            .iter()
            .filter_map(|c| match c {
                ModelChunk::ToolCall(c) => Some(c.name.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(names, ["get_time", "list"], "{index:?}");
    }
}

/// Foreign (Gemini's OpenAI-compatible endpoint and gateways before it:
/// parallel calls of one function, each whole, at `index: 0` or none,
/// with no id or `"id":""`): a fragment naming the held call's own
/// function continued it — three `read_file` calls glued into one whose
/// arguments were no JSON, none run, and the model told its output was
/// cut. A whole object cannot be continued: the next one is a call.
#[test]
fn parallel_calls_of_one_function_without_ids_are_separate_calls() {
    for (index, id) in [
        (Some(0), None),
        (Some(0), Some("")),
        (None, None),
        (None, Some("")),
        // One id for all (review: real servers; a gateway on OpenRouter):
        // glued, `{"path":"a"}{"path":"b"}` ran nothing.
        (Some(0), Some("x")),
        (None, Some("x")),
    ] {
        let (out, end) = feed(&[
            &fragment(index, id, Some("read_file"), r#"{"path":"a"}"#),
            &fragment(index, id, Some("read_file"), r#" {"path":"b"}"#),
            &fragment(index, id, Some("read_file"), r#"{"path""#),
            &fragment(index, id, None, r#":"c"}"#),
            FINISH,
            "[DONE]",
        ]);
        assert_eq!(end, Ok(true), "{index:?} {id:?}");
        // Their ids (all `call_0` under an index) are told apart by the
        // turn, as for any repeated id.
        let arguments: Vec<_> = out
            .iter()
            .filter_map(|c| match c {
                ModelChunk::ToolCall(c) => Some(c.arguments.trim().to_owned()),
                _ => None,
            })
            .collect();
        assert_eq!(
            arguments,
            [r#"{"path":"a"}"#, r#"{"path":"b"}"#, r#"{"path":"c"}"#],
            "{index:?} {id:?}"
        );
    }
    // The same name on every fragment of one call (some servers repeat
    // it) still continues it while its object is open, and an empty
    // last piece starts nothing.
    let (out, _) = feed(&[
        &fragment(Some(0), None, Some("f"), r#"{"a""#),
        &fragment(Some(0), None, Some("f"), ":1}"),
        &fragment(Some(0), None, Some("f"), ""),
        FINISH,
    ]);
    assert_eq!(out, vec![call("call_0", "f", r#"{"a":1}"#)]);
}

/// Review of this session's own change: a fragment naming the held call's
/// function and opening with `{` parsed everything held — a server
/// repeating the name on each of 20,000 pieces inside a string parsed
/// 20,000 growing prefixes (quadratic). Parsed only once an object closes,
/// and once.
#[test]
fn a_name_repeated_on_every_piece_parses_the_held_arguments_at_most_once() {
    let before = super::super::fragment::PARSES.with(std::cell::Cell::get);
    let first = fragment(Some(0), None, Some("f"), r#"{"a":""#);
    let piece = fragment(Some(0), None, Some("f"), "{");
    let close = fragment(Some(0), None, Some("f"), r#""}"#);
    let mut events: Vec<&str> = vec![&first];
    events.extend(std::iter::repeat_n(piece.as_str(), 20_000));
    events.push(&close);
    events.push(FINISH);
    let (out, _) = feed(&events);
    let calls = out
        .iter()
        .filter(|c| matches!(c, ModelChunk::ToolCall(_)))
        .count();
    assert_eq!(calls, 1, "one call");
    let parses = super::super::fragment::PARSES.with(std::cell::Cell::get) - before;
    assert!(parses <= 1, "{parses} parses");
}

/// Foreign (older Ollama `/v1`: a call the model wrote without
/// arguments went out as `"arguments":"null"`, its nil map marshalled):
/// taken as written, the agent refused the call ("must be a JSON object,
/// not null") and the model, whose output the server writes again the
/// same way each time, could never call the tool. A `null` is no
/// arguments, as a blank is: `{}`. Nothing else is read as none.
#[test]
fn null_arguments_are_no_arguments() {
    for written in ["null", " null ", "\"null\""] {
        let arguments = serde_json::to_string(written).unwrap();
        let (out, _) = feed(&[&format!(
            r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":0,"id":"call_a","function":{{"name":"get_time","arguments":{arguments}}}}}]}},"finish_reason":"tool_calls"}}]}}"#
        )]);
        let expected = if written == "\"null\"" { written } else { "{}" };
        assert_eq!(out, vec![call("call_a", "get_time", expected)], "{written}");
    }
}

/// Foreign (the functions API's shape, before `tools`: functionary's
/// server before 2024, ChatGLM3's OpenAI demo): the call came as
/// `delta.function_call` with `finish_reason: "function_call"`. It was
/// dropped, and the answer read as a finished empty one — the model's
/// call lost without a word. Read as call 0; a delta that also has
/// `tool_calls` (llama-cpp-python sends both) is read once.
#[test]
fn a_function_call_in_the_functions_shape_is_a_call() {
    let (out, _) = feed(&[
        r#"{"choices":[{"delta":{"function_call":{"name":"f","arguments":"{\"a\":"}}}]}"#,
        r#"{"choices":[{"delta":{"function_call":{"arguments":"1}"}}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"function_call"}]}"#,
    ]);
    assert_eq!(out, vec![call("call_0", "f", r#"{"a":1}"#)]);
    let (both, _) = feed(&[
        r#"{"choices":[{"delta":{"function_call":{"name":"f","arguments":"{}"},"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
    ]);
    assert_eq!(both, vec![call("c", "f", "{}")]);
    // One that says nothing of a call is no call (review of that read:
    // an unnamed call 0 failed the whole answer, a string the chunk).
    for nothing in [
        "{}",
        r#"{"name":"","arguments":""}"#,
        r#"{"name":null}"#,
        r#""auto""#,
        "null",
    ] {
        let (out, end) = feed(&[
            &format!(r#"{{"choices":[{{"delta":{{"content":"hi","function_call":{nothing}}}}}]}}"#),
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
        ]);
        assert_eq!(out, vec![ModelChunk::Text("hi".into())], "{nothing}");
        assert!(end.is_ok(), "{nothing}: {end:?}");
    }
}
