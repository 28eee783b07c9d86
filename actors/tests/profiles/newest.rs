//! Agent files in the tools' newest formats (review: foreign agent files,
//! twenty-second session): each keeps its meaning, and none loads wider
//! than its file says.

use super::*;

fn codex_role(text: &str) -> Result<(Profile, Vec<ProfileWarning>), ProfileError> {
    Profile::parse_codex_role(Path::new("/a/reviewer.toml"), text)
}

/// Claude Code reads `tools:` with no value (YAML null, `~`) as no tools
/// — a tool-less agent's file says so (`unleash-wp/lumo`'s
/// `product-gate.md`: "you have no tools and cannot read any file") —
/// and a missing key as every tool. Null was read as missing: the
/// code-blind agent ran with the shell.
#[test]
fn a_null_tools_key_is_no_tools_as_claude_code_reads_it() {
    for text in [
        "---\nname: gate\ntools:\nmodel: inherit\n---\nYou judge alone.",
        "---\nname: gate\ntools: ~\n---\nYou judge alone.",
        "---\nname: gate\nallowed-tools:\n---\nYou judge alone.",
    ] {
        assert_eq!(profile(text).tools, Some(Vec::new()), "{text:?}");
    }
    let missing = profile("---\nname: gate\n---\nYou judge alone.");
    assert_eq!(missing.tools, None, "a missing key: the parent's set");
    let nothing_denied = profile("---\nname: gate\ndisallowedTools:\n---\nx");
    assert!(nothing_denied.disallowed_tools.is_empty());
}

/// Claude Code reads a `*` entry as every tool; it was kept as a tool's
/// name, unknown, and the profile had "no tools": every delegation of it
/// was refused.
#[test]
fn a_star_in_tools_is_every_tool_as_claude_code_reads_it() {
    for text in [
        "---\nname: researcher\ntools: \"*\"\n---\nx",
        "---\nname: researcher\ntools: [\"*\"]\ndisallowedTools: Bash\n---\nx",
    ] {
        let profile = profile(text);
        assert_eq!(profile.tools, None, "{text:?}");
    }
    let denied = profile("---\nname: r\ntools: \"*\"\ndisallowedTools: Bash\n---\nx");
    assert_eq!(
        denied.disallowed_tools,
        ["Bash"],
        "a deny list still applies"
    );
}

/// Codex's permission profiles replace `sandbox_mode`: a role migrated to
/// `default_permissions = ":read-only"` was an unknown key, dropped — the
/// read-only reviewer ran with every tool, undoing the refusal of
/// `sandbox_mode = "read-only"`. Read as that one is: read-only refused,
/// the others warned, a profile of the user's own (its `[permissions]`
/// table) may be a restriction.
#[test]
fn codexs_read_only_permission_profile_is_refused_not_dropped() {
    let role = |value: &str| {
        codex_role(&format!(
            "name = \"reviewer\"\ndescription = \"d\"\ndefault_permissions = \"{value}\"\n\
             developer_instructions = \"Review.\"\n"
        ))
    };
    let e = role(":read-only").unwrap_err();
    assert!(e.is_refusal(), "{e}");
    assert!(
        e.to_string()
            .contains("`default_permissions` is `:read-only`"),
        "{e}"
    );
    let e = role("locked").unwrap_err();
    assert!(e.is_refusal(), "{e}");
    for open in [":workspace", ":danger-full-access"] {
        let (profile, warnings) = role(open).unwrap_or_else(|e| panic!("{open}: {e}"));
        assert_eq!(profile.tools, None);
        assert!(
            warnings.iter().any(|w| matches!(w,
                ProfileWarning::NotApplied { key, .. } if key == "default_permissions")),
            "{open}: {warnings:?}"
        );
    }
    let (_, warnings) = codex_role(
        "developer_instructions = \"x\"\n[permissions.mine.filesystem]\n\":project_roots\" = \"read\"\n",
    )
    .unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| matches!(w, ProfileWarning::NotApplied { key, .. } if key == "permissions")),
        "{warnings:?}"
    );
}

/// A broken role that sets a permission profile hides the name, as one
/// setting `sandbox_mode` does: an earlier directory's role of that name
/// (every tool) ran in its place.
#[test]
fn a_broken_role_with_a_permission_profile_hides_the_earlier_one() {
    let user = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        user.path().join("reviewer.md"),
        "---\nname: reviewer\ndescription: d\n---\nYou review with everything.",
    )
    .unwrap();
    std::fs::write(
        project.path().join("reviewer.toml"),
        "name = \"reviewer\"\ndefault_permissions = \":read-only\"\ndeveloper_instructions = \n",
    )
    .unwrap();
    let (set, _) = ProfileSet::load(
        &[user.path().to_path_buf(), project.path().to_path_buf()],
        &[],
    );
    assert!(
        set.get("reviewer").is_none(),
        "the user's reviewer ran instead"
    );
}

