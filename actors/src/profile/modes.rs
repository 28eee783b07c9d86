//! The values of keys that may restrict what a profile does: a mode, a
//! hook, a permission profile, another tool's permission map or cap. A
//! value that is a restriction this runtime cannot enforce — or one
//! nobody documents, which may be one — refuses the profile (loaded
//! without it, the agent could do what its file forbids); the others load.

use serde::de;

/// True for the message of a profile refused for a restriction (one this
/// runtime cannot enforce, or an unknown mode that may be one).
pub(super) fn is_refusal(message: &str) -> bool {
    message.contains(CANNOT_ENFORCE) || message.contains(MAY_BE_A_RESTRICTION)
}

/// Hook events that can block a tool call: Claude Code's (a `PreToolUse`
/// hook exiting 2 blocks it; a `PermissionRequest` hook can deny it) and
/// Kiro's `preToolUse` (the same, in its spelling: read as another event,
/// only warned, the guard was dropped).
const BLOCKING_HOOKS: &[&str] = &["PreToolUse", "PermissionRequest", "preToolUse"];

/// Claude Code's `hooks`: a hook that can block a tool call guards it, and
/// this runtime runs no hooks — refused; the others load, warned as not
/// applied.
pub(super) fn hooks_load<'a, E: de::Error>(
    mut events: impl Iterator<Item = &'a String>,
) -> Result<(), E> {
    match events.find(|event| BLOCKING_HOOKS.contains(&event.as_str())) {
        Some(event) => Err(E::custom(format!(
            "`hooks` has `{event}`, {CANNOT_ENFORCE}"
        ))),
        None => Ok(()),
    }
}

/// What an unknown mode says of itself.
const MAY_BE_A_RESTRICTION: &str = "(an unknown mode may be a restriction)";

/// What a profile that cannot be enforced here says (the profile is
/// refused: loading it without the restriction would widen what it may do).
pub(super) const CANNOT_ENFORCE: &str = "a restriction this runtime cannot enforce; loaded without it, \
    the agent could do what its file forbids: give it only the tools it may use (`tools`) \
    and remove the key";

/// Claude Code's `permissionMode`: a mode whose loss only narrows or
/// changes nothing (`default`, `acceptEdits`, `bypassPermissions`) loads,
/// warned as not applied; a restriction (`plan`: read-only; `dontAsk`:
/// refuse what is not pre-approved) or a value nobody documents is an
/// error at the key.
pub(super) fn permission_mode_loads<E: de::Error>(key: &str, mode: &str) -> Result<(), E> {
    match mode.trim() {
        // `auto` (a classifier approves what is low-risk) is looser than
        // `default`; `manual` is `default`'s newer name.
        "" | "default" | "manual" | "acceptEdits" | "auto" | "bypassPermissions" => Ok(()),
        "plan" | "dontAsk" => Err(E::custom(format!("`{key}` is `{mode}`, {CANNOT_ENFORCE}"))),
        _ => Err(E::custom(format!(
            "`{key}` is `{mode}`, none of default, manual, acceptEdits, auto, bypassPermissions, \
             dontAsk, plan \
             {MAY_BE_A_RESTRICTION}"
        ))),
    }
}

/// Claude Code's `isolation`: `worktree` runs the agent in a temporary
/// git worktree of its own, which this runtime does not make — loaded
/// without it, an agent written to edit and commit in its own copy
/// (`git branch -m`, commits on its branch) did so in the user's checkout:
/// a restriction this runtime cannot enforce. A value nobody documents may
/// be one.
pub(super) fn isolation_loads<E: de::Error>(mode: &str) -> Result<(), E> {
    match mode.trim() {
        "" => Ok(()),
        "worktree" => Err(E::custom(format!(
            "`isolation` is `{mode}`, {CANNOT_ENFORCE}"
        ))),
        _ => Err(E::custom(format!(
            "`isolation` is `{mode}`, not worktree {MAY_BE_A_RESTRICTION}"
        ))),
    }
}

/// Qwen Code's `approvalMode`, its counterpart of `permissionMode`:
/// `plan` (read-only) is a restriction this runtime cannot enforce; the
/// others (`default`, `auto-edit`, `yolo`) only change when it asks
/// (warned as not applied); a value nobody documents may be a restriction.
/// An unknown key, the read-only agent got every tool.
pub(super) fn approval_mode_loads<E: de::Error>(mode: &str) -> Result<(), E> {
    match mode.trim() {
        "" | "default" | "auto-edit" | "yolo" => Ok(()),
        "plan" => Err(E::custom(format!(
            "`approvalMode` is `{mode}`, {CANNOT_ENFORCE}"
        ))),
        _ => Err(E::custom(format!(
            "`approvalMode` is `{mode}`, none of default, auto-edit, yolo, plan \
             {MAY_BE_A_RESTRICTION}"
        ))),
    }
}

