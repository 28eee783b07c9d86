//! Which files of a folder are read: sub-folders (Claude Code reads them),
//! and files without frontmatter in the other tools' folders.

use super::*;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), text).unwrap();
}

/// A project's agent kept in a sub-folder (`.claude/agents/review/`) was
/// never read: the user's agent of that name, with every tool, ran in its
/// place — the project asked for read-only and got everything, unsaid.
#[test]
fn a_profile_in_a_sub_folder_replaces_the_earlier_one_of_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    let user = tmp.path().join("user");
    let project = tmp.path().join("project");
    write(&user, "reviewer.md", "---\nname: reviewer\n---\nevery tool");
    write(
        &project.join("review"),
        "reviewer.md",
        "---\nname: reviewer\ntools: read_file\n---\nread only",
    );
    write(
        &project.join("a/b/c"),
        "deep.md",
        "---\nname: deep\n---\ndeep",
    );
    write(
        &project.join(".git"),
        "hidden.md",
        "---\nname: hidden\n---\nx",
    );
    let known = ["read_file".to_owned(), "shell".to_owned()];
    let (set, warnings) = ProfileSet::load(&[user, project.clone()], &known);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(set.names().collect::<Vec<_>>(), ["deep", "reviewer"]);
    let reviewer = set.get("reviewer").unwrap();
    assert_eq!(reviewer.source, project.join("review/reviewer.md"));
    assert_eq!(reviewer.tools, Some(vec!["read_file".to_owned()]));
}

/// A collection linked in as a folder (`ln -s …/agents
/// ~/.claude/agents/collection`, as one such README says) loaded nothing;
/// a folder linked into itself is read once, and a folder deeper than the
/// walk goes is said, not skipped in silence.
#[cfg(unix)]
#[test]
fn a_linked_folder_is_read_once_and_a_deep_one_is_said() {
    let tmp = tempfile::tempdir().unwrap();
    let collection = tmp.path().join("collection");
    write(&collection.join("core"), "a.md", "---\nname: a\n---\na");
    write(&collection, "b.md", "---\nname: b\n---\nb");
    let dir = tmp.path().join("agents");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&collection, dir.join("collection")).unwrap();
    std::os::unix::fs::symlink(&dir, dir.join("itself")).unwrap();
    let (set, warnings) = ProfileSet::load(std::slice::from_ref(&dir), &[]);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(set.names().collect::<Vec<_>>(), ["a", "b"]);

    let deep = dir.join("1/2/3/4/5/6/7/8/9");
    write(&deep, "far.md", "---\nname: far\n---\nfar");
    let (set, warnings) = ProfileSet::load(std::slice::from_ref(&dir), &[]);
    assert_eq!(set.names().collect::<Vec<_>>(), ["a", "b"]);
    assert!(
        matches!(&warnings[..], [ProfileWarning::UnreadableDir { path, message }]
            if path == &dir.join("1/2/3/4/5/6/7/8/9") && message.contains("more than 8 folders")),
        "{warnings:?}"
    );
}

/// A folder's `README.md` (thousands of repositories keep one in
/// `.claude/agents`), or a cloned collection's `CLAUDE.md`, became a
/// sub-agent with every tool, listed first: Claude Code reads no file
/// without frontmatter as an agent, and in its folders neither does this
/// runtime. In this runtime's own folders such a file is still a profile.
#[test]
fn a_file_without_frontmatter_is_no_agent_in_another_tools_folder() {
    let tmp = tempfile::tempdir().unwrap();
    // Factory's droids too (`ozturkbatu/droid-cli-starter`'s README,
    // thirty-eighth session: a sub-agent `README` with every tool).
    for folder in [
        ".claude/agents",
        ".codex/agents",
        ".agents/agents",
        ".factory/droids",
    ] {
        let dir = tmp.path().join(folder);
        write(&dir, "README.md", "# Agents\n\n| Agent | Purpose |\n");
        write(&dir, "reviewer.md", "---\nname: reviewer\n---\nreviews");
        let (set, warnings) = ProfileSet::load(std::slice::from_ref(&dir), &[]);
        assert_eq!(set.names().collect::<Vec<_>>(), ["reviewer"], "{folder}");
        match &warnings[..] {
            [
                ProfileWarning::Skipped(ProfileError::Parse {
                    path,
                    line: 1,
                    column: 1,
                    kind,
                }),
            ] => {
                assert_eq!(path, &dir.join("README.md"));
                assert_eq!(kind, &ParseErrorKind::NoFrontmatter);
            }
            other => panic!("{folder}: {other:?}"),
        }
    }
    let own = tmp.path().join(".subagents/agents");
    write(&own, "checker.md", "Checks facts.");
    let (set, warnings) = ProfileSet::load(&[own], &[]);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(set.get("checker").unwrap().system_prompt, "Checks facts.");
}

/// Review of this session's own change (sub-folders read): files were
/// read in path order and the first of a name kept, so
/// `archive/reviewer.md` (every tool) came before `reviewer.md` (read
/// only) and took its name — the same folder loaded wider than before.
/// A folder's own files come first, then each level down.
#[test]
fn a_folders_own_file_wins_over_one_deeper_of_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("agents");
    write(
        &dir,
        "reviewer.md",
        "---\nname: reviewer\ntools: read_file\n---\nread only",
    );
    write(
        &dir.join("archive"),
        "reviewer.md",
        "---\nname: reviewer\n---\nold",
    );
    let known = ["read_file".to_owned(), "shell".to_owned()];
    let (set, warnings) = ProfileSet::load(std::slice::from_ref(&dir), &known);
    let reviewer = set.get("reviewer").unwrap();
    assert_eq!(reviewer.source, dir.join("reviewer.md"));
    assert_eq!(reviewer.tools, Some(vec!["read_file".to_owned()]));
    assert!(
        matches!(&warnings[..], [ProfileWarning::DuplicateName { skipped, .. }]
            if skipped == &dir.join("archive/reviewer.md")),
        "{warnings:?}"
    );
}