/// `permissionMode: auto` (Claude Code's classifier mode: looser than
/// `default`) and `manual` (`default`'s new name) were refused as "may be
/// a restriction", and the file's name hidden with it. Approvals here are
/// the host's `ApprovalPolicy`: warned as not applied, as `default` is.
#[test]
fn claude_codes_auto_and_manual_permission_modes_load_warned() {
    for mode in ["auto", "manual"] {
        let (profile, warnings) = parse(&format!("---\npermissionMode: {mode}\n---\nx"))
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_eq!(profile.permission_mode.as_deref(), Some(mode));
        assert_eq!(
            warnings,
            [ProfileWarning::NotApplied {
                path: PATH.into(),
                key: "permissionMode".into()
            }]
        );
    }
}

/// A Codex role's `[features] multi_agent = false` turns its sub-agents
/// off: it was warned as not applied ("a child delegates only below
/// `max_depth`"), and under a host's `max_depth(2)` the role got the
/// delegation tools. Read as a denial of delegation.
#[test]
fn a_codex_role_with_multi_agent_off_never_delegates() {
    for feature in ["multi_agent", "multi_agent_v2"] {
        let (profile, _) = codex_role(&format!(
            "developer_instructions = \"You work alone.\"\n[features]\n{feature} = false\n"
        ))
        .unwrap();
        assert!(
            profile.disallowed_tools.iter().any(|t| t == "use_agent"),
            "{feature}: {:?}",
            profile.disallowed_tools
        );
    }
    let (on, _) =
        codex_role("developer_instructions = \"x\"\n[features]\nmulti_agent = true\n").unwrap();
    assert!(on.disallowed_tools.is_empty());
}

/// Claude Code reads `model: inherit` in any case (`Inherit`, `INHERIT`)
/// as the parent's model; compared exactly, it became a model named
/// `Inherit`, and every delegation of the profile was refused as an
/// unknown model.
#[test]
fn inherit_in_any_case_is_the_parents_model() {
    for written in ["inherit", "Inherit", "INHERIT", " inherit "] {
        let text = format!("---\nname: helper\nmodel: \"{written}\"\n---\nx");
        assert_eq!(profile(&text).model, None, "{written:?}");
    }
    assert_eq!(
        profile("---\nname: helper\nmodel: sonnet\n---\nx")
            .model
            .as_deref(),
        Some("sonnet")
    );
}

/// A Codex role's `[mcp_servers.<id>]` and `[agents]`, read as what they
/// narrow: a server or its tools switched off are denied, a `max_depth`
/// of 1 or less (or `collab`, `multi_agent`'s old name, off) denies
/// delegation; `enabled_tools` (an allowlist within a server, which a
/// deny list cannot say) is refused; a server defined, a larger depth and
/// `[agents]`' other keys are not applied, each said.
#[test]
fn a_codex_roles_mcp_servers_and_agents_narrow_what_they_say() {
    let role = |table: &str| codex_role(&format!("developer_instructions = \"x\"\n{table}"));
    let cases: [(&str, &[&str], &[&str]); 11] = [
        (
            "[mcp_servers.github]\nenabled = false",
            &["mcp__github"],
            &[],
        ),
        (
            "[mcp_servers.my__gh]\nenabled = false",
            &["mcp__my__gh__*"],
            &[],
        ),
        (
            "[mcp_servers.github]\ncommand = \"gh-mcp\"\ndisabled_tools = [\"merge\", \" delete \"]",
            &["mcp__github__merge", "mcp__github__delete"],
            &["mcp_servers"],
        ),
        ("[mcp_servers.docs]\nenabled = true", &[], &[]),
        ("[agents]\nmax_depth = 1", &["use_agent"], &[]),
        ("[agents]\nmax_depth = 0", &["use_agent"], &[]),
        (
            "[agents]\nmax_depth = 3\nmax_threads = 2",
            &[],
            &["agents.max_depth", "agents.max_threads"],
        ),
        ("[features]\ncollab = false", &["use_agent"], &[]),
        // Review of this session's own diff: the sub-agent tools switched
        // off as a whole, and a feature written as a table.
        ("[agents]\nenabled = false", &["use_agent"], &[]),
        (
            "[features.multi_agent_v2]\nenabled = false\nmax_threads = 2",
            &["use_agent"],
            &[],
        ),
        (
            "[features.shell_tool]\nenabled = true",
            &[],
            &["features.shell_tool"],
        ),
    ];
    for (table, denied, not_applied) in cases {
        let (profile, warnings) = role(table).unwrap_or_else(|e| panic!("{table}: {e}"));
        assert_eq!(profile.disallowed_tools, denied, "{table}");
        let said: Vec<&str> = warnings
            .iter()
            .map(|w| match w {
                ProfileWarning::NotApplied { key, .. } => key.as_str(),
                other => panic!("{table}: {other}"),
            })
            .collect();
        assert_eq!(said, not_applied, "{table}");
    }
    let refused = role("[mcp_servers.github]\nenabled_tools = [\"get_pr\"]").unwrap_err();
    assert!(refused.is_refusal(), "{refused}");
    assert!(
        refused
            .to_string()
            .contains("mcp_servers.github.enabled_tools"),
        "{refused}"
    );
    for (table, names) in [
        (
            "[mcp_servers.github]\nenabled = \"no\"",
            "mcp_servers.github.enabled",
        ),
        (
            "[mcp_servers.github]\ndisabled_tools = \"merge\"",
            "disabled_tools",
        ),
        ("[agents]\nmax_depth = \"one\"", "agents.max_depth"),
        // A switch-off of the wrong type: "not applied", the role kept
        // delegating (review: the previous session's diff).
        ("[agents]\nenabled = \"false\"", "agents.enabled"),
        (
            "[features]\nmulti_agent = \"false\"",
            "features.multi_agent",
        ),
        ("[features.collab]\nenabled = 0", "features.collab"),
        ("[features]\nshell_tool = \"off\"", "features.shell_tool"),
    ] {
        let e = role(table).unwrap_err();
        assert!(e.to_string().contains(names), "{table}: {e}");
    }
}

