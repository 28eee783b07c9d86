//! Loading directories: precedence, skipped files, unknown tools and keys.

use super::*;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), text).unwrap();
}

fn known(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

#[test]
fn project_profiles_override_user_profiles() {
    let tmp = tempfile::tempdir().unwrap();
    let user = tmp.path().join("user");
    let project = tmp.path().join("project");
    write(
        &user,
        "reviewer.md",
        "+++\ndescription = \"user reviewer\"\n+++\nuser",
    );
    write(
        &user,
        "researcher.md",
        "---\ndescription: user researcher\n---\nresearch",
    );
    write(
        &project,
        "reviewer.md",
        "---\ndescription: project reviewer\n---\nproject",
    );
    write(&project, "checker.md", "Checks facts.");

    let (profiles, warnings) = ProfileSet::load(&[user.clone(), project.clone()], &[]);
    assert!(warnings.is_empty(), "{:?}", warnings);
    let set = profiles;
    assert_eq!(
        set.names().collect::<Vec<_>>(),
        ["checker", "researcher", "reviewer"]
    );
    assert_eq!(set.len(), 3);
    let reviewer = set.get("reviewer").unwrap();
    assert_eq!(reviewer.description, "project reviewer");
    assert_eq!(reviewer.system_prompt, "project");
    assert_eq!(reviewer.source, project.join("reviewer.md"));
    assert_eq!(
        set.get("researcher").unwrap().source,
        user.join("researcher.md")
    );
    assert_eq!(set.get("Reviewer"), None, "names are case-sensitive");

    // Reversed order: the user directory now comes last and wins.
    let set = ProfileSet::load(&[project, user], &[]).0;
    assert_eq!(set.get("reviewer").unwrap().description, "user reviewer");
}

#[test]
fn a_malformed_file_is_skipped_and_the_others_load() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("agents");
    write(&dir, "good.md", "+++\ndescription = \"fine\"\n+++\nok");
    write(
        &dir,
        "bad.md",
        "+++\ndescription = \"d\"\nmax_iterations = \"x\"\n+++\nbody",
    );
    write(&dir, "open.md", "---\ndescription: never closed\n");
    write(&dir, "also good.md", "has a space in its name");
    std::fs::write(dir.join("binary.md"), b"\xff\xfe").unwrap();

    let (profiles, warnings) = ProfileSet::load(std::slice::from_ref(&dir), &[]);
    assert_eq!(profiles.names().collect::<Vec<_>>(), ["good"]);
    let mut skipped: Vec<(String, Option<(usize, usize)>)> = warnings
        .iter()
        .map(|w| match w {
            ProfileWarning::Skipped(e) => (
                e.path().file_name().unwrap().to_string_lossy().into_owned(),
                e.position(),
            ),
            other => panic!("{other}"),
        })
        .collect();
    skipped.sort();
    assert_eq!(
        skipped,
        [
            ("also good.md".to_owned(), None),
            ("bad.md".to_owned(), Some((3, 18))),
            ("binary.md".to_owned(), Some((1, 1))),
            ("open.md".to_owned(), Some((1, 1))),
        ]
    );
    let text = warnings
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        text.contains(&format!("{}:3:18:", dir.join("bad.md").display())),
        "{text}"
    );
}

#[test]
fn a_skipped_project_file_leaves_the_user_profile() {
    let tmp = tempfile::tempdir().unwrap();
    let user = tmp.path().join("user");
    let project = tmp.path().join("project");
    write(&user, "reviewer.md", "user");
    write(&project, "reviewer.md", "+++\nbroken");
    let (profiles, warnings) = ProfileSet::load(&[user.clone(), project], &[]);
    assert_eq!(
        profiles.get("reviewer").unwrap().source,
        user.join("reviewer.md")
    );
    assert_eq!(warnings.len(), 1);
}

