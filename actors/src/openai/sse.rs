//! The event-stream format ("server-sent events", WHATWG HTML §9.2), read
//! from the whole lines [`super::lines`] passes on: each line is looked at
//! once, and only what an answer needs is kept — an event's type and its
//! data. `eventsource-stream` (0.2.3), read before, failed at the edges a
//! server's answer reaches: it copied the rest of its buffer for every
//! line (a chunk of short lines cost its size squared, in one poll that a
//! wall clock or a stop cannot cut), copied the last event id at every
//! blank line (one 15 MB `id:` line, then newlines: minutes in one poll),
//! and panicked on a byte-order mark at its start (one is dropped in
//! `lines`; a second is a field named `\u{feff}data`, ignored here, as
//! the format says).

use futures_util::{Stream, StreamExt, stream};

/// One event: its type (`message` unless the server named one) and its
/// data (its `data:` lines, joined by `\n`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    pub(crate) event: String,
    pub(crate) data: String,
}

/// The events of `lines` (whole lines, each ended by `\n`; the last may
/// be unended, and is then dropped, as the format drops an event the
/// stream did not end). An error passes through where it came.
pub(crate) fn events<S, E>(lines: S) -> impl Stream<Item = Result<Event, E>>
where
    S: Stream<Item = Result<Vec<u8>, E>>,
{
    lines
        .scan(Reader::default(), |reader, item| {
            let out = match item {
                Ok(bytes) => reader.read(&bytes).into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e)],
            };
            std::future::ready(Some(out))
        })
        .flat_map(stream::iter)
}

/// The event being read.
#[derive(Default)]
struct Reader {
    /// Bytes of a line not ended yet.
    partial: Vec<u8>,
    event: String,
    data: String,
}

impl Reader {
    /// Reads `bytes`; the events they end.
    fn read(&mut self, bytes: &[u8]) -> Vec<Event> {
        let mut out = Vec::new();
        let mut rest = bytes;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            let (line, next) = (&rest[..end], &rest[end + 1..]);
            if self.partial.is_empty() {
                self.line(line, &mut out);
            } else {
                let mut whole = std::mem::take(&mut self.partial);
                whole.extend_from_slice(line);
                self.line(&whole, &mut out);
            }
            rest = next;
        }
        self.partial.extend_from_slice(rest);
        out
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<Event>) {
        let line = String::from_utf8_lossy(line);
        let line = line.strip_suffix('\r').unwrap_or(&line);
        if line.is_empty() {
            // Dispatched only with data; either way the type is reset.
            // Its last `\n` dropped in place: no copy of the data, which
            // is every token of a streamed answer.
            let event = std::mem::take(&mut self.event);
            let mut data = std::mem::take(&mut self.data);
            if data.pop().is_some() {
                let event = if event.is_empty() {
                    "message".to_owned()
                } else {
                    event
                };
                out.push(Event { event, data });
            }
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            // A comment (`: keep-alive`).
            "" => {}
            "event" => value.clone_into(&mut self.event),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            // `id` and `retry` are for reconnecting, which a call never
            // does; any other field is ignored, as the format says.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
