//! Agent files of tools read nowhere else here (foreign-files review of
//! the thirty-fourth session): Cursor, Augment, Factory, GitHub Copilot.
//! Each kept its meaning, or was refused where it restricts.

use super::*;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), text).unwrap();
}

/// Cursor's `readonly: true` ("restricts write permissions";
/// `toniop99/agent-detective`'s `.agents/agents/repo-cartographer.md`)
/// was an unknown key: the read-only agent got every tool, and hid
/// nothing of the user's profile of its name. Refused; `readonly: false`
/// narrows nothing (not applied); Cursor's `is_background` is this
/// runtime's `background`.
#[test]
fn cursors_read_only_switch_is_refused_and_its_background_applied() {
    let cartographer = "---\nname: repo-cartographer\ndescription: >-\n  Maps the repo.\n\
                        readonly: true\nis_background: false\n---\nYou are read-only.";
    let e = parse(cartographer).unwrap_err();
    assert!(e.is_refusal() && e.to_string().contains("Cursor"), "{e}");
    let (loaded, warnings) = parse("---\nname: r\nreadonly: false\nis_background: true\n---\nx")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(loaded.background, "{loaded:?}");
    assert!(
        warnings.iter().any(|w| matches!(w,
            ProfileWarning::NotApplied { key, .. } if key == "readonly")),
        "{warnings:?}"
    );
    assert!(
        !warnings
            .iter()
            .any(|w| matches!(w, ProfileWarning::UnknownKey { .. })),
        "{warnings:?}"
    );
    let e = parse("---\nname: r\nbackground: true\nis_background: true\n---\nx").unwrap_err();
    assert!(e.to_string().contains("two spellings"), "{e}");
    // In the default folder, it hides the user's profile of its name.
    let tmp = tempfile::tempdir().unwrap();
    let user = tmp.path().join("user");
    let project = tmp.path().join(".agents/agents");
    write(
        &user,
        "repo-cartographer.md",
        "---\nname: repo-cartographer\n---\nevery tool",
    );
    write(&project, "repo-cartographer.md", cartographer);
    let (set, _) = ProfileSet::load(&[user, project], &[]);
    assert!(set.get("repo-cartographer").is_none());
}

/// Augment's deny list is `disabled_tools` (its docs' `safe-reader`,
/// `r3dlex/oh-my-auggie`'s code reviewer): an unknown key, every tool.
/// It is one more spelling of the deny list, mapped as the others are.
#[test]
fn augments_disabled_tools_is_the_deny_list() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(".agents/agents");
    write(
        &dir,
        "safe-reader.md",
        "---\nname: safe-reader\ndescription: A safe file reader\ndisabled_tools:\n  \
         - str-replace-editor\n  - save-file\n  - launch-process\n---\nYou only read.",
    );
    write(
        &dir,
        "validate.md",
        "---\nname: validate\ndisabled_tools: save-file, launch-process\n---\nCheck.",
    );
    let known = ["read_file", "write_file", "shell"].map(String::from);
    let mapping = [
        ("launch-process", "shell"),
        ("save-file", "write_file"),
        ("str-replace-editor", "write_file"),
    ]
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .into_iter()
    .collect();
    let (set, warnings) = ProfileSet::load_mapping(&[dir], &known, &mapping);
    for name in ["safe-reader", "validate"] {
        let denied = &set.get(name).unwrap().disallowed_tools;
        for tool in ["write_file", "shell"] {
            assert!(denied.iter().any(|d| d == tool), "{name}: {denied:?}");
        }
    }
    assert!(
        !warnings
            .iter()
            .any(|w| matches!(w, ProfileWarning::UnknownKey { .. })),
        "{warnings:?}"
    );
    let e = parse("---\nname: r\ndisallowedTools: [a]\ndisabled_tools: [b]\n---\nx").unwrap_err();
    assert!(e.to_string().contains("two spellings"), "{e}");
}

