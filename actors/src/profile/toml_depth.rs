//! How deep a TOML text nests its tables, read once and linearly before
//! the parser builds them. toml bounds inline tables and arrays (80
//! deep) and each key's dotted parts (80) apart, so inline tables whose
//! keys are dotted nest 79 × 79 levels past its guard — and reading such
//! a file (skipping an unknown key's value, or only dropping what was
//! parsed, which toml does for a broken file too) went down every level:
//! a stack overflow, the process aborted. Counted over toml's own lexer's
//! tokens: a reading of our own disagreed with it on broken text (a lone
//! `\r` ending a comment, a backslash before a line's end in a string)
//! and hid the nesting after it.

use toml_parser::lexer::TokenKind;

/// The deepest a profile's TOML may nest: YAML's own bound (serde-saphyr's
/// default budget). No agent file comes near it.
pub(super) const MAX_DEPTH: usize = 64;

/// Where `text` first nests tables deeper than `limit` (a byte offset),
/// counting each inline table and array, each part of a dotted key, and
/// the parts of the table header its lines are under; `None` within it.
pub(super) fn too_deep(text: &str, limit: usize) -> Option<usize> {
    // Per open `{` / `[`: whether it is a table, and the levels it adds
    // (1, plus the dotted parts of the key it is the value of).
    let mut open: Vec<(bool, usize)> = Vec::new();
    // The header's parts the lines below it sit under, and the brackets
    // and inline levels opened since.
    let (mut under, mut depth) = (0usize, 0usize);
    // Dots in the key being read (`None`: not in a key), and in the key
    // whose value is being read.
    let (mut key_dots, mut value_of): (Option<usize>, usize) = (Some(0), 0);
    // In a table header: its `[`s still open (`[[a.b]]`: two).
    let mut header = 0u8;
    for token in toml_parser::Source::new(text).lex() {
        let at = token.span().start();
        match token.kind() {
            TokenKind::Newline if open.is_empty() => {
                (key_dots, value_of) = (Some(0), 0);
            }
            TokenKind::Dot => {
                if let Some(dots) = &mut key_dots {
                    *dots += 1;
                    if under + depth + *dots + 1 > limit {
                        return Some(at);
                    }
                }
            }
            TokenKind::Equals => value_of = key_dots.take().unwrap_or(0),
            TokenKind::LeftSquareBracket
                if open.is_empty() && key_dots == Some(0) && header < 2 =>
            {
                // A table header (`[a.b]`, `[[a.b]]`): its parts are the
                // depth its lines start at.
                header += 1;
                under = 0;
            }
            TokenKind::RightSquareBracket if header > 0 => {
                header -= 1;
                if header == 0 {
                    under = key_dots.take().unwrap_or(0) + 1;
                }
            }
            kind @ (TokenKind::LeftCurlyBracket | TokenKind::LeftSquareBracket) => {
                let levels = 1 + std::mem::take(&mut value_of);
                depth += levels;
                if under + depth > limit {
                    return Some(at);
                }
                let table = kind == TokenKind::LeftCurlyBracket;
                open.push((table, levels));
                // An inline table's entries begin with keys.
                key_dots = table.then_some(0);
            }
            TokenKind::RightCurlyBracket | TokenKind::RightSquareBracket => {
                depth -= open.pop().map_or(0, |(_, levels)| levels).min(depth);
                key_dots = None;
            }
            // The next entry of an inline table begins with its key.
            TokenKind::Comma => {
                key_dots = open.last().is_some_and(|(table, _)| *table).then_some(0);
                value_of = 0;
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_files_are_shallow() {
        for text in [
            "name = \"a\"\ndescription = \"b.c {not} [a table]\"\n",
            "[tools]\nweb_search = false\n[mcp_servers.github]\nenabled = false\n",
            "x = { a = { b = [1, 2.5, { c = 'd.e' }] } }\n# a.b.c.d {[{[\n",
            "s = \"\"\"\n{{{{ [[[[ a.b.c\n\"\"\"\nt = 1.5e3\n",
        ] {
            assert_eq!(too_deep(text, 8), None, "{text}");
        }
    }

    #[test]
    fn nesting_by_tables_keys_and_headers_counts() {
        assert!(too_deep("x = [[[[[[[[[[1]]]]]]]]]]", 8).is_some());
        assert!(too_deep("a.b.c.d.e.f.g.h.i = 1", 8).is_some());
        assert!(too_deep("[a.b.c.d.e.f.g.h.i]\nx = 1", 8).is_some());
        assert!(too_deep("x = { a.b.c.d = { e.f.g.h = 1 } }", 8).is_some());
        assert!(too_deep("x = { a.b = 1, c.d.e.f.g.h.i.j = 2 }", 8).is_some());
        assert_eq!(too_deep("x = { a.b.c = { d = 1 } }", 8), None);
    }

    /// Review of this change: a multi-line string ending in four or five
    /// quotes (valid TOML), or a comment inside an inline table (TOML
    /// 1.1), hid the nesting after it.
    #[test]
    fn quotes_inside_a_closing_delimiter_and_comments_hide_nothing() {
        for text in [
            "x = { s = \"\"\"a\"\"\"\", y = { a.b.c.d.e.f.g.h.i = 1 } }",
            "x = { s = \"\"\"a\"\"\"\"\", y = { a.b.c.d.e.f.g.h.i = 1 } }",
            "x = { s = '''a'''', y = { a.b.c.d.e.f.g.h.i = 1 } }",
            "x = { #\n a.b.c.d.e.f.g.h.i = 1 }",
        ] {
            assert!(too_deep(text, 8).is_some(), "{text}");
        }
        assert_eq!(too_deep("s = \"\"\"a\"\"\"\"\nt = { u = 1 }\n", 8), None);
    }

    /// Review of this change (second pass): broken text read otherwise
    /// than toml's lexer reads it — a comment ended by a lone `\r`, a
    /// backslash before a line's end in a one-line string — hid the next
    /// line; an array-of-tables header's parts went uncounted, and a
    /// header's depth was not carried to its lines.
    #[test]
    fn broken_text_and_headers_are_read_as_toml_reads_them() {
        for text in [
            "a = 1 #\rx = { a.b.c.d.e.f.g.h.i = 1 }\n",
            "a = \"b\\\nx = { a.b.c.d.e.f.g.h.i = 1 }\n",
            "[[a.b.c.d.e.f.g.h.i]]\nx = 1",
            "[a.b.c.d.e]\nf.g.h.i = 1",
        ] {
            assert!(too_deep(text, 8).is_some(), "{text:?}");
        }
        assert_eq!(
            too_deep("[a.b.c]\nd.e = 1\n[[f.g]]\nh = { i = 1 }\n", 8),
            None
        );
    }
}
