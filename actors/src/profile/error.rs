//! The errors and warnings of profile parsing and loading.

use std::fmt;
use std::path::{Path, PathBuf};

/// The frontmatter format of a profile file, told by its opening fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrontmatterFormat {
    /// `+++`-fenced TOML (openheim's format).
    Toml,
    /// `---`-fenced YAML (the `.claude/agents/*.md` format).
    Yaml,
}

impl FrontmatterFormat {
    /// The fence line that opens and closes this format's block.
    pub fn fence(self) -> &'static str {
        match self {
            Self::Toml => "+++",
            Self::Yaml => "---",
        }
    }
}

impl fmt::Display for FrontmatterFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Toml => "TOML",
            Self::Yaml => "YAML",
        })
    }
}

/// What is wrong at a position of a profile file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// The frontmatter block is opened but no closing fence line follows.
    #[error("the {format} frontmatter opened here is never closed (no line `{}` follows)", format.fence())]
    UnclosedFrontmatter {
        /// The format the opening fence announced.
        format: FrontmatterFormat,
    },
    /// The frontmatter is not valid TOML/YAML, or a value has the wrong type.
    #[error("invalid {format} frontmatter: {message}")]
    Invalid {
        /// The frontmatter's format.
        format: FrontmatterFormat,
        /// The parser's message, without position.
        message: String,
    },
    /// The file's bytes are not UTF-8; the position is the first bad byte.
    #[error("the file is not valid UTF-8")]
    NotUtf8,
    /// The file holds a NUL byte, which no text profile does: binary, or
    /// UTF-16 written without its byte order mark (ASCII with a NUL after
    /// or before each letter, valid UTF-8 by the bytes, read as no
    /// frontmatter, the whole file the prompt and its deny list dropped).
    /// The position is the first NUL.
    #[error("the file holds a NUL byte: it is binary, or UTF-16 without a byte order mark")]
    NulByte,
    /// A frontmatter fence that is not the file's first line as written
    /// (after blank lines, indented, or in lines ended by a lone CR): read
    /// as the whole file's prompt, its settings — a deny list among them —
    /// would be silently ignored.
    #[error(
        "this looks like a {format} frontmatter fence, but a fence must be the file's first line, alone and unindented, its lines ended by LF or CRLF; as written, the whole file would be the prompt and its settings ignored"
    )]
    MisplacedFence {
        /// The format the fence announces.
        format: FrontmatterFormat,
    },
    /// A Markdown file without a frontmatter block in another tool's
    /// agents folder (`.claude/agents`, `.codex/agents`, `.agents/agents`,
    /// `.github/agents`, …),
    /// where such a file is not an agent (a folder's `README.md`); in this
    /// runtime's own folders it is a profile whose whole text is the prompt.
    #[error(
        "no frontmatter block: in this folder a file is an agent only with one (`---` with `name` and `description`); a README or notes file is not read as an agent"
    )]
    NoFrontmatter,
    /// A Markdown file in a sub-folder of another tool's agents folder
    /// that declares no `name`, which Claude Code requires of an agent: a
    /// command or a note a cloned collection keeps beside its agents.
    #[error(
        "no `name`: in a sub-folder of this folder a file is an agent only with one (a command or a note kept beside the agents is not)"
    )]
    NoName,
}

/// Why a profile file was not loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// The file's contents do not parse: what is wrong, and where.
    ///
    /// `line` and `column` are 1-based and relative to the whole file (not
    /// to the frontmatter block); the column counts characters, not bytes.
    #[error("{}:{line}:{column}: {kind}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line in the file.
        line: usize,
        /// 1-based column (in characters) in that line.
        column: usize,
        /// What is wrong.
        kind: ParseErrorKind,
    },
    /// The file name does not make a valid profile name.
    #[error("{}: `{name}` is not a valid profile name: {reason}", path.display())]
    InvalidName {
        /// The file.
        path: PathBuf,
        /// The name the file would give (lossy if not UTF-8).
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The file could not be read.
    #[error("{}: cannot read: {message}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

impl ProfileError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Self::Parse { path, .. } | Self::InvalidName { path, .. } | Self::Read { path, .. } => {
                path
            }
        }
    }

    /// True when the file was refused, not broken: it asks for a
    /// restriction this runtime cannot enforce (`permissionMode: plan`, a
    /// Codex role's `sandbox_mode = "read-only"`, an unknown mode that may
    /// be one). Loading it without would widen what it may do; a loader
    /// takes its name out rather than fall back to another file's.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Self::Parse { kind: ParseErrorKind::Invalid { message, .. }, .. }
                if super::modes::is_refusal(message)
        )
    }

    /// The 1-based `(line, column)` of a parse error; `None` for the others.
    pub fn position(&self) -> Option<(usize, usize)> {
        match self {
            Self::Parse { line, column, .. } => Some((*line, *column)),
            Self::InvalidName { .. } | Self::Read { .. } => None,
        }
    }
}

