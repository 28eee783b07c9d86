//! Runs on a node: refusals, messages, shared nodes, switches, status, the background policy, losses together.

use super::*;

#[tokio::test(start_paused = true)]
async fn a_node_without_the_model_refuses_the_run() {
    let model = background_workers(&[5]).shared();
    let other = ScriptedModel::new(vec![Reply::answer("x")])
        .named("elsewhere")
        .shared();
    let node = Loopback::new("b", other).await;
    let (thread, mut events) = thread_on(model, Placement::On(node)).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until(&mut events, &mut log, is_wake).await;
    until_result(&mut events, &mut log).await;
    check_log(&log, true);
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Failed);
    let error = envelope.error.unwrap_or_default();
    assert!(
        error.contains("no model `scripted` on this node"),
        "{error}"
    );
    // What the node has is not the asking model's to read (review: what
    // the model reads): another host's registry reached its provider.
    assert!(!error.contains("elsewhere"), "{error}");
}

/// The same for a tool the node lacks: its refusal listed every tool of
/// the node (`http_post` here, never given to the asking model). Only
/// what is missing is named.
#[tokio::test(start_paused = true)]
async fn a_node_without_a_tool_names_only_that_tool() {
    let call = UseAgentCall::run("Worker 1\nYou work.", "add").tools(["calculator"]);
    let first = Reply::new().use_agent(&call.wait(false));
    let model = ScriptedModel::new(vec![
        first,
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker 1\n", vec![Reply::answer("4")])
    .shared();
    let gate = subagents::actors::GateHandle::spawn(1).await.unwrap();
    let node_tools = ToolRegistry::new()
        .with(subagents_demo::Sleep)
        .with(subagents_demo::Post);
    let node = Loopback::with_tools("b", model.clone(), node_tools, gate);
    let builder = DelegationBuilder::new(model)
        .placement(Placement::On(node))
        .tools(ToolRegistry::new().with(subagents_demo::Calculator));
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, is_wake).await;
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Failed);
    let error = envelope.error.unwrap_or_default();
    assert!(
        error.contains("no tool `calculator` on this node"),
        "{error}"
    );
    assert!(
        !error.contains("http_post") && !error.contains("sleep"),
        "{error}"
    );
    thread.close_and_wait().await;
}

#[tokio::test(start_paused = true)]
async fn a_message_reaches_a_running_child_on_its_node() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 30, false)),
        Reply::answer("Started."),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "hurry up")),
        Reply::answer("Told it."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker", worker(30))
    .shared();
    let node = Loopback::new("b", model.clone()).await;
    let (thread, mut events) = thread_on(model, Placement::On(node)).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until(&mut events, &mut log, in_tool).await;
    thread.send_user("tell it").unwrap();
    until_result(&mut events, &mut log).await;
    let sent = results_of(&log, "use_agent");
    let (told, is_error) = sent.last().unwrap();
    assert!(!is_error, "{told}");
    until(&mut events, &mut log, is_wake).await;
    until_result(&mut events, &mut log).await;
    check_log(&log, true);
    // Its node read it at its next model call: the conversation it ended
    // on (sent back with its end) has it.
    let conversation = thread.hub().conversation(&AgentId::new("agent_1")).unwrap();
    assert!(
        conversation.iter().any(|m| m.content.contains("hurry up")),
        "{conversation:#?}"
    );
}

/// Two threads share one node, and each has an `agent_1` there: runs are
/// told apart by their key, not by the child's id — a stop for one thread's
/// `agent_1` stops that one only.
#[tokio::test(start_paused = true)]
async fn two_threads_share_a_node_with_the_same_child_ids() {
    let model = background_workers(&[200]).shared();
    let node = Loopback::new("b", model.clone()).await;
    let (a, mut a_events) = thread_on(model.clone(), Placement::On(node.clone())).await;
    let (b, mut b_events) = thread_on(model, Placement::On(node.clone())).await;
    a.send_user("go").unwrap();
    let mut a_log = Vec::new();
    until(&mut a_events, &mut a_log, in_tool).await;
    b.send_user("go").unwrap();
    let mut b_log = Vec::new();
    until(&mut b_events, &mut b_log, in_tool).await;
    assert_eq!(node.runner.live(), 2);
    let agent_1 = AgentId::new("agent_1");
    assert_eq!(
        a.stop_child(&agent_1).await.unwrap(),
        SubAgentStatus::Stopped
    );
    until(&mut b_events, &mut b_log, is_wake).await;
    until_result(&mut b_events, &mut b_log).await;
    check_log(&b_log, true);
    let b_child = b.hub().status(&agent_1).unwrap();
    assert_eq!(
        b_child.status,
        SubAgentStatus::Done,
        "the other thread's agent_1 ran on"
    );
    assert_eq!(b_child.result.as_deref(), Some("worked 200 s"));
    assert_eq!(
        a.hub().status(&agent_1).unwrap().status,
        SubAgentStatus::Stopped
    );
    assert_eq!(node.runner.live(), 0);
}

