//! One profile file's text → [`Profile`].

use std::cell::Cell;
use std::path::Path;

use serde_saphyr::MessageFormatter as _;

use super::Profile;
use super::error::{FrontmatterFormat, ParseErrorKind, ProfileError, ProfileWarning};
use subagents_messages::RequestOptions;

use super::fence::{Located, split};
use super::fields::Frontmatter;
use super::name::profile_name;

/// A parsed profile and the warnings its file raised (unknown keys,
/// values no tool here takes); the profile is usable regardless of them.
pub(crate) type Parsed = (Profile, Vec<ProfileWarning>);

impl Profile {
    /// Parses a profile file's text. The profile's name is the `name` its
    /// frontmatter declares, else `path`'s file name without extension
    /// ([`Profile::name_for`]); `path` is also its `source`. The file is
    /// not read.
    ///
    /// The text may open with a `+++` TOML or a `---` YAML frontmatter
    /// block (after an optional UTF-8 BOM); the rest, trimmed and with CRLF
    /// made LF, is the system prompt. Without a frontmatter block the whole
    /// text is the prompt and the description is empty.
    ///
    /// Returns the profile and the warnings its file raised (unknown
    /// keys, values no tool here takes); the profile is usable regardless
    /// of them.
    pub fn parse(path: &Path, text: &str) -> Result<(Profile, Vec<ProfileWarning>), ProfileError> {
        parse_profile(path, text)
    }

    /// Parses a profile file's bytes; see [`Profile::parse`]. Bytes that
    /// are not UTF-8 are an error at the first bad byte.
    pub fn parse_bytes(
        path: &Path,
        bytes: &[u8],
    ) -> Result<(Profile, Vec<ProfileWarning>), ProfileError> {
        parse_profile_bytes(path, bytes)
    }

    /// Parses a Codex role file's text (`.codex/agents/*.toml`): a TOML
    /// table whose `developer_instructions` (required) is the system
    /// prompt, with `name` (the file name when absent), `description`,
    /// `model`, `model_provider` and Codex's other config keys
    /// (`model_reasoning_effort`, `sandbox_mode`, … are warned as not
    /// applied). [`ProfileSet::load`](super::ProfileSet::load) reads every
    /// `*.toml` file of a directory this way.
    pub fn parse_codex_role(
        path: &Path,
        text: &str,
    ) -> Result<(Profile, Vec<ProfileWarning>), ProfileError> {
        super::codex::parse_codex_role(path, text)
    }

    /// The profile name a path gives: its file name without the
    /// extension (and without the `.agent` or `.chatmode` of a Copilot
    /// agent file, `reviewer.agent.md`). A name must be non-empty and contain no whitespace,
    /// control characters or characters that show as nothing (a
    /// zero-width space); names are case-sensitive.
    pub fn name_for(path: &Path) -> Result<String, ProfileError> {
        profile_name(path)
    }
}

/// Parses a profile file's bytes; see [`Profile::parse`]. Bytes that are not
/// UTF-8 are an error at the first bad byte.
pub(crate) fn parse_profile_bytes(path: &Path, bytes: &[u8]) -> Result<Parsed, ProfileError> {
    parse_profile(path, utf8(path, bytes)?)
}

/// A file's bytes as text; bytes that are not UTF-8 are an error at the
/// first bad byte (its line and column), in every kind of profile file,
/// and so is a NUL (UTF-16 without its byte order mark passes as UTF-8).
pub(crate) fn utf8<'a>(path: &Path, bytes: &'a [u8]) -> Result<&'a str, ProfileError> {
    let at = |end: usize, kind| {
        // The prefix is UTF-8 by definition; lossy is only a fallback.
        let prefix = String::from_utf8_lossy(bytes.get(..end).unwrap_or_default());
        let (line, column) = line_column(&prefix, prefix.len(), 1);
        ProfileError::Parse {
            path: path.to_path_buf(),
            line,
            column,
            kind,
        }
    };
    let text =
        std::str::from_utf8(bytes).map_err(|e| at(e.valid_up_to(), ParseErrorKind::NotUtf8))?;
    match text.find('\0') {
        Some(nul) => Err(at(nul, ParseErrorKind::NulByte)),
        None => Ok(text),
    }
}