/// Widened (foreign): a project file refused for a restriction this
/// runtime cannot enforce (`permissionMode: plan`, a Codex role's
/// `sandbox_mode = "read-only"`) was skipped like a broken file, so the
/// user's profile of that name — every tool its parent has — ran in its
/// place: the project asked for read-only and got full access. A refused
/// file takes its name out (the declared one, else its file name), as
/// `disabled: true` does; a broken one still leaves the earlier profile.
#[test]
fn a_profile_refused_for_a_restriction_hides_the_earlier_one_of_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    let user = tmp.path().join("user");
    let project = tmp.path().join("project");
    write(&user, "reviewer.md", "user");
    write(&user, "auditor.md", "user");
    write(
        &user,
        "explorer.toml",
        "developer_instructions = \"user\"\n",
    );
    write(
        &project,
        "reviewer.md",
        "---\npermissionMode: plan\n---\nread only",
    );
    // Declared under another file name, the key before the name.
    write(
        &project,
        "audit.md",
        "---\npermissionMode: plan\nname: auditor\n---\nread only",
    );
    write(
        &project,
        "explorer.toml",
        "sandbox_mode = \"read-only\"\ndeveloper_instructions = \"read only\"\n",
    );
    let (profiles, warnings) = ProfileSet::load(&[user, project], &[]);
    for name in ["reviewer", "auditor", "explorer"] {
        assert!(
            profiles.get(name).is_none(),
            "{name}: {:?}",
            profiles.get(name).map(|p| &p.source)
        );
    }
    assert_eq!(warnings.len(), 3, "{warnings:?}");
}

/// Widened (foreign): a project file with a restriction *and* an
/// unrelated error before it (an unknown escape in its quoted
/// description) failed as broken, not refused — the parser stops at the
/// first error — so the user's profile of its name, every tool, ran in
/// its place; with the restriction first, the same file hid it. A broken
/// file that names a restricting key hides its name as a refused one does.
#[test]
fn a_restriction_after_an_unrelated_error_still_hides_the_earlier_profile() {
    let tmp = tempfile::tempdir().unwrap();
    let user = tmp.path().join("user");
    let project = tmp.path().join("project");
    write(&user, "reviewer.md", "every tool");
    write(&user, "auditor.toml", "developer_instructions = \"user\"\n");
    write(&user, "helper.md", "the user's helper");
    write(
        &project,
        "reviewer.md",
        "---\nname: reviewer\ndescription: \"Use this agent when \\q a diff is ready\"\ntools: Read, Grep\npermissionMode: plan\n---\nread only",
    );
    write(
        &project,
        "auditor.toml",
        "developer_instructions = 5\n[tools]\nshell = false\n",
    );
    // Broken, but restricting nothing: the documented fallback stands.
    write(
        &project,
        "helper.md",
        "---\ndescription: \"Use this agent when \\q stuck\"\n---\nhelp",
    );
    let (profiles, _) = ProfileSet::load(&[user, project], &[]);
    for name in ["reviewer", "auditor"] {
        assert!(
            profiles.get(name).is_none(),
            "{name}: {:?}",
            profiles.get(name).map(|p| &p.source)
        );
    }
    assert!(profiles.get("helper").is_some(), "the user's helper");
}

/// Widened (foreign): a broken file restricting a name other than its
/// file's (`security.md` declaring `name: reviewer`) hid only `security`:
/// the name it declares was read by parsing the broken text again, which
/// failed — the user's all-tools `reviewer` ran on. And a broken file
/// saying `disabled: true` hid nothing (`disabled` was no restricting
/// key), though switching a profile off is the strongest narrowing. A
/// comment after the declared name is not part of it.
#[test]
fn a_broken_file_hides_the_name_it_declares_and_one_it_disables() {
    let tmp = tempfile::tempdir().unwrap();
    let user = tmp.path().join("user");
    let project = tmp.path().join("project");
    write(&user, "reviewer.md", "every tool");
    write(&user, "auditor.md", "every tool too");
    write(
        &project,
        "security.md",
        "---\nname: reviewer\ndescription: \"Use this agent when \\q a diff is ready\"\ntools: Read\n---\nread only",
    );
    write(
        &project,
        "auditor.md",
        "---\ndescription: \"Use this agent when \\q never\"\ndisabled: true\n---\noff",
    );
    // Broken by a misplaced fence (a blank line first), declaring another
    // name; and an indented `name:` that belongs to a nested table.
    write(&user, "planner.md", "every tool");
    write(
        &project,
        "plans.md",
        "\n---\nhooks:\n  name: guard\nname: planner\ntools: Read\n---\nx",
    );
    // A comment after the declared name (read whole, it hid the name
    // `checker  # read-only copy`, and the user's `checker` ran).
    write(&user, "checker.md", "every tool");
    write(
        &project,
        "checks.md",
        "---\nname: checker  # read-only copy\ndescription: \"Use this agent when \\q x\"\ntools: Read\n---\ny",
    );
    write(&user, "linter.md", "every tool");
    write(
        &project,
        "lints.toml",
        "name = \"linter\" # read-only\ndeveloper_instructions =\nsandbox_mode = \"read-only\"\n",
    );
    let (profiles, _) = ProfileSet::load(&[user, project], &[]);
    for name in [
        "reviewer", "auditor", "security", "planner", "checker", "linter",
    ] {
        assert!(
            profiles.get(name).is_none(),
            "{name}: {:?}",
            profiles.get(name).map(|p| &p.source)
        );
    }
}

