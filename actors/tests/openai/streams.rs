//! Streams that work: text, tool calls in fragments, parallel calls, usage.

use super::*;

#[tokio::test]
async fn plain_text_streams_and_the_request_has_the_openai_shape() {
    let events = [
        chunk(json!({"role": "assistant", "content": ""})),
        text("Hello"),
        text(", world"),
        finish("stop"),
        usage(12, 3),
        "[DONE]".to_owned(),
    ];
    let server = MockServer::start(vec![Reply::sse(&strs(&events))]).await;
    let model = server.model(Some("sk-test"));
    let request = ModelRequest {
        messages: vec![
            ChatMessage::system("Be brief."),
            ChatMessage::user("What is 2+2?"),
            ChatMessage::assistant(
                "Let me compute.",
                vec![ToolCall {
                    id: ToolUseId::new("call_a"),
                    name: "calculator".into(),
                    arguments: r#"{"expression":"2+2"}"#.into(),
                    extra_content: None,
                }],
            ),
            ChatMessage::tool(ToolUseId::new("call_a"), "4"),
        ],
        tools: vec![
            ToolSpec {
                name: "calculator".into(),
                description: "Evaluates arithmetic.".into(),
                parameters: r#"{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"]}"#.into(),
            },
            ToolSpec {
                name: "loose".into(),
                description: "Takes anything.".into(),
                parameters: "this is not JSON".into(),
            },
        ],
        ..Default::default()
    };
    let out = collect(&model, request).await;
    assert_eq!(
        out,
        vec![
            Ok(ModelChunk::Text("Hello".into())),
            Ok(ModelChunk::Text(", world".into())),
            Ok(ModelChunk::Usage(Usage {
                prompt_tokens: 12,
                completion_tokens: 3
            })),
        ]
    );

    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    let seen = &seen[0];
    assert_eq!(seen.method, Method::POST);
    assert_eq!(seen.path, "/v1/chat/completions");
    assert_eq!(seen.headers["authorization"], "Bearer sk-test");
    assert_eq!(seen.headers["content-type"], "application/json");
    assert_eq!(seen.headers["accept"], "text/event-stream");
    assert_eq!(
        seen.body,
        json!({
            "model": "test-model",
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "What is 2+2?"},
                {"role": "assistant", "content": "Let me compute.", "tool_calls": [
                    {"id": "call_a", "type": "function",
                     "function": {"name": "calculator", "arguments": "{\"expression\":\"2+2\"}"}}
                ]},
                {"role": "tool", "content": "4", "tool_call_id": "call_a"}
            ],
            "tools": [
                {"type": "function", "function": {
                    "name": "calculator", "description": "Evaluates arithmetic.",
                    "parameters": {"type": "object",
                                   "properties": {"expression": {"type": "string"}},
                                   "required": ["expression"]}}},
                {"type": "function", "function": {
                    "name": "loose", "description": "Takes anything.",
                    "parameters": {"type": "object"}}}
            ]
        })
    );
}

#[tokio::test]
async fn text_is_yielded_as_it_arrives() {
    let gate = Arc::new(Notify::new());
    let server = MockServer::start(vec![Reply::sse_pieces(vec![
        Piece::Send(format!("data: {}\n\n", text("first"))),
        Piece::Gate(gate.clone()),
        Piece::Send(format!("data: {}\n\n", text("second"))),
        Piece::Send(format!("data: {}\n\ndata: [DONE]\n\n", finish("stop"))),
    ])])
    .await;
    let model = server.model(None);
    let mut stream = model.stream(request("hi"));
    // The server holds the rest until the first delta has reached us.
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next()).await;
    assert_eq!(first.unwrap(), Some(Ok(ModelChunk::Text("first".into()))));
    gate.notify_one();
    let rest: Vec<_> = without_estimate(stream.collect().await);
    assert_eq!(rest, vec![Ok(ModelChunk::Text("second".into()))]);
    assert!(!server.seen()[0].headers.contains_key("authorization"));
}

