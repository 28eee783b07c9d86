//! The lenient readers of a file that did not load: whether it names a
//! restricting key, and the names it would have given — read line by
//! line, so a file broken before its restriction still hides its name.

use std::ffi::OsStr;
use std::io::Read as _;
use std::path::Path;

use super::error::FrontmatterFormat;
use super::load::MAX_PROFILE_BYTES;

/// The first [`MAX_PROFILE_BYTES`] of a file that did not load (its
/// settings come first): one too large was read whole, twice, to look
/// for a restricting key — a transcript dump of gigabytes left in an
/// agents folder was held in memory.
fn read_head(path: &Path) -> String {
    let mut bytes = Vec::new();
    if let Ok(file) = std::fs::File::open(path) {
        let _ = file.take(MAX_PROFILE_BYTES).read_to_end(&mut bytes);
    }
    lenient_text(&bytes)
}

/// A file's bytes as text for the lenient readers: UTF-16 with its byte
/// order mark (what Windows PowerShell's `>` and Notepad's "Unicode"
/// write) decoded — read as UTF-8, every key came out with a NUL after
/// each letter and a broken file's restrictions were never seen — and so
/// is UTF-16 without the mark, known by its NULs; anything else as UTF-8,
/// bad bytes replaced.
fn lenient_text(bytes: &[u8]) -> String {
    let utf16 = |skip: usize, from: fn([u8; 2]) -> u16| {
        let units = bytes[skip..]
            .chunks_exact(2)
            .map(|pair| from([pair[0], pair[1]]));
        char::decode_utf16(units)
            .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect()
    };
    match bytes {
        [0xFF, 0xFE, ..] => utf16(2, u16::from_le_bytes),
        [0xFE, 0xFF, ..] => utf16(2, u16::from_be_bytes),
        // Without its mark: a NUL after (little-endian) or before
        // (big-endian) most letters — the fence, the keys — of its head.
        _ => match unmarked_utf16(bytes) {
            Some(from) => utf16(0, from),
            None => String::from_utf8_lossy(bytes).into_owned(),
        },
    }
}

/// How `bytes` read as UTF-16 with no byte order mark: by the side of
/// each pair of its head that holds the NULs — most of them, not all (a
/// name in Cyrillic or Chinese near the top has none there, and a file
/// read so named no restriction).
fn unmarked_utf16(bytes: &[u8]) -> Option<fn([u8; 2]) -> u16> {
    let pairs = bytes.chunks_exact(2).take(64);
    let (mut after, mut before, mut all) = (0, 0, 0);
    for pair in pairs {
        all += 1;
        after += usize::from(pair[1] == 0 && pair[0] != 0);
        before += usize::from(pair[0] == 0 && pair[1] != 0);
    }
    match () {
        _ if all > 0 && after * 2 > all => Some(u16::from_le_bytes),
        _ if all > 0 && before * 2 > all => Some(u16::from_be_bytes),
        _ => None,
    }
}

/// Whether a file that could not be parsed names a key that narrows what
/// its agent may do (read leniently, line by line: a key at a line's
/// start, before `:` or `=`, or a `[table]` of that name).
pub(super) fn restricts(path: &Path) -> bool {
    // Lines end at LF, CRLF or a lone CR (old Mac line ends, refused as a
    // misplaced fence: read as one line, the file named no restriction).
    read_head(path).split(['\n', '\r']).any(|line| {
        let line = line.trim_start().trim_start_matches('\u{feff}');
        // A table (`[tools]`) or an array of tables (`[[hooks.PreToolUse]]`,
        // as Codex writes a hook: read as the table `[hooks`, it named no
        // restricting key).
        let key = match line.strip_prefix('[') {
            Some(table) => table
                .trim_start_matches('[')
                .trim_start()
                .split(['.', ']'])
                .next()
                .unwrap_or(""),
            None => line.split([':', '=']).next().unwrap_or(""),
        };
        // A dotted key (`tools.web_search = false`, as Codex's `-c` writes
        // it) sets its first part's table: read whole, it named no
        // restricting key, and a broken role that switched a tool off let
        // the earlier role of its name, with that tool, run.
        let key = key.split('.').next().unwrap_or("");
        super::fields::restricting(key.trim().trim_matches(['"', '\'']))
    })
}

