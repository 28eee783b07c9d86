//! The tool lists of a profile's frontmatter: `tools` (a list, a
//! comma-separated string, or a Codex role's table of switches),
//! `disallowedTools` and `skills`.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A tool list: an array of names, or one string of names separated by
/// commas or spaces (the `.claude/agents` style `tools: Read, Grep, Glob`,
/// or `Read Grep Glob`). Names are trimmed; empty names and repeats are
/// dropped.
pub(super) struct ToolList(pub(super) Vec<String>);

impl ToolList {
    fn push(&mut self, name: &str) {
        let name = name.trim();
        if !name.is_empty() && !self.0.iter().any(|t| t == name) {
            self.0.push(name.to_owned());
        }
    }
}

impl<'de> Deserialize<'de> for ToolList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ToolListVisitor)
    }
}

struct ToolListVisitor;

impl<'de> Visitor<'de> for ToolListVisitor {
    type Value = ToolList;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of tool names or a comma-separated string of tool names")
    }

    /// Split at the commas and the white space outside parentheses:
    /// `Agent(worker, researcher)` and `Bash(git diff:*)` are one entry each
    /// (split, neither half named its tool, and a deny list denied
    /// nothing), and `Write Edit Bash` is three — the space-separated form
    /// of Agent Skills' `allowed-tools`, which agent files copy (read as one
    /// name, it named no tool, and a deny list written so denied nothing).
    /// No tool's name holds a space: a provider allows `[A-Za-z0-9_-]`.
    fn visit_str<E: de::Error>(self, value: &str) -> Result<ToolList, E> {
        let mut list = ToolList(Vec::new());
        list.split_in(value);
        Ok(list)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ToolList, A::Error> {
        let mut list = ToolList(Vec::new());
        while let Some(name) = seq.next_element::<String>()? {
            list.push(&name);
        }
        Ok(list)
    }
}

impl ToolList {
    /// A deny list's entries each split as a string is
    /// (`["Bash, Write"]` denies both): kept whole, the entry named no
    /// tool and denied nothing. Only narrows, so only for a deny list.
    pub(super) fn each_split(self) -> ToolList {
        let mut list = ToolList(Vec::with_capacity(self.0.len()));
        for entry in &self.0 {
            list.split_in(entry);
        }
        list
    }

    /// Pushes the names of `value`, split as [`ToolListVisitor::visit_str`]
    /// says.
    fn split_in(&mut self, value: &str) {
        let before = self.0.len();
        let (mut depth, mut start) = (0usize, 0);
        for (at, c) in value.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                c if depth == 0 && (c == ',' || c.is_whitespace()) => {
                    self.push(&value[start..at]);
                    start = at + c.len_utf8();
                }
                _ => {}
            }
        }
        self.push(&value[start..]);
        // A `(` never closed: split at every comma and space, as before —
        // what follows it is named (`Bash(rm:*, Write` still denies
        // `Write`).
        if depth > 0 {
            self.0.truncate(before);
            value
                .split(|c: char| c == ',' || c.is_whitespace())
                .for_each(|name| self.push(name));
        }
    }
}

/// `tools`: an allowlist (a list, or a comma-separated string), or a
/// Codex role's `[tools]` table of switches (`web_search = true`).
pub(super) enum Tools {
    /// An allowlist.
    List(ToolList),
    /// A Codex role's switches, by name.
    Switches(Vec<(String, bool)>),
}

impl<'de> Deserialize<'de> for Tools {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ToolsVisitor)
    }
}

struct ToolsVisitor;

impl<'de> Visitor<'de> for ToolsVisitor {
    type Value = Tools;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "a list of tool names, a comma-separated string of tool names, \
             or a table of true/false switches (a Codex role's `[tools]`)",
        )
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Tools, E> {
        ToolListVisitor.visit_str(value).map(Tools::List)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Tools, A::Error> {
        ToolListVisitor.visit_seq(seq).map(Tools::List)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tools, A::Error> {
        let mut switches = Vec::new();
        while let Some((name, Switch(on))) = map.next_entry::<String, Switch>()? {
            switches.push((name, on));
        }
        Ok(Tools::Switches(switches))
    }
}

/// A `[tools]` switch: `true` or `false`, or (Codex's newer form,
/// `[tools.web_search]`) a table with its `enabled` (on without one) and
/// options — read as a switch only, a role that switched a tool off so
/// was refused, and the earlier role of its name, with it, ran. Options of
/// a tool left on (`allowed_domains`: a search held to some sites) are a
/// restriction this runtime cannot enforce: refused.
struct Switch(bool);

impl<'de> Deserialize<'de> for Switch {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Asked for as a boolean: TOML (the table form's only format)
        // offers what it holds, a table too; YAML says a wrong value at
        // the value.
        deserializer.deserialize_bool(SwitchVisitor)
    }
}

struct SwitchVisitor;

impl<'de> Visitor<'de> for SwitchVisitor {
    type Value = Switch;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a boolean, or a table with `enabled`")
    }

    fn visit_bool<E: de::Error>(self, on: bool) -> Result<Switch, E> {
        Ok(Switch(on))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Switch, A::Error> {
        let mut on = true;
        let mut options = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "enabled" {
                on = map.next_value::<bool>()?;
            } else {
                map.next_value::<de::IgnoredAny>()?;
                options.push(key);
            }
        }
        if on && !options.is_empty() {
            return Err(de::Error::custom(format!(
                "a tool switched on with options (`{}`) is {}",
                options.join("`, `"),
                super::modes::CANNOT_ENFORCE
            )));
        }
        Ok(Switch(on))
    }
}

/// OpenCode's `tools` map (`map`, tool name → on): read when it turns
/// some tool off and names no `*` — decided from the map's own entries
/// (other keys add denials to `switches`: an all-`true` map beside
/// `inheritMcp: false` passed). Its `write`, `edit`, `patch` and
/// `multiedit` go off together, as OpenCode's one `edit` permission does;
/// an MCP server's tools turned off by OpenCode's name for them
/// (`<server>_*`) are this runtime's `mcp__<server>__*` too (denied by
/// OpenCode's name alone, they were granted). `false`: not such a map.
pub(super) fn opencode_switches(
    map: &[(String, bool)],
    switches: &mut Vec<(String, bool)>,
) -> bool {
    const EDITS: [&str; 4] = ["write", "edit", "patch", "multiedit"];
    let off = |name: &str| map.iter().any(|(n, on)| n == name && !on);
    if map.iter().any(|(name, _)| name.trim() == "*") || !map.iter().any(|(_, on)| !on) {
        return false;
    }
    let mut deny = |name: String| {
        if !switches.iter().any(|(n, on)| *n == name && !on) {
            switches.retain(|(n, _)| *n != name);
            switches.push((name, false));
        }
    };
    if EDITS.iter().any(|edit| off(edit)) {
        EDITS.iter().for_each(|edit| deny((*edit).to_owned()));
    }
    for (name, _) in map.iter().filter(|(_, on)| !on) {
        if let Some(server) = name.strip_suffix("_*").filter(|s| !s.is_empty()) {
            deny(format!("mcp__{server}__*"));
            if let Some(bare) = server.strip_prefix("mcp_").filter(|s| !s.is_empty()) {
                deny(format!("mcp__{bare}__*"));
            }
        }
    }
    true
}
