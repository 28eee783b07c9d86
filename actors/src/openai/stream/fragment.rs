//! What a tool-call fragment starts: a piece of the held call's name, or
//! another whole call of the held call's function.

use serde_json::Value;

use super::PartialCall;

/// Whether `piece` continues the held call's name to (the start of) the
/// name of a tool the request offered, on a call with no arguments yet:
/// a name streamed in pieces (openai-python's accumulator joins them;
/// Gemini has sent `edit_ex`, then `isting_file`).
pub(super) fn continues_name(offered: &[String], held: &PartialCall, piece: &str) -> bool {
    held.arguments.is_empty()
        && offered.iter().any(|tool| {
            tool.strip_prefix(held.name.as_str())
                .is_some_and(|rest| rest.starts_with(piece))
        })
}

/// Whether a fragment naming the held call's own function, with no id,
/// opens another call: the held arguments are a whole JSON object already
/// and the fragment's open one. Gemini's OpenAI-compatible endpoint (and
/// gateways before it) sends parallel calls of one function at `index: 0`
/// or none, each whole, with no id: glued on, every one of them was lost
/// in arguments that were no JSON, and the model read that its output had
/// been cut. A whole object cannot be continued into JSON.
pub(super) fn another_whole_call(held: &PartialCall, piece: Option<&Value>) -> bool {
    let opens = match piece {
        Some(Value::String(piece)) => piece.trim_start().starts_with('{'),
        Some(Value::Object(_)) => true,
        _ => false,
    };
    // Parsed only once the shape says an object closed, and never again
    // once that parse failed: every fragment parsing all that was held
    // made a long stream of them quadratic.
    if !opens || !held.shape.closed() || held.shape.broken.get() {
        return false;
    }
    #[cfg(test)]
    PARSES.with(|n| n.set(n.get() + 1));
    let whole = held.arguments.trim_start().starts_with('{')
        && serde_json::from_str::<serde::de::IgnoredAny>(&held.arguments).is_ok();
    held.shape.broken.set(!whole);
    whole
}

/// Where a call's arguments stand as JSON, read piece by piece: how deep
/// in brackets, whether inside a string. Enough to tell when a top-level
/// value has closed, in one pass over each piece.
#[derive(Debug, Default)]
pub(super) struct Shape {
    depth: u32,
    opened: bool,
    in_string: bool,
    escaped: bool,
    /// A parse found the arguments no whole JSON although closed.
    broken: std::cell::Cell<bool>,
}

impl Shape {
    /// Reads the next piece of the arguments.
    pub(super) fn feed(&mut self, piece: &str) {
        for byte in piece.bytes() {
            if self.in_string {
                match (self.escaped, byte) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match byte {
                b'"' => self.in_string = true,
                b'{' | b'[' => {
                    self.depth = self.depth.saturating_add(1);
                    self.opened = true;
                }
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
        }
    }

    /// A bracket opened and every one has closed since, outside a string.
    pub(super) fn closed(&self) -> bool {
        self.opened && self.depth == 0 && !self.in_string
    }
}

#[cfg(test)]
thread_local! {
    /// How many times held arguments were parsed (the tests' count).
    pub(super) static PARSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}
