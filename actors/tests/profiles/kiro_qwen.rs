//! Agent files of Kiro, Qwen Code and VS Code (foreign-files review of the
//! thirty-eighth session): a restriction each writes under a key of its
//! own was dropped as unknown, or a list where a name was expected lost
//! the whole agent. Each keeps its meaning, or is refused where it
//! restricts.

use super::*;

/// A Kiro "read-only auditor" (`.kiro/agents`, Markdown): its
/// `permissions` as a table of `rules` (the denial of `git push`, `rm`)
/// loaded with only a `NotApplied` warning — the shell unrestricted. The
/// same rules written as a list were already refused. Refused; a Codex
/// `[permissions]` table of profiles still loads, warned.
#[test]
fn kiros_permission_rules_under_rules_are_refused() {
    let auditor = "---\nname: auditor\ntools: [read, shell]\npermissions:\n  rules:\n    \
                   - capability: shell\n      effect: deny\n      match: [\"git push*\", \"rm *\"]\n\
                   ---\nAudit.";
    let e = parse(auditor).unwrap_err();
    assert!(e.is_refusal() && e.to_string().contains("Kiro"), "{e}");
    let (_, warnings) =
        parse("+++\ndeveloper_instructions = \"x\"\n[permissions.ro]\nread = true\n+++\n")
            .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        warnings.iter().any(|w| matches!(w,
            ProfileWarning::NotApplied { key, .. } if key == "permissions")),
        "{warnings:?}"
    );
}

/// Qwen Code's `approvalMode: plan` (its read-only mode, the counterpart
/// of Claude Code's `permissionMode: plan`, which is refused) was an
/// unknown key: the cautious reviewer got every tool. Refused, as is a
/// mode nobody documents; the modes that only change when it asks load,
/// warned as not applied.
#[test]
fn qwens_plan_approval_mode_is_refused() {
    let reviewer = "---\nname: cautious-reviewer\ndescription: Reviews code without making \
                    changes\napprovalMode: plan\n---\nReview.";
    let e = parse(reviewer).unwrap_err();
    assert!(
        e.is_refusal() && e.to_string().contains("approvalMode"),
        "{e}"
    );
    let e = parse("---\nname: r\napprovalMode: careful\n---\nx").unwrap_err();
    assert!(e.is_refusal(), "{e}");
    for mode in ["default", "auto-edit", "yolo"] {
        let (_, warnings) = parse(&format!("---\nname: r\napprovalMode: {mode}\n---\nx"))
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert!(
            matches!(warnings.as_slice(), [ProfileWarning::NotApplied { key, .. }] if key == "approvalMode"),
            "{mode}: {warnings:?}"
        );
    }
}

