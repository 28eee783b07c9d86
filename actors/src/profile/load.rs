//! Loading directories of profile files into a [`ProfileSet`].

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::Profile;
use super::error::{ParseErrorKind, ProfileError, ProfileWarning};
use super::lenient::{names_of, restricts};
use super::parse::Parsed;
use super::restrict::restrict_tools;
use super::walk::profile_files;

/// The largest profile file read, in bytes.
pub(super) const MAX_PROFILE_BYTES: u64 = ProfileSet::MAX_FILE_BYTES;

/// Profiles by name, sorted by name, names unique.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProfileSet {
    profiles: Vec<Profile>,
}

impl ProfileSet {
    /// The largest profile file read, in bytes (1 MiB); a larger one is
    /// skipped with a warning.
    pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

    /// Loads every `*.md` profile (Claude Code's agents, openheim's) and
    /// every `*.toml` role (Codex's `.codex/agents/`) of each directory in
    /// `dirs`, in order; on a name clash the later directory's profile
    /// wins.
    ///
    /// - A directory that does not exist is skipped silently; one that
    ///   cannot be listed gives [`ProfileWarning::UnreadableDir`].
    /// - Only regular files (after following links) whose extension is
    ///   exactly `md` or `toml` and whose name does not start with `.` are
    ///   read.
    /// - A file that cannot be read or parsed, or whose name is not a valid
    ///   profile name, is skipped with [`ProfileWarning::Skipped`] (logged
    ///   with its file, line and column); loading goes on. A skipped file
    ///   does not hide a profile of the same name from an earlier directory.
    /// - A tool in a profile's `tools` that is not in `known_tools` is left
    ///   out of that profile's list, with [`ProfileWarning::UnknownTool`]:
    ///   a profile never gets a tool that does not exist, and its allowlist
    ///   only ever narrows. (If every listed tool is unknown, the profile
    ///   ends with `Some(empty)`, no tools, rather than inheriting all.)
    /// - A profile's name is its frontmatter `name`, else its file name.
    ///   Two files of one directory with one name: the first by file name
    ///   is kept, the other skipped with [`ProfileWarning::DuplicateName`].
    /// - `disabled: true` leaves the profile out, and takes its name out
    ///   of the set (an earlier directory's profile of that name too).
    ///
    /// Returns the profiles and every warning raised on the way (skipped
    /// files, unknown keys, unknown tools, unreadable directories; each
    /// also logged with `tracing::warn!`).
    pub fn load(dirs: &[PathBuf], known_tools: &[String]) -> (ProfileSet, Vec<ProfileWarning>) {
        Self::load_mapping(dirs, known_tools, &BTreeMap::new())
    }

    /// [`ProfileSet::load`], with foreign tool names mapped to the host's
    /// first (`Read` → `read_file`): in `tools` and in `disallowedTools`.
    /// A name `tool_names` does not map stays as written. A profile whose
    /// listed tools all fail to map or to exist gets
    /// [`ProfileWarning::NoTools`], and delegating to it is refused with
    /// the same reason: it never runs silently without tools.
    pub fn load_mapping(
        dirs: &[PathBuf],
        known_tools: &[String],
        tool_names: &BTreeMap<String, String>,
    ) -> (ProfileSet, Vec<ProfileWarning>) {
        let mut by_name: BTreeMap<String, Profile> = BTreeMap::new();
        let mut warnings = Vec::new();
        for dir in dirs {
            // The names this directory gave, and by which file.
            let mut in_dir: BTreeMap<String, PathBuf> = BTreeMap::new();
            let foreign = other_tools_folder(dir);
            for path in profile_files(dir, &mut warnings) {
                let nested = foreign && path.parent() != Some(dir.as_path());
                match load_file(&path, foreign, nested) {
                    Ok((mut profile, file_warnings)) => {
                        for w in file_warnings {
                            warn(&mut warnings, w);
                        }
                        if let Some(kept) = in_dir.get(&profile.name) {
                            warn(
                                &mut warnings,
                                ProfileWarning::DuplicateName {
                                    name: profile.name.clone(),
                                    kept: kept.clone(),
                                    skipped: path.clone(),
                                },
                            );
                            continue;
                        }
                        in_dir.insert(profile.name.clone(), path.clone());
                        if profile.disabled {
                            // `disabled: true` takes the name out, an
                            // earlier directory's profile of that name too.
                            tracing::debug!(profile = %profile.name, file = %path.display(), "profile disabled");
                            by_name.remove(&profile.name);
                            continue;
                        }
                        restrict_tools(&mut profile, known_tools, tool_names, &mut warnings);
                        if let Some(old) = by_name.insert(profile.name.clone(), profile) {
                            tracing::debug!(
                                profile = %old.name,
                                replaced = %old.source.display(),
                                "profile overridden by a later directory"
                            );
                        }
                    }
                    Err(e) => {
                        // Refused for a restriction, or broken with a
                        // restricting key in it (the parser stops at the
                        // first error, which may come before it): its
                        // name is taken out, an earlier directory's
                        // profile of that name too — that one may do what
                        // this file forbids — and held in this directory,
                        // as `disabled: true` holds it.
                        // A name this directory gave already (a file read
                        // before, shallower) stays: this file, had it
                        // loaded, was a duplicate skipped.
                        if e.is_refusal() || restricts(&path) {
                            for name in names_of(&path) {
                                if in_dir.contains_key(&name) {
                                    continue;
                                }
                                by_name.remove(&name);
                                in_dir.insert(name, path.clone());
                            }
                        }
                        warn(&mut warnings, ProfileWarning::Skipped(e));
                    }
                }
            }
        }
        let set = ProfileSet {
            profiles: by_name.into_values().collect(),
        };
        (set, warnings)
    }