/// Widened (foreign): a refused file took its name out of earlier
/// directories but did not hold it in its own, so the next file of that
/// name in the same directory (`b-reviewer.md`; `reviewer.toml` beside
/// `reviewer.md`) loaded with every tool. `disabled: true` holds it.
#[test]
fn a_refused_file_holds_its_name_in_its_directory_as_disabled_does() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("agents");
    write(
        &dir,
        "a-reviewer.md",
        "---\nname: reviewer\npermissionMode: plan\n---\nread only",
    );
    write(
        &dir,
        "b-reviewer.md",
        "---\nname: reviewer\n---\nevery tool",
    );
    write(
        &dir,
        "explorer.md",
        "---\npermissionMode: plan\n---\nread only",
    );
    write(
        &dir,
        "explorer.toml",
        "developer_instructions = \"every tool\"\n",
    );
    let (profiles, _) = ProfileSet::load(std::slice::from_ref(&dir), &[]);
    for name in ["reviewer", "explorer"] {
        assert!(
            profiles.get(name).is_none(),
            "{name}: {:?}",
            profiles.get(name).map(|p| &p.source)
        );
    }
}

#[test]
fn unknown_tools_are_left_out_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("agents");
    write(
        &dir,
        "a.md",
        "+++\ntools = [\"read_file\", \"launch_missiles\", \"grep\"]\n+++\nbody",
    );
    write(&dir, "b.md", "---\ntools: Read, Grep\n---\nbody");
    write(&dir, "c.md", "no tools listed: inherits");

    let (profiles, warnings) = ProfileSet::load(
        std::slice::from_ref(&dir),
        &known(&["read_file", "grep", "echo"]),
    );
    let set = &profiles;
    assert_eq!(set.get("a").unwrap().tools, tools(&["read_file", "grep"]));
    assert_eq!(
        set.get("b").unwrap().tools,
        Some(vec![]),
        "all unknown: no tools, not all tools"
    );
    assert_eq!(set.get("c").unwrap().tools, None);
    assert_eq!(
        warnings,
        [
            ProfileWarning::UnknownTool {
                path: dir.join("a.md"),
                profile: "a".into(),
                tool: "launch_missiles".into(),
            },
            ProfileWarning::UnknownTool {
                path: dir.join("b.md"),
                profile: "b".into(),
                tool: "Read".into(),
            },
            ProfileWarning::UnknownTool {
                path: dir.join("b.md"),
                profile: "b".into(),
                tool: "Grep".into(),
            },
            ProfileWarning::NoTools {
                path: dir.join("b.md"),
                profile: "b".into(),
                listed: vec!["Read".into(), "Grep".into()],
            },
        ]
    );
}

#[test]
fn unknown_keys_are_reported_by_load() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("agents");
    write(&dir, "a.md", "---\nicon: star\n---\nbody");
    let (profiles, warnings) = ProfileSet::load(std::slice::from_ref(&dir), &[]);
    assert_eq!(profiles.len(), 1);
    assert_eq!(
        warnings,
        [ProfileWarning::UnknownKey {
            path: dir.join("a.md"),
            key: "icon".into(),
        }]
    );
}

