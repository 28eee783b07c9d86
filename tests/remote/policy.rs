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

/// Stopped midway, across nodes, at depth 2 (review: grandchildren): the
/// cluster's orphan rule followed the thread's `Detach` at every depth —
/// a grandchild on another node, its parent's node lost, ran on to its
/// wall clock and kept a result no one can read (a grandchild's end wakes
/// nobody, and its requester died with that process); a resumed requester
/// could start it again beside it. `Detach` is the user's parent's: a
/// grandchild's run is not kept as an orphan.
#[tokio::test(start_paused = true)]
async fn a_grandchild_on_another_node_is_not_kept_as_an_orphan() {
    use std::sync::Mutex;
    use subagents::actors::{NodeLink, RunReports};
    use subagents::messages::remote::{RunRequest, RunSpec};
    /// Reports no load (so a grandchild goes there, its requester being
    /// live here) and keeps what each start asked.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<(u32, bool)>>);
    impl NodeLink for Recorder {
        fn node(&self) -> &str {
            "b"
        }
        fn live(&self) -> Option<usize> {
            Some(0)
        }
        fn start(&self, spec: RunSpec, _: RunReports) -> Result<(), String> {
            self.0
                .lock()
                .unwrap()
                .push((spec.depth, spec.keep_if_orphaned));
            Err("recorded".into())
        }
        fn request(&self, _: u64, _: RunRequest) -> Result<(), String> {
            Ok(())
        }
    }
    let model: Arc<dyn Model> = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run("Child\nYou work.", "go")),
        Reply::answer("parent: done"),
    ])
    .with_script(
        "Child\n",
        vec![
            Reply::new().use_agent(&UseAgentCall::run("Grand\nYou work.", "deeper")),
            Reply::answer("child: done"),
        ],
    )
    .shared();
    let recorder = Arc::new(Recorder::default());
    let placement = Placement::LeastLoaded(vec![recorder.clone()]);
    let (thread, mut events) = thread_with(
        DelegationBuilder::new(model)
            .placement(placement)
            .max_depth(2),
    )
    .await;
    thread.send_user("go").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    assert_eq!(*recorder.0.lock().unwrap(), vec![(2, false)]);
    thread.close_and_wait().await;
    // The parent's own child there: by the policy.
    use subagents::actors::ParentStopPolicy;
    for (policy, kept) in [
        (ParentStopPolicy::Detach, true),
        (ParentStopPolicy::Cascade, false),
    ] {
        let model: Arc<dyn Model> = ScriptedModel::new(vec![
            Reply::new().use_agent(&UseAgentCall::run("Child\nYou work.", "go")),
            Reply::answer("parent: done"),
        ])
        .shared();
        let recorder = Arc::new(Recorder::default());
        let builder = DelegationBuilder::new(model)
            .placement(Placement::On(recorder.clone()))
            .parent_stop(policy);
        let (thread, mut events) = thread_with(builder).await;
        thread.send_user("go").unwrap();
        until_result(&mut events, &mut Vec::new()).await;
        assert_eq!(*recorder.0.lock().unwrap(), vec![(1, kept)], "{policy:?}");
        thread.close_and_wait().await;
    }
}
