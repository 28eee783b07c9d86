//! Field by field: wrong types, unknown keys, names, bytes that are not UTF-8.

use super::*;

#[test]
fn wrong_type_error_says_what_is_wrong() {
    for (text, want_format) in [
        (
            "+++\nmax_iterations = \"x\"\n+++\n",
            FrontmatterFormat::Toml,
        ),
        ("---\nmax_iterations: x\n---\n", FrontmatterFormat::Yaml),
    ] {
        let e = parse_error(text);
        let ParseErrorKind::Invalid { format, message } = &e.kind else {
            panic!("{e}")
        };
        assert_eq!(*format, want_format);
        assert_eq!(
            message, "invalid type: string \"x\", expected an integer from 1 to 4294967295",
            "{e}"
        );
    }
}

#[test]
fn unknown_keys_warn_and_do_not_fail() {
    for text in [
        "+++\ndescription = \"d\"\nbadge = \"red\"\n[extra]\nx = 1\n+++\nbody",
        "---\ndescription: d\nbadge: red\nextra:\n  x: [1, 2]\n---\nbody",
    ] {
        let (profile, warnings) = parse(text).unwrap();
        assert_eq!(profile.description, "d");
        assert_eq!(profile.system_prompt, "body");
        let keys: Vec<_> = warnings
            .iter()
            .map(|w| match w {
                ProfileWarning::UnknownKey { key, path } => {
                    assert_eq!(path, Path::new(PATH));
                    key.as_str()
                }
                other => panic!("{other}"),
            })
            .collect();
        assert_eq!(keys, ["badge", "extra"], "{text}");
    }
}

#[test]
fn the_frontmatter_name_is_the_identity_and_the_file_name_stands_in() {
    // Claude Code: `name` is the agent's identity, whatever the file is
    // called.
    let (profile, warnings) = parse("---\nname: other\n---\nbody").unwrap();
    assert_eq!(profile.name, "other");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        parse("---\nname: \"  \"\n---\nbody").unwrap().0.name,
        "agent"
    );
    assert_eq!(
        parse("+++\nname = \"toml-name\"\n+++\nbody")
            .unwrap()
            .0
            .name,
        "toml-name"
    );
    let e = parse("---\nname: code reviewer\n---\nbody").unwrap_err();
    assert!(
        matches!(e, ProfileError::InvalidName { ref name, .. } if name == "code reviewer"),
        "{e}"
    );
}

#[test]
fn names_come_from_the_file_name() {
    let p = Profile::parse(Path::new("/x/Code-Reviewer.md"), "hi")
        .unwrap()
        .0;
    assert_eq!(p.name, "Code-Reviewer");
    assert_eq!(p.source, Path::new("/x/Code-Reviewer.md"));
    let e = Profile::parse(Path::new("/x/code reviewer.md"), "hi").unwrap_err();
    assert!(
        matches!(e, ProfileError::InvalidName { ref name, .. } if name == "code reviewer"),
        "{e}"
    );
}

#[test]
fn bytes_that_are_not_utf8_are_an_error_at_the_bad_byte() {
    let e = Profile::parse_bytes(Path::new(PATH), b"+++\nd = \"\xc3\xa9\xff\"\n+++\n").unwrap_err();
    assert_eq!(e.position(), Some((2, 7)), "{e}");
    assert!(matches!(
        e,
        ProfileError::Parse {
            kind: ParseErrorKind::NotUtf8,
            ..
        }
    ));
    assert!(Profile::parse_bytes(Path::new(PATH), "ok é".as_bytes()).is_ok());
}

