//! A profile's name: the one its file gives, the one its settings declare,
//! and what makes either valid.

use std::path::Path;

use super::error::{ProfileError, ProfileWarning};

/// The second extensions of GitHub Copilot's and VS Code's agent files
/// (`reviewer.agent.md`, `plan.chatmode.md`): part of the file's type, not
/// of the agent's name.
const TYPE_SUFFIXES: &[&str] = &[".agent", ".chatmode"];

/// The profile name a path gives: its file name without the extension
/// (and without Copilot's `.agent` or `.chatmode` before a `.md`).
///
/// A name must be non-empty and contain no whitespace, control characters
/// or characters that show as nothing; names are case-sensitive.
pub(crate) fn profile_name(path: &Path) -> Result<String, ProfileError> {
    let invalid = |name: String, reason| ProfileError::InvalidName {
        path: path.to_path_buf(),
        name,
        reason,
    };
    let Some(stem) = path.file_stem() else {
        return Err(invalid(String::new(), "the path has no file name"));
    };
    let Some(name) = stem.to_str() else {
        return Err(invalid(
            stem.to_string_lossy().into_owned(),
            "it is not UTF-8",
        ));
    };
    let name = match type_suffix(path, name) {
        Some(suffix) => &name[..name.len() - suffix.len()],
        None => name,
    };
    check_name(path, name.to_owned())
}

/// Copilot's `.agent` or `.chatmode` ending `stem` (the file name less
/// `.md`), when something is left before it.
fn type_suffix(path: &Path, stem: &str) -> Option<&'static str> {
    let markdown = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("md"));
    TYPE_SUFFIXES
        .iter()
        .copied()
        .find(|suffix| markdown && stem.len() > suffix.len() && stem.ends_with(suffix))
}

/// The profile's identity: the `name` its settings declare, else the one
/// its file gives (`from_file`). A Copilot agent file's `name` is a
/// display name (`"4.1 Beast Mode V3.1"`) and its identity the file's: one
/// that is no valid name is not applied (warned), where elsewhere it
/// refuses the file.
pub(super) fn identity(
    path: &Path,
    from_file: String,
    declared: Option<String>,
    warnings: &mut Vec<ProfileWarning>,
) -> Result<String, ProfileError> {
    let Some(declared) = declared
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
    else {
        return Ok(from_file);
    };
    let display_named = path
        .file_stem()
        .and_then(|s| s.to_str())
        .is_some_and(|stem| type_suffix(path, stem).is_some());
    match check_name(path, declared) {
        Err(ProfileError::InvalidName { .. }) if display_named => {
            warnings.push(ProfileWarning::NotApplied {
                path: path.to_path_buf(),
                key: "name".to_owned(),
            });
            Ok(from_file)
        }
        checked => checked,
    }
}

/// Checks a profile name (from a file name or a frontmatter `name`).
pub(crate) fn check_name(path: &Path, name: String) -> Result<String, ProfileError> {
    let invalid = |name: String, reason| ProfileError::InvalidName {
        path: path.to_path_buf(),
        name,
        reason,
    };
    if name.is_empty() {
        Err(invalid(String::new(), "it is empty"))
    } else if name.chars().any(char::is_whitespace) {
        Err(invalid(name, "it contains whitespace"))
    } else if name.chars().any(char::is_control) {
        Err(invalid(name, "it contains a control character"))
    } else if name.chars().any(crate::delegation::is_invisible) {
        // `reviewer` and a zero-width space: listed as `reviewer`, never
        // selected by a call naming `reviewer`.
        Err(invalid(
            name,
            "it contains a character that shows as nothing",
        ))
    } else {
        Ok(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_names() {
        assert_eq!(
            profile_name(Path::new("/a/code-reviewer.md")).unwrap(),
            "code-reviewer"
        );
        assert_eq!(profile_name(Path::new("Ünï.md")).unwrap(), "Ünï");
        for bad in [
            "/a/code reviewer.md",
            "/a/tab\there.md",
            "/a/ctl\u{1}.md",
            "/",
        ] {
            assert!(
                matches!(
                    profile_name(Path::new(bad)),
                    Err(ProfileError::InvalidName { .. })
                ),
                "{bad}"
            );
        }
    }

    /// Foreign (foreign-files review): Copilot's `reviewer.agent.md` was
    /// the agent `reviewer.agent`, and a display name with a space refused
    /// the whole file.
    #[test]
    fn a_copilot_agent_file_is_named_by_its_file_less_its_type() {
        for (path, name) in [
            ("/a/reviewer.agent.md", "reviewer"),
            ("/a/plan.chatmode.md", "plan"),
            ("/a/.agent.md", ".agent"),
            ("/a/notes.agent.toml", "notes.agent"),
            ("/a/x.agent.txt.md", "x.agent.txt"),
        ] {
            assert_eq!(profile_name(Path::new(path)).unwrap(), name, "{path}");
        }
        let mut warnings = Vec::new();
        let beast = Path::new("/a/4.1-Beast.agent.md");
        let named = |declared: &str, warnings: &mut Vec<_>| {
            identity(beast, "4.1-Beast".into(), Some(declared.into()), warnings)
        };
        assert_eq!(
            named("4.1 Beast Mode V3.1", &mut warnings).unwrap(),
            "4.1-Beast"
        );
        assert!(
            matches!(&warnings[..], [ProfileWarning::NotApplied { key, .. }] if key == "name"),
            "{warnings:?}"
        );
        assert_eq!(named("beast", &mut warnings).unwrap(), "beast");
        // Elsewhere a declared name is the identity, and an invalid one
        // refuses the file.
        let claude = Path::new("/a/beast.md");
        assert!(matches!(
            identity(
                claude,
                "beast".into(),
                Some("Beast Mode".into()),
                &mut warnings
            ),
            Err(ProfileError::InvalidName { .. })
        ));
    }
}
