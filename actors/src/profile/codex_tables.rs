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
//!   at depth 1 or deeper) lets it start no sub-agents: delegation is
//!   denied; a larger one, and `[agents]`'s other keys, are Codex's own
//!   (the host's `max_depth` governs): not applied.

use std::collections::BTreeMap;

use serde::de;
use serde_json::Value;

use super::fields::{CANNOT_ENFORCE, Frontmatter};

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

/// Reads `[agents]`: see the module docs.
pub(super) fn agents<E: de::Error>(
    table: BTreeMap<String, Value>,
    fm: &mut Frontmatter,
) -> Result<(), E> {
    for (key, value) in table {
        if key != "max_depth" {
            fm.not_applied.push(format!("agents.{key}"));
            continue;
        }
        match value.as_u64() {
            Some(0 | 1) => deny(fm, "use_agent".to_owned()),
            Some(_) => fm.not_applied.push("agents.max_depth".to_owned()),
            None => {
                return Err(E::custom(format!(
                    "`agents.max_depth` must be a whole number, not {value}"
                )));
            }
        }
    }
    Ok(())
}

/// Denies `tool` (as a `[tools]` switch turned off does).
fn deny(fm: &mut Frontmatter, tool: String) {
    fm.tool_switches.push((tool, false));
}
