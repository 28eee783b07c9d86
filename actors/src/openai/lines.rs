//! A pass over the response body before the event-stream parser: older
//! llama.cpp servers (`llama-server` 4227c9be, in llama-cpp-python 0.3.16)
//! report a failure after the `200` as a line `error: {json}`, a field
//! the SSE format does not define — a conforming parser drops it, and the
//! call would read as an empty answer. Such a line becomes `data:
//! {"error": …}`, the form newer servers send, so it is reported as the
//! server's own error. Every other byte passes through unchanged; lines
//! are cut at `\n` or `\r` (the event-stream format ends a line with
//! either, or both), so a line split across chunks is whole here, and a
//! server that ends its lines with a lone `\r` is passed on line by line
//! (cut only at `\n`, such a stream was held back until the connection
//! closed). Every line end leaves as one `\n`: the event-stream parser
//! after this holds a `\r` it cannot yet tell from the start of a `\r\n`,
//! so an event a server ended with lone `\r`s waited for the server's next
//! byte. A `\r\n` cut between two chunks is one line end here too: the
//! `\n` that opens the next chunk is dropped.
//!
//! Two more things are done here, where the bytes arrive. The server's
//! silence is timed: any bytes restart the clock, a keep-alive comment
//! (`: OPENROUTER PROCESSING`) included, which the event parser after this
//! swallows without yielding an event. And each line is passed on as
//! UTF-8, a byte that is not replaced by U+FFFD: the event parser holds an
//! invalid byte for ever and passes nothing after it, so one bad byte
//! stalled the whole answer until the silence ran out.

use std::time::Duration;

use futures_util::{Stream, StreamExt, stream};
use serde_json::{Value, json};

/// The longest line passed on, and the longest event (its lines with no
/// blank one between them): a server that never ends one (a stream that
/// never ends, a body that is no event stream, a proxy that drops blank
/// lines) is failed there, not held in memory to the wall clock.
pub(crate) const MAX_LINE: usize = 16 << 20;

/// Why the body was cut here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Nothing came for the silence.
    Silent,
    /// A line, or an event, went past [`MAX_LINE`] bytes.
    LineTooLong,
}

/// `body` with every `error:` line rewritten as a `data:` error event and
/// every line made UTF-8; `fault(Silent)` as its last item if the body
/// yields nothing for `silence`, `fault(LineTooLong)` if a line goes past
/// [`MAX_LINE`]. Each byte is looked at once for a line end (a long line
/// was scanned again with every chunk that did not end it).
pub(crate) fn error_lines_as_events<S, B, E>(
    body: S,
    silence: Duration,
    fault: fn(Fault) -> E,
) -> impl Stream<Item = Result<Vec<u8>, E>>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
{
    stream::unfold(
        (
            Box::pin(body),
            Vec::<u8>::new(),
            Read::Reading,
            false,
            0_usize,
        ),
        move |(mut body, mut pending, mut read, mut after_cr, event)| async move {
            // What is held has no line end (it is what followed the last).
            let mut scanned = pending.len();
            loop {
                let end = pending[scanned..]
                    .iter()
                    .rposition(|&b| ends_line(b))
                    .map(|at| scanned + at);
                scanned = pending.len();
                if let Some(end) = end {
                    let rest = pending.split_off(end + 1);
                    let out = rewrite(&pending);
                    // Lines with no blank one between them are one event,
                    // which the event parser holds whole: cut as a line
                    // that never ends is (a proxy dropping blank lines
                    // held the whole answer to the wall clock).
                    let event = event_open(event, &out);
                    if event > MAX_LINE {
                        let over = (body, Vec::new(), Read::Over, false, 0);
                        return Some((Err(fault(Fault::LineTooLong)), over));
                    }
                    // A `\r` last: a `\n` opening the next chunk is its end.
                    let after_cr = pending[end] == b'\r' && rest.is_empty();
                    return Some((Ok(out), (body, rest, read, after_cr, event)));
                }
                match read {
                    Read::Reading => {}
                    Read::Over => return None,
                    // What is left is a line the server did not end: passed
                    // on as it is (a cut event stays cut).
                    Read::Ended if !pending.is_empty() => {
                        let out = rewrite(&pending);
                        return Some((Ok(out), (body, Vec::new(), Read::Over, false, 0)));
                    }
                    // The body ended after a line end: one more, so a last
                    // event the server ended with a single line end is
                    // dispatched, not dropped at the end of the stream.
                    Read::Ended => {
                        let over = (body, Vec::new(), Read::Over, false, 0);
                        return Some((Ok(b"\n".to_vec()), over));
                    }
                }
                match tokio::time::timeout(silence, body.next()).await {
                    Ok(Some(Ok(chunk))) => {
                        let mut bytes = chunk.as_ref();
                        if after_cr && !bytes.is_empty() {
                            bytes = bytes.strip_prefix(b"\n").unwrap_or(bytes);
                            after_cr = false;
                        }
                        pending.extend_from_slice(bytes);
                        if pending.len().saturating_add(event) > MAX_LINE
                            && !pending[scanned..].iter().any(|&b| ends_line(b))
                        {
                            let over = (body, Vec::new(), Read::Over, false, 0);
                            return Some((Err(fault(Fault::LineTooLong)), over));
                        }
                    }
                    Ok(Some(Err(e))) => {
                        return Some((Err(e), (body, pending, read, after_cr, event)));
                    }
                    Ok(None) => read = Read::Ended,
                    // Nothing more is read: the caller ends the call.
                    Err(_) => {
                        let over = (body, Vec::new(), Read::Over, false, 0);
                        return Some((Err(fault(Fault::Silent)), over));
                    }
                }
            }
        },
    )
}

