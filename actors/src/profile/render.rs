//! Showing a [`ProfileSet`] to a model: a listing for a tool description and
//! a JSON-schema `enum` of the names.

use super::ProfileSet;

impl ProfileSet {
    /// One `- name: description` line per profile, in name order, joined by
    /// `\n` (no trailing newline; empty when there are no profiles). A
    /// description's whitespace, newlines included, is collapsed to single
    /// spaces; a profile without one shows `(no description)`.
    pub fn describe(&self) -> String {
        self.iter()
            .map(|p| {
                let description = p
                    .description
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ");
                if description.is_empty() {
                    format!("- {}: (no description)", p.name)
                } else {
                    format!("- {}: {description}", p.name)
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// [`describe`](Self::describe)'s lines, in name order, as many as fit
    /// in `budget` bytes (newlines counted), and how many were left out.
    pub(crate) fn describe_within(&self, budget: usize) -> (String, usize) {
        let listing = self.describe();
        let mut used = 0;
        let mut kept = 0;
        for line in listing.lines() {
            let cost = line.len() + usize::from(kept > 0);
            if used + cost > budget {
                break;
            }
            used += cost;
            kept += 1;
        }
        (listing[..used].to_owned(), self.len() - kept)
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

    use super::super::Profile;
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
}
