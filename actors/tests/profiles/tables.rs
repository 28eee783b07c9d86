//! Table tests: files that parse, and files that fail with the error they name.

use super::*;

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
            "yaml: null values are omitted, but a null `tools` is no tools (Claude Code's reading)",
            "---\ndescription:\ntools:\nmodel: ~\n---\nbody",
            Profile {
                system_prompt: "body".into(),
                tools: Some(Vec::new()),
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
        // A fence not on the first line as written was read as no
        // frontmatter at all: the whole file became the prompt, and its
        // deny list was silently dropped.
        (
            "yaml: a blank line before the fence",
            "\n---\ndisallowedTools: Bash\n---\nx",
            2,
            1,
            Some(ParseErrorKind::MisplacedFence { format: Yaml }),
        ),
        (
            "yaml: an indented fence",
            "  ---\ndisallowedTools: Bash\n---\nx",
            1,
            3,
            Some(ParseErrorKind::MisplacedFence { format: Yaml }),
        ),
        (
            "yaml: lines ended by a lone CR",
            "---\rtools: Read\r---\rx",
            1,
            1,
            Some(ParseErrorKind::MisplacedFence { format: Yaml }),
        ),
        (
            "toml: two BOMs",
            "\u{feff}\u{feff}+++\na = 1\n+++\n",
            1,
            2,
            Some(ParseErrorKind::MisplacedFence { format: Toml }),
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
            "yaml: tools a mapping, not of switches",
            "---\ntools:\n  a: b\n---\n",
            3,
            6,
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
