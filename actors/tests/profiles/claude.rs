//! Claude Code's own spellings in an allowlist, read as it reads them.

use super::*;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), text).unwrap();
}

/// Foreign (a rule for a whole MCP server in `tools`): `mcp__bigquery__*`
/// or `mcp__bigquery` grants every tool of that server in Claude Code; it
/// was looked up as one tool's name — unknown, dropped with a warning: the
/// data analyst ran without its server (or, listing only it, was refused
/// as having no tools). The deny list already read such a rule so.
#[test]
fn a_rule_for_a_whole_mcp_server_lists_its_tools() {
    let known: Vec<String> = [
        "read_file",
        "mcp__bigquery__query",
        "mcp__bigquery__list_tables",
        "mcp__other__x",
    ]
    .map(String::from)
    .to_vec();
    let mapping = std::collections::BTreeMap::from([("Read".to_owned(), "read_file".to_owned())]);
    for tools in ["[mcp__bigquery__*, Read]", "mcp__bigquery, Read"] {
        let tmp = tempfile::tempdir().unwrap();
        write(
            tmp.path(),
            "analyst.md",
            &format!("---\nname: analyst\ntools: {tools}\n---\nx"),
        );
        let (set, warnings) =
            ProfileSet::load_mapping(&[tmp.path().to_path_buf()], &known, &mapping);
        assert!(warnings.is_empty(), "{tools}: {warnings:?}");
        assert_eq!(
            set.get("analyst").unwrap().tools.as_deref(),
            Some(
                &[
                    "mcp__bigquery__query".to_owned(),
                    "mcp__bigquery__list_tables".to_owned(),
                    "read_file".to_owned()
                ][..]
            ),
            "{tools}"
        );
    }
    // A server with no tool here is unknown, as before.
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "analyst.md",
        "---\nname: analyst\ntools: mcp__absent__*, Read\n---\nx",
    );
    let (set, warnings) = ProfileSet::load_mapping(&[tmp.path().to_path_buf()], &known, &mapping);
    assert_eq!(
        set.get("analyst").unwrap().tools.as_deref(),
        Some(&["read_file".to_owned()][..])
    );
    assert!(
        matches!(&warnings[..], [ProfileWarning::UnknownTool { tool, .. }] if tool == "mcp__absent__*"),
        "{warnings:?}"
    );
}

/// Foreign (a Codex role with a dotted key, as Codex's `-c` writes it): a
/// broken project role that switched a tool off with
/// `tools.web_search = false` was not seen to restrict anything (the
/// line's key read whole, `tools.web_search`), so the user's role of its
/// name — with that tool — ran in its place. A `[tools]` table or a
/// top-level `tools =` line already hid it.
#[test]
fn a_broken_role_switching_a_tool_off_by_a_dotted_key_hides_the_earlier_one() {
    let tmp = tempfile::tempdir().unwrap();
    let user = tmp.path().join("user");
    let project = tmp.path().join("project");
    write(
        &user,
        "reviewer.toml",
        "developer_instructions = \"user\"\n",
    );
    // Broken: no `developer_instructions`.
    write(
        &project,
        "reviewer.toml",
        "tools.web_search = false\ninstructions = \"x\"\n",
    );
    let (profiles, _) = ProfileSet::load(&[user, project], &[]);
    assert!(
        profiles.get("reviewer").is_none(),
        "{:?}",
        profiles.get("reviewer").map(|p| &p.source)
    );
}

/// Foreign (review: foreign agent files): Claude Code's own `/agents`
/// generator writes a description on one line with `Examples:` and
/// `user: "…"` in it — no YAML ("mapping values are not allowed"), which
/// Claude Code's reader takes as text. The file was skipped as broken (the
/// user's profile of its name, every tool, ran in its place). A plain
/// value holding `: ` is read as text: the file loads with its tools; a
/// value YAML reads another way (quoted, a list) is left as it is.
#[test]
fn a_description_as_claude_codes_generator_writes_it_loads() {
    let text = "---\n\
        name: svelte-quality-checker\n\
        description: Use this agent when you need to review Svelte code. Examples:\\n\\n<example>\\nContext: User has just written a component.\\nuser: \"Can you check it?\"\\nassistant: \"I'll use the svelte-quality-checker agent\"\\n</example>\n\
        tools: Read, Grep\r\n\
        model: sonnet\n\
        color: blue\n\
        ---\n\
        You review Svelte code.";
    let (profile, warnings) = Profile::parse(Path::new("/p/.claude/agents/svelte.md"), text)
        .expect("loads as Claude Code loads it");
    assert_eq!(profile.name, "svelte-quality-checker");
    assert!(
        profile.description.starts_with("Use this agent when you need to review Svelte code. Examples:\\n\\n<example>\\nContext: User has"),
        "{}",
        profile.description
    );
    assert!(
        profile.description.ends_with("</example>"),
        "{}",
        profile.description
    );
    assert_eq!(
        profile.tools,
        Some(vec!["Read".to_owned(), "Grep".to_owned()])
    );
    assert!(
        warnings.iter().all(|w| matches!(
            w,
            ProfileWarning::NotApplied { .. } | ProfileWarning::UnknownKey { .. }
        )),
        "{warnings:?}"
    );
    // A comment stays one (this session's own review: quoted into the
    // value, `tools` listed the words of the comment, `*` among them).
    for comment in ["# read-only: no Write or Bash", "# TODO: * later"] {
        let text = format!(
            "---\nname: r\ndescription: Reviews code. Examples: user: \"review my PR\"\ntools: Read, Grep  {comment}\n---\nx"
        );
        let (profile, _) = Profile::parse(Path::new("/p/.claude/agents/r.md"), &text).unwrap();
        assert_eq!(
            profile.tools,
            Some(vec!["Read".to_owned(), "Grep".to_owned()]),
            "{comment}"
        );
        assert_eq!(
            profile.description,
            "Reviews code. Examples: user: \"review my PR\""
        );
    }
    // Another error is reported as it was.
    let broken = Profile::parse(
        Path::new("/p/.claude/agents/x.md"),
        "---\nname: x\ndescription: \"bad \\q\"\ntools: a: b\n---\nx",
    );
    assert!(broken.is_err(), "{broken:?}");
}
