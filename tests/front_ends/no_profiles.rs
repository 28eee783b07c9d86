//! With no named sub-agents, nothing asks the model for `agent`.

use super::*;

/// Misleading (review: tool calls from misbehaving models, thirty-fourth
/// session): with no profiles, the schemas had no `agent` — but both
/// descriptions and the refusals still said "give `agent` (a named
/// sub-agent)", and a name read only "there is no sub-agent named …": a
/// model trained on Claude Code tried names one after another. The
/// descriptions name only `system_prompt`, and both refusals say there are
/// no named sub-agents.
#[tokio::test(start_paused = true)]
async fn with_no_profiles_nothing_asks_the_model_for_agent() {
    let specs = offered_tools(false).await;
    for name in ["use_agent", "delegate_task"] {
        assert!(
            !specs[name].description.contains("`agent`"),
            "{name}: {}",
            specs[name].description
        );
        assert!(
            specs[name].description.contains("`system_prompt`"),
            "{name}"
        );
    }
    let model = ScriptedModel::new(vec![
        Reply::new()
            .tool_call(
                "delegate_task",
                json!({"agent": "general-purpose", "task": "x"}).to_string(),
            )
            .tool_call("delegate_task", json!({"task": "x"}).to_string())
            .tool_call(
                "use_agent",
                json!({"action": "run", "agent": "researcher", "input": "x"}).to_string(),
            )
            // Both given (the last read of this session's change): "give
            // either `agent` … or `system_prompt`".
            .tool_call(
                "use_agent",
                json!({"action": "run", "agent": "r", "system_prompt": "R\nr", "input": "x"})
                    .to_string(),
            ),
        Reply::answer("Done."),
    ]);
    let (parent, mut events) = DelegationBuilder::new(model.shared())
        .delegate_task_tool(true)
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let mut got = results_of(&log, "delegate_task");
    got.extend(results_of(&log, "use_agent"));
    assert_eq!(got.len(), 4, "{got:?}");
    for (output, is_error) in got {
        assert!(is_error, "{output}");
        assert!(
            output.contains("no named sub-agents") && output.contains("`system_prompt`"),
            "{output}"
        );
        assert!(!output.contains("give `agent`"), "{output}");
    }
    assert_eq!(parent.hub.snapshot().await.unwrap().requested, 0);
}