/// Review of this session's own change: a cloned collection keeps its
/// commands beside its agents (`commands/ship.md`: a description and
/// `allowed-tools`, no `name`); read from a sub-folder, each became a
/// sub-agent — named after its file, every tool (`allowed-tools` only
/// warned as unknown). In a sub-folder of another tool's folder a file is
/// an agent only with a `name`, as Claude Code requires; and
/// `allowed-tools` anywhere is the allowlist it says it is.
#[test]
fn a_command_beside_the_agents_is_no_agent_and_allowed_tools_narrows() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(".claude/agents");
    write(
        &dir.join("collection/commands"),
        "ship.md",
        "---\ndescription: Ships it.\nallowed-tools: read_file\n---\nShip.",
    );
    write(
        &dir,
        "reader.md",
        "---\nname: reader\nallowed-tools: read_file\ndisallowed-tools: shell\n---\nReads.",
    );
    let known = ["read_file".to_owned(), "shell".to_owned()];
    let (set, warnings) = ProfileSet::load(std::slice::from_ref(&dir), &known);
    assert_eq!(set.names().collect::<Vec<_>>(), ["reader"]);
    let reader = set.get("reader").unwrap();
    assert_eq!(reader.tools, Some(vec!["read_file".to_owned()]));
    assert_eq!(reader.disallowed_tools, ["shell"]);
    assert!(
        matches!(&warnings[..], [ProfileWarning::Skipped(ProfileError::Parse { kind: ParseErrorKind::NoName, path, .. })]
            if path == &dir.join("collection/commands/ship.md")),
        "{warnings:?}"
    );
}

/// Replay (the same files, another machine): a folder reached by two
/// paths — its own, and a link a level down (`shared/reviewers ->
/// ../reviewers`) — was read under whichever `read_dir` listed first,
/// depth first. Listed first, the link put `reviewers/reviewer.md` (read
/// only) a level deeper, behind `zz-old/reviewer.md` (every tool), which
/// took the name: the same checkout loaded wider tools on one
/// filesystem than on another. Read breadth first, in path order, a
/// folder is read under its shallowest path.
#[cfg(unix)]
#[test]
fn a_folder_linked_deeper_is_read_under_its_own_path_whatever_the_listing_order() {
    let known = ["read_file".to_owned(), "shell".to_owned()];
    for link in ["shared", "aaa", "links", "zzz", "m", "0"] {
        for link_first in [true, false] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("agents");
            let linked = || {
                std::fs::create_dir_all(dir.join(link)).unwrap();
                std::os::unix::fs::symlink("../reviewers", dir.join(link).join("reviewers"))
                    .unwrap();
            };
            if link_first {
                std::fs::create_dir_all(dir.join("reviewers")).unwrap();
                linked();
            }
            let narrow = "---\nname: reviewer\ntools: read_file\n---\nread only";
            write(&dir.join("reviewers"), "reviewer.md", narrow);
            write(
                &dir.join("zz-old"),
                "reviewer.md",
                "---\nname: reviewer\n---\nevery tool",
            );
            if !link_first {
                linked();
            }
            let (set, _) = ProfileSet::load(std::slice::from_ref(&dir), &known);
            let reviewer = set.get("reviewer").unwrap();
            let case = format!("link `{link}`, made first: {link_first}");
            assert_eq!(reviewer.source, dir.join("reviewers/reviewer.md"), "{case}");
            assert_eq!(reviewer.tools, Some(vec!["read_file".to_owned()]), "{case}");
        }
    }
}

/// Foreign input (review: agent files): a file deeper in a folder that
/// does not load — OpenCode's `team/reviewer.md` (a nested name it gives
/// by path), a broken one beside `tools:` — took out the valid agent of
/// its name the folder had read first, shallower: `reviewer` was gone,
/// said nowhere. Had the deeper file loaded, it was a duplicate skipped;
/// not loading, it hides nothing the folder chose already.
#[test]
fn a_deeper_file_that_does_not_load_keeps_the_folders_own_agent_of_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    let opencode = tmp.path().join(".opencode/agents");
    write(
        &opencode,
        "reviewer.md",
        "---\ndescription: R\nmode: subagent\n---\nx",
    );
    write(
        &opencode.join("team"),
        "reviewer.md",
        "---\ndescription: T\nmode: subagent\n---\ny",
    );
    let ours = tmp.path().join("ours");
    write(
        &ours,
        "reviewer.md",
        "---\nname: reviewer\ntools: read_file\n---\nx",
    );
    write(
        &ours.join("old"),
        "reviewer.md",
        "---\nname: reviewer\ntools: 5\n---\n",
    );
    for dir in [opencode, ours] {
        let known = ["read_file".to_owned()];
        let (set, warnings) = ProfileSet::load(std::slice::from_ref(&dir), &known);
        let kept = set.get("reviewer").map(|p| p.source.clone());
        assert_eq!(kept, Some(dir.join("reviewer.md")), "{warnings:?}");
        assert!(
            matches!(warnings.as_slice(), [ProfileWarning::Skipped(_)]),
            "{warnings:?}"
        );
    }
}