/// VS Code's and Copilot's "never invoke it as a sub-agent"
/// (`disable-model-invocation: true`, formerly `infer: false`;
/// `cristianbica/orchestra`'s `.github/agents/validator.agent.md` spells
/// it) was an unknown key: the agent was offered to every model. It
/// leaves the profile out, as OpenCode's `mode: primary`.
#[test]
fn an_agent_never_invoked_as_a_sub_agent_is_left_out() {
    for (text, disabled) in [
        ("disable-model-invocation: true", true),
        ("infer: false", true),
        ("disable-model-invocation: false", false),
        ("infer: true", false),
        ("disable-model-invocation: true\ndisabled: false", true),
    ] {
        let (loaded, warnings) = parse(&format!(
            "---\nname: v\nuser-invokable: true\ntarget: vscode\n{text}\n---\nx"
        ))
        .unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(loaded.disabled, disabled, "{text}");
        assert!(
            !warnings.iter().any(|w| matches!(w,
                ProfileWarning::UnknownKey { key, .. } if key != "user-invokable" && key != "target")),
            "{text}: {warnings:?}"
        );
    }
}

/// Copilot agent files (`.github/agents/*.agent.md`): the identity is the
/// file's name less `.agent.md` (`4.1-Beast.agent.md`'s display name
/// `"4.1 Beast Mode V3.1"` refused the whole file; one with no `name` was
/// `reviewer.agent`), and `.github/agents` is another tool's folder: a
/// `README.md` there was a sub-agent with every tool.
#[test]
fn a_copilot_agents_folder_is_read_as_copilot_reads_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(".github/agents");
    write(
        &dir,
        "4.1-Beast.agent.md",
        "---\nname: \"4.1 Beast Mode V3.1\"\ndescription: Beast\ntools: ['read']\n---\nGo.",
    );
    write(
        &dir,
        "reviewer.agent.md",
        "---\ndescription: Reviews\n---\nReview.",
    );
    write(&dir, "README.md", "# Our agents\n\nSee each file.");
    let (set, warnings) = ProfileSet::load(&[dir], &[]);
    let mut names: Vec<&str> = set.iter().map(|p| p.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["4.1-Beast", "reviewer"], "{warnings:?}");
    assert!(
        warnings.iter().any(|w| matches!(
            w,
            ProfileWarning::Skipped(ProfileError::Parse {
                kind: ParseErrorKind::NoFrontmatter,
                ..
            })
        )),
        "{warnings:?}"
    );
}

