//! How deep a TOML text nests its tables, read once and linearly before
//! the parser sees it. toml bounds inline tables and arrays (80 deep)
//! and each key's dotted parts (80) apart, so inline tables whose keys
//! are dotted nest 79 × 79 levels past its guard — and reading such a
//! file (skipping an unknown key's value, or only dropping what was
//! parsed) went down every level: a stack overflow, the process aborted.

/// The deepest a profile's TOML may nest: YAML's own bound (serde-saphyr's
/// default budget). No agent file comes near it.
pub(super) const MAX_DEPTH: usize = 64;

/// Where `text` first nests tables deeper than `limit` (a byte offset),
/// counting each inline table and array and each part of a dotted key or
/// table header; `None` within it. Strings and comments are skipped.
pub(super) fn too_deep(text: &str, limit: usize) -> Option<usize> {
    // Per open `{` / `[`: whether it is a table, and the levels it adds
    // (1, plus the dotted parts of the key it is the value of).
    let mut open: Vec<(bool, usize)> = Vec::new();
    let mut depth = 0usize;
    // Dots in the key being read (`None`: not in a key).
    let mut key_dots: Option<usize> = Some(0);
    // Those of the key whose value is being read.
    let mut value_of = 0;
    let mut header = false;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '#' => {
                for (_, c) in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                // Its newline eaten: at the top level a key follows. Inside
                // an inline table (TOML 1.1 lets comments in) the key being
                // read goes on: reset, a dotted key after one went uncounted.
                if open.is_empty() {
                    key_dots = Some(0);
                    value_of = 0;
                    header = false;
                }
            }
            '"' | '\'' => skip_string(text, at, c, &mut chars),
            '\n' if open.is_empty() => {
                key_dots = Some(0);
                value_of = 0;
                header = false;
            }
            '.' => {
                if let Some(dots) = &mut key_dots {
                    *dots += 1;
                    if depth + *dots + 1 > limit {
                        return Some(at);
                    }
                }
            }
            '=' => value_of = key_dots.take().unwrap_or(0),
            '[' if open.is_empty() && key_dots == Some(0) && !header => {
                // A table header: its parts count as a key's do.
                header = true;
            }
            ']' if header => {
                header = false;
                key_dots = None;
            }
            '{' | '[' => {
                let levels = 1 + std::mem::take(&mut value_of);
                depth += levels;
                if depth > limit {
                    return Some(at);
                }
                open.push((c == '{', levels));
                // An inline table's entries begin with keys.
                key_dots = (c == '{').then_some(0);
            }
            '}' | ']' => {
                depth -= open.pop().map_or(0, |(_, levels)| levels).min(depth);
                key_dots = None;
            }
            // The next entry of an inline table begins with its key.
            ',' => {
                key_dots = open.last().is_some_and(|(table, _)| *table).then_some(0);
                value_of = 0;
            }
            _ => {}
        }
    }
    None
}

/// Skips the string that opens at `at` with `quote` (`"…"`, `'…'`, or
/// their tripled multi-line forms), escapes read in basic strings.
fn skip_string(
    text: &str,
    at: usize,
    quote: char,
    chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
) {
    let tripled = text[at..].starts_with(if quote == '"' { "\"\"\"" } else { "'''" });
    if tripled {
        chars.next();
        chars.next();
    }
    let mut run = 0;
    while let Some((_, c)) = chars.next() {
        if c == '\\' && quote == '"' {
            chars.next();
            run = 0;
            continue;
        }
        if c == quote {
            run += 1;
            if !tripled {
                return;
            }
            if run == 3 {
                // One or two quotes may sit just inside the closing three
                // (`"""a""""`): left, the next was read as a string's
                // opening, and the rest of the line went uncounted.
                for _ in 0..2 {
                    if chars.next_if(|(_, next)| *next == quote).is_none() {
                        break;
                    }
                }
                return;
            }
        } else {
            run = 0;
            if c == '\n' && !tripled {
                return;
            }
        }
    }
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
}