/// The names a file that did not load would give: its file name's, and
/// the one its settings declare (`name`), read leniently.
pub(super) fn names_of(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = super::name::profile_name(path).into_iter().collect();
    let text = read_head(path);
    let toml_name = |table: &str| {
        let shallow = super::toml_depth::too_deep(table, super::toml_depth::MAX_DEPTH).is_none();
        shallow
            .then(|| toml::from_str::<toml::Table>(table).ok())
            .flatten()
            .and_then(|t| t.get("name").and_then(|n| n.as_str()).map(str::to_owned))
    };
    let declared = if path.extension() == Some(OsStr::new("toml")) {
        toml_name(&text)
    } else {
        match super::fence::split(&text) {
            Ok(split) => match split.format {
                Some(FrontmatterFormat::Toml) => toml_name(split.frontmatter),
                Some(FrontmatterFormat::Yaml) => {
                    serde_saphyr::from_str::<serde_json::Value>(split.frontmatter)
                        .ok()
                        .and_then(|v| v.get("name").and_then(|n| n.as_str()).map(str::to_owned))
                }
                None => None,
            },
            Err(_) => None,
        }
    };
    // Broken, so not parsed: its `name` line read leniently — the name
    // it declares is the one an earlier directory's profile would hold.
    let declared = declared.or_else(|| declared_leniently(&text));
    names.extend(
        declared
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty()),
    );
    names
}

/// The `name` a file's settings declare, read line by line (its
/// frontmatter, up to its closing fence): `name: x` or `name = "x"`.
fn declared_leniently(text: &str) -> Option<String> {
    let is_fence =
        |l: &str| matches!(l, "---" | "+++") || (l.len() > 3 && l.bytes().all(|b| b == b'-'));
    // Blank lines before a misplaced fence skipped; keys at a line's start
    // only (an indented `name:` belongs to a nested table).
    let mut lines = text
        .split(['\n', '\r'])
        .map(|l| l.trim_start_matches('\u{feff}').trim_end())
        .skip_while(|l| l.trim().is_empty());
    let first = lines.next()?;
    let settings = std::iter::once(first)
        .filter(|l| !is_fence(l.trim()))
        .chain(lines.take_while(|l| !is_fence(l.trim())));
    settings.into_iter().find_map(|line| {
        if line.starts_with([' ', '\t']) {
            return None;
        }
        let (key, value) = line.split_once([':', '='])?;
        // A comment after the value (`name: reviewer  # read-only`, as
        // real files write beside `model:`) is not part of the name: read
        // whole, the file hid a name nothing had.
        let value = value
            .split([' ', '\t'])
            .take_while(|word| !word.starts_with('#'))
            .collect::<Vec<_>>()
            .join(" ");
        (key.trim().trim_matches(['"', '\'']) == "name")
            .then(|| value.trim().trim_matches(['"', '\'']).to_owned())
    })
}

/// A YAML block whose top-level plain values holding `: ` (no YAML:
/// "mapping values are not allowed") are quoted, as text — what Claude
/// Code's reader makes of them (its `/agents` generator writes a
/// description so, `Examples:` and `user: "…"` on one line). `None` if
/// there is none (another error). Each line stays one line: positions
/// hold.
pub(super) fn plain_values_quoted(text: &str) -> Option<String> {
    let mut quoted = false;
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| {
            let Some((key, value)) = line.split_once(':') else {
                return line.to_owned();
            };
            let plain_key = key
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
            let value = value.strip_suffix('\r').unwrap_or(value);
            // A comment (`#` after a space or a tab, as YAML reads one)
            // stays one: quoted into the value, `tools: Read  # no Write:
            // ever` listed `Write` among the tools.
            let comment = value
                .char_indices()
                .find(|&(at, c)| c == '#' && value[..at].ends_with([' ', '\t']))
                .map_or(value.len(), |(at, _)| at);
            let (value, comment) = value.split_at(comment);
            let text = value.trim();
            let plain = value.starts_with([' ', '\t'])
                && !text.starts_with(['"', '\'', '[', '{', '|', '>', '&', '*', '!', '%', '@', '`']);
            if plain_key && plain && (text.contains(": ") || text.ends_with(':')) {
                quoted = true;
                let text = serde_json::Value::String(text.to_owned()).to_string();
                let end = if line.ends_with('\r') { "\r" } else { "" };
                format!("{key}: {text} {comment}{end}")
            } else {
                line.to_owned()
            }
        })
        .collect();
    quoted.then(|| lines.join("\n"))
}
