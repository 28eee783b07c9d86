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
}
