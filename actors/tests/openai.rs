//! The OpenAI-compatible adapter against a real HTTP server on loopback
//! serving recorded chat-completions event streams: what it sends, what it
//! parses, how each failure reads, and that dropping the stream (or an
//! agent's wall clock) aborts the request.

#![cfg(feature = "openai")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::{Value, json};
use subagents_actors::openai::OpenAiCompatible;
use subagents_actors::{AgentBuilder, DelegationBuilder, Model, ModelError, ToolRegistry};
use subagents_demo::Calculator;
use subagents_messages::{
    ChatMessage, LimitKind, Limits, ModelChunk, ModelRequest, Outcome, ToolCall, ToolSpec,
    ToolUseId, Usage,
};
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};

// ---------------------------------------------------------------------------
// The recording server.

/// One piece of a response body.
#[derive(Clone)]
enum Piece {
    /// Write these bytes.
    Send(String),
    /// Wait (real time) before the next piece.
    Wait(Duration),
    /// Wait until the test releases the gate.
    Gate(Arc<Notify>),
    /// Break the connection (the body errors, so the server aborts it).
    Break,
}

/// A canned response.
#[derive(Clone)]
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    /// Wait this long before answering at all.
    delay: Duration,
    body: Vec<Piece>,
}

impl Reply {
    /// An event stream of `data:` events (JSON chunks or `[DONE]`).
    fn sse(events: &[&str]) -> Self {
        Self::sse_pieces(
            events
                .iter()
                .map(|e| Piece::Send(format!("data: {e}\n\n")))
                .collect(),
        )
    }

    fn sse_pieces(body: Vec<Piece>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type", "text/event-stream".into())],
            delay: Duration::ZERO,
            body,
        }
    }

    /// A plain error response with a JSON body.
    fn error(status: u16, body: Value) -> Self {
        Self {
            status,
            headers: vec![("content-type", "application/json".into())],
            delay: Duration::ZERO,
            body: vec![Piece::Send(body.to_string())],
        }
    }

    fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    fn delayed(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: Method,
    path: String,
    headers: HeaderMap,
    body: Value,
}

struct ServerState {
    replies: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<Seen>>,
    /// Told when a response body is dropped (the client went away or the
    /// body ended).
    body_dropped: mpsc::UnboundedSender<()>,
}

struct MockServer {
    base_url: String,
    state: Arc<ServerState>,
    body_dropped: mpsc::UnboundedReceiver<()>,
}

impl MockServer {
    /// Serves `replies` in order, one per request, on 127.0.0.1.
    async fn start(replies: Vec<Reply>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let state = Arc::new(ServerState {
            replies: Mutex::new(replies.into()),
            seen: Mutex::new(Vec::new()),
            body_dropped: tx,
        });
        let app = Router::new().fallback(handle).with_state(state.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            base_url: format!("http://{addr}/v1"),
            state,
            body_dropped: rx,
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    fn model(&self, key: Option<&str>) -> OpenAiCompatible {
        OpenAiCompatible::new(&self.base_url, key.map(str::to_owned), "test-model").unwrap()
    }

    /// Waits (up to 5 s) until a response body was dropped.
    async fn body_was_dropped(&mut self) -> bool {
        tokio::time::timeout(Duration::from_secs(5), self.body_dropped.recv())
            .await
            .is_ok_and(|v| v.is_some())
    }
}

/// Tells the server when a body stream goes away.
struct DropSignal(mpsc::UnboundedSender<()>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

async fn handle(
    State(state): State<Arc<ServerState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    state.seen.lock().unwrap().push(Seen {
        method,
        path: uri.path().to_owned(),
        headers,
        body,
    });
    let reply = state.replies.lock().unwrap().pop_front();
    let Some(reply) = reply else {
        return Response::builder()
            .status(599)
            .body(Body::from("no reply scripted"))
            .unwrap();
    };
    tokio::time::sleep(reply.delay).await;
    let signal = DropSignal(state.body_dropped.clone());
    let pieces: VecDeque<Piece> = reply.body.into();
    let stream =
        futures_util::stream::unfold((pieces, signal), |(mut pieces, signal)| async move {
            loop {
                match pieces.pop_front()? {
                    Piece::Send(text) => {
                        return Some((
                            Ok::<_, std::io::Error>(Bytes::from(text)),
                            (pieces, signal),
                        ));
                    }
                    Piece::Wait(d) => tokio::time::sleep(d).await,
                    Piece::Gate(gate) => gate.notified().await,
                    Piece::Break => {
                        return Some((Err(std::io::Error::other("broken")), (pieces, signal)));
                    }
                }
            }
        });
    let mut response = Response::builder().status(reply.status);
    for (name, value) in reply.headers {
        response = response.header(name, value);
    }
    response.body(Body::from_stream(stream)).unwrap()
}

// ---------------------------------------------------------------------------
// Helpers.

fn chunk(delta: Value) -> String {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": null}]
    })
    .to_string()
}

fn finish(reason: &str) -> String {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "test-model",
        "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]
    })
    .to_string()
}