#[tokio::test]
async fn a_tool_call_in_many_fragments_is_assembled() {
    let events = [
        chunk(json!({"role": "assistant", "content": null})),
        tool_chunk(&[tool_fragment(0, Some("call_abc"), Some("calculator"), "")]),
        tool_chunk(&[tool_fragment(0, None, None, "{\"expr")]),
        tool_chunk(&[tool_fragment(0, None, None, "ession\": \"(2 + ")]),
        tool_chunk(&[tool_fragment(0, None, None, "3) * 4\"")]),
        tool_chunk(&[tool_fragment(0, None, None, "}")]),
        finish("tool_calls"),
        "[DONE]".to_owned(),
    ];
    // Split one event across two writes and use CRLF line ends once, as a
    // real server's buffering might.
    let mut pieces: Vec<Piece> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let raw = if i == 3 {
            format!("data: {e}\r\n\r\n")
        } else {
            format!("data: {e}\n\n")
        };
        if i == 2 {
            let (a, b) = raw.split_at(10);
            pieces.push(Piece::Send(a.to_owned()));
            pieces.push(Piece::Wait(Duration::from_millis(20)));
            pieces.push(Piece::Send(b.to_owned()));
        } else {
            pieces.push(Piece::Send(raw));
        }
        if i == 4 {
            pieces.push(Piece::Send(": keep-alive\n\n".into()));
        }
    }
    let server = MockServer::start(vec![Reply::sse_pieces(pieces)]).await;
    let out = collect(&server.model(None), request("compute")).await;
    assert_eq!(
        out,
        vec![Ok(tool_call(
            "call_abc",
            "calculator",
            r#"{"expression": "(2 + 3) * 4"}"#
        ))]
    );
}

#[tokio::test]
async fn parallel_tool_calls_interleaved_are_yielded_whole_in_index_order() {
    let events = [
        text("Checking both."),
        tool_chunk(&[tool_fragment(0, Some("call_0"), Some("calculator"), "")]),
        tool_chunk(&[tool_fragment(
            1,
            Some("call_1"),
            Some("fetch_title"),
            "{\"url\":",
        )]),
        tool_chunk(&[tool_fragment(0, None, None, "{\"expression\":")]),
        // One event carrying pieces of both calls.
        tool_chunk(&[
            tool_fragment(1, None, None, "\"https://example.com\"}"),
            tool_fragment(0, None, None, "\"6*7\"}"),
        ]),
        tool_chunk(&[tool_fragment(
            2,
            Some("call_2"),
            Some("calculator"),
            "{\"expression\":\"1\"}",
        )]),
        finish("tool_calls"),
        usage(40, 25),
        "[DONE]".to_owned(),
    ];
    let server = MockServer::start(vec![Reply::sse(&strs(&events))]).await;
    let out = collect(&server.model(None), request("two things")).await;
    assert_eq!(
        out,
        vec![
            Ok(ModelChunk::Text("Checking both.".into())),
            Ok(tool_call("call_0", "calculator", r#"{"expression":"6*7"}"#)),
            Ok(tool_call(
                "call_1",
                "fetch_title",
                r#"{"url":"https://example.com"}"#
            )),
            Ok(tool_call("call_2", "calculator", r#"{"expression":"1"}"#)),
            Ok(ModelChunk::Usage(Usage {
                prompt_tokens: 40,
                completion_tokens: 25
            })),
        ]
    );
}

#[tokio::test]
async fn usage_sent_at_the_end_is_yielded_last_and_done_ends_the_stream() {
    let events = [
        text("a"),
        finish("stop"),
        usage(7, 1),
        "[DONE]".to_owned(),
        // Anything after [DONE] is never read.
        text("after done"),
    ];
    let server = MockServer::start(vec![Reply::sse(&strs(&events))]).await;
    let out = collect(&server.model(None), request("hi")).await;
    assert_eq!(
        out,
        vec![
            Ok(ModelChunk::Text("a".into())),
            Ok(ModelChunk::Usage(Usage {
                prompt_tokens: 7,
                completion_tokens: 1
            })),
        ]
    );
}