/// Foreign input: a Codex role's prompt key in a Markdown profile was read
/// and dropped without a word, leaving an empty prompt. With an empty body
/// it is the prompt; beside a body it is reported as not applied.
#[test]
fn developer_instructions_in_markdown_are_the_prompt_or_reported() {
    let (profile, warnings) =
        parse("+++\ndeveloper_instructions = \"Never push to main.\"\n+++\n").unwrap();
    assert_eq!(profile.system_prompt, "Never push to main.");
    assert!(warnings.is_empty(), "{warnings:?}");

    let (profile, warnings) =
        parse("+++\ndeveloper_instructions = \"Never push to main.\"\n+++\nYou review.").unwrap();
    assert_eq!(profile.system_prompt, "You review.");
    assert_eq!(
        warnings,
        [ProfileWarning::NotApplied {
            path: PATH.into(),
            key: "developer_instructions".into(),
        }]
    );
}

/// Foreign input: request options out of range loaded silently — a NaN
/// or infinite `temperature` was sent as `null` (nothing), `top_p = 7` and
/// a negative `temperature` reached the server, and `max_tokens = 0` made
/// every model call of the child fail. Each is an error at its key.
#[test]
fn request_options_out_of_range_are_errors_at_their_key() {
    for (text, said) in [
        (
            "+++\ntemperature = nan\n+++\n",
            "`temperature` must be a number from 0 to 2, not NaN",
        ),
        (
            "+++\ntemperature = inf\n+++\n",
            "`temperature` must be a number from 0 to 2, not inf",
        ),
        (
            "---\ntemperature: -3\n---\n",
            "`temperature` must be a number from 0 to 2, not -3",
        ),
        (
            "---\ntopP: 7\n---\n",
            "`topP` must be a number from 0 to 1, not 7",
        ),
        (
            "+++\nmax_tokens = 0\n+++\n",
            "`max_tokens` must be at least 1",
        ),
        (
            "---\nseed: 9223372036854775808\n---\n",
            "`seed` must be at most 9223372036854775807",
        ),
    ] {
        let e = parse_error(text);
        let ParseErrorKind::Invalid { message, .. } = &e.kind else {
            panic!("{e}")
        };
        assert!(message.starts_with(said), "{text:?}: {e}");
        assert_eq!(e.line, 2, "{text:?}: {e}");
    }
    let (profile, _) = parse("---\ntemperature: 0.2\ntop_p: 1\nmax_tokens: 1\n---\n").unwrap();
    assert_eq!(profile.options.temperature, Some(0.2));
}

/// Foreign input, widened: `permissionMode: plan` (read-only) and a Codex
/// role's `sandbox_mode = "read-only"` were kept but not applied, so the
/// agent ran with every tool its parent has, against "no key ever widens
/// what a profile may do". A restriction this runtime cannot enforce (or
/// a mode nobody documents) is an error at its key; a mode whose loss only
/// narrows or changes nothing is still warned as not applied.
#[test]
fn a_restricting_mode_is_refused_not_dropped() {
    for (text, said) in [
        (
            "---\npermissionMode: plan\n---\nYou plan.",
            "`permissionMode` is `plan`, a restriction",
        ),
        (
            "+++\npermission_mode = \"plan\"\n+++\nx",
            "`permission_mode` is `plan`, a restriction",
        ),
        (
            "---\npermissionMode: dontAsk\n---\nx",
            "`permissionMode` is `dontAsk`, a restriction",
        ),
        (
            "---\npermissionMode: Plan\n---\nx",
            "`permissionMode` is `Plan`, none of",
        ),
    ] {
        let e = parse_error(text);
        let ParseErrorKind::Invalid { message, .. } = &e.kind else {
            panic!("{text:?}: {e}")
        };
        assert!(message.starts_with(said), "{text:?}: {e}");
        assert_eq!(e.line, 2, "{text:?}: {e}");
    }
    for mode in ["default", "acceptEdits", "bypassPermissions"] {
        let (profile, warnings) = parse(&format!("---\npermissionMode: {mode}\n---\nx")).unwrap();
        assert_eq!(profile.permission_mode.as_deref(), Some(mode));
        assert_eq!(
            warnings,
            [ProfileWarning::NotApplied {
                path: PATH.into(),
                key: "permissionMode".into()
            }]
        );
    }
    let role = |mode: &str| {
        Profile::parse_codex_role(
            Path::new("/a/explorer.toml"),
            &format!("developer_instructions = \"x\"\nsandbox_mode = \"{mode}\"\n"),
        )
    };
    let e = role("read-only").unwrap_err();
    assert!(
        e.to_string()
            .contains("`sandbox_mode` is `read-only`, a restriction"),
        "{e}"
    );
    assert!(matches!(e, ProfileError::Parse { line: 2, .. }), "{e}");
    assert!(role("workspace-write").is_ok());
}

