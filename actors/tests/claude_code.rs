//! Claude Code agent files (`.claude/agents/*.md`) load with their meaning:
//! every key Claude Code documents is either applied, kept on the profile
//! for the host, or warned as not applied — none is an "unknown key".

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use subagents_actors::profile::{Profile, ProfileSet, ProfileWarning};

/// A file using every key Claude Code documents, with CRLF line ends and
/// a BOM, as editors on Windows write them.
fn every_key() -> String {
    let lines = [
        "---",
        "name: security-reviewer",
        "description: Reviews diffs for security issues. Use after every change.",
        "tools: Read, Grep, calculator",
        "disallowedTools: Bash, Write",
        "model: inherit",
        "maxTurns: 12",
        "background: true",
        "color: red",
        "effort: high",
        "permissionMode: acceptEdits",
        "memory: project",
        "initialPrompt: Review the last commit.",
        "skills:",
        "  - diff-reading",
        "  - threat-models",
        "hooks:",
        "  PostToolUse:",
        "    - matcher: Bash",
        "mcpServers:",
        "  github: {command: gh-mcp}",
        "---",
        "You are a security reviewer.",
    ];
    format!("\u{feff}{}\r\n", lines.join("\r\n"))
}

#[test]
fn every_claude_code_key_is_applied_kept_or_warned_never_unknown() {
    let (profile, warnings) =
        Profile::parse(Path::new("/p/.claude/agents/sec.md"), &every_key()).unwrap();
    assert_eq!(
        profile.name, "security-reviewer",
        "the frontmatter name wins"
    );
    assert_eq!(profile.system_prompt, "You are a security reviewer.");
    assert_eq!(profile.model, None, "inherit is the parent's model");
    assert_eq!(profile.max_iterations, Some(12));
    assert_eq!(
        profile.tools,
        Some(vec!["Read".into(), "Grep".into(), "calculator".into()])
    );
    assert_eq!(profile.disallowed_tools, ["Bash", "Write"]);
    assert!(profile.background);
    assert!(!profile.disabled);
    assert_eq!(profile.color.as_deref(), Some("red"));
    assert_eq!(profile.effort.as_deref(), Some("high"));
    assert_eq!(profile.permission_mode.as_deref(), Some("acceptEdits"));
    assert_eq!(profile.memory.as_deref(), Some("project"));
    assert_eq!(
        profile.initial_prompt.as_deref(),
        Some("Review the last commit.")
    );
    assert_eq!(profile.skills, ["diff-reading", "threat-models"]);

    let not_applied: Vec<&str> = warnings
        .iter()
        .map(|w| match w {
            ProfileWarning::NotApplied { key, path } => {
                assert_eq!(path, Path::new("/p/.claude/agents/sec.md"));
                key.as_str()
            }
            other => panic!("only not-applied warnings are expected: {other}"),
        })
        .collect();
    assert_eq!(
        not_applied,
        [
            "effort",
            "permissionMode",
            "memory",
            "initialPrompt",
            "skills",
            "hooks",
            "mcpServers",
        ]
    );
    assert_eq!(
        warnings[5].to_string(),
        "/p/.claude/agents/sec.md: `hooks` is not applied by this runtime (the profile loads without it)"
    );
}

#[test]
fn a_deny_list_reads_as_a_list_or_a_comma_string() {
    for text in [
        "---\ndisallowedTools: [Bash, Write]\n---\nx",
        "---\ndisallowedTools: Bash, Write, Bash\n---\nx",
        "+++\ndisallowed_tools = [\"Bash\", \"Write\"]\n+++\nx",
    ] {
        let (profile, warnings) = Profile::parse(Path::new("/a/x.md"), text).unwrap();
        assert_eq!(profile.disallowed_tools, ["Bash", "Write"], "{text}");
        assert!(warnings.is_empty(), "{warnings:?}");
    }
}

#[test]
fn a_wrong_type_is_an_error_at_its_value() {
    let e = Profile::parse(Path::new("/a/x.md"), "---\ndisabled: maybe\n---\nx").unwrap_err();
    assert!(e.to_string().contains("/a/x.md:2:"), "{e}");
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), text).unwrap();
}

