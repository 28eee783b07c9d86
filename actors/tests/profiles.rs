//! Profile parsing (both frontmatter formats) and directory loading.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use subagents_actors::profile::{
    FrontmatterFormat, ParseErrorKind, Profile, ProfileError, ProfileSet, ProfileWarning,
};

const PATH: &str = "/agents/agent.md";

fn parse(text: &str) -> Result<(Profile, Vec<ProfileWarning>), ProfileError> {
    Profile::parse(Path::new(PATH), text)
}

fn profile(text: &str) -> Profile {
    match parse(text) {
        Ok((profile, _)) => profile,
        Err(e) => panic!("{text:?} should parse: {e}"),
    }
}

/// A parse error's fields, and its message.
struct ParseFailure {
    path: PathBuf,
    line: usize,
    column: usize,
    kind: ParseErrorKind,
    shown: String,
}

impl std::fmt::Display for ParseFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

fn parse_error(text: &str) -> ParseFailure {
    match parse(text) {
        Err(e @ ProfileError::Parse { .. }) => {
            let shown = e.to_string();
            let ProfileError::Parse {
                path,
                line,
                column,
                kind,
            } = e
            else {
                unreachable!()
            };
            ParseFailure {
                path,
                line,
                column,
                kind,
                shown,
            }
        }
        other => panic!("{text:?} should fail to parse, got {other:?}"),
    }
}

fn base() -> Profile {
    Profile {
        name: "agent".into(),
        description: String::new(),
        system_prompt: String::new(),
        model: None,
        provider: None,
        tools: None,
        max_iterations: None,
        source: PathBuf::from(PATH),
        ..Default::default()
    }
}

fn tools(names: &[&str]) -> Option<Vec<String>> {
    Some(names.iter().map(|n| (*n).to_owned()).collect())
}