/// Foreign input: a Codex role's `[tools]` table (Codex's switches for its
/// own tools, not an allowlist) failed the whole role with "expected a
/// list of tool names", so a role of that name from another directory ran
/// instead. A switch turned on grants nothing here (warned as not
/// applied); one turned off is denied; a switch that is not a boolean is
/// an error at its value.
#[test]
fn a_codex_tools_table_loads_and_a_switch_turned_off_is_denied() {
    let path = Path::new("/p/.codex/agents/explorer.toml");
    let cases: [(&str, &str, &[&str], &[&str]); 3] = [
        (
            "a table",
            "[tools]\nweb_search = true\n",
            &[],
            &["not applied tools.web_search"],
        ),
        (
            "dotted keys",
            "tools.web_search = true\ntools.view_image = false\n",
            &["view_image"],
            &["not applied tools.web_search"],
        ),
        (
            "beside Codex's other tables",
            "[tools]\nview_image = false\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\n\
             [sandbox_workspace_write]\nnetwork_access = false\n",
            &["view_image"],
            &["unknown sandbox_workspace_write", "not applied mcp_servers"],
        ),
    ];
    for (what, tables, denied, said) in cases {
        let text =
            format!("name = \"explorer\"\ndeveloper_instructions = \"You explore.\"\n{tables}");
        let (profile, warnings) = Profile::parse_codex_role(path, &text)
            .unwrap_or_else(|e| panic!("{what}: should load: {e}"));
        assert_eq!(profile.system_prompt, "You explore.", "{what}");
        assert_eq!(profile.tools, None, "{what}: switches are not an allowlist");
        assert_eq!(profile.disallowed_tools, denied, "{what}");
        let got: Vec<String> = warnings
            .iter()
            .map(|w| match w {
                ProfileWarning::UnknownKey { key, .. } => format!("unknown {key}"),
                ProfileWarning::NotApplied { key, .. } => format!("not applied {key}"),
                other => panic!("{what}: {other}"),
            })
            .collect();
        assert_eq!(got, said, "{what}");
    }
    let e = Profile::parse_codex_role(
        path,
        "developer_instructions = \"x\"\n[tools]\nweb_search = \"yes\"\n",
    )
    .unwrap_err();
    assert!(matches!(e, ProfileError::Parse { line: 3, .. }), "{e}");
}

/// Foreign input, never widened: Codex spells web search off as a
/// top-level `web_search = "disabled"` now (the `[tools]` switch is the
/// older spelling). It was an unknown key, warned and dropped: the role
/// kept the host's web-search tool. `disabled` denies it; `cached` and
/// `live` turn Codex's own on and grant nothing here; anything else is an
/// error at its value (it may be a restriction).
#[test]
fn a_codex_web_search_disabled_denies_the_tool() {
    let path = Path::new("/p/.codex/agents/explorer.toml");
    let role = |value: &str| {
        Profile::parse_codex_role(
            path,
            &format!("developer_instructions = \"x\"\nweb_search = {value}\n"),
        )
    };
    let (profile, warnings) = role("\"disabled\"").unwrap();
    assert_eq!(profile.disallowed_tools, ["web_search"]);
    assert!(warnings.is_empty(), "{warnings:?}");
    for on in ["\"cached\"", "\"live\""] {
        let (profile, warnings) = role(on).unwrap();
        assert!(profile.disallowed_tools.is_empty(), "{on}");
        assert!(
            matches!(&warnings[..], [ProfileWarning::NotApplied { key, .. }] if key == "web_search"),
            "{on}: {warnings:?}"
        );
    }
    let e = role("\"off\"").unwrap_err();
    assert!(matches!(e, ProfileError::Parse { line: 2, .. }), "{e}");
    // Either spelling turned off denies it, once.
    let (profile, _) = Profile::parse_codex_role(
        path,
        "developer_instructions = \"x\"\nweb_search = \"disabled\"\n[tools]\nweb_search = false\n",
    )
    .unwrap();
    assert_eq!(profile.disallowed_tools, ["web_search"]);
}