fn usage(prompt: u64, completion: u64) -> String {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "test-model", "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion}
    })
    .to_string()
}

fn text(t: &str) -> String {
    chunk(json!({"content": t}))
}

fn tool_fragment(index: u32, id: Option<&str>, name: Option<&str>, arguments: &str) -> Value {
    let mut function = json!({"arguments": arguments});
    if let Some(name) = name {
        function["name"] = json!(name);
    }
    let mut fragment = json!({"index": index, "function": function});
    if let Some(id) = id {
        fragment["id"] = json!(id);
        fragment["type"] = json!("function");
    }
    fragment
}

fn tool_chunk(fragments: &[Value]) -> String {
    chunk(json!({"tool_calls": fragments}))
}

fn request(user: &str) -> ModelRequest {
    ModelRequest {
        messages: vec![ChatMessage::system("Be brief."), ChatMessage::user(user)],
        tools: vec![],
        ..Default::default()
    }
}

fn tool_call(id: &str, name: &str, arguments: &str) -> ModelChunk {
    ModelChunk::ToolCall(ToolCall {
        id: ToolUseId::new(id),
        name: name.into(),
        arguments: arguments.into(),
    })
}

/// The call's chunks, without the usage estimate a stream with no usage
/// ends with (`a_stream_without_usage_ends_with_an_estimate` checks it).
async fn collect(
    model: &OpenAiCompatible,
    request: ModelRequest,
) -> Vec<Result<ModelChunk, ModelError>> {
    without_estimate(model.stream(request).collect().await)
}

fn without_estimate(
    chunks: Vec<Result<ModelChunk, ModelError>>,
) -> Vec<Result<ModelChunk, ModelError>> {
    chunks
        .into_iter()
        .filter(|c| !matches!(c, Ok(ModelChunk::UsageEstimate(_))))
        .collect()
}

fn strs(events: &[String]) -> Vec<&str> {
    events.iter().map(String::as_str).collect()
}

// ---------------------------------------------------------------------------
// Streams that work.

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

// ---------------------------------------------------------------------------
// Failures.

#[tokio::test]
async fn a_mid_stream_disconnect_is_a_connection_error() {
    let server = MockServer::start(vec![Reply::sse_pieces(vec![
        Piece::Send(format!("data: {}\n\n", text("partial"))),
        Piece::Send(format!(
            "data: {}\n\n",
            tool_chunk(&[tool_fragment(0, Some("c"), Some("calculator"), "{\"exp")])
        )),
        Piece::Wait(Duration::from_millis(20)),
        Piece::Break,
    ])])
    .await;
    let out = collect(&server.model(None), request("hi")).await;
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(out[0], Ok(ModelChunk::Text("partial".into())));
    let Err(ModelError::Connection(message)) = &out[1] else {
        panic!("expected a connection error, got {:?}", out[1]);
    };
    assert!(message.contains("mid-stream"), "{message}");
}

#[tokio::test]
async fn a_stream_that_stops_before_the_answer_finishes_is_a_connection_error() {
    // A clean end of body with no finish_reason and no [DONE].
    let events = [text("cut")];
    let server = MockServer::start(vec![Reply::sse(&strs(&events))]).await;
    let out = collect(&server.model(None), request("hi")).await;
    assert_eq!(out[0], Ok(ModelChunk::Text("cut".into())));
    assert!(
        matches!(&out[1], Err(ModelError::Connection(m)) if m.contains("closed before the model finished")),
        "{out:?}"
    );
}

