//! A blank task is refused by every front-end before any child starts.

use super::*;

/// `delegate_task` and `agent` refuse a task that is empty or only
/// spaces with a sentence saying so, and spawn no child for it (as
/// `use_agent` refuses a blank `input`): a child whose whole brief is
/// blank spent its model calls on nothing, and `delegate_task`'s parent
/// waited to its end. Guards against the engine's empty-task check
/// (`request.rs`) being dropped: both tools parse `""` as a task and rely
/// on it alone.
#[tokio::test(start_paused = true)]
async fn a_blank_task_is_refused_and_starts_no_child() {
    let model = ScriptedModel::new(vec![
        Reply::new()
            .tool_call(
                "delegate_task",
                json!({"system_prompt": "Worker\nw", "task": "   "}).to_string(),
            )
            .tool_call("agent", json!({"task": ""}).to_string()),
        Reply::answer("No."),
    ])
    // What a child would answer, were one started.
    .with_script("Worker", vec![Reply::answer("nothing to do")])
    .with_script("focused sub-agent", vec![Reply::answer("nothing to do")]);
    let (parent, mut events) =
        parent(model.shared(), ModelRegistry::new(), Limits::default()).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    for tool in ["delegate_task", "agent"] {
        let got = results_of(&log, tool);
        assert_eq!(got.len(), 1, "{tool}: {got:?}");
        let (output, is_error) = &got[0];
        assert!(is_error, "{tool}: {output}");
        assert!(
            output.contains("the task is empty"),
            "{tool} refuses a blank task: {output}"
        );
    }
    assert!(
        !log.iter()
            .any(|e| matches!(e, subagents::messages::AgentEvent::ChildStarted(_))),
        "no child starts for a blank task: {log:#?}"
    );
    assert_eq!(parent.hub.snapshot().await.unwrap().requested, 0);
}
