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
    opens
        && held.arguments.trim_start().starts_with('{')
        && serde_json::from_str::<serde::de::IgnoredAny>(&held.arguments).is_ok()
}