/// Widened (foreign): a Claude Code `hooks: PreToolUse` guard (Claude
/// Code's own example: a script that blocks any Bash command but a
/// `SELECT`; exit code 2 blocks the call) was dropped with a warning, and
/// the agent ran `Bash` unguarded. A hook that can block a tool call is a
/// restriction this runtime cannot enforce: refused. One that cannot
/// (`PostToolUse`, `Stop`) loads, warned.
#[test]
fn a_hook_that_can_block_a_tool_call_is_refused_not_dropped() {
    // Kiro's `preToolUse` (thirty-eighth session: only warned).
    for event in ["PreToolUse", "PermissionRequest", "preToolUse"] {
        let text = format!(
            "---\nname: db-reader\ntools: Bash\nhooks:\n  {event}:\n    - matcher: \"Bash\"\n      hooks:\n        - type: command\n          command: ./scripts/validate-readonly-query.sh\n---\nSELECT only."
        );
        let e = parse(&text).expect_err(event);
        assert!(e.is_refusal(), "{event}: {e}");
        assert!(
            e.to_string().contains(&format!("`hooks` has `{event}`")),
            "{e}"
        );
    }
    let (_, warnings) = parse(
        "---\nhooks:\n  PostToolUse:\n    - matcher: Edit\n      hooks:\n        - type: command\n          command: lint\n---\nx",
    )
    .unwrap();
    assert!(
        matches!(&warnings[..], [ProfileWarning::NotApplied { key, .. }] if key == "hooks"),
        "{warnings:?}"
    );
}

/// Widened (foreign): a Codex role is a whole config layer, and its
/// `[features] shell_tool = false` takes Codex's shell away — read as an
/// unknown key and dropped, so the role kept the host's `shell`. Turned
/// off, it denies the tool; other features are Codex's own, not applied.
#[test]
fn a_codex_role_that_turns_its_shell_off_never_gets_the_hosts() {
    let (profile, warnings) = Profile::parse_codex_role(
        Path::new("/p/.codex/agents/reader.toml"),
        "name = \"reader\"\ndeveloper_instructions = \"Read and answer.\"\n\
         [features]\nshell_tool = false\nunified_exec = false\n",
    )
    .unwrap();
    assert_eq!(profile.disallowed_tools, ["shell"], "{warnings:?}");
    let said: Vec<String> = warnings.iter().map(ToString::to_string).collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("features.unified_exec"), "{said:?}");
}

/// Widened (foreign): `tools` written as a mapping in a Markdown profile
/// was read as a Codex role's switches — one turned on grants nothing, so
/// no allowlist was set and the sub-agent got every tool of the parent's
/// (`tools: {}` included, where `tools: []` gives none). Refused, naming
/// the key.
#[test]
fn a_tools_mapping_in_a_markdown_profile_is_refused_not_read_as_every_tool() {
    for text in [
        "---\ntools: {}\n---\nx",
        "---\ntools:\n  Read: true\n  Grep: true\n---\nx",
        "+++\n[tools]\nread = true\n+++\nx",
    ] {
        let e = parse_error(text);
        let ParseErrorKind::Invalid { message, .. } = &e.kind else {
            panic!("{text:?}: {e}")
        };
        assert!(message.starts_with("`tools` is a mapping"), "{text:?}: {e}");
        assert_eq!(e.line, 2, "{text:?}: {e}");
    }
}