#[tokio::test]
async fn rate_limiting_is_retried_after_the_time_the_server_asks() {
    let events = [text("finally"), finish("stop"), "[DONE]".to_owned()];
    let server = MockServer::start(vec![
        Reply::error(
            429,
            json!({"error": {"message": "slow down", "type": "rate_limit"}}),
        )
        .header("retry-after", "1"),
        Reply::sse(&strs(&events)),
    ])
    .await;
    let start = Instant::now();
    let out = collect(&server.model(Some("k")), request("hi")).await;
    let elapsed = start.elapsed();
    assert_eq!(out, vec![Ok(ModelChunk::Text("finally".into()))]);
    assert!(
        elapsed >= Duration::from_secs(1),
        "retried after {elapsed:?}"
    );
    assert!(
        elapsed < Duration::from_secs(3),
        "retried after {elapsed:?}"
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].body, seen[1].body);
    assert_eq!(seen[1].headers["authorization"], "Bearer k");
}

#[tokio::test]
async fn rate_limiting_that_persists_fails_after_the_retries() {
    let limited = Reply::error(429, json!({"error": {"message": "quota exceeded"}}))
        .header("retry-after", "0");
    let server = MockServer::start(vec![
        limited.clone(),
        limited.clone(),
        limited.clone(),
        limited,
    ])
    .await;
    let model = OpenAiCompatible::builder(&server.base_url, "test-model")
        .max_retries(2)
        .build()
        .unwrap();
    let out = collect(&model, request("hi")).await;
    assert_eq!(
        out,
        vec![Err(ModelError::RateLimited {
            retry_after: Some(Duration::ZERO),
            message: "quota exceeded".into()
        })]
    );
    assert_eq!(server.seen().len(), 3, "one try and two retries");
    let Err(error) = &out[0] else { unreachable!() };
    assert!(error.to_string().contains("rate limiting"), "{error}");
}

#[tokio::test]
async fn a_server_error_is_reported_with_its_message_and_not_retried() {
    let server = MockServer::start(vec![Reply::error(
        500,
        json!({"error": {"message": "the GPU caught fire", "type": "server_error"}}),
    )])
    .await;
    let out = collect(&server.model(None), request("hi")).await;
    assert_eq!(
        out,
        vec![Err(ModelError::Server {
            status: 500,
            message: "the GPU caught fire".into()
        })]
    );
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn garbage_events_are_malformed() {
    let events = [
        text("ok so far"),
        "this is {not json".to_owned(),
        text("never read"),
    ];
    let server = MockServer::start(vec![Reply::sse(&strs(&events))]).await;
    let out = collect(&server.model(None), request("hi")).await;
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(out[0], Ok(ModelChunk::Text("ok so far".into())));
    let Err(ModelError::Malformed(message)) = &out[1] else {
        panic!("expected malformed, got {:?}", out[1]);
    };
    assert!(message.contains("this is {not json"), "{message}");
}

#[tokio::test]
async fn json_instead_of_an_event_stream_is_malformed() {
    let server = MockServer::start(vec![Reply::error(
        200,
        json!({"choices": [{"message": {"role": "assistant", "content": "hi"}}]}),
    )])
    .await;
    let out = collect(&server.model(None), request("hi")).await;
    assert!(
        matches!(&out[..], [Err(ModelError::Malformed(m))] if m.contains("stream: true")),
        "{out:?}"
    );
}

#[tokio::test]
async fn refused_credentials_are_unauthorized() {
    let server = MockServer::start(vec![Reply::error(
        401,
        json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}}),
    )])
    .await;
    let out = collect(&server.model(Some("wrong")), request("hi")).await;
    assert_eq!(
        out,
        vec![Err(ModelError::Unauthorized {
            status: 401,
            message: "Incorrect API key provided".into()
        })]
    );
    assert_eq!(server.seen()[0].headers["authorization"], "Bearer wrong");
}

