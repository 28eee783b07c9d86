//! What a profile's tool lists mean on this host: the allowlist
//! narrowed to the host's tools, the deny list in the host's names.

use std::collections::BTreeMap;

use super::Profile;
use super::error::ProfileWarning;
use super::load::warn;

/// Leaves out of `profile.tools` every tool not in `known`, warning for each.
pub(super) fn restrict_tools(
    profile: &mut Profile,
    known: &[String],
    tool_names: &BTreeMap<String, String>,
    warnings: &mut Vec<ProfileWarning>,
) {
    let map = |names: Vec<String>| -> Vec<String> {
        let mut out: Vec<String> = Vec::with_capacity(names.len());
        for name in names {
            let name = tool_names.get(&name).cloned().unwrap_or(name);
            if !out.contains(&name) {
                out.push(name);
            }
        }
        out
    };
    profile.disallowed_tools = deny_list(profile, known, tool_names, warnings);
    let Some(tools) = profile.tools.take() else {
        return;
    };
    keep_known(profile, map(tools), known, warnings);
}

/// A profile's allowlist narrowed to `known` (and the delegation tools):
/// each other entry left out, listed in `unavailable_tools` and warned.
/// For a file as it is loaded, and for a profile built in code when the
/// parent it is offered to spawns (again for a file's: nothing more to
/// leave out unless the host has fewer tools than it was loaded with).
pub(super) fn narrow_to(
    profile: &mut Profile,
    known: &[String],
    warnings: &mut Vec<ProfileWarning>,
) {
    if let Some(tools) = profile.tools.take() {
        // `Agent(worker)` in a profile built in code: a scope, as in a
        // file (dropped as a tool the host lacks, it scoped nothing). A
        // bare `Task` the host has is its tool.
        let mut not_applied = Vec::new();
        let tools = super::parse::take_spawn_entries(
            tools,
            known,
            &mut profile.disallowed_tools,
            &mut not_applied,
        );
        for key in not_applied {
            let path = profile.source.clone();
            warn(warnings, ProfileWarning::NotApplied { path, key });
        }
        keep_known(profile, tools, known, warnings);
    }
}

fn keep_known(
    profile: &mut Profile,
    tools: Vec<String>,
    known: &[String],
    warnings: &mut Vec<ProfileWarning>,
) {
    let listed = !tools.is_empty();
    let (kept, unknown): (Vec<String>, Vec<String>) = expand_servers(tools, known)
        .into_iter()
        // A delegation tool is known whatever the host's tools (the
        // depth decides where the child starts), as in the deny list.
        .partition(|t| known.iter().any(|k| k == t) || crate::delegation::is_delegation_tool(t));
    for tool in &unknown {
        warn(
            warnings,
            ProfileWarning::UnknownTool {
                path: profile.source.clone(),
                profile: profile.name.clone(),
                tool: tool.clone(),
            },
        );
    }
    if listed && kept.is_empty() {
        warn(
            warnings,
            ProfileWarning::NoTools {
                path: profile.source.clone(),
                profile: profile.name.clone(),
                listed: unknown.clone(),
            },
        );
    }
    profile.tools = Some(kept);
    profile.unavailable_tools.extend(unknown);
}

/// The deny list as the host's names. A deny list only narrows, so every
/// doubt resolves towards denying: a Claude Code pattern (`Bash(rm:*)`)
/// denies its whole tool, and a mapping is found whatever the case
/// (`bash`). An entry that still names no tool denies nothing: warned.
fn deny_list(
    profile: &Profile,
    known: &[String],
    tool_names: &BTreeMap<String, String>,
    warnings: &mut Vec<ProfileWarning>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(profile.disallowed_tools.len());
    for entry in &profile.disallowed_tools {
        let base = scoped_base(entry);
        let name = tool_names
            .get(base)
            .or_else(|| {
                tool_names
                    .iter()
                    .find(|(from, _)| from.eq_ignore_ascii_case(base))
                    .map(|(_, to)| to)
            })
            .map_or(base, String::as_str);
        // Claude Code's rule for a whole MCP server (`mcp__github`,
        // `mcp__github__*`), or any rule ending in `*` (`mcp__*`: every
        // MCP tool; `*`: every tool): each tool the host has that it
        // covers, and the rule itself, so a tool registered after the load
        // is denied where a child starts (`denies` reads the rule).
        let prefix = mcp_server(name)
            .map(|server| format!("mcp__{server}__"))
            .or_else(|| wildcard(name).map(str::to_owned));
        if let Some(prefix) = prefix {
            let matched: Vec<&String> = known
                .iter()
                .filter(|k| starts_with_any_case(k, &prefix))
                .collect();
            if !matched.is_empty() || prefix.is_empty() {
                for tool in matched {
                    if !out.contains(tool) {
                        out.push(tool.clone());
                    }
                }
                if !out.iter().any(|n| n == name) {
                    out.push(name.to_owned());
                }
                continue;
            }
        }
        if out.iter().any(|n| n == name) {
            continue;
        }
        // A delegation tool (or Claude Code's own, `Agent`, formerly
        // `Task`) is known whatever the host's list: denied, the sub-agent
        // never delegates. A host tool matches whatever the case (the
        // deny list is read so where a child starts).
        let delegation = denies_delegation(&[name.to_owned()]);
        if !delegation && !known.iter().any(|k| k.eq_ignore_ascii_case(name)) {
            warn(
                warnings,
                ProfileWarning::UnknownDeniedTool {
                    path: profile.source.clone(),
                    profile: profile.name.clone(),
                    tool: name.to_owned(),
                },
            );
        }
        out.push(name.to_owned());
    }
    out
}

