//! Google Antigravity's agent keys (`.agents/agents/<name>/agent.md`, a
//! folder this loader reads by default): each read for what it narrows —
//! an agent never run as a sub-agent left out, MCP tools and sub-agents
//! withheld, a command policy that may restrict refused — never dropped
//! as unknown (the agent got every tool).

use serde::de;
use serde_json::Value;

use super::codex_tables::deny;
use super::fields::Frontmatter;
use super::modes::CANNOT_ENFORCE;

/// Applies Antigravity's `key` (one of [`KEYS`]) to the profile.
pub(super) fn key<E: de::Error>(key: &str, value: Value, fm: &mut Frontmatter) -> Result<(), E> {
    match (key, value) {
        (_, Value::Null) => {}
        // An agent Antigravity never runs as a sub-agent (`mainAgent:
        // true`, `subagent: false`): left out, as OpenCode's `mode:
        // primary` is.
        ("subagent", Value::Bool(false)) => fm.disabled = Some(true),
        ("subagent" | "mainAgent", Value::Bool(_)) => {}
        // Not the parent's MCP tools: every one denied.
        ("inheritMcp", Value::Bool(false)) => deny(fm, "mcp__*".to_owned()),
        ("inheritMcp", Value::Bool(true)) => {}
        ("commandExecutionPolicy", policy) => match policy.as_str().map(str::trim) {
            // Its ways of running commands without asking, or in its
            // sandbox: nothing here narrows, not applied.
            Some("auto" | "eager" | "sandbox") => fm.not_applied.push(key.to_owned()),
            // `strict`, `off` (YAML reads it as `false`), `deny` and any
            // other value: a restriction of the agent's commands this
            // runtime does not apply — refused, unless the agent is left
            // out anyway (`subagent: false`, read before or after).
            _ => {
                let why = format!(
                    "`{key}: {policy}` may restrict the agent's commands, {CANNOT_ENFORCE}"
                );
                fm.refused_unless_disabled = Some((key.to_owned(), why));
            }
        },
        // The sub-agents it may start: `['*']` is any (and `subagents:
        // true`, other tools' "may delegate"); any other value a limit not
        // applied here — it starts none (read as unknown, it started any
        // profile), warned unless it is an empty list or `false`.
        ("allowed_subagents" | "subagents", Value::Array(names))
            if names.iter().any(|n| n.as_str().map(str::trim) == Some("*")) => {}
        ("subagents", Value::Bool(true)) => {}
        ("allowed_subagents" | "subagents", Value::Bool(false)) => deny(fm, "use_agent".to_owned()),
        ("allowed_subagents" | "subagents", value) => {
            if !matches!(&value, Value::Array(names) if names.is_empty()) {
                fm.not_applied.push(key.to_owned());
            }
            deny(fm, "use_agent".to_owned());
        }
        (_, other) => {
            return Err(E::custom(format!(
                "`{key}` must be true or false, not {other}"
            )));
        }
    }
    Ok(())
}

/// The keys [`key`] reads.
pub(super) const KEYS: &[&str] = &[
    "subagent",
    "mainAgent",
    "inheritMcp",
    "commandExecutionPolicy",
    "allowed_subagents",
    "subagents",
];