#[test]
fn missing_directories_are_fine_and_other_files_are_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("agents");
    write(&dir, "notes.txt", "not a profile");
    write(&dir, "README", "not a profile");
    write(&dir, "upper.MD", "extension is case-sensitive");
    write(&dir, ".hidden.md", "hidden");
    std::fs::create_dir_all(dir.join("sub.md")).unwrap();
    write(&dir, "real.md", "a profile");

    let (profiles, warnings) = ProfileSet::load(
        &[
            tmp.path().join("missing"),
            dir,
            tmp.path().join("also-missing"),
        ],
        &[],
    );
    assert!(warnings.is_empty(), "{:?}", warnings);
    assert_eq!(profiles.names().collect::<Vec<_>>(), ["real"]);

    let (empty, empty_warnings) = ProfileSet::load(&[], &[]);
    assert!(empty.is_empty());
    assert!(empty_warnings.is_empty());
    assert_eq!(empty.name_schema(), None);
}

#[test]
fn an_oversized_file_is_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("agents");
    let big = "x".repeat(
        usize::try_from(subagents_actors::profile::ProfileSet::MAX_FILE_BYTES).unwrap() + 1,
    );
    write(&dir, "big.md", &big);
    let (profiles, warnings) = ProfileSet::load(std::slice::from_ref(&dir), &[]);
    assert!(profiles.is_empty());
    assert!(matches!(
        warnings.as_slice(),
        [ProfileWarning::Skipped(ProfileError::Read { .. })]
    ));
}

#[test]
fn the_loaded_set_renders_for_a_tool_description() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("agents");
    write(
        &dir,
        "researcher.md",
        "+++\ndescription = \"Finds things out.\"\n+++\nbody",
    );
    write(
        &dir,
        "checker.md",
        "---\ndescription: >\n  Checks\n  facts.\n---\nbody",
    );
    let set = ProfileSet::load(std::slice::from_ref(&dir), &[]).0;
    assert_eq!(
        set.describe(),
        "- checker: Checks facts.\n- researcher: Finds things out."
    );
    assert_eq!(
        set.name_schema(),
        Some(serde_json::json!({"type": "string", "enum": ["checker", "researcher"]}))
    );
    let names: Vec<&str> = set.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["checker", "researcher"]);
}

/// Foreign input, a deny list: an entry that names no host tool denied
/// nothing and nothing was said (`disallowedTools: Bash` where the host's
/// shell is `shell`: the child got the shell), and Claude Code's
/// `Bash(rm:*)` (deny `rm` in Bash) matched nothing at all. A pattern now
/// denies its whole tool (only ever narrower), a mapping is found whatever
/// the case, and an entry that still names no tool is warned about.
#[test]
fn a_deny_entry_that_denies_nothing_is_said() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("agents");
    write(
        &dir,
        "a.md",
        "---\ndisallowedTools: Bash(rm:*), write\n---\nbody",
    );
    write(
        &dir,
        "b.md",
        "---\ndisallowedTools: Bash, WebSearch\n---\nbody",
    );
    let mapping: std::collections::BTreeMap<String, String> =
        [("Bash", "shell"), ("Write", "write_file")]
            .into_iter()
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect();
    let known = known(&["shell", "write_file", "read_file"]);

    let (profiles, warnings) =
        ProfileSet::load_mapping(std::slice::from_ref(&dir), &known, &mapping);
    assert_eq!(
        profiles.get("a").unwrap().disallowed_tools,
        ["shell", "write_file"]
    );
    assert_eq!(
        profiles.get("b").unwrap().disallowed_tools,
        ["shell", "WebSearch"]
    );
    assert_eq!(
        warnings,
        [ProfileWarning::UnknownDeniedTool {
            path: dir.join("b.md"),
            profile: "b".into(),
            tool: "WebSearch".into(),
        }]
    );

    // Without a mapping, nothing here is `Bash`: said, not silent.
    let (_, warnings) = ProfileSet::load(std::slice::from_ref(&dir), &known);
    let denied: Vec<&str> = warnings
        .iter()
        .filter_map(|w| match w {
            ProfileWarning::UnknownDeniedTool { tool, .. } => Some(tool.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(denied, ["Bash", "write", "Bash", "WebSearch"]);
}

/// Foreign input: a profile that is a dangling symbolic link, or a loop,
/// was skipped without a word, so a profile of the same name from another
/// directory ran in its place unnoticed. It is a skipped file, named.
#[cfg(unix)]
#[test]
fn a_profile_link_to_nothing_is_skipped_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("agents");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(dir.join("missing.md"), dir.join("reviewer.md")).unwrap();
    std::os::unix::fs::symlink(dir.join("loop.md"), dir.join("loop.md")).unwrap();
    let (profiles, warnings) = ProfileSet::load(std::slice::from_ref(&dir), &known(&[]));
    assert!(profiles.is_empty());
    let skipped: Vec<&Path> = warnings
        .iter()
        .filter_map(|w| match w {
            ProfileWarning::Skipped(e) => Some(e.path()),
            _ => None,
        })
        .collect();
    assert_eq!(
        skipped,
        [dir.join("loop.md"), dir.join("reviewer.md")],
        "{warnings:?}"
    );
}

/// Widened (foreign): Claude Code denies a whole MCP server with
/// `mcp__github` or `mcp__github__*`. Matched as one tool's name, the
/// entry denied nothing (warned), and the sub-agent kept every tool of
/// that server. It denies each of the server's tools the host has.
#[test]
fn an_mcp_server_wide_deny_denies_each_of_its_tools() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("agents");
    write(
        &dir,
        "reader.md",
        "---\nname: reader\ndisallowedTools: mcp__github__*, mcp__slack\n---\nread",
    );
    let (profiles, warnings) = ProfileSet::load(
        std::slice::from_ref(&dir),
        &known(&[
            "read_file",
            "mcp__github__create_issue",
            "mcp__github__list_prs",
            "mcp__slack__post",
            "mcp__slackware__x",
        ]),
    );
    assert_eq!(
        profiles.get("reader").unwrap().disallowed_tools,
        [
            "mcp__github__create_issue",
            "mcp__github__list_prs",
            "mcp__github__*",
            "mcp__slack__post",
            "mcp__slack"
        ],
        "{warnings:?}"
    );
    assert!(warnings.is_empty(), "{warnings:?}");
}

