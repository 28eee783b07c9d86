//! What narrows a profile stays narrowed: every restricting key of a
//! broken file hides the earlier profile of its name, and every setting
//! spelt two ways may be set once.

use super::*;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), text).unwrap();
}

/// Widened (foreign): a project file broken before its restriction (an
/// unknown escape in its quoted description) hides the user's
/// all-tools profile of its name only if its restricting key is read
/// leniently. Only `disabled` and `tools` were ever the sole restricting
/// key of a broken file in a test, so dropping any other entry of the
/// loader's restricting keys (`disallowedTools`, `permissionMode`,
/// `sandbox_mode`, `web_search`, `hooks`, `features`, …) left the user's
/// `reviewer` running with every tool where the project asked for less,
/// and nothing failed. One row per key, each alone in its file, each
/// file broken before it (a parse error, not a refusal).
#[test]
fn each_restricting_key_alone_in_a_broken_file_hides_the_earlier_profile() {
    let markdown = |key_line: &str| {
        format!(
            "---\nname: reviewer\ndescription: \"Use this agent when \\q x\"\n{key_line}\n---\nbody"
        )
    };
    // A Codex role broken by its first key (a number where the prompt
    // goes), the restricting key after it.
    let role = |key_lines: &str| format!("developer_instructions = 5\n{key_lines}\n");
    let cases: [(&str, &str, String); 45] = [
        ("disabled", "reviewer.md", markdown("disabled: true")),
        ("tools", "reviewer.md", markdown("tools: Read")),
        (
            "allowed-tools",
            "reviewer.md",
            markdown("allowed-tools: Read"),
        ),
        (
            "disallowedTools",
            "reviewer.md",
            markdown("disallowedTools: Bash"),
        ),
        (
            "disallowed-tools",
            "reviewer.md",
            markdown("disallowed-tools: Bash"),
        ),
        (
            "disallowed_tools",
            "reviewer.md",
            markdown("disallowed_tools: [Bash]"),
        ),
        (
            "permissionMode",
            "reviewer.md",
            markdown("permissionMode: plan"),
        ),
        (
            "permission_mode",
            "reviewer.md",
            markdown("permission_mode: plan"),
        ),
        ("hooks", "reviewer.md", markdown("hooks:\n  PreToolUse: []")),
        (
            "sandbox_mode",
            "reviewer.toml",
            role("sandbox_mode = \"read-only\""),
        ),
        (
            "web_search",
            "reviewer.toml",
            role("web_search = \"disabled\""),
        ),
        (
            "features",
            "reviewer.toml",
            role("[features]\nshell_tool = false"),
        ),
        (
            "mcp_servers",
            "reviewer.toml",
            role("[mcp_servers.github]\nenabled = false"),
        ),
        ("agents", "reviewer.toml", role("[agents]\nmax_depth = 1")),
        (
            "approval_policy",
            "reviewer.toml",
            role("[approval_policy.granular]\nsandbox_approval = false"),
        ),
        // Codex writes a hook as an array of tables: read as the table
        // `[hooks`, it named no restricting key.
        (
            "hooks (array of tables)",
            "reviewer.toml",
            role(
                "[[hooks.PreToolUse]]\nmatcher = \"shell\"\n\
                 [[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = \"./guard.sh\"",
            ),
        ),
        (
            "hooks (array of tables, +++)",
            "reviewer.md",
            "+++\ndescription = 5\n[[ hooks.PreToolUse ]]\nmatcher = \"shell\"\n+++\nbody"
                .to_owned(),
        ),
        // Caps: the user's profile ran with its larger one.
        ("maxTurns", "reviewer.md", markdown("maxTurns: 3")),
        (
            "max_iterations",
            "reviewer.toml",
            role("max_iterations = 3"),
        ),
        ("maxTokens", "reviewer.md", markdown("maxTokens: 100")),
        ("max_tokens", "reviewer.toml", role("max_tokens = 100")),
        // Other tools' restrictions and caps.
        ("profile", "reviewer.toml", role("profile = \"ro\"")),
        (
            "profiles",
            "reviewer.toml",
            role("[profiles.ro]\nsandbox_mode = \"read-only\""),
        ),
        (
            "permission",
            "reviewer.md",
            markdown("permission:\n  edit: deny"),
        ),
        ("readOnly", "reviewer.md", markdown("readOnly: true")),
        ("timeout_mins", "reviewer.md", markdown("timeout_mins: 5")),
        (
            "runConfig",
            "reviewer.md",
            markdown("runConfig:\n  max_turns: 3"),
        ),
        ("max_turns", "reviewer.md", markdown("max_turns: 3")),
        ("maxSteps", "reviewer.md", markdown("maxSteps: 3")),
        ("steps", "reviewer.md", markdown("steps: 3")),
        ("disable", "reviewer.md", markdown("disable: true")),
        ("mode", "reviewer.md", markdown("mode: primary")),
        // Cursor's, Augment's and Copilot's.
        ("readonly", "reviewer.md", markdown("readonly: true")),
        (
            "disabled_tools",
            "reviewer.md",
            markdown("disabled_tools: [shell]"),
        ),
        (
            "disable-model-invocation",
            "reviewer.md",
            markdown("disable-model-invocation: true"),
        ),
        ("infer", "reviewer.md", markdown("infer: false")),
        ("kind", "reviewer.md", markdown("kind: remote")),
        ("isolation", "reviewer.md", markdown("isolation: worktree")),
        (
            "approvalMode",
            "reviewer.md",
            markdown("approvalMode: plan"),
        ),
        (
            "toolsSettings",
            "reviewer.md",
            markdown("toolsSettings: {shell: {deniedCommands: [\"rm .*\"]}}"),
        ),
        // Antigravity's (thirty-ninth session).
        ("subagent", "reviewer.md", markdown("subagent: false")),
        ("inheritMcp", "reviewer.md", markdown("inheritMcp: false")),
        (
            "commandExecutionPolicy",
            "reviewer.md",
            markdown("commandExecutionPolicy: strict"),
        ),
        (
            "allowed_subagents",
            "reviewer.md",
            markdown("allowed_subagents: [worker]"),
        ),
        ("subagents", "reviewer.md", markdown("subagents: [worker]")),
    ];
    let mut widened = Vec::new();
    for (key, file, text) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let user = tmp.path().join("user");
        let project = tmp.path().join("project");
        write(&user, "reviewer.md", "every tool");
        write(&project, file, &text);
        let (profiles, warnings) = ProfileSet::load(&[user, project], &[]);
        // Broken before the key: skipped as a parse error, not refused
        // for what the key says (that path hides the name on its own).
        match warnings.as_slice() {
            [ProfileWarning::Skipped(e @ ProfileError::Parse { .. })] => {
                assert!(!e.is_refusal(), "{key}: broken, not refused: {e}");
            }
            other => panic!("{key}: one skipped file, got {other:?}"),
        }
        if let Some(kept) = profiles.get("reviewer") {
            widened.push(format!("{key}: {}", kept.source.display()));
        }
    }
    assert!(
        widened.is_empty(),
        "the user's all-tools profile ran in place of a broken restricting file:\n{}",
        widened.join("\n")
    );
}

