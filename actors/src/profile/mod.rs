//! Named agent profiles: Markdown files that define a whole sub-agent — its
//! system prompt, description, and optional model, provider, tool allowlist
//! and iteration cap.
//!
//! A profile is a `.md` file; its file name without `.md` is the profile's
//! name (case-sensitive, no whitespace). The file may open with a
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

mod error;
mod fields;
mod load;
mod parse;
mod render;

use std::path::PathBuf;

pub use error::{FrontmatterFormat, ParseError, ParseErrorKind, ProfileError, ProfileWarning};
pub use load::ProfileSet;

/// One named sub-agent profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// The name: the file name without `.md`.
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
    /// The file the profile was read from.
    pub source: PathBuf,
}