/// `agents:` as a list in a Markdown file (another tool's key: the agents
/// it may start) failed the whole file as "expected a map" once `agents`
/// was read as Codex's table. An empty list starts none — delegation
/// denied; one naming agents loads, a limit not applied: it starts none
/// (read as not applied alone, it started any profile).
#[test]
fn agents_as_a_list_in_a_markdown_file_loads() {
    let parse = |agents: &str| {
        Profile::parse(
            Path::new("/a/worker.md"),
            &format!("---\nname: worker\nagents: {agents}\n---\nYou work."),
        )
    };
    let (none, _) = parse("[]").unwrap();
    assert_eq!(none.disallowed_tools, ["use_agent"]);
    let (named, warnings) = parse("[reviewer]").unwrap();
    assert_eq!(named.disallowed_tools, ["use_agent"]);
    assert!(
        warnings
            .iter()
            .any(|w| matches!(w, ProfileWarning::NotApplied { key, .. } if key == "agents")),
        "{warnings:?}"
    );
}

/// A Codex role switching off a server whose id differs in case from the
/// host's tools (`[mcp_servers.GitHub]`, tools `mcp__github__*`), loaded
/// from a folder: the load matched the rule to the host's tools by case,
/// found none, warned it "denies nothing" and listed none of them. Matched
/// whatever the case, as a one-tool rule is (review: this session's tests).
#[test]
fn a_server_rule_in_another_case_denies_the_hosts_tools_at_the_load() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("reviewer.toml"),
        "developer_instructions = \"x\"\n[mcp_servers.GitHub]\nenabled = false\n",
    )
    .unwrap();
    let known = ["mcp__github__merge".to_owned(), "calculator".to_owned()];
    let (set, warnings) = ProfileSet::load(&[tmp.path().to_path_buf()], &known);
    assert!(warnings.is_empty(), "{warnings:?}");
    let reviewer = set.get("reviewer").unwrap();
    assert!(
        reviewer
            .disallowed_tools
            .iter()
            .any(|t| t == "mcp__github__merge"),
        "{:?}",
        reviewer.disallowed_tools
    );
}

