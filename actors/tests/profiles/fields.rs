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
