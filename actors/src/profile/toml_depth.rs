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
    // Per open `{` / `[`: the closer that ends it, and the levels it adds
    // (1, plus the dotted parts of the key it is the value of).
    let mut open: Vec<(TokenKind, usize)> = Vec::new();
    // The header's parts the lines below it sit under, and the brackets
    // and inline levels opened since.
    let (mut under, mut depth) = (0usize, 0usize);
    // Dots since the last `=`, `,`, bracket or header (a key's parts, or
    // a float's: counting those too only errs deep), and those of the
    // key whose value is being read. Not reset at a line's end: toml
    // reads a key missing its `=` on into a value after it.
    let (mut dots, mut value_of) = (0usize, 0usize);
    // At a line's start, outside any bracket: a `[` opens a header.
    let mut line_start = true;
    // In a table header: its `[`s still open (`[[a.b]]`: two).
    let mut header = 0u8;
    for token in toml_parser::Source::new(text).lex() {
        let at = token.span().start();
        let kind = token.kind();
        match kind {
            TokenKind::Whitespace | TokenKind::Comment => continue,
            TokenKind::Newline => {
                if open.is_empty() {
                    line_start = true;
                    if header > 0 {
                        // A header its line left open is one still.
                        (header, under) = (0, dots + 1);
                    }
                }
                continue;
            }
            TokenKind::Dot => {
                dots += 1;
                if under + depth + dots + 1 > limit {
                    return Some(at);
                }
            }
            TokenKind::Equals => value_of = std::mem::take(&mut dots),
            TokenKind::LeftSquareBracket if open.is_empty() && (line_start || header == 1) => {
                // A table header (`[a.b]`, `[[a.b]]`): its parts are the
                // depth its lines start at.
                header += 1;
                (under, dots) = (0, 0);
            }
            TokenKind::RightSquareBracket if open.is_empty() && header > 0 => {
                header -= 1;
                if header == 0 {
                    under = std::mem::take(&mut dots) + 1;
                }
            }
            TokenKind::LeftCurlyBracket | TokenKind::LeftSquareBracket => {
                // The value of the key before it — read on by toml if its
                // `=` is missing (`a.b {`).
                let levels = 1 + std::mem::take(&mut value_of) + std::mem::take(&mut dots);
                depth += levels;
                if under + depth > limit {
                    return Some(at);
                }
                let closer = match kind {
                    TokenKind::LeftCurlyBracket => TokenKind::RightCurlyBracket,
                    _ => TokenKind::RightSquareBracket,
                };
                open.push((closer, levels));
            }
            // Only its own closer ends a level: toml stays where it is at
            // the other kind (a `]` in an inline table, a `}` in an array).
            TokenKind::RightCurlyBracket | TokenKind::RightSquareBracket => {
                if let Some(&(closer, levels)) = open.last()
                    && closer == kind
                {
                    open.pop();
                    depth -= levels.min(depth);
                }
                (dots, value_of) = (0, 0);
            }
            // The next entry begins with its key.
            TokenKind::Comma => (dots, value_of) = (0, 0),
            _ => {}
        }
        line_start = false;
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

    /// Review of the last session's change: toml recovers from a closer of
    /// the wrong kind by staying where it is (a `]` in an inline table, a
    /// `}` in an array), from a missing comma or `=` by reading the next
    /// key and its value on — the scan closed a level on any closer and
    /// read no key after a value, so 79 × 79 levels passed it again.
    #[test]
    fn toml_recovering_from_broken_text_nests_no_deeper_than_counted() {
        for text in [
            "x = { ] a.b.c.d.e.f.g.h.i = 1 }",
            "x = { ] k.k = { ] k.k = { ] k.k = { ] k.k = 1 } } } }",
            "x = [ } [ } [ } [ } [ } [ } [ } [ } [ } 1 ]]]]]]]]]",
            "x = { a = 1 b.c.d.e.f.g.h.i.j = 1 }",
            "x = { a = 1 k.k = { b = 1 k.k = { c = 1 k.k = { d = 1 k.k = 1 } } } }",
            "x = { a.b.c.d.e.f.g.h.i { } }",
            "x = { k.k.k.k { k.k.k.k [ 1 ] } }",
        ] {
            assert!(too_deep(text, 8).is_some(), "{text:?}");
        }
    }
}