/// Gemini CLI's remote agent (`kind: remote`, an `agent_card_url`: an
/// agent another service runs; diff review) loaded as a local one with an
/// empty prompt and every tool. Left out. Another tool's `kind` (`kind:
/// subagent`, in public agent files) is an unknown key, as before — first
/// refused, such files were lost (this session's own diff review).
#[test]
fn a_gemini_remote_agent_is_left_out() {
    let remote = "---\nkind: remote\nname: my-remote-agent\n\
                  agent_card_url: https://example.com/agent-card\n---\n";
    let (loaded, warnings) = parse(remote).unwrap_or_else(|e| panic!("{e}"));
    assert!(loaded.disabled, "{loaded:?}");
    assert!(
        warnings.iter().any(|w| matches!(w,
            ProfileWarning::NotApplied { key, .. } if key == "kind")),
        "{warnings:?}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(".gemini/agents");
    write(&dir, "my-remote-agent.md", remote);
    let (set, _) = ProfileSet::load(&[dir], &[]);
    assert!(set.get("my-remote-agent").is_none());
    assert!(!profile("---\nname: l\nkind: local\n---\nx").disabled);
    for other in ["subagent", "hosted"] {
        let (loaded, warnings) = parse(&format!("---\nname: l\nkind: {other}\n---\nx"))
            .unwrap_or_else(|e| panic!("{other}: {e}"));
        assert!(!loaded.disabled, "{other}");
        assert!(
            warnings.iter().any(|w| matches!(w,
                ProfileWarning::UnknownKey { key, .. } if key == "kind")),
            "{other}: {warnings:?}"
        );
    }
}

/// Widened (the last read of this session's change): only `load` left a
/// profile out for `disabled` — a host parsing files itself and building
/// the set with `from_profiles` ran a remote agent, or one never to run as
/// a sub-agent, with every tool. Left out there too, its name with it.
#[test]
fn a_set_built_in_code_leaves_a_disabled_profile_out() {
    let remote = parse("---\nkind: remote\nname: far\nagent_card_url: https://x/card\n---\n")
        .unwrap()
        .0;
    let never = parse("---\nname: solo\ndisable-model-invocation: true\n---\nx")
        .unwrap()
        .0;
    let kept = profile("---\nname: near\n---\nx");
    let set = ProfileSet::from_profiles([remote, never, kept]);
    let names: Vec<&str> = set.names().collect();
    assert_eq!(names, ["near"]);
    let never = profile("---\nname: solo\ninfer: false\n---\nx");
    assert!(ProfileSet::from_profiles([never]).is_empty());
}

/// Widened (review: more agent files, thirty-ninth session): Google
/// Antigravity's keys were unknown, and its agents (in `.agents/agents`,
/// read by default) loaded with every tool. `nandinhos/ralph-method`'s
/// read-only reviewer (`mainAgent: true`, `subagent: false`, `inheritMcp:
/// false`, `commandExecutionPolicy: strict`) ran as a sub-agent with the
/// shell and every MCP tool; `mcdirmid/cleanroom`'s coordinator, limited
/// to one sub-agent (`allowed_subagents: [cleanroom_role_worker]`),
/// started any profile. Now: `subagent: false` leaves it out;
/// `inheritMcp: false` denies every MCP tool; a command policy that may
/// restrict is refused; a sub-agent list other than `['*']` starts none.
#[test]
fn antigravitys_keys_narrow_what_they_say() {
    assert!(profile("---\nname: r\nmainAgent: true\nsubagent: false\n---\nx").disabled);
    let (loaded, warnings) =
        parse("---\nname: r\nmainAgent: false\nsubagent: true\n---\nx").unwrap();
    assert!(!loaded.disabled && warnings.is_empty(), "{warnings:?}");
    let loaded = profile("---\nname: r\ninheritMcp: false\n---\nx");
    assert_eq!(loaded.disallowed_tools, ["mcp__*"]);
    for policy in ["strict", "off", "deny", "never-heard-of"] {
        let e = parse(&format!(
            "---\nname: r\ncommandExecutionPolicy: {policy}\n---\nx"
        ))
        .unwrap_err();
        assert!(e.is_refusal(), "{policy}: {e}");
    }
    for policy in ["auto", "eager", "sandbox"] {
        let (_, warnings) = parse(&format!(
            "---\nname: r\ncommandExecutionPolicy: {policy}\n---\nx"
        ))
        .unwrap();
        assert!(
            warnings.iter().any(|w| matches!(w, ProfileWarning::NotApplied { key, .. } if key == "commandExecutionPolicy")),
            "{policy}: {warnings:?}"
        );
    }
    for key in ["allowed_subagents", "subagents"] {
        let (loaded, warnings) = parse(&format!(
            "---\nname: c\n{key}:\n  - cleanroom_role_worker\n---\nx"
        ))
        .unwrap();
        assert_eq!(loaded.disallowed_tools, ["use_agent"], "{key}");
        assert!(
            warnings
                .iter()
                .any(|w| matches!(w, ProfileWarning::NotApplied { key: k, .. } if k == key)),
            "{key}: {warnings:?}"
        );
        let any = profile(&format!("---\nname: c\n{key}: ['*']\n---\nx"));
        assert!(any.disallowed_tools.is_empty(), "{key}: '*' is any");
    }
    let e = parse("---\nname: r\nsubagent: \"false\"\n---\nx").unwrap_err();
    assert!(e.to_string().contains("true or false"), "{e}");
    // The real file (review of this session's diff: refused for its
    // command policy, though it is an agent never run as a sub-agent):
    // left out, in either order of its keys.
    for text in [
        "mainAgent: true\nsubagent: false\ninheritMcp: false\ncommandExecutionPolicy: strict",
        "commandExecutionPolicy: strict\nsubagent: false",
    ] {
        let (loaded, _) = parse(&format!("---\nname: ralph-review\n{text}\n---\nx"))
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        assert!(loaded.disabled, "{text}");
    }
    // Other tools' "may delegate", and a spaced `*`: no limit; an empty
    // list or `false`: none, without a warning.
    for text in ["subagents: true", "allowed_subagents: [' * ']"] {
        let loaded = profile(&format!("---\nname: c\n{text}\n---\nx"));
        assert!(loaded.disallowed_tools.is_empty(), "{text}");
    }
    for text in ["subagents: []", "subagents: false"] {
        let (loaded, warnings) = parse(&format!("---\nname: c\n{text}\n---\nx")).unwrap();
        assert_eq!(loaded.disallowed_tools, ["use_agent"], "{text}");
        assert!(warnings.is_empty(), "{text}: {warnings:?}");
    }
}

/// Widened (review: more agent files): Devin's `permissions` overrides
/// (`ThePlenkov/skills`' read-only investigator: `edit: deny`, `write:
/// deny`, `exec: ask`) were read as Codex's permission profiles and
/// dropped as not applied — the shell ran without the `ask`. A table of
/// words, or with `deny`/`ask` lists, is refused unless it allows all,
/// as OpenCode's `permission` is; Codex's tables of profiles load as before.
#[test]
fn devins_permission_overrides_are_refused_not_dropped() {
    for text in [
        "permissions:\n  edit: deny\n  write: deny\n  exec: ask",
        "permissions:\n  deny:\n    - Exec(git push:*)",
        "permissions:\n  ask: [exec]",
    ] {
        let e = parse(&format!("---\nname: investigator\n{text}\n---\nx")).unwrap_err();
        assert!(e.is_refusal(), "{text}: {e}");
    }
    // A tool's patterns (review of this session's diff: loaded).
    let e =
        parse("---\nname: i\npermissions:\n  exec:\n    \"git push\": deny\n---\nx").unwrap_err();
    assert!(e.is_refusal(), "{e}");
    for text in [
        "permissions:\n  edit: allow",
        "permissions:\n  ro:\n    sandbox: read-only",
        // Lists that name nothing (refused, though nothing restricts).
        "permissions:\n  allow: [read]\n  deny: []",
        "permissions:\n  deny: null",
    ] {
        let (_, warnings) = parse(&format!("---\nname: r\n{text}\n---\nx")).unwrap();
        assert!(
            warnings.iter().any(
                |w| matches!(w, ProfileWarning::NotApplied { key, .. } if key == "permissions")
            ),
            "{text}: {warnings:?}"
        );
    }
}

/// Lost (review: more agent files): OpenCode's documented `tools` map of
/// switches (`Kyohei-Prj/opencode-config`'s reviewer: `write: false`,
/// `edit: false`, `bash: false` — every tool but those) refused the
/// whole agent ("`tools` is a mapping"). A map that turns tools off is
/// read so, its edit tools off together as OpenCode's one `edit`
/// permission; one that turns none off, or names `*`, is refused as before.
#[test]
fn opencodes_tool_switches_deny_what_they_turn_off() {
    let loaded = profile(
        "---\ndescription: Review code\nmode: subagent\ntemperature: 0.1\ntools:\n  write: false\n  edit: false\n  bash: false\n---\nReview.",
    );
    assert_eq!(loaded.tools, None);
    let mut denied = loaded.disallowed_tools.clone();
    denied.sort_unstable();
    assert_eq!(denied, ["bash", "edit", "multiedit", "patch", "write"]);
    let loaded = profile("---\nname: r\ntools:\n  write: false\n  read: true\n---\nx");
    assert!(
        ["write", "edit", "patch", "multiedit"]
            .iter()
            .all(|t| loaded.disallowed_tools.iter().any(|d| d == t))
    );
    assert!(!loaded.disallowed_tools.iter().any(|d| d == "read"));
    for text in [
        "tools:\n  read: true",
        "tools:\n  \"*\": false\n  read: true",
        "tools: {}",
    ] {
        assert!(
            parse(&format!("---\nname: r\n{text}\n---\nx")).is_err(),
            "{text}"
        );
    }
    // Decided from the map alone (review of this session's diff: another
    // key's denial made an all-`true` map pass, with every other tool).
    for other in ["inheritMcp: false", "agents: []"] {
        let text = format!("---\nname: r\ntools:\n  read: true\n{other}\n---\nx");
        assert!(parse(&text).is_err(), "{other}");
    }
    // An MCP server's tools turned off by OpenCode's name for them: this
    // runtime's names too (denied by OpenCode's alone, they were granted).
    let loaded = profile(
        "---\nname: r\ntools:\n  read: true\n  image-video-analysis_*: false\n  mcp_github_*: false\n---\nx",
    );
    for rule in ["mcp__image-video-analysis__*", "mcp__github__*"] {
        assert!(
            loaded.disallowed_tools.iter().any(|d| d == rule),
            "{rule}: {:?}",
            loaded.disallowed_tools
        );
    }
}
