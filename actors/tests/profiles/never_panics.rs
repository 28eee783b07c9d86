//! The parser never panics, on frontmatter-ish text in any line ending.

use super::*;

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

/// A TOML file nested deep through dotted keys inside inline tables
/// (another tool's file, or one made to hurt): toml bounds the inline
/// tables (80) and each key's parts (80) apart, so 79 × 79 levels of
/// tables pass its guard, and reading — skipping an unknown key's value,
/// or dropping it — went down every level: on a 2 MiB thread, a stack
/// overflow, the whole process aborted. Refused as too deep, a clear
/// error naming the file.
#[test]
fn toml_nested_through_dotted_keys_in_inline_tables_is_refused_not_a_stack_overflow() {
    let key = vec!["k"; 79].join(".");
    let mut value = "1".to_owned();
    // The same nesting in broken text toml recovers from and builds
    // before it fails: a `]` in each inline table (a closer of the other
    // kind, where toml stays), a missing comma before each key.
    let (mut closer, mut comma) = ("1".to_owned(), "1".to_owned());
    for _ in 0..79 {
        value = format!("{{ {key} = {value} }}");
        closer = format!("{{ ] {key} = {closer} }}");
        comma = format!("{{ a = 1 {key} = {comma} }}");
    }
    for (path, text) in [
        (
            "/p/deep.md",
            format!("+++\nname = \"deep\"\nx = {value}\n+++\nbody"),
        ),
        (
            "/p/.codex/agents/deep.toml",
            format!("name = \"deep\"\nx = {value}\ndeveloper_instructions = \"d\"\n"),
        ),
        // Behind a string ending in four quotes (valid TOML: one sits
        // inside the closing three), which the first reading took for a
        // string's opening — the rest of the line unread.
        (
            "/p/.codex/agents/quoted.toml",
            format!(
                "name = \"deep\"\nx = {{ s = \"\"\"a\"\"\"\", y = {value} }}\ndeveloper_instructions = \"d\"\n"
            ),
        ),
        // Broken text, which toml still builds before it fails: a comment
        // ended by a lone CR, a string's backslash before its line's end
        // (a reading of our own took the next line for a comment, or for
        // the string).
        (
            "/p/.codex/agents/cr.toml",
            format!("name = \"deep\"\n#\rx = {value}\ndeveloper_instructions = \"d\"\n"),
        ),
        (
            "/p/.codex/agents/escape.toml",
            format!("name = \"deep\\\nx = {value}\ndeveloper_instructions = \"d\"\n"),
        ),
        (
            "/p/.codex/agents/closer.toml",
            format!("name = \"deep\"\nx = {closer}\ndeveloper_instructions = \"d\"\n"),
        ),
        (
            "/p/.codex/agents/comma.toml",
            format!("name = \"deep\"\nx = {comma}\ndeveloper_instructions = \"d\"\n"),
        ),
    ] {
        let on_a_small_stack = move || {
            let parsed = match path.ends_with(".toml") {
                true => Profile::parse_codex_role(Path::new(path), &text),
                false => Profile::parse_bytes(Path::new(path), text.as_bytes()),
            };
            // And loaded from a folder: a file that does not load is read
            // again, leniently, for the names it would give.
            let tmp = tempfile::tempdir().unwrap();
            let name = Path::new(path).file_name().unwrap();
            std::fs::write(tmp.path().join(name), &text).unwrap();
            let (set, warnings) = ProfileSet::load(&[tmp.path().to_path_buf()], &[]);
            (
                parsed.map(|_| ()).map_err(|e| e.to_string()),
                set.names().count(),
                warnings.len(),
            )
        };
        let (parsed, loaded, warned) = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(on_a_small_stack)
            .unwrap()
            .join()
            .expect("no panic");
        let error = parsed.expect_err(path);
        assert!(
            error.contains("nested more than 64 deep"),
            "{path}: {error}"
        );
        assert_eq!((loaded, warned), (0, 1), "{path}");
    }
}