/// Foreign input (review: the front-ends at their limits): a name pasted
/// with a character that shows as nothing (`reviewer` and a zero-width
/// space, a byte-order mark, a word joiner) loaded, was listed as
/// `reviewer` — and a call naming `reviewer` never selected it: every
/// delegation to it refused, "the named sub-agents are: reviewer​".
/// Refused at the load, naming why.
#[test]
fn a_name_holding_a_character_that_shows_as_nothing_is_refused() {
    for name in ["reviewer\u{200b}", "\u{feff}reviewer", "re\u{2060}viewer"] {
        let e = parse(&format!("+++\nname = \"{name}\"\n+++\nbody")).unwrap_err();
        assert!(
            matches!(e, ProfileError::InvalidName { name: ref n, .. } if n == name),
            "{e}"
        );
        assert!(e.to_string().contains("shows as nothing"), "{e}");
    }
}

/// Widened (foreign): a Codex role's `[features] web_search_request =
/// false` (or `web_search`, the alias Codex reads for it) switches its web
/// search off — read as not applied, the role kept the host's
/// `web_search`. Denied, as `[tools] web_search = false` is.
#[test]
fn a_codex_role_that_turns_its_web_search_off_never_gets_the_hosts() {
    for feature in ["web_search_request = false", "web_search = false"] {
        let (profile, warnings) = Profile::parse_codex_role(
            Path::new("/p/.codex/agents/reader.toml"),
            &format!("developer_instructions = \"Read.\"\n[features]\n{feature}\n"),
        )
        .unwrap();
        assert_eq!(
            profile.disallowed_tools,
            ["web_search"],
            "{feature}: {warnings:?}"
        );
        assert!(warnings.is_empty(), "{feature}: {warnings:?}");
    }
}

/// Widened (foreign): `agents: [worker]` (another tool's allowlist of the
/// sub-agents a profile may start) was not applied, so the sub-agent
/// could start any profile — where `tools: Agent(worker)`, the same limit
/// in Claude Code's spelling, starts none. A limit this runtime does not
/// apply starts none, warned, whatever its shape.
#[test]
fn an_agents_allowlist_starts_none() {
    for value in ["[worker]", "worker", "[]"] {
        let (profile, warnings) = parse(&format!("---\nagents: {value}\n---\nx")).unwrap();
        assert_eq!(profile.disallowed_tools, ["use_agent"], "{value}");
        let warned = warnings
            .iter()
            .any(|w| matches!(w, ProfileWarning::NotApplied { key, .. } if key == "agents"));
        assert_eq!(warned, value != "[]", "{value}: {warnings:?}");
    }
    // VS Code's `['*']`, any agent (thirty-eighth session: read as a list
    // of names, a coordinator written to start any agent started none).
    let (profile, warnings) = parse("---\nagents: ['*']\n---\nx").unwrap();
    assert!(profile.disallowed_tools.is_empty(), "{profile:?}");
    assert!(warnings.is_empty(), "{warnings:?}");
}

/// Widened (foreign): a YAML block opened with a comment (`--- # x`,
/// YAML's document start, which other tools' readers take) was no block:
/// in this runtime's own folders the file loaded with every tool, its
/// deny list the prompt's text, without a warning. It opens the block; a
/// fence followed by anything else is a misplaced fence.
#[test]
fn a_fence_with_a_comment_opens_the_block_and_one_with_more_is_refused() {
    let (profile, warnings) =
        parse("--- # read-only reviewer\ntools: read_file\ndisallowedTools: shell\n---\nReview.")
            .unwrap();
    assert_eq!(profile.tools, tools(&["read_file"]), "{warnings:?}");
    assert_eq!(profile.disallowed_tools, ["shell"]);
    assert_eq!(profile.system_prompt, "Review.");
    for first in ["---\u{200b}", "--- read-only"] {
        let e = parse_error(&format!("{first}\ntools: read_file\n---\nReview."));
        assert!(
            matches!(e.kind, ParseErrorKind::MisplacedFence { .. }),
            "{first:?}: {e}"
        );
    }
}

