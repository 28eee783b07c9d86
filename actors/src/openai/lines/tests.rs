//! The pass over the body, line by line.

use super::*;
use crate::openai::sse::{Event, events};

/// A silence no test reaches.
const QUIET: Duration = Duration::from_secs(3_600);

async fn through(chunks: &[&str]) -> String {
    let body = stream::iter(
        chunks
            .iter()
            .map(|c| Ok::<_, ()>(c.as_bytes().to_vec()))
            .collect::<Vec<_>>(),
    );
    let out: Vec<Result<Vec<u8>, ()>> = error_lines_as_events(body, QUIET, |_| ()).collect().await;
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
    let mut events = Box::pin(events(error_lines_as_events(body, QUIET, |_| ())));
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
    let body = stream::iter([
        Ok::<_, ()>(b"data: {\"a\":\"\xff\"}\n\n".to_vec()),
        Ok(b"data: {\"b\":2}\n\n".to_vec()),
    ])
    .chain(stream::pending());
    let mut events = Box::pin(events(error_lines_as_events(body, QUIET, |_| ())));
    let within = Duration::from_secs(5);
    let first = tokio::time::timeout(within, events.next()).await;
    let first = first.expect("stalled").expect("an event").expect("parsed");
    assert_eq!(first.data, "{\"a\":\"\u{fffd}\"}");
    let second = tokio::time::timeout(within, events.next()).await;
    let second = second.expect("stalled").expect("an event").expect("parsed");
    assert_eq!(second.data, "{\"b\":2}");
}

/// Foreign input: a server (or a gateway) that opens its stream with a
/// UTF-8 byte-order mark, as the event-stream format allows: the parser
/// after this cut the mark's first byte off and panicked, so every call
/// failed. Dropped here, whole or split across chunks; a body opening
/// with only part of a mark passes unchanged.
#[tokio::test(start_paused = true)]
async fn a_byte_order_mark_opening_the_body_is_dropped() {
    let splits: [&[&[u8]]; 3] = [
        &[b"\xEF\xBB\xBFdata: {\"a\":1}\n\n"],
        &[b"\xEF", b"\xBB", b"\xBFdata: {\"a\":1}\n\n"],
        &[b"\xEF\xBB\xBF", b"data: {\"a\":1}\n", b"\n"],
    ];
    for chunks in splits {
        let body = stream::iter(chunks.iter().map(|c| Ok::<_, ()>(c.to_vec())));
        let events = events(error_lines_as_events(body, QUIET, |_| ()));
        let events: Vec<_> = events.collect().await;
        let data: Vec<_> = events
            .into_iter()
            .map(|e| e.expect("parsed").data)
            .collect();
        assert_eq!(data, ["{\"a\":1}"], "{chunks:?}");
    }
    // Not a mark: passed on as it came (the lone bytes as U+FFFD).
    let body = stream::iter([Ok::<_, ()>(b"\xEF\xBB".to_vec()), Ok(b"x\n".to_vec())]);
    let out: Vec<_> = error_lines_as_events(body, QUIET, |_| ()).collect().await;
    let out: Vec<u8> = out.into_iter().flat_map(|c| c.expect("bytes")).collect();
    assert_eq!(out, "\u{fffd}x\n\n".as_bytes());
}

/// Foreign input: OpenRouter keeps a connection alive with comment
/// lines while its upstream queues. The parser swallows them without
/// an event, and the silence was timed between events, so a healthy
/// server sending keep-alives timed out. Any bytes restart the clock;
/// a server that sends nothing for the whole silence is still silent.
#[tokio::test(start_paused = true)]
async fn keep_alive_comments_restart_the_silence() {
    let silence = Duration::from_millis(200);
    let keep_alive = stream::iter(0..20).then(|_| async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok::<_, &str>(b": keep-alive\n\n".to_vec())
    });
    let body = stream::iter([Ok::<_, &str>(b"data: a\n\n".to_vec())])
        .chain(keep_alive)
        .chain(stream::iter([Ok(b"data: b\n\n".to_vec())]))
        .chain(stream::pending());
    let mut events = Box::pin(events(error_lines_as_events(body, silence, |_| "silent")));
    let data = |e: Option<Result<Event, _>>| e.map(|e| e.map(|e| e.data));
    assert_eq!(data(events.next().await), Some(Ok("a".to_owned())));
    // A second's worth of keep-alives, five times the silence.
    assert_eq!(data(events.next().await), Some(Ok("b".to_owned())));
    let start = tokio::time::Instant::now();
    let end = events.next().await.expect("an item").map(|e| e.data);
    assert!(matches!(end, Err("silent")), "{end:?}");
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
    let events = |body: &'static [u8]| {
        let body = stream::iter([Ok::<_, ()>(body.to_vec())]);
        events(error_lines_as_events(body, QUIET, |_| ()))
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
    let body =
        stream::iter([Ok::<_, ()>(b"data: {\"a\":1}\r\r".to_vec())]).chain(stream::pending());
    let mut events = Box::pin(events(error_lines_as_events(body, QUIET, |_| ())));
    let event = tokio::time::timeout(Duration::from_secs(5), events.next()).await;
    let event = event
        .expect("held back")
        .expect("an event")
        .expect("parsed");
    assert_eq!(event.data, "{\"a\":1}");
}