#[test]
fn loading_delegates_by_the_frontmatter_name_and_warns_on_a_duplicate() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("agents");
    write(&dir, "a-reviewer.md", "---\nname: reviewer\n---\nfirst");
    write(&dir, "b-reviewer.md", "---\nname: reviewer\n---\nsecond");
    write(&dir, "helper.md", "no frontmatter");
    let (set, warnings) = ProfileSet::load(std::slice::from_ref(&dir), &[]);
    assert_eq!(set.names().collect::<Vec<_>>(), ["helper", "reviewer"]);
    assert_eq!(set.get("reviewer").unwrap().system_prompt, "first");
    assert_eq!(
        warnings,
        [ProfileWarning::DuplicateName {
            name: "reviewer".into(),
            kept: dir.join("a-reviewer.md"),
            skipped: dir.join("b-reviewer.md"),
        }]
    );
    let text = warnings[0].to_string();
    assert!(
        text.contains("a-reviewer.md") && text.contains("b-reviewer.md"),
        "the warning names both files: {text}"
    );
}

#[test]
fn a_disabled_profile_is_left_out_and_takes_its_name_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let user = tmp.path().join("user");
    let project = tmp.path().join("project");
    write(&user, "reviewer.md", "user reviewer");
    write(&user, "checker.md", "---\ndisabled: true\n---\nchecks");
    write(&project, "reviewer.md", "---\ndisabled: true\n---\nproject");
    let (set, warnings) = ProfileSet::load(&[user, project], &[]);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(set.is_empty(), "{:?}", set.names().collect::<Vec<_>>());
    let (profile, _) =
        Profile::parse(Path::new("/a/x.md"), "---\ndisabled: false\n---\nx").unwrap();
    assert!(!profile.disabled);
}

#[test]
fn a_skipped_duplicate_does_not_hide_an_earlier_directorys_profile() {
    let tmp = tempfile::tempdir().unwrap();
    let user = tmp.path().join("user");
    let project = tmp.path().join("project");
    write(&user, "reviewer.md", "user reviewer");
    write(&project, "reviewer.md", "project reviewer");
    write(&project, "zz.md", "---\nname: reviewer\n---\nduplicate");
    let (set, warnings) = ProfileSet::load(&[user, project.clone()], &[]);
    assert_eq!(
        set.get("reviewer").unwrap().source,
        project.join("reviewer.md")
    );
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].path(), project.join("zz.md"));
}

#[test]
fn foreign_tool_names_map_to_the_hosts_and_a_profile_left_without_tools_is_warned() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("agents");
    write(
        &dir,
        "reader.md",
        "---\ntools: Read, Grep\ndisallowedTools: Bash\n---\nreads",
    );
    write(&dir, "shell.md", "---\ntools: Bash, WebFetch\n---\nruns");
    write(&dir, "none.md", "---\ntools: []\n---\nthinks");
    let known = [
        "read_file".to_owned(),
        "grep".to_owned(),
        "shell".to_owned(),
    ];
    let names = [("Read", "read_file"), ("Grep", "grep"), ("Bash", "shell")]
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect();
    let (set, warnings) = ProfileSet::load_mapping(std::slice::from_ref(&dir), &known, &names);
    let reader = set.get("reader").unwrap();
    assert_eq!(reader.tools, Some(vec!["read_file".into(), "grep".into()]));
    assert_eq!(reader.disallowed_tools, ["shell"], "a deny list maps too");
    let shell = set.get("shell").unwrap();
    assert_eq!(shell.tools, Some(vec!["shell".into()]));
    assert_eq!(shell.unavailable_tools, ["WebFetch"]);
    // A deliberate empty list is not a lost one.
    assert!(set.get("none").unwrap().unavailable_tools.is_empty());
    assert_eq!(warnings.len(), 1, "{warnings:?}");

    // Without the mapping, every name is foreign: each is warned, and so
    // is the profile left with none.
    let (set, warnings) = ProfileSet::load(std::slice::from_ref(&dir), &known);
    assert_eq!(set.get("reader").unwrap().tools, Some(vec![]));
    let no_tools: Vec<&ProfileWarning> = warnings
        .iter()
        .filter(|w| matches!(w, ProfileWarning::NoTools { .. }))
        .collect();
    assert_eq!(
        no_tools,
        [
            &ProfileWarning::NoTools {
                path: dir.join("reader.md"),
                profile: "reader".into(),
                listed: vec!["Read".into(), "Grep".into()],
            },
            &ProfileWarning::NoTools {
                path: dir.join("shell.md"),
                profile: "shell".into(),
                listed: vec!["Bash".into(), "WebFetch".into()],
            },
        ]
    );
}