/// A thread switch stops every child — those on another node too, on
/// their node.
#[tokio::test(start_paused = true)]
async fn a_switch_stops_the_children_on_another_node() {
    let model = background_workers(&[200, 200]).shared();
    let node = Loopback::new("b", model.clone()).await;
    let (thread, mut events) = thread_on(model, Placement::On(node.clone())).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    while node.runner.live() < 2 {
        until(&mut events, &mut log, in_tool).await;
    }
    assert_eq!(thread.switch_away().await.unwrap(), 2);
    run_for(&mut events, &mut log, 60).await;
    check_log(&log, true);
    for id in ["agent_1", "agent_2"] {
        let envelope = thread.hub().status(&AgentId::new(id)).unwrap();
        assert_eq!(envelope.status, SubAgentStatus::Stopped, "{id}");
    }
    assert_eq!(node.runner.live(), 0, "stopped on their node");
    assert!(!log.iter().any(is_wake), "off screen: no wake");
}

/// `use_agent status` of a child on another node shows what it does now
/// (its node's events say so: in a tool, which one, since when); its model
/// calls and tokens arrive with its end.
#[tokio::test(start_paused = true)]
async fn status_shows_what_a_remote_child_does() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 30, false)),
        Reply::answer("Started."),
        Reply::new().use_agent(&UseAgentCall::status("agent_1")),
        Reply::answer("It sleeps."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker", worker(30))
    .shared();
    let node = Loopback::new("b", model.clone()).await;
    let (thread, mut events) = thread_on(model, Placement::On(node)).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until(&mut events, &mut log, in_tool).await;
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    thread.send_user("how is it going?").unwrap();
    until_result(&mut events, &mut log).await;
    let status = json(&results_of(&log, "use_agent").pop().unwrap().0);
    assert_eq!(status["now"]["doing"], "in_tool", "{status}");
    assert_eq!(status["now"]["tool"], "sleep");
    assert_eq!(status["now"]["for_s"], 5.0);
    until(&mut events, &mut log, is_wake).await;
    until_result(&mut events, &mut log).await;
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Done);
    assert_eq!(envelope.tool_calls, 1);
}

/// The hub's background-approval policy answers for a background child
/// on another node as for a local one: the parent never sees the request,
/// and the child goes on.
#[tokio::test(start_paused = true)]
async fn the_background_policy_answers_for_a_remote_child() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run("Poster\nYou post.", "post it")
                .tools(["http_post"])
                .wait(false),
        ),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Poster",
        vec![
            Reply::new().tool_call("http_post", r#"{"url":"https://example.com","body":"x"}"#),
            Reply::answer("posted"),
        ],
    )
    .shared();
    let node = Loopback::new("b", model.clone()).await;
    let (thread, mut events) = thread_with(
        DelegationBuilder::new(model)
            .placement(Placement::On(node))
            .background_approvals(subagents::actors::hub::BackgroundApprovals::Approve),
    )
    .await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until(&mut events, &mut log, is_wake).await;
    until_result(&mut events, &mut log).await;
    check_log(&log, true);
    let asked = |e: &AgentEvent| {
        matches!(e, AgentEvent::Child(_, inner)
            if matches!(**inner, AgentEvent::ApprovalRequested(_) | AgentEvent::ApprovalResolved { .. }))
    };
    assert!(!log.iter().any(asked), "the parent saw the approval");
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Done);
    assert_eq!(envelope.result.as_deref(), Some("posted"));
    let (_, children) = children(&log);
    let results: Vec<String> = children[&AgentId::new("agent_1")]
        .events
        .iter()
        .filter_map(|(_, e)| match e {
            AgentEvent::ToolResult(r) => Some(r.output.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 1);
    assert!(!results[0].contains("denied"), "{results:?}");
}

/// Children lost together close in the order they started: the parent's
/// stream never depends on a map's order (replay, byte for byte).
#[tokio::test(start_paused = true)]
async fn children_lost_together_close_in_the_order_they_started() {
    let model = background_workers(&[200, 200, 200]).shared();
    let node = Loopback::new("b", model.clone()).await;
    let (thread, mut events) = thread_on(model, Placement::On(node.clone())).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    while node.runner.live() < 3 {
        until(&mut events, &mut log, in_tool).await;
    }
    node.kill();
    for _ in 0..3 {
        until(&mut events, &mut log, is_wake).await;
        until_result(&mut events, &mut log).await;
    }
    check_log(&log, true);
    let ended: Vec<String> = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Child(id, inner) if matches!(**inner, AgentEvent::Result(_)) => {
                Some(id.to_string())
            }
            _ => None,
        })
        .collect();
    assert_eq!(ended, ["agent_1", "agent_2", "agent_3"]);
}