/// `text` begins with `prefix`, whatever the case: a deny rule for a
/// whole MCP server matches as a one-tool rule does (`mcp__GitHub`,
/// written so by a Codex role's `[mcp_servers.GitHub]`, denied none of
/// the host's `mcp__github__*` tools).
fn starts_with_any_case(text: &str, prefix: &str) -> bool {
    text.get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
}

/// A deny entry's tool: `Bash` for `Bash(rm:*)` (a Claude Code pattern
/// denies its whole tool), the entry itself otherwise.
fn scoped_base(entry: &str) -> &str {
    let entry = entry.trim();
    match entry.split_once('(') {
        Some((base, _)) if entry.ends_with(')') => base.trim(),
        _ => entry,
    }
}

/// True when a profile's deny list covers `tool`, read as the load reads
/// it, also for a list no load put in the host's names
/// (`ProfileSet::from_profiles`, a tool registered after the load): an
/// entry matches whatever its case (`Bash` denies `bash`), a scoped one
/// its whole tool, an MCP server's rule each of that server's tools.
pub(crate) fn denies(denied: &[String], tool: &str) -> bool {
    denied.iter().any(|entry| {
        let base = scoped_base(entry);
        base.eq_ignore_ascii_case(tool)
            || mcp_server(base)
                .is_some_and(|server| starts_with_any_case(tool, &format!("mcp__{server}__")))
            || wildcard(base).is_some_and(|prefix| starts_with_any_case(tool, prefix))
    })
}

/// A deny rule ending in `*` (`mcp__*`, `*`, `**`): the start of every
/// tool's name it denies. Read as one tool's name, it denied none — a deny
/// list resolves towards denying.
fn wildcard(rule: &str) -> Option<&str> {
    rule.ends_with('*').then(|| rule.trim_end_matches('*'))
}

/// True when a profile's deny list takes delegation away: the sub-agent
/// never delegates (also for a rule ending in `*` that covers a
/// delegation tool: `*`, `use_*`).
pub(crate) fn denies_delegation(denied: &[String]) -> bool {
    use crate::delegation::denying_takes_delegation as takes;
    denied.iter().any(|entry| {
        let base = scoped_base(entry);
        takes(base, false) || wildcard(base).is_some_and(|start| takes(start, true))
    })
}

/// An allowlist with each rule for a whole MCP server (`mcp__github__*`,
/// `mcp__github`: Claude Code grants the server's every tool) as the
/// server's tools in `known`, in their order, repeats dropped. Looked up
/// as one tool's name, the rule was unknown: the sub-agent ran without
/// the server, or was refused as having no tools. A rule no tool of
/// `known` matches stays as written (unknown, said).
pub(crate) fn expand_servers(names: Vec<String>, known: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    let mut push = |name: &str| {
        if !out.iter().any(|o| o == name) {
            out.push(name.to_owned());
        }
    };
    for name in &names {
        let server = mcp_server(name).filter(|_| !known.contains(name));
        let prefix = server.map(|server| format!("mcp__{server}__"));
        let tools: Vec<&String> = match &prefix {
            Some(prefix) => known
                .iter()
                .filter(|k| k.starts_with(prefix.as_str()))
                .collect(),
            None => Vec::new(),
        };
        if tools.is_empty() {
            push(name);
        }
        for tool in tools {
            push(tool);
        }
    }
    out
}

/// The server a Claude Code rule for a whole MCP server names
/// (`mcp__github`, `mcp__github__*`); `None` for one tool's rule. With
/// the `__*`, the server's id may hold `__` itself (`mcp__my__docs__*`,
/// how a Codex role's server `my__docs` switched off is denied); without
/// it, `mcp__my__docs` is the tool `docs` of the server `my`.
fn mcp_server(rule: &str) -> Option<&str> {
    let rest = rule.strip_prefix("mcp__")?;
    let (server, starred) = match rest.strip_suffix("__*") {
        Some(server) => (server, true),
        None => (rest, false),
    };
    // `mcp__*` names no server: every MCP tool (a rule ending in `*`).
    let named = !server.is_empty() && !server.contains('*');
    (named && (starred || !server.contains("__"))).then_some(server)
}

#[cfg(test)]
mod tests {
    use super::{denies, denies_delegation};

    #[test]
    fn an_mcp_servers_rule_denies_each_of_its_tools_and_no_other() {
        let rule = |r: &str| vec![r.to_owned()];
        for server in ["mcp__github", "mcp__github__*"] {
            assert!(
                denies(&rule(server), "mcp__github__create_issue"),
                "{server}"
            );
            assert!(
                !denies(&rule(server), "mcp__githubx__create_issue"),
                "{server}"
            );
            assert!(!denies(&rule(server), "github"), "{server}");
        }
        assert!(denies(
            &rule("mcp__github__create_issue"),
            "mcp__github__create_issue"
        ));
        assert!(!denies(
            &rule("mcp__github__create_issue"),
            "mcp__github__list"
        ));
        // Whatever the case, as a one-tool rule.
        assert!(denies(&rule("mcp__GitHub"), "mcp__github__merge"));
        // A server whose id holds `__`, said with its `__*`.
        assert!(denies(&rule("mcp__my__gh__*"), "mcp__my__gh__merge"));
        assert!(!denies(&rule("mcp__my__gh__*"), "mcp__my__ghx__merge"));
        assert!(!denies(&rule("mcp__my__gh"), "mcp__my__gh__merge"));
        assert!(denies(&rule(" Bash(rm:*) "), "bash"));
        assert!(!denies(&rule("Bash(rm:*"), "bash"), "not a scoped entry");
        assert!(denies_delegation(&rule("Agent(*)")));
        assert!(!denies_delegation(&rule("mcp__agent")));
    }
}
