//! The event-stream reader: the format's rules, and what a hostile or
//! broken server's answer costs it.

use futures_util::{StreamExt, stream};

use super::*;
use crate::openai::lines::error_lines_as_events;

/// The events `chunks` (a body, as a server sends it) make, through both
/// stages of the call path.
fn read(chunks: Vec<Vec<u8>>) -> Vec<(String, String)> {
    let body = stream::iter(chunks.into_iter().map(Ok::<_, ()>));
    let lines = error_lines_as_events(body, std::time::Duration::from_secs(3600), |_| ());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let events: Vec<_> = runtime.block_on(events(lines).collect());
    (events.into_iter())
        .map(|e| e.expect("no error"))
        .map(|e| (e.event, e.data))
        .collect()
}

fn message(data: &str) -> (String, String) {
    ("message".to_owned(), data.to_owned())
}

/// The format's rules a chat-completion stream meets: `data:` lines
/// joined by `\n`, one space after the colon dropped (and only one), a
/// named event, comments and unknown fields ignored, a blank line with no
/// data dispatching nothing (and resetting the type), a field with no
/// colon, an event the stream did not end dropped.
#[test]
fn events_are_read_as_the_format_says() {
    let body = concat!(
        ": keep-alive\n",
        "data: {\"a\":1}\n\n",
        "data:x\ndata:  two spaces\n\n",
        "event: error\nid: 7\nretry: 10\nfoo: bar\ndata: {\"error\":1}\n\n",
        "event: ignored\n\n",
        "data\n\n",
        "data: cut"
    );
    assert_eq!(
        read(vec![body.as_bytes().to_vec()]),
        [
            message("{\"a\":1}"),
            message("x\n two spaces"),
            ("error".to_owned(), "{\"error\":1}".to_owned()),
            message(""),
        ]
    );
    // The same, a byte at a time.
    let bytes = body.bytes().map(|b| vec![b]).collect();
    assert_eq!(read(bytes).len(), 4);
}

/// Foreign input (review: dependencies): a body opening with two
/// byte-order marks — `lines` drops one, the format drops one; the
/// parser read before then cut the second's first byte off and panicked
/// again. The second is part of a field's name here, a field ignored.
#[test]
fn a_second_byte_order_mark_is_a_field_ignored_not_a_panic() {
    let body = b"\xEF\xBB\xBF\xEF\xBB\xBFdata: {}\n\ndata: {\"a\":1}\n\n".to_vec();
    assert_eq!(read(vec![body]), [message("{\"a\":1}")]);
    let split = vec![
        b"\xEF\xBB\xBF".to_vec(),
        b"\xEF\xBB\xBFdata: {}\n\n".to_vec(),
    ];
    assert_eq!(read(split), []);
}

/// Foreign input (review: dependencies), what it costs: the parser read
/// before copied the event id into every blank line's dispatch (a 1 MiB
/// `id:` line, then 2,000 blank lines: 2 GiB copied), and copied the rest
/// of its buffer at every line (one chunk of 20,000 blank lines: 200 MB),
/// each in one poll no wall clock or stop can cut. Counted, the reading
/// stays within a few times what it is given.
#[test]
fn a_long_id_or_a_chunk_of_blank_lines_costs_what_it_weighs() {
    let long_id = vec![
        format!("id: {}\n\n", "a".repeat(1 << 20)).into_bytes(),
        "\n".repeat(2_000).into_bytes(),
        b"data: {\"a\":1}\n\n".to_vec(),
    ];
    let blank_lines = vec![format!("{}data: {{\"a\":1}}\n\n", "\n".repeat(20_000)).into_bytes()];
    for (name, chunks) in [("a long id", long_id), ("blank lines", blank_lines)] {
        let given: usize = chunks.iter().map(Vec::len).sum();
        let mut events = Vec::new();
        let cost = allocation_counter::measure(|| events = read(chunks));
        assert_eq!(events, [message("{\"a\":1}")], "{name}");
        let limit = 4 * given as u64 + (1 << 20);
        assert!(
            cost.bytes_total < limit,
            "{name}: {} bytes allocated",
            cost.bytes_total
        );
    }
}