/// Files that parse, and the profile each gives (`base()` plus changes).
#[test]
fn table_files_that_parse() {
    let cases: Vec<(&str, &str, Profile)> = vec![
        (
            "toml: openheim example",
            "+++\ndescription = \"Reviews code.\"\nmodel = \"claude-haiku-4-5\"\nprovider = \"anthropic\"\ntools = [\"read_file\"]\nmax_iterations = 6\n+++\nYou are a reviewer.\nCite file:line.\n",
            Profile {
                description: "Reviews code.".into(),
                system_prompt: "You are a reviewer.\nCite file:line.".into(),
                model: Some("claude-haiku-4-5".into()),
                provider: Some("anthropic".into()),
                tools: tools(&["read_file"]),
                max_iterations: Some(6),
                ..base()
            },
        ),
        (
            "yaml: .claude/agents example, tools as comma-separated string",
            "---\nname: agent\ndescription: Expert code reviewer. Use proactively.\ntools: Read, Grep, Glob, Bash\nmodel: sonnet\n---\n\nYou are a senior code reviewer.\n",
            Profile {
                description: "Expert code reviewer. Use proactively.".into(),
                system_prompt: "You are a senior code reviewer.".into(),
                model: Some("sonnet".into()),
                tools: tools(&["Read", "Grep", "Glob", "Bash"]),
                ..base()
            },
        ),
        (
            "yaml: tools as a list, provider and max_iterations",
            "---\ndescription: d\ntools:\n  - read_file\n  - grep\nprovider: openai\nmax_iterations: 3\n---\nbody",
            Profile {
                description: "d".into(),
                system_prompt: "body".into(),
                provider: Some("openai".into()),
                tools: tools(&["read_file", "grep"]),
                max_iterations: Some(3),
                ..base()
            },
        ),
        (
            "yaml: flow list, maxTurns, model inherit",
            "---\ntools: [a, b, a]\nmaxTurns: 2\nmodel: inherit\n---\nbody",
            Profile {
                system_prompt: "body".into(),
                tools: tools(&["a", "b"]),
                max_iterations: Some(2),
                ..base()
            },
        ),
        (
            "toml: tools as comma-separated string",
            "+++\ntools = \"read_file, grep ,, \"\n+++\nbody",
            Profile {
                system_prompt: "body".into(),
                tools: tools(&["read_file", "grep"]),
                ..base()
            },
        ),
        (
            "toml: empty tool list means no tools",
            "+++\ntools = []\n+++\nbody",
            Profile {
                system_prompt: "body".into(),
                tools: Some(vec![]),
                ..base()
            },
        ),
        (
            "toml: CRLF",
            "+++\r\ndescription = \"d\"\r\nmax_iterations = 2\r\n+++\r\nline one\r\nline two\r\n",
            Profile {
                description: "d".into(),
                system_prompt: "line one\nline two".into(),
                max_iterations: Some(2),
                ..base()
            },
        ),
        (
            "yaml: CRLF",
            "---\r\ndescription: d\r\ntools:\r\n  - a\r\n---\r\nline one\r\nline two\r\n",
            Profile {
                description: "d".into(),
                system_prompt: "line one\nline two".into(),
                tools: tools(&["a"]),
                ..base()
            },
        ),
        (
            "toml: BOM",
            "\u{feff}+++\ndescription = \"d\"\n+++\nbody",
            Profile {
                description: "d".into(),
                system_prompt: "body".into(),
                ..base()
            },
        ),
        (
            "yaml: BOM",
            "\u{feff}---\ndescription: d\n---\nbody",
            Profile {
                description: "d".into(),
                system_prompt: "body".into(),
                ..base()
            },
        ),
        (
            "toml: empty body",
            "+++\ndescription = \"d\"\n+++\n",
            Profile {
                description: "d".into(),
                ..base()
            },
        ),
        (
            "yaml: empty body, closing fence without newline",
            "---\ndescription: d\n---",
            Profile {
                description: "d".into(),
                ..base()
            },
        ),
        (
            "toml: unicode",
            "+++\ndescription = \"Prüft Code — 日本語 🦀\"\n+++\nDu bist ein Prüfer. 🦀\n",
            Profile {
                description: "Prüft Code — 日本語 🦀".into(),
                system_prompt: "Du bist ein Prüfer. 🦀".into(),
                ..base()
            },
        ),
        (
            "yaml: unicode",
            "---\ndescription: Prüft Code — 日本語 🦀\ntools: [lire_fichier, 読む]\n---\nDu bist ein Prüfer. 🦀\n",
            Profile {
                description: "Prüft Code — 日本語 🦀".into(),
                system_prompt: "Du bist ein Prüfer. 🦀".into(),
                tools: tools(&["lire_fichier", "読む"]),
                ..base()
            },
        ),
        (
            "yaml: folded multi-line description",
            "---\ndescription: >\n  Reviews code.\n  Use often.\n---\nbody",
            Profile {
                description: "Reviews code. Use often.".into(),
                system_prompt: "body".into(),
                ..base()
            },
        ),
        (
            "toml: empty frontmatter block",
            "+++\n+++\nbody",
            Profile {
                system_prompt: "body".into(),
                ..base()
            },
        ),
        (
            "yaml: comments-only frontmatter block",
            "---\n# nothing yet\n---\nbody",
            Profile {
                system_prompt: "body".into(),
                ..base()
            },
        ),
        (
            "yaml: null values are omitted",
            "---\ndescription:\ntools:\nmodel: ~\n---\nbody",
            Profile {
                system_prompt: "body".into(),
                ..base()
            },
        ),
        (
            "no frontmatter: the whole file is the prompt",
            "You are terse.\n\n---\n\nStill the prompt.\n",
            Profile {
                system_prompt: "You are terse.\n\n---\n\nStill the prompt.".into(),
                ..base()
            },
        ),
        (
            "no frontmatter: BOM and CRLF",
            "\u{feff}Hello\r\nworld\r\n",
            Profile {
                system_prompt: "Hello\nworld".into(),
                ..base()
            },
        ),
        ("empty file", "", base()),
        (
            "fence with trailing whitespace",
            "+++  \ndescription = \"d\"\n+++\t\nbody",
            Profile {
                description: "d".into(),
                system_prompt: "body".into(),
                ..base()
            },
        ),
        (
            "a fence inside the body is body text",
            "---\ndescription: d\n---\nabove\n---\nbelow",
            Profile {
                description: "d".into(),
                system_prompt: "above\n---\nbelow".into(),
                ..base()
            },
        ),
    ];
    for (what, text, want) in cases {
        let got = profile(text);
        assert_eq!(got, want, "{what}");
    }
}