#[tokio::test]
async fn an_unknown_model_is_model_not_found() {
    // Ollama's shape: `error` is a string.
    let server = MockServer::start(vec![Reply::error(
        404,
        json!({"error": "model \"test-model\" not found, try pulling it first"}),
    )])
    .await;
    let out = collect(&server.model(None), request("hi")).await;
    assert_eq!(
        out,
        vec![Err(ModelError::ModelNotFound {
            model: "test-model".into(),
            url: format!("{}/chat/completions", server.base_url),
            message: "model \"test-model\" not found, try pulling it first".into()
        })]
    );
    let Err(error) = &out[0] else { unreachable!() };
    assert!(
        error
            .to_string()
            .contains("`test-model` was not found at `http://"),
        "the URL is in the message: {error}"
    );
}

/// llama-cpp-python reports no usage: the adapter estimates it (about 4
/// characters a token, the request's JSON and the answer), so a token
/// budget still holds.
#[tokio::test]
async fn a_stream_without_usage_ends_with_an_estimate() {
    let events = [text(&"x".repeat(40)), finish("stop"), "[DONE]".to_owned()];
    let server = MockServer::start(vec![Reply::sse(&strs(&events))]).await;
    let out: Vec<_> = server.model(None).stream(request("hi")).collect().await;
    let Some(Ok(ModelChunk::UsageEstimate(estimate))) = out.last() else {
        panic!("no estimate: {out:?}");
    };
    assert_eq!(estimate.completion_tokens, 10);
    let body = server.seen()[0].body.to_string();
    assert_eq!(
        estimate.prompt_tokens,
        (body.chars().count() as u64).div_ceil(4),
        "from the request's JSON"
    );
    // With usage reported, there is no estimate.
    let events = [text("a"), finish("stop"), usage(3, 4), "[DONE]".to_owned()];
    let server = MockServer::start(vec![Reply::sse(&strs(&events))]).await;
    let out: Vec<_> = server.model(None).stream(request("hi")).collect().await;
    assert!(
        !out.iter()
            .any(|c| matches!(c, Ok(ModelChunk::UsageEstimate(_))))
    );
}

/// llama-cpp-python's usual failure: 200, then a properly closed stream
/// with nothing in it. The server was reached; it is not "unreachable".
#[tokio::test]
async fn an_empty_stream_after_200_says_the_server_was_reached_and_failed() {
    let server = MockServer::start(vec![Reply::sse(&[])]).await;
    let out = collect(&server.model(None), request("hi")).await;
    assert_eq!(
        out,
        vec![Err(ModelError::EmptyAnswer {
            url: format!("{}/chat/completions", server.base_url)
        })]
    );
    let Err(error) = &out[0] else { unreachable!() };
    assert!(!error.to_string().contains("could not reach"), "{error}");
}

#[tokio::test]
async fn a_refused_connection_is_a_connection_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let model = OpenAiCompatible::new(format!("http://{addr}/v1"), None, "m").unwrap();
    let out = collect(&model, request("hi")).await;
    let [Err(ModelError::Connection(message))] = &out[..] else {
        panic!("expected a connection error, got {out:?}");
    };
    assert!(message.to_lowercase().contains("connect"), "{message}");
}

#[tokio::test]
async fn a_silent_server_is_a_timeout() {
    let events = [text("late"), finish("stop"), "[DONE]".to_owned()];
    let server = MockServer::start(vec![
        // Silent before the response starts…
        Reply::sse(&strs(&events)).delayed(Duration::from_secs(10)),
        // …and between two events.
        Reply::sse_pieces(vec![
            Piece::Send(format!("data: {}\n\n", text("early"))),
            Piece::Wait(Duration::from_secs(10)),
            Piece::Send("data: [DONE]\n\n".into()),
        ]),
    ])
    .await;
    let model = OpenAiCompatible::builder(&server.base_url, "test-model")
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let start = Instant::now();
    let out = collect(&model, request("hi")).await;
    assert_eq!(
        out,
        vec![Err(ModelError::Timeout(Duration::from_millis(200)))]
    );
    let out = collect(&model, request("hi")).await;
    assert_eq!(
        out,
        vec![
            Ok(ModelChunk::Text("early".into())),
            Err(ModelError::Timeout(Duration::from_millis(200)))
        ]
    );
    assert!(start.elapsed() < Duration::from_secs(3));
}

// ---------------------------------------------------------------------------
// Cancellation.

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

// ---------------------------------------------------------------------------
// End to end through an agent.

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

// ---------------------------------------------------------------------------
// End to end: a parent delegating to a child through `use_agent`, both on
// the adapter.

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
