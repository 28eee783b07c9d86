//! What particular servers send that others do not (the eighteenth
//! session's review against real servers): each failed every call, or
//! read a cut answer as a finished one.

use super::*;

/// Foreign (Mistral's API): a field its schema forbids is refused with
/// HTTP 422, and it forbids `stream_options` — "retried without it when
/// refused by name" held for a 400 only, so every call to Mistral failed.
#[tokio::test]
async fn a_422_refusing_stream_options_is_sent_again_without_it() {
    let refusal = json!({"detail": [{"type": "extra_forbidden",
        "loc": ["body", "stream_options"], "msg": "Extra inputs are not permitted",
        "input": {"include_usage": true}}]});
    let server = MockServer::start(vec![
        Reply::error(422, refusal),
        Reply::sse(&strs(&[text("ok"), finish("stop"), "[DONE]".to_owned()])),
    ])
    .await;
    let out = collect(&server.model(None), request("hi")).await;
    assert_eq!(out, vec![Ok(ModelChunk::Text("ok".into()))]);
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen[1].body.get("stream_options").is_none());
    // Any other 422 is answered as it is, once.
    let other = MockServer::start(vec![Reply::error(
        422,
        json!({"detail": [{"loc": ["body", "messages"], "msg": "field required"}]}),
    )])
    .await;
    let out = collect(&other.model(None), request("hi")).await;
    assert!(
        matches!(&out[..], [Err(ModelError::Server { status: 422, .. })]),
        "{out:?}"
    );
    assert_eq!(other.seen().len(), 1);
}

/// Foreign (Mistral's and DeepSeek's finish reasons): `model_length` (the
/// context window cut the answer) and `insufficient_system_resource` (the
/// service interrupted it) were read as finished answers — the half
/// answer a result, its calls run.
#[tokio::test]
async fn a_context_cut_is_truncated_and_a_resource_interruption_fails() {
    let server = MockServer::start(vec![Reply::sse(&strs(&[
        text("half"),
        finish("model_length"),
        "[DONE]".to_owned(),
    ]))])
    .await;
    let out = collect(&server.model(None), request("hi")).await;
    assert_eq!(
        out,
        vec![
            Ok(ModelChunk::Text("half".into())),
            Ok(ModelChunk::Truncated("model_length".into()))
        ]
    );
    let server = MockServer::start(vec![Reply::sse(&strs(&[
        text("half"),
        finish("insufficient_system_resource"),
        "[DONE]".to_owned(),
    ]))])
    .await;
    let out = collect(&server.model(None), request("hi")).await;
    assert!(
        matches!(out.last(), Some(Err(ModelError::MidStream { .. }))),
        "{out:?}"
    );
}

