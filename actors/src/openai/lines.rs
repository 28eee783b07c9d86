//! A pass over the response body before the event-stream parser: older
//! llama.cpp servers (`llama-server` 4227c9be, in llama-cpp-python 0.3.16)
//! report a failure after the `200` as a line `error: {json}`, a field
//! the SSE format does not define — a conforming parser drops it, and the
//! call would read as an empty answer. Such a line becomes `data:
//! {"error": …}`, the form newer servers send, so it is reported as the
//! server's own error. Every other byte passes through unchanged; lines
//! are cut only at `\n`, so a line split across chunks is whole here.

use futures_util::{Stream, StreamExt, stream};
use serde_json::{Value, json};

/// `body` with every `error:` line rewritten as a `data:` error event.
pub(crate) fn error_lines_as_events<S, B, E>(body: S) -> impl Stream<Item = Result<Vec<u8>, E>>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
{
    stream::unfold(
        (Box::pin(body), Vec::<u8>::new(), false),
        |(mut body, mut pending, mut ended)| async move {
            loop {
                if let Some(end) = pending.iter().rposition(|&b| b == b'\n') {
                    let rest = pending.split_off(end + 1);
                    let out = rewrite(&pending);
                    return Some((Ok(out), (body, rest, ended)));
                }
                if ended {
                    if pending.is_empty() {
                        return None;
                    }
                    let out = rewrite(&pending);
                    return Some((Ok(out), (body, Vec::new(), true)));
                }
                match body.next().await {
                    Some(Ok(chunk)) => pending.extend_from_slice(chunk.as_ref()),
                    Some(Err(e)) => return Some((Err(e), (body, pending, ended))),
                    None => ended = true,
                }
            }
        },
    )
}

/// Whole lines (each ending in `\n`, but perhaps the last): `error:` ones
/// rewritten.
fn rewrite(lines: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(lines.len() + 16);
    for line in lines.split_inclusive(|&b| b == b'\n') {
        match line.strip_prefix(b"error:") {
            Some(rest) => {
                let text = String::from_utf8_lossy(rest);
                let text = text.trim();
                let error = serde_json::from_str::<Value>(text)
                    .unwrap_or_else(|_| Value::String(text.to_owned()));
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(json!({ "error": error }).to_string().as_bytes());
                if line.ends_with(b"\n") {
                    out.push(b'\n');
                }
            }
            None => out.extend_from_slice(line),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn through(chunks: &[&str]) -> String {
        let body = stream::iter(
            chunks
                .iter()
                .map(|c| Ok::<_, ()>(c.as_bytes().to_vec()))
                .collect::<Vec<_>>(),
        );
        let out: Vec<Result<Vec<u8>, ()>> = error_lines_as_events(body).collect().await;
        out.into_iter()
            .map(|c| String::from_utf8(c.unwrap_or_default()).unwrap_or_default())
            .collect()
    }

    #[tokio::test]
    async fn error_lines_become_data_events_and_the_rest_passes_unchanged() {
        let body =
            "data: {\"a\":1}\n\nerror: {\"code\":400,\"message\":\"Failed\"}\n\ndata: [DONE]\n\n";
        // Cut at every byte: lines are whole whatever the chunks.
        let chunks: Vec<String> = body.chars().map(String::from).collect();
        let chunks: Vec<&str> = chunks.iter().map(String::as_str).collect();
        let expected = "data: {\"a\":1}\n\ndata: {\"error\":{\"code\":400,\"message\":\"Failed\"}}\n\ndata: [DONE]\n\n";
        assert_eq!(through(&chunks).await, expected);
        assert_eq!(through(&[body]).await, expected);
        assert_eq!(
            through(&["error: plain words"]).await,
            "data: {\"error\":\"plain words\"}"
        );
        assert_eq!(
            through(&["data: x\r\n", "errors: no\n"]).await,
            "data: x\r\nerrors: no\n"
        );
    }
}