/// Kiro's `toolsSettings` (a table per tool): whether a sub-agent tool is
/// limited to named agents (`availableAgents`: this runtime does not apply
/// such a list, so the agent starts none, as Claude Code's `Agent(worker)`
/// is read). What only spares a prompt (`allowedCommands`, `allowedPaths`,
/// `trusted`, `trustedAgents`, `autoAllowReadonly`, …) widens nothing here;
/// a denial (`deniedCommands`, `deniedPaths`, `deniedServices`, `blocked`,
/// `denyByDefault: true`) is a restriction this runtime cannot enforce,
/// and a setting nobody documents whose name says it may deny may be one;
/// another (an MCP tool's own) is that tool's. An unknown key, every
/// denial was dropped.
pub(super) fn tools_settings<E: de::Error>(settings: &serde_json::Value) -> Result<bool, E> {
    use serde_json::Value;
    let refused = |tool: &str, key: &str, why: &str| {
        E::custom(format!("`toolsSettings.{tool}.{key}` is {why}"))
    };
    let tools = match settings {
        Value::Null => return Ok(false),
        Value::Object(tools) => tools,
        other => {
            return Err(E::custom(format!(
                "`toolsSettings` is {other}, not a table of tools {MAY_BE_A_RESTRICTION}"
            )));
        }
    };
    let mut limited = false;
    for (tool, value) in tools {
        let keys = match value {
            Value::Null => continue,
            Value::Object(keys) => keys,
            other => {
                return Err(E::custom(format!(
                    "`toolsSettings.{tool}` is {other}, not a table {MAY_BE_A_RESTRICTION}"
                )));
            }
        };
        for (key, value) in keys {
            let none = matches!(value, Value::Null)
                || matches!(value, Value::Array(list) if list.is_empty());
            match key.as_str() {
                "allowedCommands" | "allowedPaths" | "allowedServices" | "trusted"
                | "trustedAgents" | "autoAllowReadonly" | "allowReadOnly" => {}
                "availableAgents" => {
                    let every = matches!(value, Value::Array(list)
                        if list.iter().any(|n| n.as_str().is_some_and(|n| n.trim() == "*")));
                    limited |= !(every || matches!(value, Value::Null));
                }
                "denyByDefault" if matches!(value, Value::Bool(false) | Value::Null) => {}
                "deniedCommands" | "deniedPaths" | "deniedServices" | "blocked" if none => {}
                "denyByDefault" | "deniedCommands" | "deniedPaths" | "deniedServices"
                | "blocked" => {
                    return Err(refused(tool, key, &format!("a denial, {CANNOT_ENFORCE}")));
                }
                // A setting whose name says it may deny; any other (an
                // MCP tool's own, `@git/git_status: {git_user: …}`, Kiro's
                // documented use of the key now) is the tool's to read.
                _ if sounds_restrictive(key) => {
                    return Err(refused(
                        tool,
                        key,
                        &format!("a setting nobody documents {MAY_BE_A_RESTRICTION}"),
                    ));
                }
                _ => {}
            }
        }
    }
    Ok(limited)
}

/// A setting's name that says it may deny or narrow (`deniedUrls`,
/// `blockList`, `readOnly`, `disallow…`, `restrict…`, `exclude…`).
fn sounds_restrictive(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        "deny",
        "denied",
        "block",
        "disallow",
        "forbid",
        "readonly",
        "read_only",
        "restrict",
        "exclude",
    ]
    .iter()
    .any(|word| key.contains(word))
}

/// A Codex role's top-level `web_search` (`disabled`, `cached`, `live`):
/// whether it is on. Any other value may be a restriction: an error.
pub(super) fn web_search_on<E: de::Error>(mode: &str) -> Result<bool, E> {
    match mode.trim() {
        "disabled" => Ok(false),
        "cached" | "live" => Ok(true),
        _ => Err(E::custom(format!(
            "`web_search` is `{mode}`, none of disabled, cached, live \
             {MAY_BE_A_RESTRICTION}"
        ))),
    }
}

/// A Codex role's `sandbox_mode`: `read-only` is a restriction this
/// runtime cannot enforce (an error); the others only narrow what a
/// process may touch, so dropping them (warned) widens nothing here.
pub(super) fn sandbox_mode_loads<E: de::Error>(mode: &str) -> Result<(), E> {
    match mode.trim() {
        "workspace-write" | "danger-full-access" => Ok(()),
        "read-only" => Err(E::custom(format!(
            "`sandbox_mode` is `{mode}`, {CANNOT_ENFORCE}"
        ))),
        _ => Err(E::custom(format!(
            "`sandbox_mode` is `{mode}`, none of read-only, workspace-write, danger-full-access \
             {MAY_BE_A_RESTRICTION}"
        ))),
    }
}