/// Foreign (Anthropic's OpenAI-compatible endpoint, gateways, older
/// sse-starlette): a keep-alive `data: {"type": "ping"}` between chunks,
/// or an `event: ping`, failed the call as `Malformed` after the host had
/// seen its first words. An object that is no chunk and no ping still is.
#[tokio::test]
async fn pings_between_chunks_are_keep_alives() {
    let body = [
        format!("data: {}\n\n", text("Hel")),
        "data: {\"type\": \"ping\"}\n\n".to_owned(),
        "event: ping\ndata: 2024-04-27 01:35:43.686476\n\n".to_owned(),
        format!("data: {}\n\n", text("lo")),
        format!("data: {}\n\n", finish("stop")),
        "data: [DONE]\n\n".to_owned(),
    ];
    let server = MockServer::start(vec![Reply::sse_pieces(
        body.into_iter().map(Piece::Send).collect(),
    )])
    .await;
    let out = collect(&server.model(None), request("hi")).await;
    assert_eq!(
        out,
        vec![
            Ok(ModelChunk::Text("Hel".into())),
            Ok(ModelChunk::Text("lo".into()))
        ]
    );
    let server = MockServer::start(vec![Reply::sse(&[r#"{"type": "pong"}"#])]).await;
    let out = collect(&server.model(None), request("hi")).await;
    assert!(
        matches!(&out[..], [Err(ModelError::Malformed(_))]),
        "{out:?}"
    );
}

/// Foreign (a gateway translating Bedrock's reasoning blocks):
/// `"reasoning_content": {"text": …}` failed every chunk as `Malformed`,
/// though reasoning is never passed on. Counted as output, whatever its
/// shape.
#[tokio::test]
async fn reasoning_sent_as_an_object_is_counted_not_refused() {
    let events = [
        chunk(json!({"reasoning_content": {"text": "abcd"}})),
        chunk(json!({"reasoning": [{"text": "efgh"}]})),
        text("42"),
        finish("stop"),
        "[DONE]".to_owned(),
    ];
    let server = MockServer::start(vec![Reply::sse(&strs(&events))]).await;
    let out: Vec<_> = server.model(None).stream(request("hi")).collect().await;
    assert_eq!(
        out.first(),
        Some(&Ok(ModelChunk::Text("42".into()))),
        "{out:?}"
    );
    // "abcd" + "efgh" + "42": ten characters, three tokens.
    assert!(
        matches!(
            out.last(),
            Some(Ok(ModelChunk::UsageEstimate(Usage {
                completion_tokens: 3,
                ..
            })))
        ),
        "{out:?}"
    );
}

/// Foreign (Anthropic's "overloaded", HTTP 529): a busy service's 503 is
/// waited out as a rate limit is; the same answer as a 529 failed at once.
#[tokio::test]
async fn an_overloaded_529_is_waited_out_as_a_503_is() {
    let overloaded = Reply::error(
        529,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    )
    .header("retry-after-ms", "20");
    let events = [text("ready"), finish("stop"), "[DONE]".to_owned()];
    let server = MockServer::start(vec![overloaded, Reply::sse(&strs(&events))]).await;
    let out = collect(&server.model(None), request("hi")).await;
    assert_eq!(out, vec![Ok(ModelChunk::Text("ready".into()))]);
    assert_eq!(server.seen().len(), 2);
}

/// Foreign (Mistral's API): `seed` is refused with 422 "Extra inputs are
/// not permitted" (its name for it is `random_seed`), so every call of a
/// profile with a `seed` failed; and its error puts FastAPI's `detail`
/// inside `message`, which was shown as raw JSON. Sent again with the
/// seed as `random_seed`; the refusal reads `loc: msg`.
#[tokio::test]
async fn mistrals_refused_seed_is_sent_again_as_random_seed() {
    let refusal = json!({"object": "error", "message": {"detail": [{"type": "extra_forbidden",
        "loc": ["body", "seed"], "msg": "Extra inputs are not permitted", "input": 7}]},
        "type": "invalid_request_error"});
    let seeded = || {
        let mut request = request("hi");
        request.options.seed = Some(7);
        request
    };
    let server = MockServer::start(vec![
        Reply::error(422, refusal.clone()),
        Reply::sse(&strs(&[text("ok"), finish("stop"), "[DONE]".to_owned()])),
    ])
    .await;
    let out = collect(&server.model(None), seeded()).await;
    assert_eq!(out, vec![Ok(ModelChunk::Text("ok".into()))]);
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen[1].body.get("seed").is_none());
    assert_eq!(seen[1].body["random_seed"], 7);
    // Mistral's error shape reads as its words, not its JSON.
    let other = MockServer::start(vec![Reply::error(
        422,
        json!({"object": "error", "message": {"detail": [{"loc": ["body", "messages"],
            "msg": "field required"}]}, "type": "invalid_request_error"}),
    )])
    .await;
    let out = collect(&other.model(None), request("hi")).await;
    match &out[..] {
        [
            Err(ModelError::Server {
                status: 422,
                message,
            }),
        ] => {
            assert!(
                message.contains("body.messages: field required"),
                "{message}"
            );
            assert!(!message.contains("{\""), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

/// Refused by a real server (review: what the adapter sends): TGI refuses
/// a `top_p` of 1 (422 "`top_p` must be > 0.0 and < 1.0"), a value a host
/// sets to turn nucleus sampling off — which TGI does when it is left
/// out. Sent again without it (and learnt: not sent again); sent as set
/// to every other server, whose own default is often below 1.
#[tokio::test]
async fn tgis_refused_top_p_of_one_is_sent_again_without_it() {
    let refusal = json!({"error": "Input validation error: `top_p` must be > 0.0 and < 1.0",
        "error_type": "validation"});
    let with_top_p = || {
        let mut request = request("hi");
        request.options.top_p = Some(1.0);
        request
    };
    let server = MockServer::start(vec![
        Reply::error(422, refusal),
        Reply::sse(&strs(&[text("ok"), finish("stop"), "[DONE]".to_owned()])),
        Reply::sse(&strs(&[text("again"), finish("stop"), "[DONE]".to_owned()])),
    ])
    .await;
    let model = server.model(None);
    let out = collect(&model, with_top_p()).await;
    assert_eq!(out, vec![Ok(ModelChunk::Text("ok".into()))]);
    let out = collect(&model, with_top_p()).await;
    assert_eq!(out, vec![Ok(ModelChunk::Text("again".into()))]);
    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0].body["top_p"], 1.0, "sent as set first");
    assert!(seen[1].body.get("top_p").is_none());
    assert!(seen[2].body.get("top_p").is_none(), "learnt");
}

/// Shared (review: real servers): one adapter for a parent whose options
/// set `top_p` 1 and a child whose profile sets 0.9. TGI's refusal of the
/// 1 was learnt as "leave `top_p` out" for every later call: the child's
/// 0.9, which TGI takes, went out as nothing — no nucleus cut, unsaid.
/// Only a 1 is left out.
#[tokio::test]
async fn a_learnt_refusal_of_top_p_one_leaves_another_top_p_as_set() {
    let refusal = json!({"error": "Input validation error: `top_p` must be > 0.0 and < 1.0",
        "error_type": "validation"});
    let with_top_p = |top_p| {
        let mut request = request("hi");
        request.options.top_p = Some(top_p);
        request
    };
    let ok = || Reply::sse(&strs(&[text("ok"), finish("stop"), "[DONE]".to_owned()]));
    let server = MockServer::start(vec![Reply::error(422, refusal), ok(), ok(), ok()]).await;
    let model = server.model(None);
    for top_p in [1.0, 0.9, 1.0] {
        let out = collect(&model, with_top_p(top_p)).await;
        assert_eq!(out, vec![Ok(ModelChunk::Text("ok".into()))], "{top_p}");
    }
    let seen = server.seen();
    assert_eq!(seen.len(), 4);
    assert!(seen[1].body.get("top_p").is_none());
    assert_eq!(seen[2].body["top_p"], 0.9, "as set");
    assert!(seen[3].body.get("top_p").is_none(), "learnt");
}

/// A field the server refused was sent again on every call: each call
/// paid a refused request first — two requests a call against a
/// per-request rate limit (Mistral's free tier: about one a second, the
/// second drew a 429 and a backoff). The adapter remembers the amendment.
#[tokio::test]
async fn a_refused_field_is_amended_on_every_later_call_at_once() {
    let refusal = json!({"detail": [{"type": "extra_forbidden",
        "loc": ["body", "stream_options"], "msg": "Extra inputs are not permitted"}]});
    let ok = || Reply::sse(&strs(&[text("ok"), finish("stop"), "[DONE]".to_owned()]));
    let server = MockServer::start(vec![Reply::error(422, refusal), ok(), ok()]).await;
    let model = server.model(None);
    for _ in 0..2 {
        let out = collect(&model, request("hi")).await;
        assert_eq!(out, vec![Ok(ModelChunk::Text("ok".into()))]);
    }
    let seen = server.seen();
    assert_eq!(seen.len(), 3, "one refusal, then each call once");
    assert!(seen[2].body.get("stream_options").is_none());
}

/// A 529 that kept failing was reported as HTTP 503 (the status was
/// dropped on the retry path): "the model service failed (HTTP 503)" for
/// an Anthropic-compatible service that said 529.
#[tokio::test]
async fn an_overloaded_529_that_keeps_failing_says_529() {
    let overloaded = Reply::error(
        529,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    );
    let server = MockServer::start(vec![overloaded]).await;
    let model = OpenAiCompatible::builder(&server.base_url, "test-model")
        .max_retries(0)
        .build()
        .unwrap();
    let out = collect(&model, request("hi")).await;
    assert!(
        matches!(&out[..], [Err(ModelError::Server { status: 529, .. })]),
        "{out:?}"
    );
}

/// An error about the seed's value (not a refusal of the field) was read
/// as Mistral's refusal of `seed`: sent again as `random_seed` — on
/// OpenAI a second failure, on vLLM a call run unseeded — and remembered
/// for every later call of the adapter. Only a refusal of the field as one
/// the server does not take is amended; this one is answered as it is.
#[tokio::test]
async fn an_error_about_the_seeds_value_is_answered_as_it_is() {
    let server = MockServer::start(vec![Reply::error(
        400,
        json!({"error": {"message": "seed must be less than 9223372036854775807", "type": "invalid_request_error"}}),
    )])
    .await;
    let mut request = request("hi");
    request.options.seed = Some(u64::MAX);
    let out = collect(&server.model(None), request).await;
    assert!(
        matches!(&out[..], [Err(ModelError::Server { status: 400, .. })]),
        "{out:?}"
    );
    assert_eq!(server.seen().len(), 1, "sent once, as it was");
}

/// Foreign (vLLM): a prompt past the context window is refused with a 400
/// naming both fields — "'max_tokens' or 'max_completion_tokens' is too
/// large" — and was read as OpenAI's refusal of `max_tokens`: the whole
/// request was sent again renamed, to the same 400. Any other 400 is
/// answered as it is: one request.
#[tokio::test]
async fn a_context_overflow_naming_both_fields_is_not_sent_again() {
    let overflow = json!({"object": "error", "type": "BadRequestError", "code": 400,
        "message": "'max_tokens' or 'max_completion_tokens' is too large: 5000. This model's maximum context length is 4096 tokens and your request has 120 input tokens (5000 > 4096 - 120)."});
    let server = MockServer::start(vec![
        Reply::error(400, overflow.clone()),
        Reply::error(400, overflow),
    ])
    .await;
    let mut asked = request("hi");
    asked.options.max_tokens = Some(5000);
    let out = collect(&server.model(None), asked).await;
    assert!(
        out.iter().any(|item| item
            .as_ref()
            .is_err_and(|e| e.to_string().contains("is too large"))),
        "{out:?}"
    );
    assert_eq!(server.seen().len(), 1);
}

/// Foreign (chat templates that want roles to alternate: Gemma, Mistral,
/// Llama 2 — llama.cpp's `--jinja`, LM Studio, vLLM with the model's
/// template): two user messages in a row are refused ("Conversation roles
/// must alternate", a 500). A running child reads the messages sent to it
/// as user messages, several at one call, or one after its task while it
/// was queued: its next call failed there. A run of user messages goes out
/// as one, blank lines between; the others are sent as they are.
#[tokio::test]
async fn user_messages_in_a_row_go_out_as_one() {
    let server = MockServer::start(vec![Reply::sse(&strs(&[
        text("ok"),
        finish("stop"),
        "[DONE]".to_owned(),
    ]))])
    .await;
    let request = ModelRequest {
        messages: vec![
            ChatMessage::system("sys"),
            ChatMessage::user("the task"),
            ChatMessage::user("one more thing"),
            ChatMessage::assistant("on it", Vec::new()),
            ChatMessage::user("and another"),
            ChatMessage::user("and the last"),
        ],
        ..Default::default()
    };
    let out = collect(&server.model(None), request).await;
    assert_eq!(out, vec![Ok(ModelChunk::Text("ok".into()))]);
    let sent: Vec<(String, String)> = server.seen()[0].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let want = [
        ("system", "sys"),
        ("user", "the task\n\none more thing"),
        ("assistant", "on it"),
        ("user", "and another\n\nand the last"),
    ]
    .map(|(r, c)| (r.to_owned(), c.to_owned()));
    assert_eq!(sent, want);
}

/// Foreign server (review: model servers' streams): a thinking model's
/// API (DeepSeek's thinking mode, Kimi) refuses an assistant message that
/// called tools without its `reasoning_content` — a 400 after every tool
/// call, read as a server error: the turn failed, and every later request
/// of the conversation the same way. Sent again with an empty one on each
/// assistant message (which these servers take), and so from then on.
#[tokio::test]
async fn a_refusal_for_a_missing_reasoning_content_is_amended() {
    for said in [
        "Missing `reasoning_content` field in the assistant message at message index 2. For more information, please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls",
        // DeepSeek V4 (the last read of this session's change: no "missing").
        "The `reasoning_content` in the thinking mode must be passed back to the API.",
        "assistant message with tool_calls must include reasoning_content",
    ] {
        let refusal = json!({"error": {"message": said, "type": "invalid_request_error", "param": null, "code": "invalid_request_error"}});
        let ok = || Reply::sse(&strs(&[text("ok"), finish("stop"), "[DONE]".to_owned()]));
        let server = MockServer::start(vec![Reply::error(400, refusal), ok(), ok()]).await;
        let model = server.model(None);
        let mut asked = request("what is the weather?");
        let call = ToolCall {
            id: ToolUseId::new("call_1"),
            name: "weather".into(),
            arguments: "{}".into(),
            extra_content: None,
        };
        let mut later = call.clone();
        later.id = ToolUseId::new("call_2");
        asked.messages.extend([
            ChatMessage::assistant("", vec![call]),
            ChatMessage::tool(ToolUseId::new("call_1"), "sunny"),
            ChatMessage::assistant("and tomorrow?", vec![later]),
            ChatMessage::tool(ToolUseId::new("call_2"), "rain"),
        ]);
        for _ in 0..2 {
            let out = collect(&model, asked.clone()).await;
            assert_eq!(out, vec![Ok(ModelChunk::Text("ok".into()))]);
        }
        let seen = server.seen();
        assert_eq!(seen.len(), 3, "one refusal, then each call once");
        for sent in &seen[1..] {
            let messages = sent.body["messages"].as_array().unwrap();
            // Every assistant message (the refusal names one index: the next
            // would be refused in turn), and only theirs.
            for at in [2, 4] {
                assert_eq!(messages[at]["role"], "assistant");
                assert_eq!(messages[at]["reasoning_content"], "", "{messages:?}");
            }
            for at in [0, 1, 3, 5] {
                assert!(messages[at].get("reasoning_content").is_none(), "{at}");
            }
        }
        assert!(
            seen[0].body["messages"][2]
                .get("reasoning_content")
                .is_none()
        );
    }
    // A refusal of the field itself is answered as it is.
    let unknown =
        json!({"error": {"message": "Unknown parameter: 'messages[2].reasoning_content'."}});
    let server = MockServer::start(vec![Reply::error(400, unknown)]).await;
    let mut asked = request("hi");
    asked.messages.push(ChatMessage::assistant("", Vec::new()));
    let out = collect(&server.model(None), asked).await;
    assert!(
        matches!(&out[..], [Err(ModelError::Server { status: 400, .. })]),
        "{out:?}"
    );
    assert_eq!(server.seen().len(), 1);
}

/// Foreign server (review: model servers' streams): Gemini's compatible
/// endpoint answers a 429 with no `Retry-After`, the wait in its body
/// (`RetryInfo`'s `retryDelay`), and wraps its errors in a list: the
/// retries were spent on the backoff (1, 2, 4 s) inside the half minute
/// it named, and the message a model read was the raw JSON (`[{"error":
/// …`). The wait is read from the body — past the adapter's longest, it
/// fails at once, saying it — and the message from the list's one error.
#[tokio::test]
async fn geminis_429_is_waited_as_its_body_says_and_read_from_its_list() {
    let quota = json!([{"error": {"code": 429,
    "message": "Quota exceeded for metric: generate_content_free_tier_requests. Please retry in 30.5s.",
    "status": "RESOURCE_EXHAUSTED",
    "details": [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "30.5s"}
    ]}}]);
    let server = MockServer::start(vec![Reply::error(429, quota)]).await;
    let model = OpenAiCompatible::builder(&server.base_url, "test-model")
        .max_retry_wait(Duration::from_secs(10))
        .build()
        .unwrap();
    let out = collect(&model, request("hi")).await;
    let [
        Err(ModelError::RateLimited {
            retry_after,
            message,
        }),
    ] = &out[..]
    else {
        panic!("{out:?}")
    };
    assert_eq!(*retry_after, Some(Duration::from_millis(30_500)));
    assert!(
        message.starts_with("Quota exceeded for metric"),
        "{message}"
    );
    assert_eq!(
        server.seen().len(),
        1,
        "not retried inside the wait it named"
    );
}

/// Foreign server (review: model servers' streams): Mistral (its API,
/// and vLLM serving its models with their tokenizer) refuses a user
/// message right after a tool result — "Unexpected role 'user' after
/// role 'tool'", a 400 — which a message read mid-turn (a steered child)
/// and a resumed child's first message make: the turn failed, and every
/// later call of the conversation. Sent again with a short assistant
/// message between the two, and so from then on; a server that takes
/// the order is sent it as it is.
#[tokio::test]
async fn a_refused_user_after_a_tool_result_gets_an_assistant_between() {
    let refusal = json!({"object": "error", "message": "Unexpected role 'user' after role 'tool'", "type": "invalid_request_message_order", "param": null, "code": "3230"});
    let ok = || Reply::sse(&strs(&[text("ok"), finish("stop"), "[DONE]".to_owned()]));
    let server = MockServer::start(vec![Reply::error(400, refusal), ok(), ok()]).await;
    let model = server.model(None);
    let mut asked = request("look it up");
    let call = |id: &str| ToolCall {
        id: ToolUseId::new(id),
        name: "search".into(),
        arguments: "{}".into(),
        extra_content: None,
    };
    asked.messages.extend([
        ChatMessage::assistant("", vec![call("call_1")]),
        ChatMessage::tool(ToolUseId::new("call_1"), "found"),
        ChatMessage::user("also the other one"),
        ChatMessage::assistant("", vec![call("call_2")]),
        ChatMessage::tool(ToolUseId::new("call_2"), "found too"),
        ChatMessage::user("thanks"),
    ]);
    for _ in 0..2 {
        let out = collect(&model, asked.clone()).await;
        assert_eq!(out, vec![Ok(ModelChunk::Text("ok".into()))]);
    }
    let seen = server.seen();
    assert_eq!(seen.len(), 3, "one refusal, then each call once");
    let roles = |at: usize| -> Vec<String> {
        seen[at].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap().to_owned())
            .collect()
    };
    let first: Vec<&str> = vec![
        "system",
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "tool",
        "user",
    ];
    assert_eq!(roles(0), first, "sent as it is first");
    let bridged = vec![
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ];
    assert_eq!(roles(1), bridged);
    assert_eq!(roles(2), bridged, "remembered");
    // Not empty: Mistral's validator refuses an assistant message with
    // neither text nor calls.
    assert_eq!(seen[1].body["messages"][4]["content"], "Done.");
}

/// Foreign server (review: model servers' streams): a service that fails
/// the call inside its 200 stream, overloaded, before the answer began
/// (Anthropic's `overloaded_error` event, OpenAI's `server_error` chunk)
/// failed the turn at once, where the same overload sent as a 503 or 529
/// was waited out. The request goes again, as for the status; after some
/// of the answer, or for an error that is no overload, it fails as
/// before (the host would see its text twice).
#[tokio::test(start_paused = true)]
async fn an_overload_inside_the_stream_before_the_answer_is_retried() {
    let ok = || Reply::sse(&strs(&[text("ok"), finish("stop"), "[DONE]".to_owned()]));
    let overloaded =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            .to_string();
    let server_error = json!({"error": {"message": "The server had an error while processing your request.", "type": "server_error"}}).to_string();
    let role = chunk(json!({"role": "assistant", "content": ""}));
    let server = MockServer::start(vec![
        Reply::sse(&[&role, &overloaded]),
        Reply::sse(&[&server_error]),
        ok(),
    ])
    .await;
    let out = collect(&server.model(None), request("hi")).await;
    assert_eq!(out, vec![Ok(ModelChunk::Text("ok".into()))]);
    assert_eq!(server.seen().len(), 3);
    // After output: not sent again.
    let server = MockServer::start(vec![Reply::sse(&[&text("par"), &server_error]), ok()]).await;
    let out = collect(&server.model(None), request("hi")).await;
    assert!(
        matches!(
            &out[..],
            [Ok(ModelChunk::Text(_)), Err(ModelError::MidStream { .. })]
        ),
        "{out:?}"
    );
    assert_eq!(server.seen().len(), 1);
    // No overload, or a status not retried before the stream either
    // (llama-server's 500 for an answer that is no tool call, recorded in
    // `llama-server-error.sse`): not sent again.
    let refused = json!({"error": {"message": "bad tool schema", "type": "invalid_request_error"}})
        .to_string();
    let unparsed = json!({"error": {"code": 500, "message": "The model produced output that does not match the expected peg-native format", "type": "server_error"}}).to_string();
    for error in [refused, unparsed] {
        let server = MockServer::start(vec![Reply::sse(&[&error]), ok()]).await;
        let out = collect(&server.model(None), request("hi")).await;
        assert!(
            matches!(&out[..], [Err(ModelError::MidStream { .. })]),
            "{out:?}"
        );
        assert_eq!(server.seen().len(), 1);
    }
    // Overloaded every time: the retries run out, then the service's words.
    let server = MockServer::start(vec![Reply::sse(&[&overloaded]); 4]).await;
    let out = collect(&server.model(None), request("hi")).await;
    assert!(
        matches!(&out[..], [Err(ModelError::MidStream { message })] if message == "Overloaded"),
        "{out:?}"
    );
    assert_eq!(server.seen().len(), 4, "the first and three retries");
}