#[test]
fn codex_roles_load_beside_markdown_profiles_and_the_project_wins() {
    let tmp = tempfile::tempdir().unwrap();
    let user = tmp.path().join("home/.codex/agents");
    let project = tmp.path().join("proj/.codex/agents");
    write(
        &user,
        "explorer.toml",
        "name = \"explorer\"\ndescription = \"user explorer\"\ndeveloper_instructions = \"You explore.\"\n",
    );
    write(
        &project,
        "explorer.toml",
        "name = \"explorer\"\ndescription = \"project explorer\"\nmodel = \"gpt-5-mini\"\ndeveloper_instructions = \"You explore here.\"\n",
    );
    write(
        &project,
        "reviewer.md",
        "---\ndescription: reviews\n---\nYou review.",
    );
    write(
        &project,
        "broken.toml",
        "description = \"no instructions\"\n",
    );
    let (set, warnings) = ProfileSet::load(&[user, project.clone()], &[]);
    assert_eq!(set.names().collect::<Vec<_>>(), ["explorer", "reviewer"]);
    let explorer = set.get("explorer").unwrap();
    assert_eq!(explorer.description, "project explorer");
    assert_eq!(explorer.system_prompt, "You explore here.");
    assert_eq!(explorer.model.as_deref(), Some("gpt-5-mini"));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        matches!(&warnings[0], ProfileWarning::Skipped(e) if e.path() == project.join("broken.toml")),
        "{warnings:?}"
    );
    assert!(warnings[0].to_string().contains("developer_instructions"));
}

/// `tests/fixtures/agents/`: files we wrote, modelled on what real agent
/// files do — a closing line of many dashes, an unquoted colon in a
/// description (no YAML, read as text as Claude Code reads it), CRLF and
/// a BOM, a Codex role.
#[test]
fn the_fixture_directory_loads_as_real_files_would() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agents");
    let known = ["calculator".to_owned(), "read_file".to_owned()];
    let names = [("Read".to_owned(), "read_file".to_owned())]
        .into_iter()
        .collect();
    let (set, warnings) = ProfileSet::load_mapping(std::slice::from_ref(&dir), &known, &names);
    assert_eq!(
        set.names().collect::<Vec<_>>(),
        ["colon", "dashes", "explorer", "windows"]
    );
    assert_eq!(
        set.get("colon").unwrap().description,
        "Use this agent when: the user asks for a review"
    );
    assert_eq!(set.get("dashes").unwrap().system_prompt, "You check.");
    assert_eq!(
        set.get("dashes").unwrap().tools,
        Some(vec!["read_file".into()])
    );
    let windows = set.get("windows").unwrap();
    assert_eq!(windows.system_prompt, "You run on Windows.");
    assert_eq!(windows.disallowed_tools, ["Bash"]);
    assert_eq!(
        set.get("explorer").unwrap().system_prompt,
        "You explore the codebase."
    );
    let skipped: Vec<String> = warnings
        .iter()
        .filter_map(|w| match w {
            ProfileWarning::Skipped(e) => Some(e.to_string()),
            _ => None,
        })
        .collect();
    assert!(skipped.is_empty(), "{warnings:?}");
    // `Bash` is listed but not a host tool: left out (and denied anyway).
    assert!(warnings.iter().any(|w| matches!(
        w,
        ProfileWarning::UnknownTool { tool, .. } if tool == "Bash"
    )));
}

/// A Codex role that is not UTF-8 is skipped with the position of its
/// first bad byte, as a Markdown profile is (it was a read error with no
/// position).
#[test]
fn a_codex_role_that_is_not_utf8_names_its_first_bad_byte() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("worker.toml"),
        b"name = \"worker\"\ndeveloper_instructions = \"\xff\"\n",
    )
    .unwrap();
    let (set, warnings) = ProfileSet::load(&[tmp.path().to_path_buf()], &[]);
    assert_eq!(set.names().count(), 0);
    let [ProfileWarning::Skipped(e)] = warnings.as_slice() else {
        panic!("{warnings:?}");
    };
    assert_eq!(e.position(), Some((2, 27)), "{e}");
}
