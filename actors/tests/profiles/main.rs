//! Profile parsing (both frontmatter formats) and directory loading.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod claude;
mod fields;
mod folders;
mod kiro_qwen;
mod loading;
mod narrowing;
mod never_panics;
mod newest;
mod others;
mod tables;

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use subagents_actors::profile::{
    FrontmatterFormat, ParseErrorKind, Profile, ProfileError, ProfileSet, ProfileWarning,
};

const PATH: &str = "/agents/agent.md";

fn parse(text: &str) -> Result<(Profile, Vec<ProfileWarning>), ProfileError> {
    Profile::parse(Path::new(PATH), text)
}

fn profile(text: &str) -> Profile {
    match parse(text) {
        Ok((profile, _)) => profile,
        Err(e) => panic!("{text:?} should parse: {e}"),
    }
}

/// A parse error's fields, and its message.
struct ParseFailure {
    path: PathBuf,
    line: usize,
    column: usize,
    kind: ParseErrorKind,
    shown: String,
}

impl std::fmt::Display for ParseFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

fn parse_error(text: &str) -> ParseFailure {
    match parse(text) {
        Err(e @ ProfileError::Parse { .. }) => {
            let shown = e.to_string();
            let ProfileError::Parse {
                path,
                line,
                column,
                kind,
            } = e
            else {
                unreachable!()
            };
            ParseFailure {
                path,
                line,
                column,
                kind,
                shown,
            }
        }
        other => panic!("{text:?} should fail to parse, got {other:?}"),
    }
}

fn base() -> Profile {
    Profile {
        name: "agent".into(),
        description: String::new(),
        system_prompt: String::new(),
        model: None,
        provider: None,
        tools: None,
        max_iterations: None,
        source: PathBuf::from(PATH),
        ..Default::default()
    }
}

fn tools(names: &[&str]) -> Option<Vec<String>> {
    Some(names.iter().map(|n| (*n).to_owned()).collect())
}
