//! The frontmatter fences: where a file's block starts and ends, and a
//! fence misplaced so that the whole file would read as its prompt.

use super::error::{FrontmatterFormat, ParseErrorKind};

/// A position error before the path is attached: `(line, column, kind)`.
pub(super) type Located = (usize, usize, ParseErrorKind);

/// A file's text cut into its frontmatter block and body.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Split<'a> {
    /// `None` when the file has no frontmatter block.
    pub(super) format: Option<FrontmatterFormat>,
    /// The lines between the fences (empty without a block).
    pub(super) frontmatter: &'a str,
    /// The 1-based file line of the frontmatter's first line.
    pub(super) first_line: usize,
    /// Everything after the closing fence line (the whole text without a block).
    pub(super) body: &'a str,
}

/// Whether `line` closes a block opened by `format`'s fence: the fence
/// itself, or for YAML a longer run of dashes (`-----`, which some
/// `.claude/agents` files close with; YAML reads no value from it).
fn closes(line: &str, format: FrontmatterFormat) -> bool {
    line == format.fence() || (format == FrontmatterFormat::Yaml && is_dashes(line))
}

/// A run of more than three dashes: a YAML fence, opening or closing (an
/// opening `----` read as no fence made the whole file the prompt — its
/// settings, a deny list among them, silently dropped).
fn is_dashes(line: &str) -> bool {
    line.len() > 3 && line.bytes().all(|b| b == b'-')
}

/// The format a fence line opens: the fence alone, or for YAML followed
/// by a comment (`--- # reviewer`: YAML's document start, which other
/// tools' readers take as the fence — read as none, the whole file was
/// the prompt and its deny list silently dropped).
fn opens(line: &str) -> Option<FrontmatterFormat> {
    match line {
        "+++" => Some(FrontmatterFormat::Toml),
        "---" => Some(FrontmatterFormat::Yaml),
        line if is_dashes(line) => Some(FrontmatterFormat::Yaml),
        line => {
            let after = line.trim_start_matches('-');
            let commented = after.starts_with([' ', '\t']) && after.trim_start().starts_with('#');
            (line.len() - after.len() >= 3 && commented).then_some(FrontmatterFormat::Yaml)
        }
    }
}

/// A first line that starts as a fence and goes on with something else
/// (`---x`, `+++ toml`, a fence followed by a character that shows as
/// nothing): no fence, and no file without one either — read as the
/// prompt, its settings (a deny list among them) were silently dropped.
fn fence_with_more(line: &str) -> Option<FrontmatterFormat> {
    if line.starts_with("---") {
        Some(FrontmatterFormat::Yaml)
    } else if line.starts_with("+++") {
        Some(FrontmatterFormat::Toml)
    } else {
        None
    }
}

pub(super) fn split(text: &str) -> Result<Split<'_>, Located> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (first, rest) = match text.split_once('\n') {
        Some((first, rest)) => (first, rest),
        None => (text, ""),
    };
    let format = match opens(first.trim_end()) {
        Some(format) => format,
        None => {
            if let Some(format) = fence_with_more(first.trim_end()) {
                return Err((1, 1, ParseErrorKind::MisplacedFence { format }));
            }
            if let Some(found) = misplaced_fence(text) {
                return Err(found);
            }
            return Ok(Split {
                format: None,
                frontmatter: "",
                first_line: 1,
                body: text,
            });
        }
    };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if closes(line.trim_end(), format) {
            return Ok(Split {
                format: Some(format),
                frontmatter: rest.get(..offset).unwrap_or_default(),
                first_line: 2,
                body: rest.get(offset + line.len()..).unwrap_or_default(),
            });
        }
        offset += line.len();
    }
    Err((1, 1, ParseErrorKind::UnclosedFrontmatter { format }))
}

/// A fence where the file starts but not as its first line: after blank
/// lines or more BOMs, indented, or ending in a lone CR. Its position.
fn misplaced_fence(text: &str) -> Option<Located> {
    let start = text.find(|c: char| !c.is_whitespace() && c != '\u{feff}')?;
    let line = text[start..].split(['\n', '\r']).next()?.trim_end();
    let format = opens(line)?;
    let before = &text[..start];
    let row = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .unwrap_or_default()
        .chars()
        .count()
        + 1;
    Some((row, column, ParseErrorKind::MisplacedFence { format }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_finds_the_closing_fence() {
        let s = split("+++\na = 1\n+++ \r\nbody").unwrap();
        assert_eq!(s.format, Some(FrontmatterFormat::Toml));
        assert_eq!(s.frontmatter, "a = 1\n");
        assert_eq!(s.body, "body");
        let s = split("---\n---").unwrap();
        assert_eq!((s.frontmatter, s.body), ("", ""));
        let s = split("no fence\n---\n").unwrap();
        assert_eq!(s.format, None);
        assert_eq!(s.body, "no fence\n---\n");
        // Foreign input: a block opened with four dashes was no block — the
        // whole file the prompt, its deny list dropped without a word.
        let s = split("----\ndisallowedTools: Bash\n----\nbody").unwrap();
        assert_eq!(s.format, Some(FrontmatterFormat::Yaml));
        assert_eq!((s.frontmatter, s.body), ("disallowedTools: Bash\n", "body"));
        assert!(matches!(
            split("\n----\nx: 1\n----\n"),
            Err((2, 1, ParseErrorKind::MisplacedFence { .. }))
        ));
    }

    /// Foreign input: YAML's document start with a comment opens the block
    /// (other tools' readers take it); a fence with anything else after it
    /// is a misplaced fence, not a file without frontmatter.
    #[test]
    fn a_fence_with_a_comment_opens_and_one_with_more_is_misplaced() {
        let s = split("--- # read-only reviewer\ntools: Read\n---\nReview.").unwrap();
        assert_eq!(s.format, Some(FrontmatterFormat::Yaml));
        assert_eq!((s.frontmatter, s.body), ("tools: Read\n", "Review."));
        let s = split("----\t# x\nname: a\n---\n").unwrap();
        assert_eq!(s.format, Some(FrontmatterFormat::Yaml));
        for first in [
            "---\u{200b}",
            "---x",
            "--- not a comment",
            "+++ toml",
            "+++#",
        ] {
            let text = format!("{first}\ntools: Read\n---\nReview.");
            assert!(
                matches!(
                    split(&text),
                    Err((1, 1, ParseErrorKind::MisplacedFence { .. }))
                ),
                "{first:?}: {:?}",
                split(&text)
            );
        }
        // Not a fence at all: a Markdown file.
        assert_eq!(split("-- two dashes\n").unwrap().format, None);
    }

    #[test]
    fn a_toml_fence_is_not_closed_by_a_yaml_fence() {
        let e = split("+++\n---\n").unwrap_err();
        assert_eq!(
            e,
            (
                1,
                1,
                ParseErrorKind::UnclosedFrontmatter {
                    format: FrontmatterFormat::Toml
                }
            )
        );
    }
}
