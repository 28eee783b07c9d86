//! Cancellation, and end to end: an agent and a delegating parent on the
//! adapter.

use super::*;

/// Text, then keep-alive comments every 50 ms for up to 10 s.
fn slow_stream() -> Reply {
    let mut pieces = vec![Piece::Send(format!("data: {}\n\n", text("thinking…")))];
    for _ in 0..200 {
        pieces.push(Piece::Wait(Duration::from_millis(50)));
        pieces.push(Piece::Send(": keep-alive\n\n".into()));
    }
    pieces.push(Piece::Send(format!(
        "data: {}\n\ndata: [DONE]\n\n",
        finish("stop")
    )));
    Reply::sse_pieces(pieces)
}

#[tokio::test]
async fn dropping_the_stream_aborts_the_request() {
    let mut server = MockServer::start(vec![slow_stream()]).await;
    let model = server.model(None);
    let mut stream = model.stream(request("hi"));
    let first = stream.next().await;
    assert_eq!(first, Some(Ok(ModelChunk::Text("thinking…".into()))));
    let start = Instant::now();
    drop(stream);
    assert!(server.body_was_dropped().await, "the server kept streaming");
    assert!(start.elapsed() < Duration::from_secs(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_stream_is_cut_by_the_agent_wall_clock() {
    let mut server = MockServer::start(vec![slow_stream()]).await;
    let (agent, _events) = AgentBuilder::new(server.model(None).shared())
        .system_prompt("You are slow.")
        .limits(Limits {
            wall_clock: Duration::from_millis(300),
            ..Limits::default()
        })
        .spawn()
        .await
        .unwrap();
    let start = Instant::now();
    let result = agent.run("take your time").await.unwrap();
    assert_eq!(result.outcome, Outcome::LimitReached(LimitKind::WallClock));
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    // The model call was dropped with the turn, so the request is gone too.
    assert!(server.body_was_dropped().await, "the server kept streaming");
    agent.shutdown();
}

/// A stream that never ends: a model that loops on a server without an
/// output limit (llama-server's `n_predict` -1), its usage due only at
/// the end. The token budget was read only from usage, so the answer ran
/// to the wall clock. Its output so far, estimated, ends it at the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_streaming_past_the_budget_ends_there() {
    let mut pieces = Vec::new();
    for _ in 0..2_000 {
        let line = format!("data: {}\n\n", text(&"loop ".repeat(80)));
        pieces.push(Piece::Send(line));
        pieces.push(Piece::Wait(Duration::from_millis(10)));
    }
    let mut server = MockServer::start(vec![Reply::sse_pieces(pieces)]).await;
    let (agent, _events) = AgentBuilder::new(server.model(None).shared())
        .limits(Limits {
            token_budget: 1_000,
            wall_clock: Duration::from_secs(5),
            ..Limits::default()
        })
        .spawn()
        .await
        .unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.outcome, Outcome::LimitReached(LimitKind::Tokens));
    assert!(result.text.contains("estimated"), "{}", result.text);
    assert!(result.usage.total() > 1_000, "{:?}", result.usage);
    assert!(server.body_was_dropped().await, "the server kept streaming");
    agent.shutdown();
}

/// A stream that never yields (a model looping where nothing is shown):
/// reasoning, or a tool call's arguments, streaming without end was never
/// seen by the token budget — only text and usage were — so the call ran
/// to the wall clock, and cut there it cost 0 tokens (nothing had been
/// shown). Hidden output counts against the budget as text does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hidden_output_streaming_past_the_budget_ends_there() {
    for arguments in [false, true] {
        let mut pieces = Vec::new();
        if arguments {
            let first = tool_chunk(&[tool_fragment(0, Some("c"), Some("calculator"), "{\"x\":\"")]);
            pieces.push(Piece::Send(format!("data: {first}\n\n")));
        }
        for _ in 0..2_000 {
            let event = if arguments {
                tool_chunk(&[tool_fragment(0, None, None, &"loop ".repeat(80))])
            } else {
                chunk(json!({"reasoning_content": "loop ".repeat(80)}))
            };
            pieces.push(Piece::Send(format!("data: {event}\n\n")));
            pieces.push(Piece::Wait(Duration::from_millis(10)));
        }
        let mut server = MockServer::start(vec![Reply::sse_pieces(pieces)]).await;
        let (agent, _events) = AgentBuilder::new(server.model(None).shared())
            .limits(Limits {
                token_budget: 1_000,
                wall_clock: Duration::from_secs(5),
                ..Limits::default()
            })
            .spawn()
            .await
            .unwrap();
        let result = agent.run("go").await.unwrap();
        assert_eq!(
            result.outcome,
            Outcome::LimitReached(LimitKind::Tokens),
            "arguments {arguments}"
        );
        assert!(result.usage.total() > 1_000, "{:?}", result.usage);
        assert!(server.body_was_dropped().await, "the server kept streaming");
        agent.shutdown();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_runs_a_tool_call_round_trip_through_the_adapter() {
    let first = [
        tool_chunk(&[tool_fragment(
            0,
            Some("call_x"),
            Some("calculator"),
            "{\"expression\"",
        )]),
        tool_chunk(&[tool_fragment(0, None, None, ":\"6*7\"}")]),
        finish("tool_calls"),
        usage(50, 10),
        "[DONE]".to_owned(),
    ];
    let second = [
        text("It is 42."),
        finish("stop"),
        usage(70, 5),
        "[DONE]".to_owned(),
    ];
    let server =
        MockServer::start(vec![Reply::sse(&strs(&first)), Reply::sse(&strs(&second))]).await;
    let (agent, _events) = AgentBuilder::new(server.model(None).shared())
        .system_prompt("You compute.")
        .tools(ToolRegistry::new().with(Calculator))
        .spawn()
        .await
        .unwrap();
    let result = agent.run("What is 6*7?").await.unwrap();
    assert_eq!(result.outcome, Outcome::Completed, "{}", result.text);
    assert_eq!(result.text, "It is 42.");
    assert_eq!((result.model_calls, result.tool_calls), (2, 1));
    assert_eq!(result.usage.total(), 135);

    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].body["tools"][0]["function"]["name"], "calculator");
    assert_eq!(
        seen[0].body["tools"][0]["function"]["parameters"]["type"],
        "object"
    );
    let messages = seen[1].body["messages"].as_array().unwrap();
    let n = messages.len();
    assert_eq!(
        messages[n - 2],
        json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_x", "type": "function",
             "function": {"name": "calculator", "arguments": "{\"expression\":\"6*7\"}"}}
        ]})
    );
    assert_eq!(
        messages[n - 1],
        json!({"role": "tool", "content": "42", "tool_call_id": "call_x"})
    );
    agent.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_delegates_through_use_agent_over_the_adapter() {
    let run = json!({
        "action": "run",
        "system_prompt": "Calculator helper\nYou compute with the calculator.",
        "input": "What is 6*7?",
        "tools": ["calculator"],
        "wait": true,
    })
    .to_string();
    let parent_call = [
        tool_chunk(&[tool_fragment(0, Some("call_p"), Some("use_agent"), "")]),
        tool_chunk(&[tool_fragment(0, None, None, &run[..20])]),
        tool_chunk(&[tool_fragment(0, None, None, &run[20..])]),
        finish("tool_calls"),
        "[DONE]".to_owned(),
    ];
    let child_call = [
        tool_chunk(&[tool_fragment(
            0,
            Some("call_c"),
            Some("calculator"),
            "{\"expression\":\"6*7\"}",
        )]),
        finish("tool_calls"),
        "[DONE]".to_owned(),
    ];
    let child_answer = [text("42"), finish("stop"), "[DONE]".to_owned()];
    let parent_answer = [
        text("The child says 42."),
        finish("stop"),
        "[DONE]".to_owned(),
    ];
    let server = MockServer::start(vec![
        Reply::sse(&strs(&parent_call)),
        Reply::sse(&strs(&child_call)),
        Reply::sse(&strs(&child_answer)),
        Reply::sse(&strs(&parent_answer)),
    ])
    .await;
    let (parent, _events) = DelegationBuilder::new(server.model(None).shared())
        .system_prompt("You are the parent. Delegate.")
        .tools(ToolRegistry::new().with(Calculator))
        .spawn()
        .await
        .unwrap();
    let result = tokio::time::timeout(Duration::from_secs(10), parent.agent.run("Ask a helper."))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result.outcome, Outcome::Completed, "{}", result.text);
    assert_eq!(result.text, "The child says 42.");

    let seen = server.seen();
    assert_eq!(seen.len(), 4);
    // The parent offered use_agent; the child saw its own prompt and only
    // the calculator.
    let tool_names = |i: usize| -> Vec<String> {
        seen[i].body["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(tool_names(0).contains(&"use_agent".to_owned()));
    assert_eq!(tool_names(1), ["calculator"]);
    assert!(
        seen[1].body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .starts_with("Calculator helper")
    );
    // The child's answer came back to the parent as the use_agent result.
    let messages = seen[3].body["messages"].as_array().unwrap();
    let last = &messages[messages.len() - 1];
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], "call_p");
    assert!(last["content"].as_str().unwrap().contains("42"));
    parent.agent.shutdown();
}

