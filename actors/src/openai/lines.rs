//! A pass over the response body before the event-stream reader
//! ([`super::sse`]): older
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
//! closed). Every line end leaves as one `\n`, so the reader after this
//! never holds a `\r` it cannot yet tell from the start of a `\r\n` (the
//! parser read before did: an event a server ended with lone `\r`s waited
//! for the server's next byte). A `\r\n` cut between two chunks is one line end here too: the
//! `\n` that opens the next chunk is dropped.
//!
//! Two more things are done here, where the bytes arrive. The server's
//! silence is timed: any bytes restart the clock, a keep-alive comment
//! (`: OPENROUTER PROCESSING`) included, which the reader after this
//! swallows without yielding an event. And each line is passed on as
//! UTF-8, a byte that is not replaced by U+FFFD (the parser read before
//! held an invalid byte for ever and passed nothing after it: one bad
//! byte stalled the whole answer until the silence ran out). A UTF-8
//! byte-order mark opening the body (the format allows one) is dropped
//! (that parser panicked on it).

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
            Read::Fresh,
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
                    Read::Fresh | Read::Reading => {}
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
                        if read == Read::Fresh {
                            read = opened(&mut pending);
                            scanned = 0;
                        }
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
#[derive(Clone, Copy, PartialEq, Eq)]
enum Read {
    /// Fewer than three bytes have come, all of them a byte-order mark's
    /// (none at all, first).
    Fresh,
    Reading,
    /// The body ended; what it left is still to be passed on.
    Ended,
    /// Everything is passed on.
    Over,
}

/// The state after the body's first bytes, `pending`: a UTF-8 byte-order
/// mark opening the body is dropped once it is whole. The event-stream
/// format allows one, and the parser after this panics on it (it cuts
/// the first character's first byte off: `eventsource-stream` 0.2.3), so
/// every call to a server that writes one failed.
fn opened(pending: &mut Vec<u8>) -> Read {
    if pending.len() < BOM.len() && BOM.starts_with(pending) {
        return Read::Fresh;
    }
    if pending.starts_with(BOM) {
        pending.drain(..BOM.len());
    }
    Read::Reading
}

/// The UTF-8 byte-order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

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
mod tests;
