//! Codex roles: `.codex/agents/*.toml`, one role per file — a TOML table
//! with `name`, `description`, `developer_instructions` (the system
//! prompt) and any of Codex's config keys (`model`, `model_provider`,
//! `model_reasoning_effort`, `sandbox_mode`, …), read with the same keys
//! and warnings as a profile's frontmatter.

use std::path::Path;

use super::FrontmatterFormat;
use super::error::{ParseErrorKind, ProfileError};
use super::name::profile_name;
use super::parse::{Parsed, from_frontmatter, parse_frontmatter};

/// Parses a Codex role file's text; see [`Profile::parse_codex_role`](super::Profile::parse_codex_role).
pub(crate) fn parse_codex_role(path: &Path, text: &str) -> Result<Parsed, ProfileError> {
    let name = profile_name(path)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let error = |(line, column, kind)| ProfileError::Parse {
        path: path.to_path_buf(),
        line,
        column,
        kind,
    };
    let mut fm = parse_frontmatter(FrontmatterFormat::Toml, text, 1).map_err(error)?;
    let Some(instructions) = fm
        .developer_instructions
        .take()
        .map(|i| i.replace("\r\n", "\n").trim().to_owned())
        .filter(|i| !i.is_empty())
    else {
        return Err(error((
            1,
            1,
            ParseErrorKind::Invalid {
                format: FrontmatterFormat::Toml,
                message: "a Codex role must define `developer_instructions` (its system prompt)"
                    .to_owned(),
            },
        )));
    };
    from_frontmatter(path, name, fm, instructions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ProfileWarning;

    #[test]
    fn a_codex_role_reads_its_instructions_model_and_name() {
        let text = "name = \"explorer\"\ndescription = \"Answers codebase questions.\"\n\
                    model = \"gpt-5-mini\"\nmodel_provider = \"openai\"\n\
                    model_reasoning_effort = \"low\"\nsandbox_mode = \"workspace-write\"\n\
                    developer_instructions = \"\"\"\nYou explore.\r\nCite paths.\n\"\"\"\n";
        let (profile, warnings) =
            parse_codex_role(Path::new("/p/.codex/agents/x.toml"), text).unwrap();
        assert_eq!(profile.name, "explorer");
        assert_eq!(profile.description, "Answers codebase questions.");
        assert_eq!(profile.system_prompt, "You explore.\nCite paths.");
        assert_eq!(profile.model.as_deref(), Some("gpt-5-mini"));
        assert_eq!(profile.provider.as_deref(), Some("openai"));
        assert_eq!(profile.effort.as_deref(), Some("low"));
        let keys: Vec<&str> = warnings
            .iter()
            .map(|w| match w {
                ProfileWarning::NotApplied { key, .. } => key.as_str(),
                other => panic!("{other}"),
            })
            .collect();
        // A sandbox the runtime does not apply is said, not silently
        // dropped (sorted: the TOML reader gives keys in order).
        assert_eq!(keys, ["model_reasoning_effort", "sandbox_mode"]);
    }

    #[test]
    fn a_codex_role_without_instructions_is_an_error_that_says_so() {
        let e = parse_codex_role(Path::new("/a/r.toml"), "description = \"d\"").unwrap_err();
        assert!(e.to_string().contains("developer_instructions"), "{e}");
        let e = parse_codex_role(Path::new("/a/r.toml"), "developer_instructions = 3").unwrap_err();
        assert!(e.to_string().contains("/a/r.toml:1:"), "{e}");
        // The file name stands in for a missing `name`.
        let (p, _) = parse_codex_role(
            Path::new("/a/reviewer.toml"),
            "developer_instructions = \"x\"",
        )
        .unwrap();
        assert_eq!(p.name, "reviewer");
    }
}
