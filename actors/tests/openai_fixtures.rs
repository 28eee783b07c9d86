//! The OpenAI adapter against the recorded wire format of a real server:
//! llama-cpp-python 0.3.16's responses, recorded by
//! `scripts/real-server/record-llama-cpp-python-fixtures.sh` (every file in
//! `tests/fixtures/sse/` is a real response, replayed byte for byte by a
//! loopback server here, so CI checks the real format without building a
//! server).

#![cfg(feature = "openai")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use futures_util::StreamExt;
use subagents_actors::model::{Model, ModelError};
use subagents_actors::openai::OpenAiCompatible;
use subagents_messages::{ChatMessage, ModelChunk, ModelRequest};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sse")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Serves one HTTP response (`status` line, `content_type`, `body`) to the
/// first request on 127.0.0.1 and returns the base URL.
async fn serve_once(status: &'static str, content_type: &'static str, body: Vec<u8>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        // Read the request head and its body (by content-length).
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = socket.read(&mut buf).await.unwrap();
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen);
            if let Some(head_end) = text.find("\r\n\r\n") {
                let length = text[..head_end]
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                if seen.len() >= head_end + 4 + length {
                    break;
                }
            }
            if n == 0 {
                break;
            }
        }
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        socket.write_all(head.as_bytes()).await.unwrap();
        socket.write_all(&body).await.unwrap();
        socket.shutdown().await.ok();
    });
    format!("http://{addr}/v1")
}

/// The HTTP body of a recorded `curl -i` response.
fn body_of(recorded: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(recorded);
    let at = text
        .find("\r\n\r\n")
        .map(|i| i + 4)
        .or_else(|| text.find("\n\n").map(|i| i + 2))
        .unwrap_or(0);
    recorded[at..].to_vec()
}

async fn call(base_url: String) -> Vec<Result<ModelChunk, ModelError>> {
    let model = OpenAiCompatible::new(base_url, None, "tiny").unwrap();
    model
        .stream(ModelRequest {
            messages: vec![ChatMessage::user("hello")],
            ..Default::default()
        })
        .collect()
        .await
}

const SSE: &str = "text/event-stream; charset=utf-8";

#[tokio::test]
async fn a_text_stream_cut_by_max_tokens_is_truncated_and_its_usage_estimated() {
    let out = call(serve_once("200 OK", SSE, fixture("llama-cpp-python-text.sse")).await).await;
    let out: Vec<ModelChunk> = out.into_iter().map(Result::unwrap).collect();
    let text: String = out
        .iter()
        .filter_map(|c| match c {
            ModelChunk::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert!(!text.is_empty(), "{out:?}");
    // llama-cpp-python says `length` and never reports usage in a stream.
    assert!(
        out.contains(&ModelChunk::Truncated("length".into())),
        "{out:?}"
    );
    assert!(
        matches!(out.last(), Some(ModelChunk::UsageEstimate(u)) if u.completion_tokens > 0),
        "{out:?}"
    );
    assert!(!out.iter().any(|c| matches!(c, ModelChunk::Usage(_))));
}

#[tokio::test]
async fn a_stream_of_empty_deltas_yields_no_text() {
    let out = call(serve_once("200 OK", SSE, fixture("llama-cpp-python-length.sse")).await).await;
    let out: Vec<ModelChunk> = out.into_iter().map(Result::unwrap).collect();
    assert!(
        !out.iter().any(|c| matches!(c, ModelChunk::Text(_))),
        "{out:?}"
    );
    assert_eq!(out[0], ModelChunk::Truncated("length".into()));
}

/// Every delta repeats the call's id and name with only its piece of the
/// arguments: the name is not repeated, the pieces are joined. This server
/// says `tool_calls` even when `max_tokens` cut the call (the arguments
/// are not JSON): the agent refuses to run such a call.
#[tokio::test]
async fn a_streamed_tool_call_that_repeats_its_name_is_assembled_once() {
    let out =
        call(serve_once("200 OK", SSE, fixture("llama-cpp-python-tool-call.sse")).await).await;
    let calls: Vec<_> = out
        .iter()
        .filter_map(|c| match c {
            Ok(ModelChunk::ToolCall(call)) => Some(call.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 1, "{out:?}");
    assert_eq!(calls[0].name, "get_weather");
    assert!(calls[0].id.as_str().starts_with("call__0_get_weather"));
    assert!(
        calls[0].arguments.starts_with(r#"{"city""#),
        "{}",
        calls[0].arguments
    );
    assert!(
        serde_json::from_str::<serde_json::Value>(&calls[0].arguments).is_err(),
        "the recorded call was cut"
    );
}

/// `content: null` in an assistant message is a 500 on this server (a
/// validation error); the adapter never sends it, and reports the 500 with
/// the server's message.
#[tokio::test]
async fn a_validation_500_is_a_server_error_with_the_message() {
    let recorded = fixture("llama-cpp-python-content-null.txt");
    assert!(recorded.starts_with(b"HTTP/1.1 500"));
    let body = body_of(&recorded);
    let out = call(serve_once("500 Internal Server Error", "application/json", body).await).await;
    assert!(
        matches!(&out[..], [Err(ModelError::Server { status: 500, message })]
            if message.starts_with("7 validation errors") && message.contains("ChatCompletionRequestAssistantMessa")),
        "{out:?}"
    );
}

/// The template failing after the 200 went out: a properly closed, empty
/// stream. The server was reached, and failed.
#[tokio::test]
async fn an_empty_stream_is_an_empty_answer_not_unreachable() {
    let recorded = fixture("llama-cpp-python-content-omitted.txt");
    let body = body_of(&recorded);
    assert!(body.iter().all(u8::is_ascii_whitespace), "recorded empty");
    let base = serve_once("200 OK", SSE, body).await;
    let out = call(base.clone()).await;
    assert_eq!(
        out,
        vec![Err(ModelError::EmptyAnswer {
            url: format!("{base}/chat/completions")
        })]
    );
}

/// A completion interrupted by a newer request (llama-cpp-python's
/// `interrupt_requests`, on by default): a role delta, then `[DONE]` — no
/// text, no call, no finish. Recorded from two overlapping requests. It is
/// an empty answer, not an empty completed one (which the agent would
/// have returned as a finished, blank result).
#[tokio::test]
async fn an_interrupted_completion_is_an_empty_answer_not_a_blank_result() {
    let base = serve_once("200 OK", SSE, fixture("llama-cpp-python-interrupted.sse")).await;
    let out = call(base.clone()).await;
    assert_eq!(
        out,
        vec![Err(ModelError::EmptyAnswer {
            url: format!("{base}/chat/completions")
        })]
    );
}