/// Something worth telling about while parsing or loading profiles. Never
/// fatal: each is also logged with `tracing::warn!` by the loader.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileWarning {
    /// A profile file was skipped; loading went on without it.
    #[error("skipped profile file: {0}")]
    Skipped(ProfileError),
    /// A frontmatter key this loader does not know; it was ignored.
    #[error("{}: unknown frontmatter key `{key}` ignored", path.display())]
    UnknownKey {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
    },
    /// A profile's `tools` names a tool that does not exist; the tool was
    /// left out of that profile's list.
    #[error("{}: profile `{profile}` lists unknown tool `{tool}`; it is left out", path.display())]
    UnknownTool {
        /// The file.
        path: PathBuf,
        /// The profile.
        profile: String,
        /// The unknown tool name.
        tool: String,
    },
    /// A profile's deny list (`disallowedTools`) names a tool that does
    /// not exist here (after mapping), so the entry denies nothing: a host
    /// tool that does that work under another name stays open until the
    /// name is mapped ([`ProfileSet::load_mapping`](crate::profile::ProfileSet::load_mapping)).
    #[error(
        "{}: profile `{profile}` denies `{tool}`, which is no tool here, so it denies nothing; map it to the host's tool if one does that work",
        path.display()
    )]
    UnknownDeniedTool {
        /// The file.
        path: PathBuf,
        /// The profile.
        profile: String,
        /// The entry, as mapped.
        tool: String,
    },
    /// Every tool a profile lists is unknown here (after mapping): it
    /// would run with no tools, so delegating to it is refused.
    #[error(
        "{}: profile `{profile}` lists only tools that do not exist here ({}); delegating to it is refused until they are mapped to the host's tools",
        path.display(),
        listed.join(", ")
    )]
    NoTools {
        /// The file.
        path: PathBuf,
        /// The profile.
        profile: String,
        /// The tools it lists, as mapped.
        listed: Vec<String>,
    },
    /// A profile's `model` names nothing the model registry knows
    /// ([`ModelRegistry::check_profiles`](crate::registry::ModelRegistry::check_profiles)).
    #[error("{}: profile `{profile}` names the model `{model}`: {reason}", path.display())]
    UnknownModel {
        /// The file.
        path: PathBuf,
        /// The profile.
        profile: String,
        /// The model it names.
        model: String,
        /// Why it does not resolve, listing the models that do.
        reason: String,
    },
    /// A known key whose behaviour this runtime does not apply (Claude
    /// Code's `hooks`, `mcpServers`, `isolation`, `permissionMode`, …).
    /// Kept on the profile where it has a field; the profile loads.
    #[error("{}: `{key}` is not applied by this runtime (the profile loads without it)", path.display())]
    NotApplied {
        /// The file.
        path: PathBuf,
        /// The key, as written.
        key: String,
    },
    /// Two files of one directory give the same profile name; the first
    /// (by file name) is kept.
    #[error(
        "{}: the profile name `{name}` is taken by {}; this file is skipped",
        skipped.display(),
        kept.display()
    )]
    DuplicateName {
        /// The name.
        name: String,
        /// The file kept.
        kept: PathBuf,
        /// The file skipped.
        skipped: PathBuf,
    },
    /// A profile directory exists but could not be listed.
    #[error("{}: cannot read profile directory: {message}", path.display())]
    UnreadableDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

impl ProfileWarning {
    /// The file or directory the warning is about.
    pub fn path(&self) -> &Path {
        match self {
            Self::Skipped(e) => e.path(),
            Self::UnknownKey { path, .. }
            | Self::UnknownTool { path, .. }
            | Self::UnknownDeniedTool { path, .. }
            | Self::NotApplied { path, .. }
            | Self::NoTools { path, .. }
            | Self::UnknownModel { path, .. }
            | Self::DuplicateName { skipped: path, .. }
            | Self::UnreadableDir { path, .. } => path,
        }
    }
}
