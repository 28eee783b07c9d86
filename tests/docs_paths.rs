//! The Rust examples of the README and `docs/` name items by the facade's
//! paths (`subagents::actors::…`), which a host that depends on
//! `subagents` alone can write. The pages compiled as doctests
//! (`docs_examples`) compile against the facade's own dependencies, which
//! are wider than a host's: `use subagents_actors::…` compiled there, and
//! a host copying `docs/openai.md` (its `Cargo.toml` names `subagents`
//! only) got `unresolved import subagents_actors`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

/// The internal crates' names as paths.
const INTERNAL: [&str; 3] = [
    "subagents_actors::",
    "subagents_messages::",
    "subagents_supervisor::",
];

#[test]
fn the_docs_examples_use_the_facades_paths() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    let mut wrong = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        let mut rust = false;
        for (n, line) in text.lines().enumerate() {
            if let Some(fence) = line.trim_start().strip_prefix("```") {
                rust = !rust && fence.trim().starts_with("rust");
                continue;
            }
            if rust && INTERNAL.iter().any(|name| line.contains(name)) {
                wrong.push(format!("{}:{}: {line}", page.display(), n + 1));
            }
        }
    }
    assert!(
        pages.len() > 5,
        "the pages were not found: {}",
        root.display()
    );
    assert!(
        wrong.is_empty(),
        "an example a host cannot compile on the facade:\n{}",
        wrong.join("\n")
    );
}

/// docs/architecture.md's layout is the module map the README points to:
/// eleven modules added by later splits were missing from it (a reader
/// looking for where one live thread per store id is held found no such
/// file). Every source file's module is named in its drawings — where it
/// is: in its crate's lines, under its module's (`hub/`) lines, and a
/// file of a module's own folder by its path there (`handle/death`). A
/// bare word anywhere passed: `hub/handle/death.rs` was "named" by
/// `book/death`, and 17 stems are shared by two to four files.
#[test]
fn the_layout_names_every_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let blocks = drawn_blocks(&page);
    let mut missing = Vec::new();
    for dir in [
        "src",
        "messages/src",
        "actors/src",
        "supervisor/src",
        "cluster/src",
    ] {
        let mut stack = vec![root.join(dir)];
        while let Some(at) = stack.pop() {
            for entry in std::fs::read_dir(&at).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if path.is_dir() {
                    if name != "tests" {
                        stack.push(path);
                    }
                    continue;
                }
                let Some(stem) = name.strip_suffix(".rs") else {
                    continue;
                };
                if ["mod", "lib", "main", "tests"].contains(&stem) {
                    continue;
                }
                let inner = path.strip_prefix(root.join(dir)).unwrap();
                let parts: Vec<String> = inner
                    .with_extension("")
                    .iter()
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect();
                if !is_drawn(&blocks, dir, &parts) {
                    missing.push(path.strip_prefix(root).unwrap().display().to_string());
                }
            }
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "docs/architecture.md's layout does not name, where it is:\n{}",
        missing.join("\n")
    );
}

/// The `text` drawings' lines, by crate (`actors/src/`) and module
/// (`hub/`, "" for the crate's own lines).
fn drawn_blocks(page: &str) -> std::collections::BTreeMap<(String, String), String> {
    let mut blocks = std::collections::BTreeMap::<(String, String), String>::new();
    let (mut in_drawing, mut krate, mut module) = (false, String::new(), String::new());
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            in_drawing = !in_drawing && line.trim() == "```text";
            continue;
        }
        if !in_drawing {
            continue;
        }
        let head = line.split_whitespace().next().unwrap_or("");
        if !line.starts_with(' ') && head.ends_with("src/") {
            krate = head.trim_end_matches('/').to_owned();
            module.clear();
        } else if line.starts_with("  ") && !line.starts_with("   ") {
            // `  hub/   …` opens a module's lines; `  defaults.rs …` the
            // crate's own again.
            module = head.strip_suffix('/').unwrap_or("").to_owned();
        }
        let block = blocks.entry((krate.clone(), module.clone())).or_default();
        block.push_str(line);
        block.push('\n');
    }
    blocks
}

/// `parts` (a file's path in its crate, `hub/handle/death`) is named in
/// its module's lines (its crate's, for a module drawn with none): the
/// file's stem as a word, or its path below the module for a file of a
/// module's own folder.
fn is_drawn(
    blocks: &std::collections::BTreeMap<(String, String), String>,
    krate: &str,
    parts: &[String],
) -> bool {
    let words = |text: &str, word: &str| {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|w| w == word)
    };
    // A module's own lines name its files outside the brackets: inside,
    // prose ("a call's prompt") named `call.rs` once its entry was gone.
    let outside_brackets = |text: &str| {
        let mut depth = 0usize;
        text.chars()
            .map(|c| {
                match c {
                    '(' => depth += 1,
                    ')' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                if depth > 0 { ' ' } else { c }
            })
            .collect::<String>()
    };
    let crate_text: String = blocks
        .iter()
        .filter(|((k, _), _)| k == krate)
        .map(|(_, text)| text.as_str())
        .collect();
    match parts {
        [stem] => words(&crate_text, stem),
        [module, rest @ ..] => {
            let own = blocks.get(&(krate.to_owned(), module.clone()));
            let text = own.map_or(crate_text.as_str(), String::as_str);
            match rest {
                [stem] if own.is_some() => words(&outside_brackets(text), stem),
                [stem] => words(text, stem),
                _ => text.contains(&rest.join("/")),
            }
        }
        [] => true,
    }
}
