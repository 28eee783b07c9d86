//! The key an adapter sends, left out of every error it returns: a
//! gateway that echoes it (`Incorrect API key provided: sk-…`) put it in
//! an error that reaches the parent model (and so another provider), a
//! child's envelope on disk and the logs.

use crate::model::ModelError;

/// What a key is replaced by.
const REDACTED: &str = "<redacted>";

/// Keys shorter than this are left (they would take words out of the
/// message; no service issues one).
const SHORTEST: usize = 8;

/// `message` with `key` left out: wherever it is whole, and where a
/// message cut short (`…`) cut it — its first characters, at least
/// [`SHORTEST`] of them, before the cut (a key the service echoed late
/// in a long message straddled the cut, and its start was shown).
pub(crate) fn without_key(message: String, key: Option<&str>) -> String {
    let Some(key) = key.filter(|k| k.len() >= SHORTEST) else {
        return message;
    };
    let mut message = match message.contains(key) {
        true => message.replace(key, REDACTED),
        false => message,
    };
    let mut from = 0;
    while let Some(at) = message[from..].find('…').map(|at| from + at) {
        let before = &message[..at];
        let cut = (SHORTEST..key.len())
            .rev()
            .find(|&n| key.is_char_boundary(n) && before.ends_with(&key[..n]));
        if let Some(n) = cut {
            message.replace_range(at - n..at, REDACTED);
            from = at - n + REDACTED.len() + '…'.len_utf8();
        } else {
            from = at + '…'.len_utf8();
        }
    }
    message
}

/// A service's message in `body` (`service_message`), `key` left out:
/// before it is read and cut short (a key echoed late in a long message
/// straddled the cut), and again once read — a key the service escaped
/// in its JSON (`\/` for `/`, PHP's `json_encode`) is whole only then
/// (and a retry's log line carries the message before the last scrub).
pub(crate) fn service_text(body: &str, key: Option<&str>) -> String {
    let read = super::error::service_message(&without_key(body.to_owned(), key));
    without_key(read, key)
}

/// `error` with `key` left out of every text it carries.
pub(crate) fn scrub(error: ModelError, key: Option<&str>) -> ModelError {
    let clean = |text: String| without_key(text, key);
    match error {
        ModelError::Unauthorized { status, message } => ModelError::Unauthorized {
            status,
            message: clean(message),
        },
        ModelError::ModelNotFound {
            model,
            url,
            message,
        } => ModelError::ModelNotFound {
            model,
            url,
            message: clean(message),
        },
        ModelError::MidStream { message } => ModelError::MidStream {
            message: clean(message),
        },
        ModelError::RateLimited {
            retry_after,
            message,
        } => ModelError::RateLimited {
            retry_after,
            message: clean(message),
        },
        ModelError::Server { status, message } => ModelError::Server {
            status,
            message: clean(message),
        },
        ModelError::Malformed(text) => ModelError::Malformed(clean(text)),
        ModelError::Connection(text) => ModelError::Connection(clean(text)),
        ModelError::Other(text) => ModelError::Other(clean(text)),
        e @ (ModelError::EmptyAnswer { .. } | ModelError::Timeout(_)) => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-SECRET-0123456789";

    #[test]
    fn a_key_whole_or_cut_short_at_a_cut_is_left_out() {
        let key = Some(KEY);
        let said = |text: &str| without_key(text.to_owned(), key);
        assert_eq!(said(&format!("bad key {KEY}.")), "bad key <redacted>.");
        // Cut short by a message cut (`truncate`'s `…`), in a sentence.
        assert_eq!(said("key: sk-SECRET-01…"), "key: <redacted>…");
        assert_eq!(
            said("(data: sk-SECRET-0123…) after"),
            "(data: <redacted>…) after"
        );
        // Fewer than eight of its characters, or no cut: left.
        assert_eq!(said("key: sk-SECR…"), "key: sk-SECR…");
        assert_eq!(said("sk-SECRET-01 said"), "sk-SECRET-01 said");
        assert_eq!(without_key(KEY.to_owned(), Some("short")), KEY);
        assert_eq!(without_key(format!("{KEY}…"), None), format!("{KEY}…"));
        // Escaped in the service's JSON, whole once read.
        let slashed = "sk-AB/CD-0123456789";
        let body = format!(
            r#"{{"error":{{"message":"bad {}"}}}}"#,
            slashed.replace('/', "\\/")
        );
        assert_eq!(service_text(&body, Some(slashed)), "bad <redacted>");
        let error = scrub(
            ModelError::MidStream {
                message: format!("echo {KEY}"),
            },
            key,
        );
        assert_eq!(
            error.to_string(),
            "the model service reported an error mid-stream: echo <redacted>"
        );
    }
}
