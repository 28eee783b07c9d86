//! The frontmatter fields, deserialized the same way from TOML and YAML.
//!
//! A hand-written visitor rather than a derive: unknown keys are collected
//! (to become warnings) instead of failing, and every known value is
//! deserialized straight from the format's deserializer, so a wrong type is
//! reported at the value's own position.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};

use super::modes::{
    CANNOT_ENFORCE, OTHER_TOOLS, approval_mode_loads, hooks_load, isolation_loads, other_tools_key,
    permission_mode_loads, permissions_load, sandbox_mode_loads, tools_settings, web_search_on,
};
use super::tools::{ToolList, Tools};
use super::values::{Iterations, ModelName, in_range, seed_in_range};

/// The frontmatter of one profile file, as written.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Frontmatter {
    pub(super) name: Option<String>,
    pub(super) description: Option<String>,
    pub(super) model: Option<String>,
    pub(super) provider: Option<String>,
    pub(super) tools: Option<Vec<String>>,
    /// A Codex role's `[tools]` switches (its own tools turned on or
    /// off), in the order written.
    pub(super) tool_switches: Vec<(String, bool)>,
    /// `tools` was written as a mapping (switches): a Codex role's form,
    /// refused in a Markdown profile, which lists its tools — unless it
    /// is OpenCode's (see `parse.rs`), read from its own switches
    /// (`tools_map`: other keys add denials to `tool_switches`).
    pub(super) tools_as_switches: bool,
    pub(super) tools_map: Vec<(String, bool)>,
    /// A refusal that stands only if the profile is not left out
    /// (`disabled`): its key and why (Antigravity's command policy on an
    /// agent it never runs as a sub-agent).
    pub(super) refused_unless_disabled: Option<(String, String)>,
    pub(super) max_iterations: Option<u32>,
    /// Claude Code's deny list (`disallowedTools`).
    pub(super) disallowed_tools: Option<Vec<String>>,
    /// Claude Code's `disabled`.
    pub(super) disabled: Option<bool>,
    /// Claude Code's `background`.
    pub(super) background: Option<bool>,
    /// Kept for the host, not applied here.
    pub(super) color: Option<String>,
    pub(super) effort: Option<String>,
    pub(super) permission_mode: Option<String>,
    pub(super) memory: Option<String>,
    pub(super) initial_prompt: Option<String>,
    pub(super) skills: Option<Vec<String>>,
    /// A Codex role's system prompt (`developer_instructions`).
    pub(super) developer_instructions: Option<String>,
    /// Request options for the sub-agent's model calls.
    pub(super) max_tokens: Option<u32>,
    pub(super) temperature: Option<f64>,
    pub(super) top_p: Option<f64>,
    pub(super) seed: Option<u64>,
    pub(super) stop: Option<Vec<String>>,
    /// Known keys whose behaviour is not applied, in the order written
    /// (each becomes one warning).
    pub(super) not_applied: Vec<String>,
    /// Keys not understood, in the order written.
    pub(super) unknown: Vec<String>,
}

/// Keys that change behaviour in the tool that wrote them and that this
/// runtime does not apply: each gets one `NotApplied` warning. Their
/// values are read as anything (and dropped) unless the profile keeps
/// them as a field.
pub(super) const NOT_APPLIED: &[&str] = &[
    "effort",
    "model_reasoning_effort",
    "nickname_candidates",
    "sandbox_mode",
    "approval_policy",
    "permissionMode",
    "permission_mode",
    "approvalMode",
    "toolsSettings",
    "memory",
    "initialPrompt",
    "initial_prompt",
    "skills",
    "hooks",
    "mcpServers",
    "isolation",
    "default_permissions",
    "permissions",
];

/// A key that narrows what a profile may do: one of [`RESTRICTING_KEYS`],
/// or another tool's restriction ([`OTHER_TOOLS`]).
pub(super) fn restricting(key: &str) -> bool {
    RESTRICTING_KEYS.contains(&key) || OTHER_TOOLS.contains(&key)
}

/// Keys that narrow what a profile may do, in every format read here.
const RESTRICTING_KEYS: &[&str] = &[
    // Switched off: the strongest narrowing there is.
    "disabled",
    "disable",
    "mode",
    "tools",
    "allowed-tools",
    "disallowedTools",
    "disallowed-tools",
    "disallowed_tools",
    "disabled_tools",
    "disable-model-invocation",
    "infer",
    "kind",
    "permissionMode",
    "permission_mode",
    "approvalMode",
    "toolsSettings",
    "isolation",
    "approval_policy",
    "sandbox_mode",
    "web_search",
    "hooks",
    "features",
    "mcp_servers",
    "agents",
    "subagent",
    "inheritMcp",
    "commandExecutionPolicy",
    "allowed_subagents",
    "subagents",
    "default_permissions",
    "permissions",
    // Caps: a broken file's smaller cap gave way to the earlier
    // profile's larger one (or the builder's default).
    "max_iterations",
    "maxTurns",
    "max_turns",
    "maxSteps",
    "steps",
    "max_tokens",
    "maxTokens",
];