/// Foreign input: a host tool named like a front-end the parent does not
/// offer (`agent`; only `use_agent` is on) is an ordinary tool, and a local
/// child given it runs it. The proxy dropped every delegation *name* from
/// the spec it sent the node, so the same child there had no `agent`, its
/// call was the depth refusal, and its envelope still listed the tool.
#[tokio::test(start_paused = true)]
async fn a_host_tool_named_like_a_front_end_not_offered_reaches_a_child_on_a_node() {
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&UseAgentCall::run("Helper\nA sub-agent.", "use it").tools(["agent"])),
        Reply::answer("Done."),
    ])
    .with_script(
        "Helper",
        vec![
            Reply::new().tool_call("agent", "{}"),
            Reply::answer("helped"),
        ],
    )
    .shared();
    let tools = || ToolRegistry::new().with(HostTool("agent"));
    let gate = GateHandle::spawn(1).await.unwrap();
    let node = Loopback::with_tools("b", model.clone(), tools(), gate);
    let builder = DelegationBuilder::new(model)
        .tools(tools())
        .placement(Placement::On(node.clone()));
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    assert_eq!(node.started.load(Ordering::SeqCst), 1, "it ran on the node");
    assert_eq!(
        thread.hub().status(&AgentId::new("agent_1")).unwrap().tools,
        ["agent"]
    );
    let (_, children) = children(&log);
    let results: Vec<(String, bool)> = children[&AgentId::new("agent_1")]
        .events
        .iter()
        .filter_map(|(_, e)| match e {
            AgentEvent::ToolResult(r) if r.name == "agent" => Some((r.output.clone(), r.is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [("the host's agent ran".to_owned(), false)],
        "{log:#?}"
    );
}

/// Foreign (trimmed by the wire): a run's `Ended` over the wire's limit
/// goes without its conversation. The child kept that empty conversation
/// as its own, so a later message resumed it from its task alone — what
/// it did and its answer gone. It keeps what it started from and its
/// answer, as a run ended here does.
#[tokio::test(start_paused = true)]
async fn a_run_ended_without_its_conversation_keeps_its_task_and_answer() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 5, true)),
        Reply::answer("Done."),
    ])
    .with_script("Worker", worker(5))
    .shared();
    let node = Loopback::new("b", model.clone()).await;
    node.strip_conversation.store(true, Ordering::SeqCst);
    let (thread, mut events) = thread_on(model, Placement::On(node)).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let kept = thread
        .hub()
        .conversation(&AgentId::new("agent_1"))
        .expect("known");
    let said: Vec<&str> = kept.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(said.first(), Some(&"work 5 s"), "{said:?}");
    assert_eq!(said.last(), Some(&"worked 5 s"), "{said:?}");
}

/// Stopped midway, across nodes: a message sent to a queued child goes
/// with its start, after its input. A remote child's turn kept only its
/// input, so when its node sent `Ended` without the conversation (over
/// the wire's limit), or was lost, the kept conversation lacked the
/// message — a message then resumed it without that instruction, and the
/// store wrote the same. It starts from its input and the messages sent
/// while it waited, as a local child does.
#[tokio::test(start_paused = true)]
async fn a_remote_childs_kept_conversation_has_what_it_was_sent_while_queued() {
    let mut turns = vec![
        Reply::new()
            .use_agent(&work_call("Worker 1", 200, false))
            .use_agent(&work_call("Worker 2", 200, false))
            .use_agent(&work_call("Worker 3", 200, false))
            .use_agent(&work_call("Worker 4", 5, false)),
        Reply::answer("Started."),
        Reply::new().use_agent(&UseAgentCall::send("agent_4", "use metric units")),
        Reply::answer("Sent."),
    ];
    turns.extend((0..6).map(|_| Reply::answer("Noted.")));
    let mut model = ScriptedModel::new(turns);
    for (i, secs) in [200, 200, 200, 5].into_iter().enumerate() {
        model = model.with_script(format!("Worker {}\n", i + 1), worker(secs));
    }
    let model = model.shared();
    let node = Loopback::new("b", model.clone()).await;
    node.strip_conversation.store(true, Ordering::SeqCst);
    let (thread, mut events) = thread_on(model, Placement::On(node)).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    thread.send_user("tell the fourth").unwrap();
    until_wake(&mut events, &mut log, "agent_4").await;
    let kept = thread
        .hub()
        .conversation(&AgentId::new("agent_4"))
        .expect("known");
    assert!(
        kept.iter().any(|m| m.content.contains("use metric units")),
        "{kept:#?}"
    );
    thread.close_and_wait().await;
}