/// Files that fail, with the file line and column of the error.
#[test]
fn table_files_that_fail() {
    use FrontmatterFormat::{Toml, Yaml};
    let unclosed = |format| ParseErrorKind::UnclosedFrontmatter { format };
    let cases: Vec<(&str, &str, usize, usize, Option<ParseErrorKind>)> = vec![
        (
            "toml: missing closing fence",
            "+++\ndescription = \"d\"\nbody\n",
            1,
            1,
            Some(unclosed(Toml)),
        ),
        (
            "yaml: missing closing fence",
            "---\ndescription: d\nbody\n",
            1,
            1,
            Some(unclosed(Yaml)),
        ),
        (
            "yaml: only an opening fence",
            "---",
            1,
            1,
            Some(unclosed(Yaml)),
        ),
        (
            "toml: closed by the other fence",
            "+++\n---\n",
            1,
            1,
            Some(unclosed(Toml)),
        ),
        (
            "toml: BOM, missing closing fence",
            "\u{feff}+++\na = 1\n",
            1,
            1,
            Some(unclosed(Toml)),
        ),
        (
            "toml: max_iterations a string",
            "+++\ndescription = \"d\"\nmax_iterations = \"x\"\n+++\nbody",
            3,
            18,
            None,
        ),
        (
            "toml: CRLF, max_iterations a string",
            "+++\r\ndescription = \"d\"\r\nmax_iterations = \"x\"\r\n+++\r\nbody",
            3,
            18,
            None,
        ),
        (
            "toml: unicode before the error",
            "+++\ndescription = \"日本語\"; max_iterations = \"x\"\n+++\n",
            2,
            20,
            None,
        ),
        (
            "toml: max_iterations zero",
            "+++\nmax_iterations = 0\n+++\n",
            2,
            18,
            None,
        ),
        (
            "toml: max_iterations negative",
            "+++\nmax_iterations = -1\n+++\n",
            2,
            18,
            None,
        ),
        (
            "toml: tools a number",
            "+++\n\ntools = 5\n+++\n",
            3,
            9,
            None,
        ),
        (
            "toml: tools with a number in it",
            "+++\ntools = [\"a\", 5]\n+++\n",
            2,
            15,
            None,
        ),
        (
            "toml: description not a string",
            "+++\ndescription = 1\n+++\n",
            2,
            15,
            None,
        ),
        (
            "toml: syntax error",
            "+++\ndescription = \"d\nmodel = \"m\"\n+++\n",
            2,
            17,
            None,
        ),
        (
            "toml: duplicate key",
            "+++\nmodel = \"a\"\nmodel = \"b\"\n+++\n",
            3,
            1,
            None,
        ),
        (
            "yaml: max_iterations a string",
            "---\ndescription: d\nmax_iterations: x\n---\nbody",
            3,
            17,
            None,
        ),
        (
            "yaml: CRLF, max_iterations a string",
            "---\r\ndescription: d\r\nmax_iterations: x\r\n---\r\nbody",
            3,
            17,
            None,
        ),
        (
            "yaml: max_iterations zero",
            "---\nmax_iterations: 0\n---\n",
            2,
            17,
            None,
        ),
        (
            "yaml: tools a mapping",
            "---\ntools:\n  a: b\n---\n",
            3,
            3,
            None,
        ),
        (
            "yaml: frontmatter a list",
            "---\n- a\n- b\n---\n",
            2,
            1,
            None,
        ),
        (
            "yaml: frontmatter a scalar",
            "---\njust text\n---\n",
            2,
            1,
            None,
        ),
        (
            "yaml: bad indentation",
            "---\ndescription: d\n  model: m\n---\n",
            3,
            8,
            None,
        ),
        (
            "yaml: duplicate key",
            "---\nmodel: a\nmodel: b\n---\n",
            3,
            1,
            None,
        ),
        // Two spellings of one setting: refused at the second, never the
        // later silently replacing the first (an empty deny list after a
        // full one, a cap of 50 after 2).
        (
            "yaml: the deny list spelt two ways",
            "---\ndisallowedTools: Bash, Write\ndisallowed_tools: []\n---\n",
            3,
            19,
            None,
        ),
        (
            "yaml: the cap spelt two ways",
            "---\nmax_iterations: 2\nmaxTurns: 50\n---\n",
            3,
            11,
            None,
        ),
        (
            "toml: the deny list spelt two ways",
            "+++\ndisallowedTools = [\"shell\"]\ndisallowed_tools = []\n+++\n",
            3,
            20,
            None,
        ),
    ];
    let path = PathBuf::from(PATH);
    let mut wrong = Vec::new();
    for (what, text, line, column, kind) in cases {
        let e = parse_error(text);
        if (e.line, e.column) != (line, column) {
            wrong.push(format!("{what}: want {line}:{column}, got {e}"));
            continue;
        }
        assert_eq!(e.path, path, "{what}");
        match kind {
            Some(kind) => assert_eq!(e.kind, kind, "{what}"),
            None => assert!(
                matches!(e.kind, ParseErrorKind::Invalid { .. }),
                "{what}: {e}"
            ),
        }
        // The message names the file and the position.
        assert!(
            e.to_string()
                .starts_with(&format!("{PATH}:{line}:{column}: ")),
            "{what}: {e}"
        );
    }
    assert!(wrong.is_empty(), "wrong positions:\n{}", wrong.join("\n"));
}

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

