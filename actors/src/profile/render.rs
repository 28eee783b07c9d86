//! Showing a [`ProfileSet`] to a model: a listing for a tool description and
//! a JSON-schema `enum` of the names.

use super::{Profile, ProfileSet};

/// A profile's `- name: description` line: one line, whatever its name
/// and description hold.
fn line(profile: &Profile) -> String {
    let name = subagents_messages::text::one_line(&profile.name, usize::MAX);
    let description = profile
        .description
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if description.is_empty() {
        format!("- {name}: (no description)")
    } else {
        format!("- {name}: {description}")
    }
}

impl ProfileSet {
    /// One `- name: description` line per profile, in name order, joined by
    /// `\n` (no trailing newline; empty when there are no profiles). A
    /// description's whitespace, newlines included, is collapsed to single
    /// spaces; a profile without one shows `(no description)`.
    pub fn describe(&self) -> String {
        self.iter().map(line).collect::<Vec<_>>().join("\n")
    }

    /// [`describe`](Self::describe)'s lines, in name order, as many as fit
    /// in `budget` characters (newlines counted), and how many were left
    /// out.
    /// Counted by profile, not by line: a host's profile named with a line
    /// break (`from_profiles` takes any name) underflowed the count, and a
    /// cut by bytes could fall inside a character — a panic on every model
    /// call of the parent.
    pub(crate) fn describe_within(&self, budget: usize) -> (String, usize) {
        let mut listing = String::new();
        let (mut kept, mut chars) = (0, 0);
        for profile in self.iter() {
            let line = line(profile);
            let more = line.chars().count() + usize::from(kept > 0);
            if chars + more > budget {
                break;
            }
            chars += more;
            if kept > 0 {
                listing.push('\n');
            }
            listing.push_str(&line);
            kept += 1;
        }
        (listing, self.len() - kept)
    }

    /// A JSON schema for a profile-name argument,
    /// `{"type": "string", "enum": [names…]}`, or `None` when there are no
    /// profiles (an empty `enum` would admit no value).
    pub fn name_schema(&self) -> Option<serde_json::Value> {
        if self.is_empty() {
            return None;
        }
        Some(serde_json::json!({
            "type": "string",
            "enum": self.names().collect::<Vec<_>>(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn profile(name: &str, description: &str) -> Profile {
        Profile {
            name: name.to_owned(),
            description: description.to_owned(),
            system_prompt: String::new(),
            model: None,
            provider: None,
            tools: None,
            max_iterations: None,
            source: PathBuf::from(format!("{name}.md")),
            ..Default::default()
        }
    }

    #[test]
    fn describe_lists_profiles_by_name() {
        let set = ProfileSet::from_profiles([
            profile("researcher", "Finds\n  things out."),
            profile("code-reviewer", "Reviews diffs."),
            profile("bare", ""),
        ]);
        assert_eq!(
            set.describe(),
            "- bare: (no description)\n- code-reviewer: Reviews diffs.\n- researcher: Finds things out."
        );
        assert_eq!(
            set.name_schema(),
            Some(
                serde_json::json!({"type": "string", "enum": ["bare", "code-reviewer", "researcher"]})
            )
        );
    }

    #[test]
    fn no_profiles_no_schema() {
        let set = ProfileSet::default();
        assert_eq!(set.describe(), "");
        assert_eq!(set.name_schema(), None);
    }

    #[test]
    fn a_bounded_listing_keeps_whole_lines_and_counts_the_rest() {
        let set = ProfileSet::from_profiles(
            (0..50).map(|i| profile(&format!("p{i:02}"), "does a thing")),
        );
        let full = set.describe();
        assert!(full.len() > 500);
        let (listing, omitted) = set.describe_within(500);
        assert!(listing.len() <= 500, "{}", listing.len());
        assert!(full.starts_with(&listing));
        assert_eq!(listing.lines().count() + omitted, 50);
        assert!(listing.lines().all(|l| l.ends_with("does a thing")));
        assert_eq!(set.describe_within(usize::MAX), (full, 0));
        assert_eq!(set.describe_within(0), (String::new(), 50));
    }

    /// A host's profile named with a line break (`from_profiles` takes
    /// any name, as `read_line` gives it): the listing counted lines, not
    /// profiles — "attempt to subtract with overflow" — and cut by bytes
    /// one short per `\r`, inside a character. Every model call of the
    /// parent built it.
    #[test]
    fn a_name_with_a_line_break_is_listed_on_its_line_without_a_panic() {
        let set = ProfileSet::from_profiles([profile("a\nb", "d")]);
        assert_eq!(set.describe_within(4096), ("- a b: d".to_owned(), 0));
        let set = ProfileSet::from_profiles([profile("a\r\nb", "\u{e9}"), profile("c", "x")]);
        let (listing, left) = set.describe_within(9);
        assert_eq!((listing.as_str(), left), ("- a b: \u{e9}", 1));
    }
}