/// `LeastLoaded` weighs this node's own live children against each
/// node's: it counted every child holding a slot — those already on the
/// other node, and the one being placed — so a tie (0 and 0) went away,
/// and every child after the first went to the node while this one sat
/// idle. The first stays here; the second, with one live here and none
/// there, goes there.
#[tokio::test(start_paused = true)]
async fn least_loaded_counts_only_this_nodes_own_children() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 30, false)),
        Reply::answer("Started."),
        Reply::new().use_agent(&work_call("Worker", 30, false)),
        Reply::answer("Started another."),
        Reply::answer("Noted."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker", worker(30))
    .shared();
    let node = Loopback::new("b", model.clone()).await;
    let (thread, mut events) = thread_on(model, Placement::LeastLoaded(vec![node.clone()])).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until(&mut events, &mut log, in_tool).await;
    assert_eq!(node.started.load(Ordering::SeqCst), 0, "a tie stays here");
    thread.send_user("another").unwrap();
    until_result(&mut events, &mut log).await;
    assert_eq!(
        node.started.load(Ordering::SeqCst),
        1,
        "one here, none there"
    );
    thread.close_and_wait().await;
}

/// Stopped midway (a request that cannot go): a message to a remote child
/// over the wire's limit fails to go, and the proxy read that as the node
/// lost — the child ended here while its run went on on its node, for
/// nobody. The node is told to stop it.
#[tokio::test(start_paused = true)]
async fn a_request_that_cannot_go_leaves_nothing_running_on_the_node() {
    let huge = "x".repeat(65 << 20);
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 60, false)),
        Reply::answer("Started."),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", huge)),
        Reply::answer("Sent."),
        Reply::answer("Noted."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker", worker(60))
    .shared();
    let node = Loopback::new("b", model.clone()).await;
    // A call of 65 MiB is past any token budget but this one.
    let (thread, mut events) = thread_with(
        DelegationBuilder::new(model)
            .placement(Placement::On(node.clone()))
            .limits(subagents::messages::Limits {
                token_budget: u64::MAX,
                ..Default::default()
            }),
    )
    .await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until(&mut events, &mut log, in_tool).await;
    assert_eq!(node.runner.live(), 1);
    thread.send_user("tell it").unwrap();
    until_result(&mut events, &mut log).await;
    run_for(&mut events, &mut log, 5).await;
    assert_eq!(node.runner.live(), 0, "its run goes on on the node");
    thread.close_and_wait().await;
}

/// Stopped midway (a lost node), by label: `Placement::Labels` chose the
/// first node with the child's label whether or not it was up — every
/// child with that label failed "node lost: … it is down" though a second
/// node with it was up (the twelfth session fixed this for
/// `LeastLoaded`). A lost node is passed over; with none left, a `hard`
/// label says so.
#[tokio::test(start_paused = true)]
async fn a_lost_node_is_passed_over_for_the_next_with_the_label() {
    let model = profile_worker(UseAgentCall::run_named("worker", "work 5 s"));
    let b = Loopback::labelled("b", model.clone(), &["worker"]).await;
    let c = Loopback::labelled("c", model.clone(), &["worker"]).await;
    b.kill();
    let nodes: Vec<Arc<dyn subagents::actors::NodeLink>> = vec![b.clone(), c.clone()];
    let (thread, mut events) = thread_with(
        DelegationBuilder::new(model)
            .placement(Placement::Labels { nodes, hard: true })
            .profiles(worker_profile()),
    )
    .await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until(&mut events, &mut log, is_wake).await;
    check_log(&log, true);
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Done, "{envelope:?}");
    assert_eq!(c.started.load(Ordering::SeqCst), 1);
    assert_eq!(b.started.load(Ordering::SeqCst), 0);
    thread.close_and_wait().await;
}

