//! A successful response's body before it is read as events: whether it
//! is an event stream at all, whatever its label says, and the start of
//! one that is not, as text.

use std::time::Duration;

use futures_util::{Stream, StreamExt};

/// How much of an error body is read: enough for any service's message
/// (only its first few hundred characters are shown), not a body without
/// end.
pub(super) const MAX_ERROR_BODY: usize = 64 * 1024;

/// What a body that is no event stream looks like.
pub(super) enum NotEvents {
    /// JSON (`{`, `[`): an answer not streamed, or an error object.
    Json,
    /// A web page (`<`): a login page, or a base URL that is not the API's.
    Page,
}

impl NotEvents {
    /// What the service likely did, to say with the refusal.
    pub(super) fn why(&self) -> &'static str {
        match self {
            NotEvents::Json => "does it support `stream: true`?",
            NotEvents::Page => "a login page, or a base URL that is not the API's?",
        }
    }
}

/// What the start of a body says.
pub(super) enum Head {
    /// Events (`data:`, `event:`, `:` …), or a body that ended, failed or
    /// went on too long with nothing but whitespace: read as events.
    Events,
    /// Not events.
    Not(NotEvents),
    /// Nothing but whitespace for `silence`: the call timed out (read on
    /// as events, it waited the silence out a second time).
    Silent,
}

/// How much whitespace a body may begin with before it is read as events
/// whatever follows (held whole, a body of endless spaces was kept to the
/// wall clock).
const MAX_HEAD: usize = 64 * 1024;

/// The chunks read from the start of `body` until its first byte that is
/// neither whitespace nor a byte-order mark (or its end, an error,
/// `silence` with nothing, or [`MAX_HEAD`] bytes), as they came — to be
/// read again ahead of the rest — and what they say. A body's label is
/// not its content: a server that streams events as `application/json`
/// (Micronaut, a gateway) or `text/html` (Flask's default) was refused
/// unread, and a JSON error as `text/plain` (Go's guess) or unlabelled
/// was read as an empty stream, its message lost.
pub(super) async fn head<S, B, E>(body: &mut S, silence: Duration) -> (Vec<Result<B, E>>, Head)
where
    S: Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
{
    let mut taken = Vec::new();
    // A BOM split across chunks: its bytes so far.
    let mut skipped = 0usize;
    loop {
        let item = match tokio::time::timeout(silence, body.next()).await {
            Err(_) => return (taken, Head::Silent),
            Ok(None) => return (taken, Head::Events),
            Ok(Some(item)) => item,
        };
        let first = match &item {
            Ok(chunk) => first_significant(chunk.as_ref(), &mut skipped),
            Err(_) => {
                taken.push(item);
                return (taken, Head::Events);
            }
        };
        taken.push(item);
        if let Some(byte) = first {
            let head = match byte {
                b'{' | b'[' => Head::Not(NotEvents::Json),
                b'<' => Head::Not(NotEvents::Page),
                _ => Head::Events,
            };
            return (taken, head);
        }
        if skipped > MAX_HEAD {
            return (taken, Head::Events);
        }
    }
}

/// The first byte of `chunk` that is neither whitespace nor part of a
/// leading byte-order mark (`skipped`: the bytes of the body seen so far).
fn first_significant(chunk: &[u8], skipped: &mut usize) -> Option<u8> {
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    for &byte in chunk {
        let at = *skipped;
        *skipped += 1;
        if at < BOM.len() && byte == BOM[at] || byte.is_ascii_whitespace() {
            continue;
        }
        return Some(byte);
    }
    None
}

/// The start of a body, as text: the chunks read already (`taken`), then
/// up to [`MAX_ERROR_BODY`] bytes in all, each read timed as the stream's
/// are (`silence`); what is there when the server goes quiet or the limit
/// is reached.
pub(super) async fn read_capped<S, B, E>(
    taken: Vec<Result<B, E>>,
    mut body: S,
    silence: Duration,
) -> String
where
    S: Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
{
    let mut bytes = Vec::new();
    for chunk in taken.into_iter().map_while(Result::ok) {
        bytes.extend_from_slice(chunk.as_ref());
    }
    while bytes.len() < MAX_ERROR_BODY {
        match tokio::time::timeout(silence, body.next()).await {
            Ok(Some(Ok(chunk))) => bytes.extend_from_slice(chunk.as_ref()),
            _ => break,
        }
    }
    bytes.truncate(MAX_ERROR_BODY);
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::stream;

    fn why(head: Head) -> Option<&'static str> {
        match head {
            Head::Not(not) => Some(not.why()),
            Head::Events => None,
            Head::Silent => Some("silent"),
        }
    }

    async fn sniffed(chunks: &[&'static str]) -> (usize, Option<&'static str>) {
        let mut body = stream::iter(chunks.iter().map(|c| Ok::<_, ()>(c.as_bytes())));
        let (taken, sniffed) = head(&mut body, Duration::from_secs(1)).await;
        (taken.len(), why(sniffed))
    }

    #[tokio::test]
    async fn a_body_is_told_by_its_first_byte() {
        let json = Some(NotEvents::Json.why());
        let page = Some(NotEvents::Page.why());
        assert_eq!(
            sniffed(&["data: {}\n\n", "data: [DONE]\n\n"]).await,
            (1, None)
        );
        assert_eq!(sniffed(&[": ping\n"]).await, (1, None));
        assert_eq!(sniffed(&["\n", " \r\n", "event: x\n"]).await, (3, None));
        assert_eq!(sniffed(&["{\"error\":{}}"]).await, (1, json));
        assert_eq!(sniffed(&["\u{feff}  ", "[1]"]).await, (2, json));
        // A BOM split across chunks.
        assert_eq!(sniffed(&["\u{feff}"]).await, (1, None));
        let mut body =
            stream::iter([b"\xEF\xBB".as_slice(), b"\xBF{}".as_slice()].map(Ok::<_, ()>));
        let (taken, sniffed_head) = head(&mut body, Duration::from_secs(1)).await;
        assert_eq!((taken.len(), why(sniffed_head)), (2, json));
        assert_eq!(sniffed(&["<!doctype html>"]).await, (1, page));
        assert_eq!(sniffed(&[]).await, (0, None));
    }

    /// Diff review (thirty-fourth session): a body with nothing but
    /// whitespace waited the silence out here, then again as events; and
    /// endless whitespace was held whole.
    #[tokio::test(start_paused = true)]
    async fn a_silent_or_endless_blank_start_ends_the_peek() {
        let mut silent = stream::iter([Ok::<_, ()>(b"  ".as_slice())]).chain(stream::pending());
        let (_, sniffed_head) = head(&mut silent, Duration::from_secs(1)).await;
        assert_eq!(why(sniffed_head), Some("silent"));
        let spaces = vec![b' '; 1024];
        let mut endless = stream::repeat(Ok::<_, ()>(spaces.as_slice()));
        let (taken, sniffed_head) = head(&mut endless, Duration::from_secs(1)).await;
        assert_eq!(why(sniffed_head), None);
        assert!(taken.len() <= MAX_HEAD / 1024 + 1, "{}", taken.len());
    }
}
