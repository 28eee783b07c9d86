//! Named agent profiles: Markdown files that define a whole sub-agent — its
//! system prompt, description, and optional model, provider, tool allowlist
//! and iteration cap.
//!
//! A profile is a `.md` file; its name is the frontmatter's `name` (Claude
//! Code's identity), else the file name without `.md` (case-sensitive, no
//! whitespace either way). The file may open with a
//! frontmatter block in either of two formats, both loaded unmodified:
//!
//! ```text
//! +++                                   ---
//! description = "Reviews diffs."        name: code-reviewer
//! model = "claude-haiku-4-5"            description: Reviews diffs.
//! tools = ["read_file"]                 tools: read_file, grep
//! max_iterations = 6                    model: inherit
//! +++                                   ---
//! You are a meticulous reviewer.        You are a meticulous reviewer.
//! ```
//!
//! The rest of the file is the system prompt. [`Profile::parse`] parses one
//! file's text; [`ProfileSet::load`] loads directories of them (later
//! directories win; see [`ProfileSet::default_dirs`]). Nothing here panics on
//! any input: a bad file is an error (with file, line and column) or, when
//! loading a directory, a warning and a skipped file. See `docs/profiles.md`.

mod antigravity;
mod codex;
mod codex_tables;
mod error;
mod fence;
mod fields;
mod lenient;
mod load;
mod modes;
mod name;
mod parse;
mod render;
mod restrict;
mod toml_depth;
mod tools;
mod values;
mod walk;

use std::path::PathBuf;

use subagents_messages::RequestOptions;

pub use error::{FrontmatterFormat, ParseErrorKind, ProfileError, ProfileWarning};
pub use load::ProfileSet;
pub(crate) use restrict::{denies, denies_delegation, expand_servers};

/// One named sub-agent profile.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Profile {
    /// The name: its frontmatter `name` (a Codex role's `name`), else the
    /// file name without its extension.
    pub name: String,
    /// When to use this profile, for the orchestrating model; may be empty.
    pub description: String,
    /// The sub-agent's system prompt: the file's body, trimmed, CRLF made LF.
    pub system_prompt: String,
    /// A model overriding the parent's; `None` inherits it (as does
    /// `model: inherit` in the file).
    pub model: Option<String>,
    /// A provider overriding the parent's; `None` inherits it.
    pub provider: Option<String>,
    /// The tools the sub-agent may use; `None` inherits the parent's set,
    /// `Some(empty)` means no tools at all.
    pub tools: Option<Vec<String>>,
    /// A cap on the sub-agent's loop iterations (at least 1); `None`
    /// inherits the parent's.
    pub max_iterations: Option<u32>,
    /// Tools the sub-agent may never have (Claude Code's
    /// `disallowedTools`): taken out of whatever it would otherwise get —
    /// its `tools`, a call's own list, or every tool the parent has. A
    /// deny list only ever narrows.
    pub disallowed_tools: Vec<String>,
    /// The tools its file lists that the host does not have (after
    /// [`ProfileSet::load_mapping`]'s mapping), left out of `tools` at
    /// load. If they were all it listed, delegating to it is refused.
    pub unavailable_tools: Vec<String>,
    /// `disabled: true`: [`ProfileSet::load`] leaves the profile out.
    pub disabled: bool,
    /// `background: true`: a `use_agent run` of this profile that does not
    /// say `wait` runs in the background.
    pub background: bool,
    /// Kept for the host, not applied by this runtime: Claude Code's
    /// `color` (a UI colour).
    pub color: Option<String>,
    /// Kept for the host, not applied (warned): Claude Code's `effort`.
    pub effort: Option<String>,
    /// Kept for the host, not applied (warned): Claude Code's
    /// `permissionMode`. Approvals here are the host's
    /// [`ApprovalPolicy`](crate::agent::ApprovalPolicy). A mode that
    /// restricts (`plan`, `dontAsk`) or that nobody documents is refused:
    /// a file at load, a profile built in code at the parent's spawn.
    pub permission_mode: Option<String>,
    /// Kept for the host, not applied (warned): Claude Code's `memory`.
    pub memory: Option<String>,
    /// Kept for the host, not applied (warned): Claude Code's
    /// `initialPrompt`.
    pub initial_prompt: Option<String>,
    /// Kept for the host, not applied (warned): Claude Code's `skills`.
    pub skills: Vec<String>,
    /// Request options for the sub-agent's model calls (`max_tokens`,
    /// `temperature`, `top_p`, `seed`, `stop` in the file): over the
    /// delegating builder's child options, field by field; an unset one
    /// keeps the builder's.
    pub options: RequestOptions,
    /// The file the profile was read from.
    pub source: PathBuf,
}