/// A deny entry in another case than the host's tool denies it where a
/// child starts (`a_deny_entry_in_another_case_or_scoped_still_denies`):
/// not warned as denying nothing; nor is Claude Code's spawn tool, which
/// takes delegation away.
#[test]
fn a_deny_entry_in_another_case_or_naming_claude_codes_agent_is_not_warned() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    write(
        &dir,
        "a.md",
        "---\nname: a\ndisallowedTools: Bash(rm:*), Write, Agent, Task\n---\nA.",
    );
    let (profiles, warnings) =
        ProfileSet::load(std::slice::from_ref(&dir), &known(&["bash", "write"]));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(profiles.get("a").is_some());
}

/// The peak resident memory of this process so far (Linux), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// Foreign input: a 512 MiB file in an agents folder (a transcript dump)
/// whose head names a restricting key. Refused for its size, it was then
/// read whole — twice — to look for that key and its name. Its head is
/// read (its settings come first): the earlier directory's profile of
/// its name is still held back, and the process's peak memory barely
/// moves.
#[test]
fn a_huge_file_is_looked_at_only_as_far_as_a_profile_goes() {
    let tmp = tempfile::tempdir().unwrap();
    let first = tmp.path().join("first");
    let second = tmp.path().join("second");
    write(&first, "helper.md", "---\nname: helper\n---\nI help.");
    write(
        &second,
        "helper.md",
        "---\nname: helper\ntools: Read\n---\n",
    );
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(second.join("helper.md"))
        .unwrap();
    file.set_len(512 << 20).unwrap();
    let before = peak_rss();
    let (profiles, warnings) = ProfileSet::load(&[first, second], &[]);
    let grew = peak_rss().saturating_sub(before);
    assert!(profiles.is_empty(), "the earlier `helper` is held back");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(grew < 64 << 20, "the peak grew by {} MiB", grew >> 20);
}

/// This session's own review: `mcp__*` read as the rule for an MCP
/// server named `*` matched none of the host's tools, and the load
/// warned that the rule denied nothing — where it denies every MCP tool.
/// Turned into the tools it covers, the rule kept, no warning.
#[test]
fn a_wildcard_deny_rule_is_the_tools_it_covers_not_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    write(
        &dir,
        "a.md",
        "---\nname: a\ndisallowedTools: [\"mcp__*\"]\n---\nx",
    );
    let known = known(&["read_file", "mcp__github__merge", "mcp__docs__search"]);
    let (profiles, warnings) = ProfileSet::load(std::slice::from_ref(&dir), &known);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        profiles.get("a").unwrap().disallowed_tools,
        ["mcp__github__merge", "mcp__docs__search", "mcp__*"]
    );
}