/// Widened (foreign): a Codex role that selects a config profile
/// (`profile = "ro"`, its `[profiles.ro]` read-only) — Codex applies it
/// as a layer — loaded as two unknown keys, with every tool. Refused, as
/// a permission profile of the role's own is; OpenCode's `permission`
/// map and `readOnly`, Gemini CLI's `timeout_mins` and Qwen Code's
/// `runConfig` likewise, where they may restrict.
#[test]
fn other_tools_restricting_keys_are_refused_not_dropped() {
    let e = codex_role(
        "developer_instructions = \"r\"\nprofile = \"ro\"\n[profiles.ro]\nsandbox_mode = \"read-only\"\n",
    )
    .unwrap_err();
    assert!(e.is_refusal() && e.to_string().contains("`profile`"), "{e}");
    let e =
        codex_role("developer_instructions = \"r\"\n[profiles.ro]\nmodel = \"m\"\n").unwrap_err();
    assert!(e.is_refusal(), "{e}");
    for text in [
        "---\nname: r\nmode: subagent\npermission:\n  edit: deny\n---\nx",
        "---\nname: r\npermission:\n  bash:\n    \"git *\": allow\n    \"*\": ask\n---\nx",
        "---\nname: r\nreadOnly: true\n---\nx",
        "---\nname: r\ntimeout_mins: 5\n---\nx",
        "---\nname: r\nrunConfig:\n  max_time_minutes: 5\n---\nx",
        "---\nname: r\npermissions:\n  - action: edit\n    effect: deny\n---\nx",
    ] {
        match parse(text) {
            Err(e) => assert!(e.is_refusal(), "{text:?}: {e}"),
            Ok(loaded) => panic!("{text:?} loaded: {loaded:?}"),
        }
    }
    // Nothing restricted: loaded, the key warned as not applied.
    for (text, key) in [
        (
            "---\nname: r\npermission:\n  edit: allow\n---\nx",
            "permission",
        ),
        ("---\nname: r\nreadOnly: false\n---\nx", "readOnly"),
    ] {
        let (_, warnings) = parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert!(
            warnings.iter().any(|w| matches!(w,
                ProfileWarning::NotApplied { key: k, .. } if k == key)),
            "{text:?}: {warnings:?}"
        );
    }
}

/// Gemini CLI's `max_turns` and OpenCode's `steps` (formerly `maxSteps`)
/// are the iteration cap, as Claude Code's `maxTurns` is: unknown, the
/// sub-agent ran on the default 20 calls, not its file's 3. A `steps`
/// that is no number is some other tool's list, unknown as before.
#[test]
fn other_tools_turn_caps_are_the_iteration_cap() {
    for key in ["max_turns", "steps", "maxSteps"] {
        let text = format!("---\nname: a\n{key}: 3\n---\nx");
        assert_eq!(profile(&text).max_iterations, Some(3), "{key}");
    }
    let (listed, warnings) = parse("---\nname: a\nsteps:\n  - read\n  - write\n---\nx").unwrap();
    assert_eq!(listed.max_iterations, None);
    assert!(warnings.iter().any(|w| matches!(w,
        ProfileWarning::UnknownKey { key, .. } if key == "steps")));
    assert!(parse("---\nname: a\nsteps: 0\n---\nx").is_err());
    assert!(parse("---\nname: a\nmaxTurns: 3\nmax_turns: 4\n---\nx").is_err());
}

/// This session's own review: `steps` read as the cap was checked as a
/// second spelling before its value was read — a list of steps beside
/// `maxTurns` (another tool's text, an unknown key) refused the file.
/// Only a number is the cap, and a number beside another spelling is
/// still refused, in either order.
#[test]
fn steps_is_a_second_spelling_of_the_cap_only_as_a_number() {
    let (listed, warnings) = parse("---\nname: a\nmaxTurns: 5\nsteps:\n  - plan\n---\nx").unwrap();
    assert_eq!(listed.max_iterations, Some(5));
    assert!(warnings.iter().any(|w| matches!(w,
        ProfileWarning::UnknownKey { key, .. } if key == "steps")));
    for text in [
        "---\nname: a\nmaxTurns: 5\nsteps: 3\n---\nx",
        "---\nname: a\nsteps: 3\nmaxTurns: 5\n---\nx",
    ] {
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains("two spellings of one setting"), "{text:?}: {e}");
    }
}

/// Widened (this session's own review: OpenCode's keys beside the ones
/// it read): OpenCode's `disable: true` was an unknown key, and an agent
/// it marks `mode: primary` (never started as a sub-agent there) was
/// offered as one. Both leave the profile out; `mode: subagent` and
/// `all` say nothing this runtime does otherwise.
#[test]
fn opencodes_disable_and_primary_mode_leave_the_profile_out() {
    for text in [
        "---\nname: a\ndisable: true\n---\nx",
        "---\nname: a\nmode: primary\n---\nx",
        "---\nname: a\nmode: primary\ndisabled: false\n---\nx",
    ] {
        assert!(profile(text).disabled, "{text:?}");
    }
    for mode in ["subagent", "all"] {
        let (loaded, warnings) = parse(&format!("---\nname: a\nmode: {mode}\n---\nx")).unwrap();
        assert!(!loaded.disabled);
        assert!(warnings.is_empty(), "{mode}: {warnings:?}");
    }
}
