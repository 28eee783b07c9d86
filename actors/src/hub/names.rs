//! What a child is called: its name on the stream and in `status`, on
//! one line.

use subagents_messages::text::one_line;

/// The longest child name shown.
const NAME_CHARS: usize = 80;

/// The name of a child: the first line of its system prompt with visible
/// text, on one line (control, escape and bidi characters removed; see
/// `subagents_messages::text::one_line`), at most 80 characters.
fn child_name(system_prompt: &str) -> String {
    system_prompt
        .lines()
        .map(|l| one_line(l, NAME_CHARS))
        .find(|l| !l.is_empty())
        .unwrap_or_else(|| "sub-agent".to_owned())
}

/// A name given with the request, shown by the same rules as
/// [`child_name`]; one with no visible text falls back to the prompt's.
pub(super) fn display_name(name: Option<&str>, system_prompt: &str) -> String {
    name.map(|n| one_line(n, NAME_CHARS))
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| child_name(system_prompt))
}