    /// The default profile directories, in load order — the user's, then
    /// the project's, so that passed to [`ProfileSet::load`] the project's
    /// profiles win (as in Claude Code):
    ///
    /// 1. `$XDG_CONFIG_HOME/subagents/agents` (or
    ///    `$HOME/.config/subagents/agents` when `XDG_CONFIG_HOME` is unset,
    ///    empty or relative; left out when neither is usable);
    /// 2. `$HOME/.claude/agents` and `$HOME/.codex/agents` (left out
    ///    without a usable `HOME`);
    /// 3. `<project_root>/.claude/agents`, `.codex/agents`,
    ///    `.agents/agents`, then `.subagents/agents` (this runtime's own,
    ///    last: it wins over the other tools' files).
    pub fn default_dirs(project_root: &Path) -> Vec<PathBuf> {
        default_dirs_from(
            project_root,
            std::env::var_os("HOME").as_deref(),
            std::env::var_os("XDG_CONFIG_HOME").as_deref(),
        )
    }

    /// A set of the given profiles; on a name clash the later one wins. A
    /// profile `disabled` (a file's `disabled: true`, `mode: primary`, a
    /// remote agent, one never to run as a sub-agent) is left out, and its
    /// name with it, as [`ProfileSet::load`] leaves it out: kept, a host
    /// parsing files itself ran them with every tool.
    pub fn from_profiles(profiles: impl IntoIterator<Item = Profile>) -> Self {
        let by_name: BTreeMap<String, Profile> =
            profiles.into_iter().map(|p| (p.name.clone(), p)).collect();
        Self {
            profiles: by_name.into_values().filter(|p| !p.disabled).collect(),
        }
    }

    /// Refuses, at the spawn of the parent they are offered to, a profile
    /// built in code (`from_profiles` takes any) that a file would not
    /// have given: a name no call can select (empty, with whitespace, a
    /// control character or one that shows as nothing), request options no
    /// server takes, a `permission_mode` that restricts (`plan`,
    /// `dontAsk`) or that nobody documents, or `max_iterations` 0.
    pub(crate) fn check(&self) -> Result<(), crate::agent::AgentError> {
        use crate::agent::AgentError;
        for profile in &self.profiles {
            super::name::check_name(&profile.source, profile.name.clone())
                .map_err(AgentError::Profile)?;
            let within = |why: String| format!("{why} (in the profile `{}`)", profile.name);
            crate::agent::check_options(&profile.options).map_err(|e| match e {
                AgentError::Options { field, why } => AgentError::Options {
                    field,
                    why: within(why),
                },
                other => other,
            })?;
            // A mode a file could not give (`plan`, `dontAsk`, one nobody
            // documents): refused as the file's key is — kept, it was
            // read by nothing, and the profile ran with every tool.
            if let Some(mode) = &profile.permission_mode {
                super::modes::permission_mode_loads::<serde::de::value::Error>(
                    "permission_mode",
                    mode,
                )
                .map_err(|e| AgentError::Options {
                    field: "permission_mode",
                    why: within(e.to_string()),
                })?;
            }
            if profile.max_iterations == Some(0) {
                return Err(AgentError::Options {
                    field: "max_iterations",
                    why: within("must be at least 1 (0 would stop it before it starts)".into()),
                });
            }
        }
        Ok(())
    }

