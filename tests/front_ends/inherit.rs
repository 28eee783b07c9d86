//! `inherit`, Claude Code's word for the parent's model, wherever it is
//! written.

use super::*;

/// A profile built in code from Claude Code's agent definitions (`"model":
/// "inherit"`) was refused at every delegation ("runs on the model
/// `inherit`, which is not registered here") — only a profile file's was
/// dropped as it was read — and a call naming `inherit` was refused too.
/// Both run on the parent's model — in any case, as Claude Code reads it
/// (`Inherit` was a model of that name, refused).
#[tokio::test(start_paused = true)]
async fn inherit_is_the_parents_model_in_code_and_in_a_call() {
    let mut helper = profile("helper", "You help.");
    helper.model = Some("inherit".into());
    // With a provider too, as a profile file's is read (review of this
    // change: refused in code, run from a file).
    helper.provider = Some("openai".into());
    let (main, seen) = spy(
        "main",
        ScriptedModel::new(vec![
            Reply::new()
                .tool_call(
                    "delegate_task",
                    json!({"agent": "helper", "task": "help"}).to_string(),
                )
                .tool_call(
                    "delegate_task",
                    json!({"system_prompt": "Inline", "task": "x", "model": "Inherit", "provider": "openai"}).to_string(),
                ),
            Reply::answer("Done."),
        ])
        .with_script("You help.", vec![Reply::answer("Helped.")])
        .with_script("Inline", vec![Reply::answer("Inlined.")]),
    );
    let (parent, mut events) = DelegationBuilder::new(main)
        .system_prompt("You are the parent.")
        .profiles(ProfileSet::from_profiles([helper]))
        .delegate_task_tool(true)
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    assert_eq!(
        results_of(&log, "delegate_task"),
        [
            ("Helped.".to_owned(), false),
            ("Inlined.".to_owned(), false)
        ],
    );
    assert_eq!(
        seen.lock().unwrap().len(),
        4,
        "parent twice, each child once"
    );
    check_log(&log, true);
}
