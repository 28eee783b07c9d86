//! A value the model sent, as a refusal quotes it: one line, cut short,
//! quoted with its escapes when it is not a clean line already.

/// A value the model sent, as a refusal quotes it: one line, at most 80
/// characters (a megabyte-long id came back whole, into its context). One
/// that is not a clean line already — a space around it, a line break, an
/// escape, a bidi mark, a character that shows as nothing — is quoted with
/// its escapes (`"agent_1 "`, `"agent_1\u{200b}"`): cleaned, or shown, it
/// read as a value that exists ("there is no sub-agent with id `agent_1`"
/// while `agent_1` ran).
pub(crate) fn shown(value: &str) -> String {
    use subagents_messages::text::one_line;
    const MAX: usize = 80;
    if one_line(value, usize::MAX) == value && !value.chars().any(is_invisible) {
        return one_line(value, MAX);
    }
    let cut: String = value.chars().take(MAX).collect();
    let more = if cut.len() < value.len() { "…" } else { "" };
    quoted(&cut) + more
}

/// `text` in quotes, escaped by this crate's own rules: quotes,
/// backslashes, `\n`, `\r`, `\t`, and as `\u{…}` every other control,
/// whitespace but the space and character that shows as nothing. Not
/// `{:?}`: `str`'s `Debug` escapes by the toolchain's Unicode tables
/// (Rust 1.83 took Unicode 16), so a refusal's bytes — on the stream, in
/// the conversation and its run file — changed with the compiler.
pub(crate) fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || (c.is_whitespace() && c != ' ') || is_invisible(c) => {
                out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A character that shows as nothing where it stands: Unicode's format
/// characters (zero-width space and joiners, soft hyphen, word joiner,
/// byte-order mark, bidi marks, tags), fillers and variation selectors. A
/// value holding one looks like the value without it.
pub(crate) fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}'
        | '\u{FFF9}'..='\u{FFFB}' | '\u{1D173}'..='\u{1D17A}' | '\u{E0000}'..='\u{E0FFF}'
        | '\u{2800}' | '\u{13430}'..='\u{1343F}' | '\u{1BCA0}'..='\u{1BCA3}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_quoted_as_it_was_sent() {
        assert_eq!(shown("agent_1"), "agent_1");
        assert_eq!(shown("agent_1 "), "\"agent_1 \"");
        assert_eq!(shown("sonnet\n"), "\"sonnet\\n\"");
        // Invisible (review: the front-ends at their limits): shown as is,
        // "no sub-agent with id `agent_1​`" read as naming `agent_1`.
        for value in [
            "agent_1\u{200b}",
            "\u{feff}agent_1",
            "agent_1\u{e0041}",
            "agent_1\u{1bca0}",
            "agent_\u{2800}1",
        ] {
            let quoted = shown(value);
            assert!(
                quoted.starts_with('"') && quoted.contains("\\u{"),
                "{quoted}"
            );
            assert!(!quoted.chars().any(is_invisible), "{quoted:?}");
        }
        let marked = shown("\u{202e}agent_1\u{1b}[31m");
        assert!(!marked.contains(['\u{202e}', '\u{1b}']), "{marked}");
        assert!(marked.contains("agent_1"), "{marked}");
        // The crate's own escapes, not the toolchain's (review: replay):
        // an unassigned code point (`Debug` escapes it, and will not once
        // a Unicode version assigns it) and an emoji's selector.
        assert_eq!(shown("a \u{378} "), "\"a \u{378} \"");
        assert_eq!(shown("ok\u{2705}\u{fe0f} "), "\"ok\u{2705}\\u{fe0f} \"");
        assert_eq!(shown("a\u{2028}b\u{a0}"), "\"a\\u{2028}b\\u{a0}\"");
        assert_eq!(shown(" \"q\\"), "\" \\\"q\\\\\"");
        let long = "x".repeat(1 << 20);
        assert_eq!(shown(&long).chars().count(), 80);
        let long = format!(" {long}");
        assert!(shown(&long).chars().count() <= 83, "{}", shown(&long).len());
    }
}