    /// Each profile's tools narrowed to the host's `known` ones, as a
    /// file's are when loaded: a profile built in code listing a tool
    /// the host lacks was refused at every delegation ("not one of your
    /// tools", a list the model never wrote). The warnings, for the log.
    pub(crate) fn narrow_to(&mut self, known: &[String]) -> Vec<ProfileWarning> {
        let mut warnings = Vec::new();
        for profile in &mut self.profiles {
            super::restrict::narrow_to(profile, known, &mut warnings);
        }
        warnings
    }

    /// The profile named `name` (case-sensitive).
    pub fn get(&self, name: &str) -> Option<&Profile> {
        self.profiles
            .binary_search_by(|p| p.name.as_str().cmp(name))
            .ok()
            .and_then(|at| self.profiles.get(at))
    }

    /// The profiles, sorted by name.
    pub fn iter(&self) -> std::slice::Iter<'_, Profile> {
        self.profiles.iter()
    }

    /// The profile names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.profiles.iter().map(|p| p.name.as_str())
    }

    /// Whether there are no profiles.
    pub fn is_empty(&self) -> bool {
        self.profiles.is_empty()
    }

    /// How many profiles there are.
    pub fn len(&self) -> usize {
        self.profiles.len()
    }
}

impl<'a> IntoIterator for &'a ProfileSet {
    type Item = &'a Profile;
    type IntoIter = std::slice::Iter<'a, Profile>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Logs a warning and keeps it.
pub(super) fn warn(warnings: &mut Vec<ProfileWarning>, warning: ProfileWarning) {
    match &warning {
        ProfileWarning::Skipped(e) => match e.position() {
            Some((line, column)) => tracing::warn!(
                file = %e.path().display(), line, column, error = %e, "skipped profile file"
            ),
            None => tracing::warn!(file = %e.path().display(), error = %e, "skipped profile file"),
        },
        other => tracing::warn!(path = %other.path().display(), "{other}"),
    }
    warnings.push(warning);
}

/// Whether `dir` is another tool's agents folder (`.claude/agents`,
/// `.codex/agents`, `.agents/agents`, Copilot's `.github/agents` and
/// `.copilot/agents`, Cursor's, Gemini CLI's, OpenCode's, Qwen Code's,
/// Augment's, Kiro's, Factory's `.factory/droids`), where a Markdown file without a
/// frontmatter block is not an agent: Claude Code registers none, and a
/// folder's `README.md` (or a cloned collection's `CLAUDE.md`) became a
/// sub-agent with every tool. In this runtime's own folders such a file is
/// a profile, as in openheim's.
fn other_tools_folder(dir: &Path) -> bool {
    let mut parts = dir.components().rev().map(|c| c.as_os_str());
    let last = parts.next();
    // Factory's droids (a folder's README became a sub-agent with every
    // tool; Factory requires a frontmatter `name`).
    if last == Some(OsStr::new("droids")) {
        return parts.next() == Some(OsStr::new(".factory"));
    }
    last == Some(OsStr::new("agents"))
        && parts.next().is_some_and(|p| {
            [
                ".claude",
                ".codex",
                ".agents",
                ".github",
                ".copilot",
                ".cursor",
                ".gemini",
                ".opencode",
                ".qwen",
                ".augment",
                ".kiro",
            ]
            .map(OsStr::new)
            .contains(&p)
        })
}

/// Reads and parses one profile file (at most [`MAX_PROFILE_BYTES`]); in
/// another tool's folder (`needs_frontmatter`), a Markdown file without a
/// frontmatter block is an error, and in a sub-folder of it (`nested`)
/// one that declares no `name` (Claude Code requires one: a command or a
/// note a cloned collection keeps beside its agents is no agent).
fn load_file(path: &Path, needs_frontmatter: bool, nested: bool) -> Result<Parsed, ProfileError> {
    super::name::profile_name(path)?;
    let read_error = |message: String| ProfileError::Read {
        path: path.to_path_buf(),
        message,
    };
    let file = std::fs::File::open(path).map_err(|e| read_error(e.to_string()))?;
    let mut bytes = Vec::new();
    file.take(MAX_PROFILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| read_error(e.to_string()))?;
    if bytes.len() as u64 > MAX_PROFILE_BYTES {
        return Err(read_error(format!("larger than {MAX_PROFILE_BYTES} bytes")));
    }
    if path.extension() == Some(OsStr::new("toml")) {
        // A Codex role (`.codex/agents/*.toml`).
        let text = super::parse::utf8(path, &bytes)?;
        return super::codex::parse_codex_role(path, text);
    }
    let text = super::parse::utf8(path, &bytes)?;
    let refused = |kind| ProfileError::Parse {
        path: path.to_path_buf(),
        line: 1,
        column: 1,
        kind,
    };
    if let (true, Ok(split)) = (needs_frontmatter, super::fence::split(text)) {
        if split.format.is_none() {
            return Err(refused(ParseErrorKind::NoFrontmatter));
        }
        let declares_name = split.frontmatter.lines().any(|line| {
            let key = line.split([':', '=']).next().unwrap_or("");
            key.trim().trim_matches(['"', '\'']) == "name"
        });
        if nested && !declares_name {
            return Err(refused(ParseErrorKind::NoName));
        }
    }
    super::parse::parse_profile(path, text)
}

fn default_dirs_from(
    project_root: &Path,
    home: Option<&OsStr>,
    xdg_config_home: Option<&OsStr>,
) -> Vec<PathBuf> {
    fn usable(v: Option<&OsStr>) -> Option<&Path> {
        v.map(Path::new).filter(|p| p.is_absolute())
    }
    let config = usable(xdg_config_home)
        .map(Path::to_path_buf)
        .or_else(|| usable(home).map(|h| h.join(".config")));
    let mut dirs = Vec::with_capacity(7);
    if let Some(config) = config {
        dirs.push(config.join("subagents").join("agents"));
    }
    if let Some(home) = usable(home) {
        dirs.push(home.join(".claude").join("agents"));
        dirs.push(home.join(".codex").join("agents"));
    }
    for tool in [".claude", ".codex", ".agents", ".subagents"] {
        dirs.push(project_root.join(tool).join("agents"));
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_dirs_prefer_xdg_then_home() {
        let root = Path::new("/proj");
        let project: Vec<PathBuf> = [".claude", ".codex", ".agents", ".subagents"]
            .iter()
            .map(|t| Path::new("/proj").join(t).join("agents"))
            .collect();
        let home = [
            PathBuf::from("/h/.claude/agents"),
            PathBuf::from("/h/.codex/agents"),
        ];
        let with = |first: &[PathBuf], then: &[PathBuf]| -> Vec<PathBuf> {
            first.iter().chain(then).chain(&project).cloned().collect()
        };
        assert_eq!(
            default_dirs_from(root, Some(OsStr::new("/h")), Some(OsStr::new("/x"))),
            with(&[PathBuf::from("/x/subagents/agents")], &home)
        );
        assert_eq!(
            default_dirs_from(root, Some(OsStr::new("/h")), None),
            with(&[PathBuf::from("/h/.config/subagents/agents")], &home)
        );
        // Empty or relative XDG_CONFIG_HOME is ignored, per the XDG spec.
        for xdg in ["", "rel/dir"] {
            assert_eq!(
                default_dirs_from(root, Some(OsStr::new("/h")), Some(OsStr::new(xdg))),
                with(&[PathBuf::from("/h/.config/subagents/agents")], &home)
            );
        }
        assert_eq!(default_dirs_from(root, None, None), project);
        assert_eq!(default_dirs_from(root, Some(OsStr::new("")), None), project);
    }

    #[test]
    fn default_dirs_end_with_the_project_dir() {
        let dirs = ProfileSet::default_dirs(Path::new("/proj"));
        assert_eq!(dirs.last(), Some(&PathBuf::from("/proj/.subagents/agents")));
    }
}