// ---- loading directories ----

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

// ---- the parser never panics ----

/// Frontmatter-ish lines, to reach deeper than random text does.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("+++".to_owned()),
        Just("---".to_owned()),
        Just("description = \"d\"".to_owned()),
        Just("description: d".to_owned()),
        Just("max_iterations = 4294967296".to_owned()),
        Just("max_iterations: -1".to_owned()),
        Just("tools = [\"a\", [1]]".to_owned()),
        Just("tools: [a, {b: c}]".to_owned()),
        Just("tools: &x [*x]".to_owned()),
        Just("  - item".to_owned()),
        Just("[table]".to_owned()),
        Just("? complex".to_owned()),
        Just("\u{feff}".to_owned()),
        "[a-z_]{0,12}[:=] ?[\\[{\"'a-z0-9,\\]} ]{0,16}",
        any::<String>(),
    ]
}

fn line_ending() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just("\n"), Just("\r\n"), Just("\r"), Just("")]
}

fn check_no_panic(text: &str) -> Result<(), TestCaseError> {
    match parse(text) {
        Ok((profile, _)) => prop_assert_eq!(profile.name, "agent"),
        Err(e @ ProfileError::Parse { .. }) => {
            let (line, _) = e.position().unwrap_or_default();
            prop_assert!(e.position().is_some_and(|(l, c)| l >= 1 && c >= 1));
            prop_assert!(
                line <= text.split('\n').count() + 1,
                "line {} past the end: {}",
                line,
                e
            );
        }
        Err(other) => prop_assert!(false, "unexpected error {other}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        check_no_panic(&text)?;
    }

    #[test]
    fn arbitrary_frontmatter_never_panics(
        fence in prop_oneof![Just("+++"), Just("---"), Just("\u{feff}+++"), Just("\u{feff}---")],
        lines in prop::collection::vec((fragment(), line_ending()), 0..12),
    ) {
        let mut text = String::from(fence);
        text.push('\n');
        for (line, end) in lines {
            text.push_str(&line);
            text.push_str(end);
        }
        check_no_panic(&text)?;
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = Profile::parse_bytes(Path::new(PATH), &bytes);
    }
}