/// A Codex role's `default_permissions` (its permission profiles, which
/// replace `sandbox_mode`): `:read-only` is a restriction this runtime
/// cannot enforce (an error), as `sandbox_mode = "read-only"` is; the
/// other built-in ones only narrow what a process may touch (warned); a
/// profile of the role's own (`[permissions.<name>]`) may be a restriction.
pub(super) fn permissions_load<E: de::Error>(profile: &str) -> Result<(), E> {
    match profile.trim() {
        ":workspace" | ":danger-full-access" => Ok(()),
        ":read-only" => Err(E::custom(format!(
            "`default_permissions` is `{profile}`, {CANNOT_ENFORCE}"
        ))),
        _ => Err(E::custom(format!(
            "`default_permissions` is `{profile}`, none of :read-only, :workspace, \
             :danger-full-access {MAY_BE_A_RESTRICTION}"
        ))),
    }
}

/// Keys other tools write that may restrict an agent, read nowhere here:
/// the Codex config profile a role selects (`profile`) or defines
/// (`profiles`), which may set a read-only sandbox, a rejecting approval
/// policy or a smaller model; OpenCode's `permission` map and `readOnly`;
/// Cursor's `readonly` ("restricts write permissions");
/// Gemini CLI's `timeout_mins` and Qwen Code's `runConfig` (a run's caps).
pub(super) const OTHER_TOOLS: &[&str] = &[
    "profile",
    "profiles",
    "permission",
    "readOnly",
    "readonly",
    "timeout_mins",
    "runConfig",
];

/// One of [`OTHER_TOOLS`], or `permissions` written as OpenCode's list of
/// rules (Codex's `[permissions]` table only defines profiles, which
/// `default_permissions` selects): refused where it may restrict, `Ok`
/// where it cannot (`readOnly: false`, a `permission` map that allows
/// every tool), then warned as not applied.
pub(super) fn other_tools_key<E: de::Error>(key: &str, value: &serde_json::Value) -> Result<(), E> {
    use serde_json::Value;
    let what = match (key, value) {
        (_, Value::Null) => return Ok(()),
        ("profile" | "profiles", _) => "the Codex config profile the role runs with",
        ("permission", value) if !allows_all(value) => {
            "OpenCode's permissions, not `allow` for every tool"
        }
        ("permission", _) | ("readOnly" | "readonly", Value::Bool(false)) => return Ok(()),
        ("readOnly", _) => "OpenCode's read-only switch",
        ("readonly", _) => "Cursor's read-only switch",
        ("timeout_mins", _) => "Gemini CLI's time limit of a run",
        ("runConfig", _) => "Qwen Code's limits of a run",
        ("permissions", Value::Array(rules)) if !rules.is_empty() => {
            "a list of permission rules (OpenCode's, Kiro's)"
        }
        // Kiro's rules under `rules` (Codex's `[permissions]` tables are
        // profiles by name, each a table: a list there is no profile).
        ("permissions", Value::Object(table))
            if table
                .get("rules")
                .is_some_and(|r| matches!(r, Value::Array(rules) if !rules.is_empty())) =>
        {
            "Kiro's permission rules"
        }
        // Devin's overrides (`edit: deny`, `exec: ask`, or lists under
        // `deny` and `ask`): a table of words, not of profiles — dropped as
        // not applied, its `ask` and its `deny` were lost.
        ("permissions", Value::Object(table)) if table.iter().any(devin_restricts) => {
            "Devin's permission overrides, not `allow` for every tool"
        }
        _ => return Ok(()),
    };
    Err(E::custom(format!(
        "`{key}` is {what}, which may be {CANNOT_ENFORCE}"
    )))
}

/// One entry of a `permissions` table read as Devin's overrides: a
/// `deny` or `ask` list that names something, or a tool given a word
/// other than `allow` (or `false`, YAML's `no`/`off`). A table under a
/// name is Codex's permission profile: not Devin's.
fn devin_restricts((key, value): (&String, &serde_json::Value)) -> bool {
    use serde_json::Value;
    match (key.as_str(), value) {
        ("deny" | "ask", Value::Null) => false,
        ("deny" | "ask", Value::Array(names)) => !names.is_empty(),
        ("deny" | "ask", _) => true,
        (_, Value::String(word)) => word.trim() != "allow",
        (_, Value::Bool(on)) => !on,
        // A tool's patterns (`exec: {"git push": deny}`); Codex's
        // profiles say no `deny` or `ask`.
        (_, Value::Object(inner)) => inner.values().any(|v| {
            v.as_str()
                .is_some_and(|w| matches!(w.trim(), "deny" | "ask"))
        }),
        _ => false,
    }
}

/// An OpenCode `permission` value allows everything: each of its leaves is
/// `allow` (a bash pattern's map included). `deny`, `ask` or any value
/// nobody documents may be a restriction.
fn allows_all(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(s) => s.trim() == "allow",
        serde_json::Value::Object(map) => map.values().all(allows_all),
        _ => false,
    }
}