/// Kiro's `toolsSettings` was an unknown key: an orchestrator limited to
/// two named agents (`subagent.availableAgents`) started any profile under
/// `max_depth(2)`, and denied commands, paths and addresses were dropped.
/// A list of agents this runtime does not apply starts none (delegation
/// denied, as Claude Code's `Agent(worker)`); a denial is refused; what
/// only spares a prompt loads, warned.
#[test]
fn kiros_tool_settings_keep_their_denials() {
    let orchestrator = "---\nname: orchestrator\ntools: [\"read\", \"subagent\"]\ntoolsSettings:\n  \
                        subagent:\n    availableAgents: [\"navitaire-gonow\", \"navitaire-skyspeed\"]\n\
                        ---\nDelegate.";
    let (loaded, warnings) = parse(orchestrator).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded.disallowed_tools, ["use_agent"], "{loaded:?}");
    assert!(
        matches!(warnings.as_slice(), [ProfileWarning::NotApplied { key, .. }] if key == "toolsSettings"),
        "{warnings:?}"
    );
    for denial in [
        "shell: {deniedCommands: [\"rm .*\"]}",
        "shell: {denyByDefault: true}",
        "write: {deniedPaths: [\".env\"]}",
        "aws: {deniedServices: [iam]}",
        "web_fetch: {blocked: [\"https://internal.*\"]}",
        "web_fetch: {blockList: [\"https://internal.*\"]}",
        "shell: [rm]",
    ] {
        let text = format!("---\nname: r\ntoolsSettings: {{{denial}}}\n---\nx");
        let e = parse(&text).unwrap_err();
        assert!(
            e.is_refusal() && e.to_string().contains("toolsSettings"),
            "{denial}: {e}"
        );
    }
    let (loaded, _) = parse(
        "---\nname: r\ntoolsSettings:\n  shell: {allowedCommands: [\"^git \"], autoAllowReadonly: true, \
         deniedCommands: [], denyByDefault: false}\n  write: {allowedPaths: [\"src/**\"]}\n  \
         subagent: {availableAgents: [\"*\"], trustedAgents: [a]}\n---\nx",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(loaded.disallowed_tools.is_empty(), "{loaded:?}");
    // An MCP tool's own setting (Kiro's documented example; review of
    // this session's diff: refused as undocumented, the agent lost).
    let (loaded, warnings) = parse(
        "---\nname: r\ntoolsSettings:\n  \"@git/git_status\": {git_user: \"$GIT_USER\"}\n---\nx",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(loaded.disallowed_tools.is_empty(), "{loaded:?}");
    assert!(
        matches!(warnings.as_slice(), [ProfileWarning::NotApplied { key, .. }] if key == "toolsSettings"),
        "{warnings:?}"
    );
}

/// VS Code's and GitHub Copilot's `model` may be a list (the first one
/// available is used; `.github/agents/*.agent.md`): read as a wrong type,
/// the whole agent was skipped. The first name is the model; the
/// fallbacks, which this runtime does not try, are warned as not applied.
#[test]
fn a_list_of_models_is_read_as_its_first() {
    let checker = "---\nname: adr-checker\ndescription: Checks ADRs\nmodel: ['Claude Sonnet 4.6 \
                   (copilot)', 'GPT-5 (copilot)']\ntools: [read]\n---\nCheck.";
    let (loaded, warnings) = parse(checker).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded.model.as_deref(), Some("Claude Sonnet 4.6 (copilot)"));
    // The fallbacks are what is not applied, not the model.
    assert!(
        warnings.iter().any(|w| matches!(w,
            ProfileWarning::NotApplied { key, .. } if key == "model[1..]")),
        "{warnings:?}"
    );
    let (loaded, warnings) = parse("---\nname: r\nmodel: [gpt-5]\n---\nx").unwrap();
    assert_eq!(loaded.model.as_deref(), Some("gpt-5"));
    assert!(warnings.is_empty(), "{warnings:?}");
    let (loaded, _) = parse("---\nname: r\nmodel: []\n---\nx").unwrap();
    assert_eq!(loaded.model, None);
    assert!(parse("---\nname: r\nmodel: {a: b}\n---\nx").is_err());
    assert!(parse("---\nname: r\nmodel: [[a]]\n---\nx").is_err());
    // A bare number is a name, as it was read before lists, as written.
    assert_eq!(
        profile("---\nname: r\nmodel: 4.0\n---\nx").model.as_deref(),
        Some("4.0")
    );
    assert_eq!(
        profile("---\nname: r\nmodel: 4\n---\nx").model.as_deref(),
        Some("4")
    );
}

/// Claude Code's `isolation: worktree` runs the agent in a git worktree of
/// its own (`ollulf/CuttingBoard`'s `task-worker`: "You run inside your own
/// git worktree … rename [your branch] first with `git branch -m`"). Only
/// warned, the agent edited and committed in the user's own checkout —
/// what its file forbids. Refused, as a restriction this runtime cannot
/// enforce; a value nobody documents may be one; none loads.
#[test]
fn a_worktree_isolation_is_refused() {
    let worker = "---\nname: task-worker\ndescription: one task in its own worktree\ntools: Bash, Edit\n\
                  isolation: worktree\n---\nYou run inside your own git worktree.";
    let e = parse(worker).unwrap_err();
    assert!(e.is_refusal() && e.to_string().contains("isolation"), "{e}");
    assert!(
        parse("---\nname: r\nisolation: sandbox\n---\nx")
            .unwrap_err()
            .is_refusal()
    );
    let (_, warnings) = parse("---\nname: r\nisolation:\n---\nx").unwrap();
    assert!(
        matches!(warnings.as_slice(), [ProfileWarning::NotApplied { key, .. }] if key == "isolation"),
        "{warnings:?}"
    );
}