/// Widened (foreign): a setting written two ways (`tools` and Agent
/// Skills' `allowed-tools`, `disallowed_tools` and `disallowed-tools`)
/// may be set once — a second spelling is a parse error at it, never the
/// later value silently replacing the first (`allowed-tools: Read,
/// shell` after `tools: Read` gave the profile the shell; an empty deny
/// list after a full one denied nothing). Only two of the pairs were
/// tested, so dropping any other spelling from the mapping of spellings
/// to settings passed. One row per pair, in both formats and both
/// orders.
#[test]
fn every_setting_spelt_two_ways_may_be_set_once() {
    // (first spelling, second spelling, YAML value, TOML value)
    let pairs = [
        ("tools", "allowed-tools", "Read", "[\"Read\"]"),
        ("disallowed_tools", "disallowed-tools", "Bash", "[\"Bash\"]"),
        ("disallowedTools", "disallowed-tools", "Bash", "[\"Bash\"]"),
        ("disallowedTools", "disallowed_tools", "Bash", "[\"Bash\"]"),
        ("disallowed_tools", "disabled_tools", "Bash", "[\"Bash\"]"),
        ("background", "is_background", "true", "true"),
        ("provider", "model_provider", "openai", "\"openai\""),
        ("max_iterations", "maxTurns", "5", "5"),
        ("max_tokens", "maxTokens", "100", "100"),
        ("top_p", "topP", "0.5", "0.5"),
        ("effort", "model_reasoning_effort", "high", "\"high\""),
        (
            "permission_mode",
            "permissionMode",
            "default",
            "\"default\"",
        ),
        ("initial_prompt", "initialPrompt", "hi", "\"hi\""),
    ];
    let mut wrong = Vec::new();
    for (a, b, yaml, toml) in pairs {
        for (first, second) in [(a, b), (b, a)] {
            // Both formats read keys as written: refused at the second,
            // named after the first. (TOML's reader handed them over in
            // sorted order: the refusal could name the second line's key
            // as the one "above", and point at the first line.)
            let yaml_refusal = [format!("`{second}` sets what `{first}` above already set")];
            let toml_refusal = yaml_refusal.clone();
            for (text, refusals, lines) in [
                (
                    format!("---\n{first}: {yaml}\n{second}: {yaml}\n---\n"),
                    &yaml_refusal[..],
                    &[3][..],
                ),
                (
                    format!("+++\n{first} = {toml}\n{second} = {toml}\n+++\n"),
                    &toml_refusal[..],
                    &[3][..],
                ),
            ] {
                match parse(&text) {
                    Err(e @ ProfileError::Parse { .. }) => {
                        let ProfileError::Parse { line, kind, .. } = &e else {
                            unreachable!()
                        };
                        let shown = e.to_string();
                        if !matches!(kind, ParseErrorKind::Invalid { .. })
                            || !lines.contains(line)
                            || !refusals.iter().any(|r| shown.contains(r.as_str()))
                        {
                            wrong.push(format!("{text:?}: {shown}"));
                        }
                    }
                    Ok(_) => wrong.push(format!("{text:?}: accepted")),
                    Err(e) => wrong.push(format!("{text:?}: {e}")),
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "a second spelling was not refused at its line:\n{}",
        wrong.join("\n")
    );
}

/// Widened (foreign): a file written as UTF-16 with its byte order mark
/// (Windows PowerShell's `>`, Notepad's "Unicode") is not UTF-8 and is
/// skipped — but read as UTF-8 by the lenient reader, its keys came out
/// with a NUL after each letter: its `tools: Read` was never seen, and
/// the user's all-tools `reviewer` ran in its place. Both byte orders.
#[test]
fn a_utf16_file_naming_a_restriction_hides_the_earlier_profile() {
    let text = "---\nname: reviewer\ntools: Read\n---\nbody";
    let little: Vec<u8> = [0xFF, 0xFE]
        .into_iter()
        .chain(text.encode_utf16().flat_map(u16::to_le_bytes))
        .collect();
    let big: Vec<u8> = [0xFE, 0xFF]
        .into_iter()
        .chain(text.encode_utf16().flat_map(u16::to_be_bytes))
        .collect();
    for (order, bytes) in [("little-endian", little), ("big-endian", big)] {
        let tmp = tempfile::tempdir().unwrap();
        let user = tmp.path().join("user");
        let project = tmp.path().join("project");
        write(&user, "reviewer.md", "every tool");
        std::fs::create_dir_all(&project).unwrap();
        // Named apart from its declared name: the name is read too.
        std::fs::write(project.join("security.md"), bytes).unwrap();
        let (profiles, warnings) = ProfileSet::load(&[user, project], &[]);
        assert!(
            matches!(
                warnings.as_slice(),
                [ProfileWarning::Skipped(ProfileError::Parse {
                    kind: ParseErrorKind::NotUtf8,
                    ..
                })]
            ),
            "{order}: {warnings:?}"
        );
        assert!(
            profiles.get("reviewer").is_none(),
            "{order}: the user's all-tools profile ran in place of the project's"
        );
    }
}

/// Widened (foreign): a file whose lines end with a lone CR (old Mac line
/// ends) is refused as a misplaced fence — but the lenient reader split
/// its lines at LF only: the whole file one line, its `tools: Read` was
/// never seen, and the user's all-tools `reviewer` ran in its place.
#[test]
fn a_file_with_lone_cr_line_ends_naming_a_restriction_hides_the_earlier_profile() {
    let tmp = tempfile::tempdir().unwrap();
    let user = tmp.path().join("user");
    let project = tmp.path().join("project");
    write(&user, "reviewer.md", "every tool");
    // Named apart from its declared name: the name is read too.
    write(
        &project,
        "security.md",
        "---\rname: reviewer\rtools: Read\r---\rread only",
    );
    let (profiles, warnings) = ProfileSet::load(&[user, project], &[]);
    assert!(
        matches!(
            warnings.as_slice(),
            [ProfileWarning::Skipped(ProfileError::Parse {
                kind: ParseErrorKind::MisplacedFence { .. },
                ..
            })]
        ),
        "{warnings:?}"
    );
    assert!(
        profiles.get("reviewer").is_none(),
        "the user's all-tools profile ran in place of the project's"
    );
}

/// Foreign input (review: agent files): UTF-16 written without its byte
/// order mark (`iconv -t UTF-16LE`) is ASCII with a NUL after each letter
/// — valid UTF-8 by its bytes. Read as no frontmatter, the whole file was
/// the prompt: its `disallowedTools: shell` dropped, every tool given, in
/// this runtime's own folders; in another tool's, skipped, but its name
/// never read, the earlier profile of that name kept. A NUL is refused
/// (at the first one), and the lenient reader decodes both byte orders.
///
/// A name in another script near its top (review: this session's diff):
/// no NUL beside its letters there, it was read as UTF-8 — the name never
/// held. Told by the side most NULs are on.
#[test]
fn a_utf16_file_without_its_mark_is_refused_and_still_hides_its_name() {
    for name in ["reviewer", "ревьюер", "审查员"] {
        let text = format!("---\nname: {name}\ndisallowedTools: shell\n---\nbody");
        let little: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
        let big: Vec<u8> = text.encode_utf16().flat_map(u16::to_be_bytes).collect();
        for (order, bytes) in [("little-endian", little), ("big-endian", big)] {
            let tmp = tempfile::tempdir().unwrap();
            let user = tmp.path().join("user");
            let project = tmp.path().join("project");
            write(&user, &format!("{name}.md"), "every tool");
            std::fs::create_dir_all(&project).unwrap();
            std::fs::write(project.join("security.md"), bytes).unwrap();
            let (profiles, warnings) = ProfileSet::load(&[user, project], &[]);
            assert!(
                matches!(
                    warnings.as_slice(),
                    // A NUL first, or a byte no UTF-8 has (a letter
                    // of another script) before it.
                    [ProfileWarning::Skipped(ProfileError::Parse {
                        kind: ParseErrorKind::NulByte | ParseErrorKind::NotUtf8,
                        ..
                    })]
                ),
                "{order}: {warnings:?}"
            );
            assert!(
                profiles.get("security").is_none(),
                "{order}: loaded with every tool"
            );
            assert!(
                profiles.get(name).is_none(),
                "{name}, {order}: the user's all-tools profile ran in place of the project's"
            );
        }
    }
}