/// Parses a profile file's text. The profile's name is the `name` its
/// frontmatter declares, else `path`'s file name without extension
/// ([`profile_name`]); `path` is also its `source`. The file is not read.
///
/// The text may open with a `+++` TOML or a `---` YAML frontmatter block
/// (after an optional UTF-8 BOM); the rest, trimmed and with CRLF made LF,
/// is the system prompt. Without a frontmatter block the whole text is the
/// prompt and the description is empty.
pub(crate) fn parse_profile(path: &Path, text: &str) -> Result<Parsed, ProfileError> {
    let name = profile_name(path)?;
    let error = |(line, column, kind)| ProfileError::Parse {
        path: path.to_path_buf(),
        line,
        column,
        kind,
    };
    let split = split(text).map_err(error)?;
    let fm = match split.format {
        None => Frontmatter::default(),
        Some(format) => {
            let fm =
                parse_frontmatter(format, split.frontmatter, split.first_line).map_err(error)?;
            // A mapping of switches (a Codex role's `[tools]`) turns its
            // own tools on, so it lists none: here, where `tools` is an
            // allowlist, read so it would give every tool of the parent's.
            // OpenCode's map that turns tools off (`write: false`: every
            // tool but those) is read so — each one off denied, its edit
            // tools together, as OpenCode reads them (refused, a real
            // reviewer agent was lost); one that turns none off, or names
            // `*`, is refused as before.
            let mut fm = fm;
            if fm.tools_as_switches
                && super::tools::opencode_switches(&fm.tools_map, &mut fm.tool_switches)
            {
                fm.tools_as_switches = false;
            }
            if fm.tools_as_switches {
                let (line, column) = locate_key(split.frontmatter, "tools", split.first_line);
                return Err(error((
                    line,
                    column,
                    ParseErrorKind::Invalid {
                        format,
                        message: "`tools` is a mapping; a Markdown profile lists its tools (a list, or a comma-separated string)".to_owned(),
                    },
                )));
            }
            fm
        }
    };
    let body = split.body.replace("\r\n", "\n");
    from_frontmatter(path, name, fm, body.trim().to_owned())
}

