//! Fuzzes the profile parser: no input may panic it, a name is always
//! valid, and the Claude Code keys (deny list, `disabled`, `background`,
//! the kept and not-applied keys) never break those rules.
//!
//! Run: `cargo +nightly fuzz run parse_profile` (from the repository root).

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use subagents_actors::profile::{Profile, ProfileError};

/// Parses `text`; a profile's name is valid, an error is placed.
fn check(text: &[u8]) {
    match Profile::parse_bytes(Path::new("fuzz.md"), text) {
        Ok((profile, _warnings)) => {
            assert!(!profile.name.is_empty());
            assert!(!profile.name.chars().any(|c| c.is_whitespace() || c.is_control()));
            assert!(profile.disallowed_tools.iter().all(|t| !t.trim().is_empty()));
        }
        Err(ProfileError::Parse(e)) => assert!(e.line >= 1 && e.column >= 1),
        // A frontmatter `name` may be invalid; it is named in the error.
        Err(ProfileError::InvalidName { .. }) => {}
        Err(other) => panic!("unexpected error kind: {other}"),
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    // The same text behind each fence exercises both frontmatter parsers.
    for fence in [&b"+++\n"[..], b"---\n"] {
        let mut text = fence.to_vec();
        text.extend_from_slice(data);
        check(&text);
    }
    // The data as the value of each Claude Code key.
    for key in [
        "name", "disallowedTools", "disabled", "background", "color", "effort",
        "permissionMode", "memory", "initialPrompt", "skills", "hooks", "mcpServers",
        "isolation", "maxTurns",
    ] {
        let mut text = format!("---\n{key}: ").into_bytes();
        text.extend_from_slice(data);
        text.extend_from_slice(b"\n---\nbody");
        check(&text);
    }
});
