//! Bad input: a malformed profile, an unknown tool, a recursion attempt.

use super::*;

#[test]
fn malformed_profile() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("good.md"),
        "+++\ndescription = \"fine\"\n+++\nYou are fine.",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("bad.md"),
        "+++\ndescription = \"unterminated\nmax_iterations = 3\n+++\nbody",
    )
    .unwrap();
    let (profiles, warnings) = ProfileSet::load(&[dir.path().to_path_buf()], &[]);
    assert_eq!(profiles.names().collect::<Vec<_>>(), ["good"]);
    let skipped = warnings
        .iter()
        .find_map(|w| match w {
            ProfileWarning::Skipped(e) => Some(e),
            _ => None,
        })
        .unwrap();
    assert!(skipped.path().ends_with("bad.md"));
    assert_eq!(
        skipped.position().map(|(line, _)| line),
        Some(2),
        "{skipped}"
    );
}

#[test]
fn unknown_tool() {
    let report = Scenario::new(vec![
        Reply::new().use_agent(&run_call("Worker", true, &["shell"])),
        Reply::new().tool_call("no_such_tool", "{}"),
        Reply::answer("gave up"),
    ])
    .tools(ToolRegistry::new().with(Calculator))
    .at(Duration::ZERO, HostAction::User("go".into()))
    .run(0);
    let outputs = tool_outputs(&report, "use_agent");
    assert!(outputs[0].contains("the tool `shell` is not one of your tools, so a sub-agent cannot get it; your tools are: calculator"));
    assert_eq!(
        tool_outputs(&report, "no_such_tool"),
        ["there is no tool named `no_such_tool`; the tools available are: calculator, use_agent"]
    );
    assert!(report.envelopes.is_empty(), "no child was spawned");
    assert_nothing_lost(&report);
}

#[test]
fn recursion_attempt() {
    let report = one_child(
        vec![
            Reply::new().use_agent(&run_call("Grandchild", true, &[])),
            Reply::answer("could not nest"),
        ],
        ToolRegistry::new(),
        &[],
    );
    let refused = report.events().iter().any(|e| {
        matches!(e, AgentEvent::Child(_, inner) if matches!(&**inner,
            AgentEvent::ToolResult(r) if r.is_error && r.output.contains("`use_agent` is not available to this sub-agent")))
    });
    assert!(refused, "{}", report.render());
    assert_eq!(report.envelopes.len(), 1, "no grandchild");
    assert_nothing_lost(&report);
}