/// A profile from its parsed frontmatter and system prompt: `name` (the
/// file's) stands in for a missing frontmatter name; unknown and
/// not-applied keys become warnings.
pub(super) fn from_frontmatter(
    path: &Path,
    name: String,
    mut fm: Frontmatter,
    system_prompt: String,
) -> Result<Parsed, ProfileError> {
    let mut warnings: Vec<ProfileWarning> = fm
        .unknown
        .into_iter()
        .map(|key| ProfileWarning::UnknownKey {
            path: path.to_path_buf(),
            key,
        })
        .collect();
    // A Codex `[tools]` switch: one turned off is denied (it narrows);
    // one turned on names Codex's own tool and grants nothing here.
    let mut disallowed_tools = fm.disallowed_tools.take().unwrap_or_default();
    let tools = fm
        .tools
        .take()
        .and_then(|tools| spawn_tool_entries(tools, &mut disallowed_tools, &mut fm.not_applied));
    for (name, on) in std::mem::take(&mut fm.tool_switches) {
        if on {
            fm.not_applied.push(format!("tools.{name}"));
        } else if !disallowed_tools.contains(&name) {
            disallowed_tools.push(name);
        }
    }
    warnings.extend(
        fm.not_applied
            .into_iter()
            .map(|key| ProfileWarning::NotApplied {
                path: path.to_path_buf(),
                key,
            }),
    );
    // A Codex role's prompt key in a Markdown file: the prompt when the
    // body is empty, else not applied (the body is the prompt) — never
    // dropped without a word.
    let mut system_prompt = system_prompt;
    if let Some(instructions) = fm
        .developer_instructions
        .map(|i| i.replace("\r\n", "\n").trim().to_owned())
        .filter(|i| !i.is_empty())
    {
        if system_prompt.is_empty() {
            system_prompt = instructions;
        } else {
            warnings.push(ProfileWarning::NotApplied {
                path: path.to_path_buf(),
                key: "developer_instructions".to_owned(),
            });
        }
    }
    // Claude Code's identity is the frontmatter `name`; the file name
    // stands in when there is none.
    let name = super::name::identity(path, name, fm.name, &mut warnings)?;

    let profile = Profile {
        name,
        description: fm
            .description
            .map(|d| d.trim().to_owned())
            .unwrap_or_default(),
        system_prompt,
        // `inherit` is the `.claude/agents` way of saying "the parent's model".
        model: non_empty(fm.model).filter(|m| !m.eq_ignore_ascii_case("inherit")),
        provider: non_empty(fm.provider),
        tools,
        max_iterations: fm.max_iterations,
        disallowed_tools,
        unavailable_tools: Vec::new(),
        disabled: fm.disabled.unwrap_or(false),
        background: fm.background.unwrap_or(false),
        color: non_empty(fm.color),
        effort: non_empty(fm.effort),
        permission_mode: non_empty(fm.permission_mode),
        memory: non_empty(fm.memory),
        initial_prompt: non_empty(fm.initial_prompt),
        skills: fm.skills.unwrap_or_default(),
        options: RequestOptions {
            tool_choice: None,
            max_tokens: fm.max_tokens,
            temperature: fm.temperature,
            top_p: fm.top_p,
            stop: fm.stop.unwrap_or_default(),
            seed: fm.seed,
        },
        source: path.to_path_buf(),
    };
    Ok((profile, warnings))
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

pub(super) fn parse_frontmatter(
    format: FrontmatterFormat,
    text: &str,
    first_line: usize,
) -> Result<Frontmatter, Located> {
    if text.trim().is_empty() {
        return Ok(Frontmatter::default());
    }
    let invalid = |message: String| ParseErrorKind::Invalid { format, message };
    // The key whose value failed, for errors the parser cannot place.
    let current_key: Cell<Option<String>> = Cell::new(None);
    // An error in a key's value is no earlier than that key: a position
    // before it is a parser's fallback (YAML gives the table's start for a
    // value its visitor refused), so the value's own position is used.
    let place = |reported: (usize, usize)| match current_key.take() {
        Some(key) => reported.max(locate_key(text, &key, first_line)),
        None => reported,
    };
    if format == FrontmatterFormat::Toml
        && let Some(at) = super::toml_depth::too_deep(text, super::toml_depth::MAX_DEPTH)
    {
        let (line, column) = line_column(text, at, first_line);
        let message = format!(
            "tables nested more than {} deep",
            super::toml_depth::MAX_DEPTH
        );
        return Err((line, column, invalid(message)));
    }
    let parsed = match format {
        FrontmatterFormat::Toml => toml::Deserializer::parse(text)
            .and_then(|de| Frontmatter::deserialize(de, &current_key))
            .map_err(|e| {
                let (line, column) = match e.span() {
                    Some(span) => line_column(text, span.start, first_line),
                    None => (first_line, 1),
                };
                let (line, column) = place((line, column));
                (line, column, invalid(e.message().trim().to_owned()))
            }),
        FrontmatterFormat::Yaml => {
            let yaml = |text: &str| {
                let mut options = serde_saphyr::Options::default();
                options.with_snippet = false;
                serde_saphyr::with_deserializer_from_str_with_options(text, options, |de| {
                    Frontmatter::deserialize(de, &current_key)
                })
            };
            // The YAML parser skips a leading BOM (one here means the file
            // had two); its byte offsets then start after it.
            let skipped = if text.starts_with('\u{feff}') {
                '\u{feff}'.len_utf8()
            } else {
                0
            };
            // A plain value holding `: ` (Claude Code's `/agents` writes a
            // description so) is no YAML, but Claude Code reads it as text:
            // read so here too, or the first error stands.
            yaml(text)
                .or_else(|e| {
                    let Some(quoted) = super::lenient::plain_values_quoted(text) else {
                        return Err(e);
                    };
                    let key = current_key.take();
                    yaml(&quoted).map_err(|_| {
                        current_key.set(key);
                        e
                    })
                })
                .map_err(|e| {
                    let e = e.without_snippet();
                    let (line, column) = match e.location() {
                        Some(loc) => match loc.span().byte_offset() {
                            Some(at) => {
                                let at = usize::try_from(at).unwrap_or(usize::MAX);
                                line_column(text, at.saturating_add(skipped), first_line)
                            }
                            None => (
                                first_line
                                    .saturating_add(
                                        usize::try_from(loc.line()).unwrap_or(usize::MAX),
                                    )
                                    .saturating_sub(1)
                                    .max(first_line),
                                usize::try_from(loc.column()).unwrap_or(usize::MAX).max(1),
                            ),
                        },
                        None => (first_line, 1),
                    };
                    let (line, column) = place((line, column));
                    let message = serde_saphyr::UserMessageFormatter.format_message(e);
                    (line, column, invalid(message.trim().to_owned()))
                })
        }
    };
    parsed.map(Option::unwrap_or_default)
}

/// Where the value of top-level `key` starts: the first line that begins
/// (unindented) with `key`, optionally quoted, then `:` or `=`. Falls back
/// to the start of the frontmatter.
fn locate_key(text: &str, key: &str, first_line: usize) -> (usize, usize) {
    for (n, line) in text.split('\n').enumerate() {
        let rest = [key.to_owned(), format!("\"{key}\""), format!("'{key}'")]
            .iter()
            .find_map(|k| line.strip_prefix(k.as_str()));
        let Some(rest) = rest else { continue };
        let after_key = rest.trim_start();
        let Some(value) = after_key
            .strip_prefix(':')
            .or_else(|| after_key.strip_prefix('='))
        else {
            continue;
        };
        let value_start = line.len() - value.trim_start().len();
        let column = line.get(..value_start).unwrap_or_default().chars().count() + 1;
        return (first_line + n, column);
    }
    (first_line, 1)
}

/// The 1-based `(line, column)` of byte `at` of `text`, whose first line is
/// line `first_line` of the file. The column counts characters; `at` is
/// clamped into the text and down to a character boundary.
fn line_column(text: &str, at: usize, first_line: usize) -> (usize, usize) {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = text.get(..at).unwrap_or_default();
    let line = first_line + before.matches('\n').count();
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).unwrap_or_default().chars().count() + 1;
    (line, column)
}

