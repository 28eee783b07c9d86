//! Text a host shows on one line: child names, tasks in wake lines, tool
//! names in `status`. Written by a model or a host, it may carry control
//! characters, terminal escapes or bidirectional overrides that would
//! reorder or recolour a UI; [`one_line`] removes them.

/// Bidirectional formatting characters (they reorder what follows them).
fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// `text` on one line for display: terminal escape sequences (`ESC [ …
/// letter`) and bidirectional formatting characters removed, every other
/// control character (newlines, tabs, BEL) and every run of whitespace made
/// one space, trimmed, and cut to `max_chars` characters (an ellipsis marks
/// the cut). The same rules as profile names, which admit no control
/// character either.
pub fn one_line(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars * 4));
    let mut chars = text.chars().peekable();
    let mut pending_space = false;
    let mut count = 0usize;
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters… final byte in @..~; other escapes: ESC x.
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
            continue;
        }
        if is_bidi_control(c) {
            continue;
        }
        if c.is_control() || c.is_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        if pending_space {
            if count + 1 >= max_chars {
                out.push('…');
                return out;
            }
            out.push(' ');
            count += 1;
            pending_space = false;
        }
        if count + 1 > max_chars {
            // Replace the last character by the ellipsis.
            out.pop();
            out.push('…');
            return out;
        }
        out.push(c);
        count += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_escapes_and_bidi_overrides_are_removed() {
        assert_eq!(
            one_line("\u{202e}evil\u{0007} \u{1b}[31mred\u{1b}[0m", 80),
            "evil red"
        );
        assert_eq!(
            one_line("line one\nline two\r\n\tthree", 80),
            "line one line two three"
        );
        assert_eq!(one_line("  \n  ", 80), "");
        assert_eq!(one_line("a\u{2066}b\u{2069}c", 80), "abc");
    }

    #[test]
    fn long_text_is_cut_with_an_ellipsis() {
        assert_eq!(one_line("abcdef", 4), "abc…");
        assert_eq!(one_line("abcd", 4), "abcd");
        assert_eq!(one_line("ab cd", 3), "ab…");
        assert_eq!(one_line("ééééé", 3).chars().count(), 3);
    }
}