/// A profile `worker` whose prompt opens with `Worker 1` (the scripted
/// worker's), every tool of its parent.
fn worker_profile() -> subagents::actors::profile::ProfileSet {
    use subagents::actors::profile::{Profile, ProfileSet};
    ProfileSet::from_profiles([Profile {
        name: "worker".into(),
        description: "works".into(),
        system_prompt: "Worker 1\nYou work.".into(),
        source: std::path::PathBuf::from("worker.md"),
        ..Default::default()
    }])
}

/// A parent that starts one child in the background with `call`, then
/// notes its wake; the child sleeps 5 s.
fn profile_worker(call: UseAgentCall) -> Arc<dyn Model> {
    let first = Reply::new().use_agent(&call.wait(false));
    let turns = vec![first, Reply::answer("Started."), Reply::answer("Noted.")];
    ScriptedModel::new(turns)
        .with_script("Worker 1\n", worker(5))
        .shared()
}

/// Widened (review: identifiers): `Placement::Labels` matched a child's
/// shown name, which for a child written in the call is the first line
/// of the prompt the model wrote — the model put a child of its own
/// making on a node the host labelled for a profile (`deployer`), where
/// that node's tools ran for it. Labels match a profile's name: such a
/// child runs here, or is refused when it must run on a labelled node.
#[tokio::test(start_paused = true)]
async fn a_child_written_in_the_call_is_placed_by_no_label() {
    for hard in [false, true] {
        let call = work_call("Worker 1", 5, false);
        let model = profile_worker(call);
        let b = Loopback::labelled("b", model.clone(), &["worker", "Worker 1"]).await;
        let nodes: Vec<Arc<dyn subagents::actors::NodeLink>> = vec![b.clone()];
        let placement = Placement::Labels { nodes, hard };
        let (thread, mut events) = thread_with(
            DelegationBuilder::new(model)
                .placement(placement)
                .profiles(worker_profile()),
        )
        .await;
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        run_for(&mut events, &mut log, 60).await;
        check_log(&log, true);
        assert_eq!(b.started.load(Ordering::SeqCst), 0, "hard: {hard}");
        let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
        let expected = if hard {
            SubAgentStatus::Failed
        } else {
            SubAgentStatus::Done
        };
        assert_eq!(envelope.status, expected, "hard: {hard}: {envelope:?}");
        thread.close_and_wait().await;
    }
}

/// Host code called back (review): a transport's `live` that panics (a
/// poisoned lock in its load table) ran in the hub's handler and took the
/// hub down — every child of the thread failed, every later delegation
/// was refused "the sub-agent hub is stopped". The child being placed is
/// refused, naming the panic; the hub goes on (a panic's payload whose
/// `Drop` panics too).
#[tokio::test(start_paused = true)]
async fn a_transport_that_panics_choosing_a_node_fails_that_child_alone() {
    use subagents::actors::{NodeLink, RunReports};
    use subagents::messages::remote::{RunRequest, RunSpec};
    struct Panicky(bool);
    impl NodeLink for Panicky {
        fn node(&self) -> &str {
            "p"
        }
        fn live(&self) -> Option<usize> {
            if self.0 {
                explode()
            }
            panic!("transport state poisoned")
        }
        fn start(&self, _: RunSpec, _: RunReports) -> Result<(), String> {
            Ok(())
        }
        fn request(&self, _: u64, _: RunRequest) -> Result<(), String> {
            Ok(())
        }
    }
    for bombs in [false, true] {
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&work_call("Worker", 30, false)),
            Reply::answer("Started."),
            Reply::new().use_agent(&UseAgentCall::status("agent_1")),
            Reply::answer("Checked."),
            Reply::answer("Noted."),
        ])
        .with_script("Worker", worker(30))
        .shared();
        let (thread, mut events) = thread_on(
            model,
            Placement::LeastLoaded(vec![Arc::new(Panicky(bombs))]),
        )
        .await;
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        thread.send_user("how is it").unwrap();
        until_result(&mut events, &mut log).await;
        let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
        assert_eq!(envelope.status, SubAgentStatus::Failed);
        assert!(
            envelope.error.as_deref().unwrap_or("").contains(if bombs {
                "panic with a non-text payload"
            } else {
                "transport state poisoned"
            }),
            "{envelope:?}"
        );
        let status = results_of(&log, "use_agent").pop().unwrap();
        assert!(!status.0.contains("hub is stopped"), "{status:?}");
        thread.close_and_wait().await;
    }
}
