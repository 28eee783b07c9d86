//! The hub's background approval policy on a remote child.

use super::*;

/// Stopped midway, across nodes: the policy's answer to a background
/// child's request was sent with its failure ignored — a link that could
/// not send it left the request answered by nobody and shown to nobody
/// (the policy had silenced it), and the node's turn waited on it to its
/// wall clock, the child `running` and its slot held. A request that
/// cannot go loses the node, as the host's own answer does.
#[tokio::test(start_paused = true)]
async fn a_policy_answer_that_cannot_be_sent_loses_the_node() {
    use subagents::actors::hub::BackgroundApprovals;
    let model: Arc<dyn Model> = ScriptedModel::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run("Poster\nYou post.", "post it")
                .tools(["http_post", "sleep"])
                .wait(false),
        ),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Poster",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":5}"#),
            Reply::new().tool_call("http_post", r#"{"url":"https://example.com","body":"x"}"#),
            Reply::answer("posted"),
        ],
    )
    .shared();
    let node = Loopback::new("b", model.clone()).await;
    let (thread, mut events) = thread_with(
        DelegationBuilder::new(model)
            .placement(Placement::On(node.clone()))
            .background_approvals(BackgroundApprovals::Approve),
    )
    .await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, in_tool).await;
    // Its link breaks: every request fails from now on.
    node.panics.store(true, Ordering::SeqCst);
    run_for(&mut events, &mut log, 60).await;
    check_log(&log, true);
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Failed, "{envelope:?}");
    assert!(
        envelope
            .error
            .as_deref()
            .is_some_and(|e| e.contains("node")),
        "{envelope:?}"
    );
    thread.close_and_wait().await;
}
