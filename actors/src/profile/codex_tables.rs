//! A Codex role's config tables that narrow what the role may do, read
//! into the same deny list as a `[tools]` switch turned off:
//!
//! - `[mcp_servers.<id>]`: `enabled = false` switches the server off (its
//!   tools are denied: the rule `mcp__<id>`), `disabled_tools` switches
//!   some of its tools off (`mcp__<id>__<tool>` each); `enabled_tools`
//!   keeps only some of them, which a deny list cannot say: refused. A
//!   table that defines or configures a server (`command`, `url`, …) adds
//!   what this runtime does not run: not applied.
//! - `[agents]`: `max_depth` 1 or less (a role always runs as a sub-agent,
//!   at depth 1 or deeper) or `enabled = false` lets it start no
//!   sub-agents: delegation is denied; a larger depth, and `[agents]`'s
//!   other keys, are Codex's own (the host's `max_depth` governs): not
//!   applied.
//! - `[features]`: a feature that is one tool, switched off (a boolean, or
//!   a table's `enabled`), denies that tool.

use std::collections::BTreeMap;

use serde::de;
use serde_json::Value;

use super::fields::Frontmatter;
use super::modes::CANNOT_ENFORCE;

/// What a server's table may say of it and still only narrow.
const NARROWING: &[&str] = &["enabled", "disabled_tools"];

/// Reads `[mcp_servers]`: see the module docs.
pub(super) fn mcp_servers<E: de::Error>(
    servers: BTreeMap<String, Value>,
    fm: &mut Frontmatter,
) -> Result<(), E> {
    let mut adds = false;
    for (id, server) in servers {
        let Value::Object(table) = server else {
            adds = true;
            continue;
        };
        if table.contains_key("enabled_tools") {
            return Err(E::custom(format!(
                "`mcp_servers.{id}.enabled_tools` keeps only some of the server's tools, \
                 {CANNOT_ENFORCE}"
            )));
        }
        match table.get("enabled") {
            None | Some(Value::Bool(true)) => {}
            // `mcp__<id>__*` for an id holding `__`: as `mcp__a__b`, the
            // rule named the tool `b` of a server `a`, and denied one tool.
            Some(Value::Bool(false)) if id.contains("__") => deny(fm, format!("mcp__{id}__*")),
            Some(Value::Bool(false)) => deny(fm, format!("mcp__{id}")),
            Some(other) => {
                return Err(E::custom(format!(
                    "`mcp_servers.{id}.enabled` must be true or false, not {other}"
                )));
            }
        }
        match table.get("disabled_tools") {
            None => {}
            Some(Value::Array(tools)) => {
                for tool in tools {
                    let Value::String(tool) = tool else {
                        return Err(E::custom(format!(
                            "`mcp_servers.{id}.disabled_tools` must list tool names, not {tool}"
                        )));
                    };
                    deny(fm, format!("mcp__{id}__{}", tool.trim()));
                }
            }
            Some(other) => {
                return Err(E::custom(format!(
                    "`mcp_servers.{id}.disabled_tools` must be a list of tool names, not {other}"
                )));
            }
        }
        adds |= table.keys().any(|key| !NARROWING.contains(&key.as_str()));
    }
    if adds {
        fm.not_applied.push("mcp_servers".to_owned());
    }
    Ok(())
}

/// Reads `[agents]`: see the module docs. Its `enabled = false` (the
/// sub-agent tools off) denies delegation too. Written otherwise (another
/// tool's key of that name: a list of the agents it may start), it starts
/// none — denied: an empty list says so, and one naming agents is a limit
/// this runtime does not apply (not applied, warned), read as Claude
/// Code's `Agent(worker)` is (read as not applied alone, the sub-agent
/// started any profile).
pub(super) fn agents<E: de::Error>(table: Option<Value>, fm: &mut Frontmatter) -> Result<(), E> {
    let table = match table {
        Some(Value::Object(table)) => table,
        None => return Ok(()),
        // VS Code's "any agent" (`['*']`): no limit (read as a list of
        // names, a coordinator written to start any agent started none).
        Some(Value::Array(names)) if names.iter().any(|n| n.as_str() == Some("*")) => {
            return Ok(());
        }
        Some(other) => {
            if !matches!(&other, Value::Array(names) if names.is_empty()) {
                fm.not_applied.push("agents".to_owned());
            }
            deny(fm, "use_agent".to_owned());
            return Ok(());
        }
    };
    for (key, value) in table {
        let off = match (key.as_str(), &value) {
            ("enabled", Value::Bool(on)) => !on,
            // `"false"`, `0`: read as not applied, the switch-off was lost
            // and the role delegated; refused, as `max_depth` is.
            ("enabled", other) => {
                return Err(E::custom(format!(
                    "`agents.enabled` must be true or false, not {other}"
                )));
            }
            ("max_depth", depth) => match depth.as_u64() {
                Some(depth) => depth <= 1,
                None => {
                    return Err(E::custom(format!(
                        "`agents.max_depth` must be a whole number, not {depth}"
                    )));
                }
            },
            _ => false,
        };
        if off {
            deny(fm, "use_agent".to_owned());
        } else {
            fm.not_applied.push(format!("agents.{key}"));
        }
    }
    Ok(())
}

/// Reads `[features]`: one that is a tool switched off (`shell_tool =
/// false`, or as a table, `[features.shell_tool] enabled = false`) denies
/// it, as a `[tools]` switch turned off does; any other is Codex's own,
/// not applied. A tool's switch that is not true or false (`"false"`,
/// `0`) is refused: read as not applied, the switch-off was lost.
pub(super) fn features<E: de::Error>(
    features: BTreeMap<String, Value>,
    fm: &mut Frontmatter,
) -> Result<(), E> {
    for (name, value) in features {
        let switch = match &value {
            Value::Object(table) => table.get("enabled"),
            value => Some(value),
        };
        let off = match switch {
            None | Some(Value::Bool(true)) => false,
            Some(Value::Bool(false)) => true,
            Some(other) if feature_tool(&name).is_some() => {
                return Err(E::custom(format!(
                    "`features.{name}` must be switched on or off with true or false, not {other}"
                )));
            }
            Some(_) => false,
        };
        match feature_tool(&name) {
            Some(tool) if off => deny(fm, tool.to_owned()),
            _ => fm.not_applied.push(format!("features.{name}")),
        }
    }
    Ok(())
}

/// The tool a Codex feature switches on or off, for those that are one
/// tool (`shell_tool`: Codex's `shell`).
fn feature_tool(feature: &str) -> Option<&'static str> {
    match feature {
        "shell_tool" => Some("shell"),
        // Its web search (`web_search_request`, and `web_search`, the
        // name Codex reads as its alias): off, the host's `web_search` is
        // denied, as `[tools] web_search = false` is.
        "web_search_request" | "web_search" => Some("web_search"),
        // Its sub-agents: off, it starts none (denied, whatever the depth).
        // (`collab`: the name it had before `multi_agent`.)
        "multi_agent" | "multi_agent_v2" | "collab" => Some("use_agent"),
        _ => None,
    }
}

/// Denies `tool` (as a `[tools]` switch turned off does).
pub(super) fn deny(fm: &mut Frontmatter, tool: String) {
    fm.tool_switches.push((tool, false));
}