/// Foreign input (Gemini's OpenAI-compatible endpoint): a tool call
/// carries `extra_content` (its `thought_signature`), which the next
/// request must send back with the call — it was dropped, and the
/// request after every tool call was refused (400, "missing a
/// `thought_signature`"). Kept on the call and sent back as it came.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calls_extra_content_is_sent_back_with_it() {
    let signed = json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "test-model",
        "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [{
            "extra_content": {"google": {"thought_signature": "CiQB"}},
            "function": {"arguments": "{\"expression\":\"6*7\"}", "name": "calculator"},
            "id": "call_1", "type": "function"
        }]}, "finish_reason": null}]
    })
    .to_string();
    let first = [signed, finish("tool_calls"), "[DONE]".to_owned()];
    let second = [text("42."), finish("stop"), "[DONE]".to_owned()];
    let server =
        MockServer::start(vec![Reply::sse(&strs(&first)), Reply::sse(&strs(&second))]).await;
    let (agent, _events) = AgentBuilder::new(server.model(None).shared())
        .tools(ToolRegistry::new().with(Calculator))
        .spawn()
        .await
        .unwrap();
    let result = agent.run("What is 6*7?").await.unwrap();
    assert_eq!(result.outcome, Outcome::Completed, "{}", result.text);
    let seen = server.seen();
    let messages = seen[1].body["messages"].as_array().unwrap();
    let call = &messages[messages.len() - 2]["tool_calls"][0];
    assert_eq!(
        call["extra_content"]["google"]["thought_signature"], "CiQB",
        "{call}"
    );
    agent.shutdown();
}