/// The bytes of the event left open after `out` (whole lines, rewritten):
/// `open` before it, plus its lines since its last blank one.
fn event_open(open: usize, out: &[u8]) -> usize {
    out.split_inclusive(|&b| b == b'\n')
        .fold(open, |open, line| match line {
            b"\n" => 0,
            line => open.saturating_add(line.len()),
        })
}

/// How far the body has been read.
#[derive(Clone, Copy)]
enum Read {
    Reading,
    /// The body ended; what it left is still to be passed on.
    Ended,
    /// Everything is passed on.
    Over,
}

/// A byte that ends a line in an event stream.
fn ends_line(byte: u8) -> bool {
    byte == b'\n' || byte == b'\r'
}

/// Whole lines (each ending in `\n`, `\r` or `\r\n`, but perhaps the
/// last): `error:` ones rewritten, the rest passed on as UTF-8 (a line end
/// is never inside a character, so no character is cut here), each line
/// end as one `\n`.
fn rewrite(lines: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(lines.len() + 16);
    let mut rest = lines;
    while !rest.is_empty() {
        let (line, ended, next) = match rest.iter().position(|&b| ends_line(b)) {
            Some(at) => {
                let crlf = rest[at] == b'\r' && rest.get(at + 1) == Some(&b'\n');
                (&rest[..at], true, &rest[at + 1 + usize::from(crlf)..])
            }
            None => (rest, false, &[][..]),
        };
        match line.strip_prefix(b"error:") {
            Some(text) => {
                let text = String::from_utf8_lossy(text);
                let text = text.trim();
                let error = serde_json::from_str::<Value>(text)
                    .unwrap_or_else(|_| Value::String(text.to_owned()));
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(json!({ "error": error }).to_string().as_bytes());
            }
            None => out.extend_from_slice(String::from_utf8_lossy(line).as_bytes()),
        }
        if ended {
            out.push(b'\n');
        }
        rest = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A silence no test reaches.
    const QUIET: Duration = Duration::from_secs(3_600);

    async fn through(chunks: &[&str]) -> String {
        let body = stream::iter(
            chunks
                .iter()
                .map(|c| Ok::<_, ()>(c.as_bytes().to_vec()))
                .collect::<Vec<_>>(),
        );
        let out: Vec<Result<Vec<u8>, ()>> =
            error_lines_as_events(body, QUIET, |_| ()).collect().await;
        out.into_iter()
            .map(|c| String::from_utf8(c.unwrap_or_default()).unwrap_or_default())
            .collect()
    }

    /// A stream that never ends a line (a body that is no event stream, a
    /// server that loops inside one line): held in memory to the wall
    /// clock, each chunk scanning all of it again. Failed past the limit;
    /// a long line under it, in small chunks, still arrives whole.
    #[tokio::test]
    async fn a_line_that_never_ends_is_cut_at_the_limit() {
        let mib = vec![b'a'; 1 << 20];
        let endless = stream::iter((0..(MAX_LINE >> 20) + 2).map(|_| Ok::<_, Fault>(mib.clone())));
        let out: Vec<Result<Vec<u8>, Fault>> = error_lines_as_events(endless, QUIET, |fault| fault)
            .collect()
            .await;
        let read: Vec<Result<usize, Fault>> = out
            .iter()
            .map(|r| r.as_ref().map(Vec::len).map_err(|f| *f))
            .collect();
        assert_eq!(
            read,
            [Err(Fault::LineTooLong)],
            "nothing passed on before the cut"
        );
        let long = "x".repeat(3 << 20);
        let pieces: Vec<&str> = long
            .as_bytes()
            .chunks(4096)
            .map(|c| std::str::from_utf8(c).unwrap())
            .chain(["\n"])
            .collect();
        assert!(
            through(&pieces).await == format!("{long}\n\n"),
            "the long line whole"
        );
    }

    /// Foreign stream (a proxy that drops blank lines): every line ended,
    /// but with no blank one between them the event parser after this
    /// appended them all to one event — held in memory to the wall clock,
    /// no chunk reaching the turn (so no token budget), and `Malformed` at
    /// the end. Cut once the open event passes the limit; events under it,
    /// each ended by a blank line, pass however many there are.
    #[tokio::test]
    async fn an_event_that_never_ends_is_cut_at_the_limit() {
        let line = format!("data: {}\n", "x".repeat(1 << 20)).into_bytes();
        let lines = (MAX_LINE >> 20) + 4;
        let endless = stream::iter((0..lines).map(move |_| Ok::<_, Fault>(line.clone())));
        let out: Vec<Result<usize, Fault>> = error_lines_as_events(endless, QUIET, |fault| fault)
            .map(|r| r.map(|bytes| bytes.len()))
            .collect()
            .await;
        assert_eq!(
            out.last(),
            Some(&Err(Fault::LineTooLong)),
            "{} items",
            out.len()
        );
        assert!(
            out.len() <= MAX_LINE >> 20,
            "cut at the limit: {} items",
            out.len()
        );

        let event = format!("data: {}\n\n", "x".repeat(1 << 20)).into_bytes();
        let events = stream::iter((0..lines).map(move |_| Ok::<_, Fault>(event.clone())));
        let out: Vec<Result<Vec<u8>, Fault>> = error_lines_as_events(events, QUIET, |fault| fault)
            .collect()
            .await;
        assert!(out.iter().all(Result::is_ok), "events under the limit pass");
    }

    #[tokio::test]
    async fn error_lines_become_data_events_and_the_rest_passes_unchanged() {
        let body =
            "data: {\"a\":1}\n\nerror: {\"code\":400,\"message\":\"Failed\"}\n\ndata: [DONE]\n\n";
        // Cut at every byte: lines are whole whatever the chunks.
        let chunks: Vec<String> = body.chars().map(String::from).collect();
        let chunks: Vec<&str> = chunks.iter().map(String::as_str).collect();
        // (The last `\n`: one more line end after a body that ended with one.)
        let expected = "data: {\"a\":1}\n\ndata: {\"error\":{\"code\":400,\"message\":\"Failed\"}}\n\ndata: [DONE]\n\n\n";
        assert_eq!(through(&chunks).await, expected);
        assert_eq!(through(&[body]).await, expected);
        assert_eq!(
            through(&["error: plain words"]).await,
            "data: {\"error\":\"plain words\"}"
        );
        assert_eq!(
            through(&["data: x\r\n", "errors: no\n"]).await,
            "data: x\nerrors: no\n\n"
        );
        // Lines ended by `\r` alone, or `\r\n` cut between chunks: each
        // line end one `\n`.
        assert_eq!(
            through(&["data: x\r\rerror: {\"message\":\"no\"}\r\r"]).await,
            "data: x\n\ndata: {\"error\":{\"message\":\"no\"}}\n\n\n"
        );
        assert_eq!(through(&["a\r", "\nb\r", "c\n"]).await, "a\nb\nc\n\n");
        assert_eq!(through(&["a\r", "", "\n\n"]).await, "a\n\n\n");
        let crlf = "data: x\r\n\r\nerror: no\r\n\r\n";
        let chunks: Vec<String> = crlf.chars().map(String::from).collect();
        let chunks: Vec<&str> = chunks.iter().map(String::as_str).collect();
        assert_eq!(
            through(&chunks).await,
            "data: x\n\ndata: {\"error\":\"no\"}\n\n\n"
        );
    }

    /// Foreign input: a server ending its lines with a lone `\r` (the
    /// format allows it) is passed on as each line arrives — cut only at
    /// `\n`, nothing came through until the connection closed, so a
    /// healthy stream timed out. The event parser after it then reads each
    /// event (here, through the whole call path's two stages).
    #[tokio::test]
    async fn lines_ended_by_a_lone_cr_pass_as_they_arrive() {
        use eventsource_stream::Eventsource;
        let first = b"data: {\"a\":1}\r\r".to_vec();
        let second = b"data: {\"b\":2}\r\r".to_vec();
        let body = stream::iter([Ok::<_, ()>(first.clone()), Ok(second)]).chain(stream::pending());
        let mut lines = Box::pin(error_lines_as_events(body, QUIET, |_| ()));
        let within = std::time::Duration::from_secs(5);
        let got = tokio::time::timeout(within, lines.next()).await;
        assert_eq!(
            got,
            Ok(Some(Ok(b"data: {\"a\":1}\n\n".to_vec()))),
            "held back"
        );
        drop(first);
        let body = stream::iter([
            Ok::<_, ()>(b"data: {\"a\":1}\r\r".to_vec()),
            Ok(b"data: {\"b\":2}\r\r".to_vec()),
        ])
        .chain(stream::pending());
        let mut events = Box::pin(error_lines_as_events(body, QUIET, |_| ()).eventsource());
        let event = tokio::time::timeout(within, events.next()).await;
        let event = event
            .expect("held back")
            .expect("an event")
            .expect("parsed");
        assert_eq!(event.data, "{\"a\":1}");
    }

    /// Foreign input: one byte that is not UTF-8 in a line (a server
    /// cutting a character, a proxy's mangling) stalled the stream: the
    /// event parser held it and passed nothing after it, so the answer's
    /// later events never came. It is replaced; the events go on.
    #[tokio::test(start_paused = true)]
    async fn a_byte_that_is_not_utf8_does_not_stall_the_events_after_it() {
        use eventsource_stream::Eventsource;
        let body = stream::iter([
            Ok::<_, ()>(b"data: {\"a\":\"\xff\"}\n\n".to_vec()),
            Ok(b"data: {\"b\":2}\n\n".to_vec()),
        ])
        .chain(stream::pending());
        let mut events = Box::pin(error_lines_as_events(body, QUIET, |_| ()).eventsource());
        let within = Duration::from_secs(5);
        let first = tokio::time::timeout(within, events.next()).await;
        let first = first.expect("stalled").expect("an event").expect("parsed");
        assert_eq!(first.data, "{\"a\":\"\u{fffd}\"}");
        let second = tokio::time::timeout(within, events.next()).await;
        let second = second.expect("stalled").expect("an event").expect("parsed");
        assert_eq!(second.data, "{\"b\":2}");
    }

    /// Foreign input: OpenRouter keeps a connection alive with comment
    /// lines while its upstream queues. The parser swallows them without
    /// an event, and the silence was timed between events, so a healthy
    /// server sending keep-alives timed out. Any bytes restart the clock;
    /// a server that sends nothing for the whole silence is still silent.
    #[tokio::test(start_paused = true)]
    async fn keep_alive_comments_restart_the_silence() {
        use eventsource_stream::Eventsource;
        let silence = Duration::from_millis(200);
        let keep_alive = stream::iter(0..20).then(|_| async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok::<_, &str>(b": keep-alive\n\n".to_vec())
        });
        let body = stream::iter([Ok::<_, &str>(b"data: a\n\n".to_vec())])
            .chain(keep_alive)
            .chain(stream::iter([Ok(b"data: b\n\n".to_vec())]))
            .chain(stream::pending());
        let mut events = Box::pin(error_lines_as_events(body, silence, |_| "silent").eventsource());
        let data = |e: Option<Result<eventsource_stream::Event, _>>| e.map(|e| e.map(|e| e.data));
        assert_eq!(data(events.next().await), Some(Ok("a".to_owned())));
        // A second's worth of keep-alives, five times the silence.
        assert_eq!(data(events.next().await), Some(Ok("b".to_owned())));
        let start = tokio::time::Instant::now();
        let end = events.next().await.expect("an item").map(|e| e.data);
        assert!(
            matches!(
                end,
                Err(eventsource_stream::EventStreamError::Transport("silent"))
            ),
            "{end:?}"
        );
        assert_eq!(start.elapsed(), silence);
    }

    /// Foreign input: a last event the server ended with one line end, or
    /// with lone `\r`s, was dropped at the end of the stream (the parser
    /// dispatches an event at a blank line, and holds a lone `\r` as a
    /// possible `\r\n`): a finish sent that way read as a cut. One more
    /// line end after a body that ended with one dispatches it; a line the
    /// server did not end stays cut.
    #[tokio::test]
    async fn a_last_event_with_one_line_end_is_not_dropped() {
        use eventsource_stream::Eventsource;
        let events = |body: &'static [u8]| {
            let body = stream::iter([Ok::<_, ()>(body.to_vec())]);
            error_lines_as_events(body, QUIET, |_| ())
                .eventsource()
                .map(|e| e.map(|e| e.data).unwrap_or_default())
                .collect::<Vec<_>>()
        };
        assert_eq!(events(b"data: a\n\ndata: last\n").await, ["a", "last"]);
        assert_eq!(events(b"data: a\r\rdata: last\r\r").await, ["a", "last"]);
        assert_eq!(
            events(b"data: a\r\n\r\ndata: last\r\n").await,
            ["a", "last"]
        );
        assert_eq!(events(b"data: a\n\ndata: {\"cut").await, ["a"]);
    }

    /// Foreign input: an event a server ended with lone `\r`s, the server
    /// then quiet (its finish, before a `[DONE]` it sends later; a tool
    /// call before a long think). The event parser holds a last `\r` until
    /// the next byte tells it from a `\r\n`, so the event waited on the
    /// server. Every line end leaves here as `\n`, which it never holds.
    #[tokio::test(start_paused = true)]
    async fn an_event_ended_by_lone_crs_is_not_held_for_the_next_byte() {
        use eventsource_stream::Eventsource;
        let body =
            stream::iter([Ok::<_, ()>(b"data: {\"a\":1}\r\r".to_vec())]).chain(stream::pending());
        let mut events = Box::pin(error_lines_as_events(body, QUIET, |_| ()).eventsource());
        let event = tokio::time::timeout(Duration::from_secs(5), events.next()).await;
        let event = event
            .expect("held back")
            .expect("an event")
            .expect("parsed");
        assert_eq!(event.data, "{\"a\":1}");
    }
}