impl Frontmatter {
    /// Deserializes a frontmatter table. While a key's value is being
    /// deserialized, `current_key` holds that key (and keeps it on an
    /// error), so an error the format could not place can still be placed.
    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
        current_key: &Cell<Option<String>>,
    ) -> Result<Option<Self>, D::Error> {
        deserializer.deserialize_option(OptionalFrontmatter { current_key })
    }
}

/// A table, or nothing (an empty or comments-only YAML document is null).
struct OptionalFrontmatter<'k> {
    current_key: &'k Cell<Option<String>>,
}

impl<'de> Visitor<'de> for OptionalFrontmatter<'_> {
    type Value = Option<Frontmatter>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table of profile settings")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer
            .deserialize_map(FrontmatterVisitor {
                current_key: self.current_key,
            })
            .map(Some)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        FrontmatterVisitor {
            current_key: self.current_key,
        }
        .visit_map(map)
        .map(Some)
    }
}

struct FrontmatterVisitor<'k> {
    current_key: &'k Cell<Option<String>>,
}

impl<'de> Visitor<'de> for FrontmatterVisitor<'_> {
    type Value = Frontmatter;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table of profile settings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Frontmatter, A::Error> {
        let mut fm = Frontmatter::default();
        // Keys read so far: a second spelling of a key already set (both
        // `disallowedTools` and `disallowed_tools`) is refused, never the
        // later one silently replacing the first (an empty deny list
        // after a full one would widen what the profile may do). The same
        // spelling twice is the format's own duplicate-key error.
        let mut seen: Vec<String> = Vec::new();
        // OpenCode's `steps` read as the cap (a number): one spelling more
        // of it, known only once its value is read.
        let mut steps_cap = false;
        while let Some(key) = map.next_key::<String>()? {
            self.current_key.set(Some(key.clone()));
            let setting = setting_of(&key);
            if let Some(first) = seen.iter().find(|k| *k != &key && setting_of(k) == setting) {
                return Err(twice(&key, first));
            }
            seen.push(key.clone());
            match key.as_str() {
                "name" => fm.name = map.next_value()?,
                "description" => fm.description = map.next_value()?,
                "model" => {
                    let named = map.next_value::<Option<ModelName>>()?;
                    // The fallbacks, not the model (applied).
                    if named.as_ref().is_some_and(|m| m.fallbacks) {
                        fm.not_applied.push(format!("{key}[1..]"));
                    }
                    fm.model = named.and_then(|m| m.first);
                }
                "provider" | "model_provider" => fm.provider = map.next_value()?,
                "developer_instructions" => fm.developer_instructions = map.next_value()?,
                // Agent Skills' and Claude Code commands' spelling, copied
                // into agent files (and found in commands a cloned
                // collection keeps beside its agents): warned as unknown,
                // the restriction it states was lost — every tool.
                "tools" | "allowed-tools" => match map.next_value::<Option<Tools>>()? {
                    // `*` (every tool, as Claude Code reads it) is read
                    // where the list's `Agent(…)` scope is (`parse.rs`).
                    Some(Tools::List(list)) => fm.tools = Some(list.0),
                    Some(Tools::Switches(switches)) => {
                        fm.tools_as_switches = true;
                        fm.tools_map.clone_from(&switches);
                        fm.tool_switches.extend(switches);
                    }
                    // Written with no value (YAML null): no tools, as
                    // Claude Code reads it — a missing key is every tool.
                    // Read as missing, a tool-less agent got the shell.
                    None => fm.tools = Some(Vec::new()),
                },
                // The same cap as Claude Code (`maxTurns`), Gemini CLI
                // (`max_turns`) and OpenCode (`steps`, formerly `maxSteps`)
                // spell it; `steps` only as a number (a list of steps is
                // some other tool's text).
                "max_iterations" | "maxTurns" | "max_turns" | "maxSteps" => {
                    if steps_cap {
                        return Err(twice(&key, "steps"));
                    }
                    fm.max_iterations = map.next_value::<Option<Iterations>>()?.map(|i| i.0);
                }
                "steps" => match map.next_value::<serde_json::Value>()? {
                    steps @ serde_json::Value::Number(_) => {
                        let cap_set = seen.iter().find(|k| setting_of(k) == "max_iterations");
                        if let Some(first) = cap_set {
                            return Err(twice(&key, first));
                        }
                        let cap = serde_json::from_value::<Iterations>(steps);
                        fm.max_iterations = Some(cap.map_err(de::Error::custom)?.0);
                        steps_cap = true;
                    }
                    _ => fm.unknown.push(key.clone()),
                },
                // Augment's `disabled_tools` is its deny list.
                "disallowedTools" | "disallowed_tools" | "disallowed-tools" | "disabled_tools" => {
                    fm.disallowed_tools = map
                        .next_value::<Option<ToolList>>()?
                        .map(|t| t.each_split().0);
                }
                // OpenCode's `disable`; its `mode: primary` (an agent it
                // never starts as a sub-agent) leaves the profile out too,
                // whatever a `disabled` says.
                "disabled" | "disable" => {
                    let value = map.next_value::<Option<bool>>()?;
                    fm.disabled = if fm.disabled == Some(true) {
                        fm.disabled
                    } else {
                        value
                    };
                }
                // VS Code's and Copilot's "never a sub-agent"
                // (`disable-model-invocation: true`, formerly `infer:
                // false`) leaves the profile out, as `mode: primary`.
                "disable-model-invocation" | "infer" => {
                    match (key.as_str(), map.next_value::<serde_json::Value>()?) {
                        ("disable-model-invocation", serde_json::Value::Bool(true))
                        | ("infer", serde_json::Value::Bool(false)) => fm.disabled = Some(true),
                        (_, serde_json::Value::Bool(_) | serde_json::Value::Null) => {}
                        _ => fm.unknown.push(key.clone()),
                    }
                }
                // Gemini CLI's `kind: remote`: an agent another service
                // runs (`agent_card_url`), none this runtime can start —
                // with no `tools` and no prompt, it was a blank agent with
                // every tool. Left out, as `mode: primary`. Other tools
                // write `kind` with other words (`kind: subagent`): an
                // unknown key, as before (refused, such files were lost).
                "kind" => match map.next_value::<serde_json::Value>()? {
                    serde_json::Value::String(kind) if kind.trim() == "remote" => {
                        fm.disabled = Some(true);
                        fm.not_applied.push(key.clone());
                    }
                    serde_json::Value::String(kind) if kind.trim() == "local" => {}
                    _ => fm.unknown.push(key.clone()),
                },
                "mode" => match map.next_value::<serde_json::Value>()? {
                    serde_json::Value::String(mode) if mode.trim() == "primary" => {
                        fm.disabled = Some(true);
                    }
                    serde_json::Value::String(mode)
                        if ["subagent", "all"].contains(&mode.trim()) => {}
                    _ => fm.unknown.push(key.clone()),
                },
                "max_tokens" | "maxTokens" => {
                    fm.max_tokens = map.next_value()?;
                    if fm.max_tokens == Some(0) {
                        return Err(de::Error::custom(format!(
                            "`{key}` must be at least 1 (0 would fail every model call)"
                        )));
                    }
                }
                "temperature" => fm.temperature = in_range(&key, map.next_value()?, 0.0, 2.0)?,
                "top_p" | "topP" => fm.top_p = in_range(&key, map.next_value()?, 0.0, 1.0)?,
                "seed" => fm.seed = seed_in_range(&key, map.next_value()?)?,
                "stop" => fm.stop = map.next_value()?,
                // Cursor's `is_background`.
                "background" | "is_background" => fm.background = map.next_value()?,
                "color" => fm.color = map.next_value()?,
                "effort" | "model_reasoning_effort" => fm.effort = map.next_value()?,
                "permissionMode" | "permission_mode" => {
                    fm.permission_mode = map.next_value()?;
                    if let Some(mode) = &fm.permission_mode {
                        permission_mode_loads(&key, mode)?;
                    }
                }
                // Claude Code's own worktree for the agent, which this
                // runtime does not make.
                "isolation" => {
                    if let Some(mode) = map.next_value::<Option<String>>()? {
                        isolation_loads(&mode)?;
                    }
                }
                // Qwen Code's counterpart of `permissionMode`.
                "approvalMode" => {
                    if let Some(mode) = map.next_value::<Option<String>>()? {
                        approval_mode_loads(&mode)?;
                    }
                }
                // Kiro's settings of its tools: a sub-agent tool limited
                // to named agents starts none; a denial is refused.
                "toolsSettings" => {
                    if tools_settings(&map.next_value()?)? {
                        fm.tool_switches.push(("use_agent".to_owned(), false));
                    }
                }
                "sandbox_mode" => {
                    if let Some(mode) = map.next_value::<Option<String>>()? {
                        sandbox_mode_loads(&mode)?;
                    }
                }
                // Codex's permission profiles, which replace `sandbox_mode`.
                "default_permissions" => {
                    if let Some(profile) = map.next_value::<Option<String>>()? {
                        permissions_load(&profile)?;
                    }
                }
                // Codex's own web search: off denies a host tool of that
                // name (it narrows); on grants nothing here.
                "web_search" => {
                    if let Some(mode) = map.next_value::<Option<String>>()? {
                        if web_search_on(&mode)? {
                            fm.not_applied.push(key.clone());
                        } else {
                            fm.tool_switches.push((key.clone(), false));
                        }
                    }
                }
                // A Codex role is a config layer: its `[features]` switch
                // a tool off (`shell_tool = false`: no shell), which
                // narrows — denied, as a `[tools]` switch turned off is.
                // Any other feature is Codex's own: not applied.
                "features" => super::codex_tables::features(
                    map.next_value::<Option<_>>()?.unwrap_or_default(),
                    &mut fm,
                )?,
                // A Codex role's MCP servers and sub-agents: what narrows
                // is denied (see `codex_tables`).
                "mcp_servers" => super::codex_tables::mcp_servers(
                    map.next_value::<Option<_>>()?.unwrap_or_default(),
                    &mut fm,
                )?,
                "agents" => super::codex_tables::agents(map.next_value()?, &mut fm)?,
                _ if super::antigravity::KEYS.contains(&key.as_str()) => {
                    super::antigravity::key(&key, map.next_value()?, &mut fm)?;
                }
                // Claude Code hooks: one that can block a tool call is a
                // restriction (refused); the others are only not applied.
                "hooks" => {
                    let events = map
                        .next_value::<Option<std::collections::BTreeMap<String, IgnoredAny>>>()?
                        .unwrap_or_default();
                    hooks_load(events.keys())?;
                }
                "memory" => fm.memory = map.next_value()?,
                "initialPrompt" | "initial_prompt" => fm.initial_prompt = map.next_value()?,
                // Claude Code's list of skills, kept; Codex's table of them
                // (`[[skills.config]]`): not applied (read as a list, the
                // whole role was refused).
                "skills" => match map.next_value::<Option<serde_json::Value>>()? {
                    Some(serde_json::Value::Object(_)) => {}
                    value => {
                        fm.skills = value
                            .map(|v| {
                                serde_json::from_value::<ToolList>(v).map_err(de::Error::custom)
                            })
                            .transpose()?
                            .map(|t| t.0);
                    }
                },
                // Codex's table of prompts it rejects (`granular`, `reject`),
                // as `dontAsk` refuses: loaded, the host's approval ran them.
                "approval_policy" => {
                    if let serde_json::Value::Object(_) = map.next_value()? {
                        let why = "a table of the prompts it rejects";
                        return Err(de::Error::custom(format!(
                            "`{key}` is {why}, {CANNOT_ENFORCE}"
                        )));
                    }
                }
                _ if OTHER_TOOLS.contains(&key.as_str()) || key == "permissions" => {
                    other_tools_key(&key, &map.next_value()?)?;
                }
                _ if NOT_APPLIED.contains(&key.as_str()) => {
                    map.next_value::<IgnoredAny>()?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    fm.unknown.push(key.clone());
                }
            }
            self.current_key.set(None);
            if NOT_APPLIED.contains(&key.as_str()) || OTHER_TOOLS.contains(&key.as_str()) {
                fm.not_applied.push(key);
            }
        }
        if let Some((key, why)) = fm.refused_unless_disabled.take()
            && fm.disabled != Some(true)
        {
            self.current_key.set(Some(key));
            return Err(de::Error::custom(why));
        }
        Ok(fm)
    }
}

/// A setting written a second time under another spelling.
fn twice<E: de::Error>(key: &str, first: &str) -> E {
    E::custom(format!(
        "`{key}` sets what `{first}` above already set (two spellings of one setting); keep one"
    ))
}

/// The setting a key names: its first spelling, for keys written two ways
/// (the Codex or snake_case one and the Claude Code one).
fn setting_of(key: &str) -> &str {
    match key {
        "model_provider" => "provider",
        "maxTurns" | "max_turns" | "maxSteps" => "max_iterations",
        "disable" => "disabled",
        "disallowedTools" | "disallowed-tools" | "disabled_tools" => "disallowed_tools",
        "is_background" => "background",
        "allowed-tools" => "tools",
        "maxTokens" => "max_tokens",
        "topP" => "top_p",
        "model_reasoning_effort" => "effort",
        "permissionMode" => "permission_mode",
        "initialPrompt" => "initial_prompt",
        key => key,
    }
}