/// Foreign (review: foreign agent files): keys Codex documents for a role
/// refused the whole role — `[[skills.config]]` (read as a list of tool
/// names: "invalid type: map"), and `[tools.web_search]` written as a
/// table (Codex's newer form, with `enabled` and options): a role that
/// switched its search off so was skipped, and the earlier role of its
/// name, with search, ran. Skills as a table are not applied; a tool's
/// table is its switch (`enabled`, on without it); options of a tool left
/// on (`allowed_domains`) cannot be enforced here: refused (this
/// session's own review: read as not applied, the search was unlimited).
#[test]
fn codex_skills_and_a_tools_table_load_as_codex_writes_them() {
    let role = |text: &str| {
        Profile::parse_codex_role(
            Path::new("/p/.codex/agents/reader.toml"),
            &format!("developer_instructions = \"Read.\"\n{text}"),
        )
    };
    let (_, warnings) = role("[[skills.config]]\npath = \"x\"\nenabled = false\n").unwrap();
    assert!(
        matches!(&warnings[..], [ProfileWarning::NotApplied { key, .. }] if key == "skills"),
        "{warnings:?}"
    );
    let (off, _) = role("[tools.web_search]\nenabled = false\n").unwrap();
    assert_eq!(off.disallowed_tools, ["web_search"]);
    let (on, warnings) = role("[tools.web_search]\nenabled = true\n").unwrap();
    assert!(on.disallowed_tools.is_empty());
    assert!(
        matches!(&warnings[..], [ProfileWarning::NotApplied { key, .. }] if key == "tools.web_search"),
        "{warnings:?}"
    );
    let limited = role("[tools.web_search]\nallowed_domains = [\"docs.rs\"]\n").unwrap_err();
    assert!(limited.is_refusal(), "{limited}");
    assert!(
        limited.to_string().contains("`allowed_domains`"),
        "{limited}"
    );
    let (off, _) = role("[tools.web_search]\nenabled = false\nallowed_domains = []\n").unwrap();
    assert_eq!(off.disallowed_tools, ["web_search"]);
    let e = role("[tools.web_search]\nenabled = \"no\"\n").unwrap_err();
    assert!(e.to_string().contains("expected a boolean"), "{e}");
}

/// Widened (foreign: review of foreign agent files): a Codex role's
/// `approval_policy` as a table of the prompts it rejects (`granular`,
/// or the older `reject`) — Codex's counterpart of Claude Code's
/// `dontAsk`, which is refused — loaded, warned as not applied: under a
/// host whose approvals allow, the child did what its role rejects.
/// Refused as `dontAsk` is; a mode named by its string is not applied.
#[test]
fn a_codex_approval_policy_that_rejects_is_refused_not_dropped() {
    let role = |policy: &str| {
        Profile::parse_codex_role(
            Path::new("/p/.codex/agents/reader.toml"),
            &format!("developer_instructions = \"Read.\"\n{policy}\n"),
        )
    };
    for policy in [
        "approval_policy = { granular = { sandbox_approval = false, rules = false } }",
        "approval_policy = { reject = { sandbox_approval = true } }",
    ] {
        let e = role(policy).unwrap_err();
        assert!(e.is_refusal(), "{policy}: {e}");
        assert!(e.to_string().contains("cannot enforce"), "{policy}: {e}");
    }
    let (_, warnings) = role("approval_policy = \"on-request\"").unwrap();
    assert!(
        matches!(&warnings[..], [ProfileWarning::NotApplied { key, .. }] if key == "approval_policy"),
        "{warnings:?}"
    );
}
