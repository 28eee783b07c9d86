//! The OpenAI-compatible adapter against a real HTTP server on loopback
//! serving recorded chat-completions event streams: what it sends, what it
//! parses, how each failure reads, and that dropping the stream (or an
//! agent's wall clock) aborts the request.

#![cfg(feature = "openai")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod config;
mod end_to_end;
mod failures;
mod gateways;
mod servers;
mod streams;

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
    query: Option<String>,
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
        query: uri.query().map(str::to_owned),
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
    ModelChunk::ToolCall(Box::new(ToolCall {
        id: ToolUseId::new(id),
        name: name.into(),
        arguments: arguments.into(),
        extra_content: None,
    }))
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