/// Claude Code's tool for starting sub-agents (`Agent`, formerly `Task`)
/// in an allowlist, taken out of it: bare, it says the sub-agent may start
/// sub-agents, which the depth decides here (warned as an unknown tool, a
/// coordinator listing only it was refused as having no tools); scoped to
/// named types (`Agent(worker, researcher)`), it is a limit this runtime
/// does not apply — dropped, the sub-agent could start any profile below
/// the depth limit — so it starts none (a narrowing, said), also beside
/// a `*` (every tool, as Claude Code reads it: `None`).
fn spawn_tool_entries(
    tools: Vec<String>,
    disallowed_tools: &mut Vec<String>,
    not_applied: &mut Vec<String>,
) -> Option<Vec<String>> {
    let kept = take_spawn_entries(tools, &[], disallowed_tools, not_applied);
    (!kept.iter().any(|t| t == "*")).then_some(kept)
}

/// [`spawn_tool_entries`] without the `*`: the list left. Scoped in any
/// case (`agent(worker)`, `TASK(x)`: the deny list reads them so) and
/// with the scope written apart (`Agent (worker)`, split at the space
/// into `Agent` and `(worker)`) — read as bare, either gave the sub-agent
/// delegation where its file scoped it. Bare, only `Agent` and `Task`
/// (`agent` is a front-end here, or a host's tool), and not one among
/// `host_tools` (a profile built in code on a host with a tool named
/// `Task`). Also for a profile built in code: its `tools` dropped an
/// `Agent(worker)` as a tool the host lacks.
pub(super) fn take_spawn_entries(
    tools: Vec<String>,
    host_tools: &[String],
    disallowed_tools: &mut Vec<String>,
    not_applied: &mut Vec<String>,
) -> Vec<String> {
    let mut kept = Vec::with_capacity(tools.len());
    let mut tools = tools.into_iter().peekable();
    while let Some(mut entry) = tools.next() {
        let base = entry.split('(').next().unwrap_or_default().trim();
        let spawns = ["Agent", "Task"]
            .iter()
            .any(|t| base.eq_ignore_ascii_case(t));
        let scope_apart = !entry.contains('(')
            && tools
                .peek()
                .is_some_and(|next| next.trim_start().starts_with('('));
        let scoped = entry.contains('(') || scope_apart;
        // Bare, only as Claude Code spells it: `agent` is a front-end
        // here, or a host's tool.
        let bare_spawn = (base == "Agent" || base == "Task") && !host_tools.contains(&entry);
        if !(bare_spawn || (spawns && scoped)) {
            kept.push(entry);
            continue;
        }
        if let Some(scope) = tools.next_if(|_| scope_apart) {
            entry = format!("{entry} {scope}");
        }
        if scoped {
            not_applied.push(format!(
                "tools: {entry} (a sub-agent started from it starts none)"
            ));
            if !disallowed_tools.iter().any(|d| d == "Agent") {
                disallowed_tools.push("Agent".to_owned());
            }
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_column_counts_chars_and_offsets_lines() {
        assert_eq!(line_column("ab\ncd", 0, 2), (2, 1));
        assert_eq!(line_column("ab\ncd", 4, 2), (3, 2));
        assert_eq!(line_column("é\néx", 5, 1), (2, 2));
        // Inside a multi-byte char and past the end are clamped.
        assert_eq!(line_column("é", 1, 1), (1, 1));
        assert_eq!(line_column("ab", 99, 1), (1, 3));
    }

    #[test]
    fn locate_key_finds_the_value() {
        let text = "a: 1\nmax_iterations:   0\n\"q\" = 2\n";
        assert_eq!(locate_key(text, "max_iterations", 2), (3, 19));
        assert_eq!(locate_key(text, "q", 2), (4, 7));
        assert_eq!(locate_key(text, "missing", 2), (2, 1));
        // A key that is only a prefix of another does not match.
        assert_eq!(
            locate_key("max_iterations_x: 1\n", "max_iterations", 2),
            (2, 1)
        );
    }
}
