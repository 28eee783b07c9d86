//! Fuzzes the profile parser: no input may panic it.
//!
//! Run: `cargo +nightly fuzz run parse_profile` (from the repository root).

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use subagents_actors::profile::{ProfileError, parse_profile_bytes};

fuzz_target!(|data: &[u8]| {
    match parse_profile_bytes(Path::new("fuzz.md"), data) {
        Ok(parsed) => assert_eq!(parsed.profile.name, "fuzz"),
        Err(ProfileError::Parse(e)) => assert!(e.line >= 1 && e.column >= 1),
        Err(other) => panic!("unexpected error kind: {other}"),
    }
    // The same text behind each fence exercises both frontmatter parsers.
    for fence in [&b"+++\n"[..], b"---\n"] {
        let mut text = fence.to_vec();
        text.extend_from_slice(data);
        let _ = parse_profile_bytes(Path::new("fuzz.md"), &text);
    }
});
