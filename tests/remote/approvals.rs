//! Approvals across nodes, and their order against a stop.

use super::*;

/// A parent whose background child asks to post, then sleeps long.
fn background_poster() -> Arc<dyn Model> {
    ScriptedModel::new(vec![
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
            Reply::new().tool_call("http_post", r#"{"url":"https://example.com","body":"x"}"#),
            Reply::new().tool_call("sleep", r#"{"secs":600}"#),
            Reply::answer("posted"),
        ],
    )
    .shared()
}

/// Foreign: a node asked its child's approval in the parent's name. The
/// thread routes an answer by the id's agent, so the host's "approve" to
/// what it saw in the child's row went to the parent's own call of that
/// number. An approval in another agent's name stops the run and fails
/// the child; it never reaches the host.
#[tokio::test(start_paused = true)]
async fn an_approval_a_node_asks_in_another_agents_name_fails_its_child() {
    let model = background_poster();
    let node = Loopback::new("b", model.clone()).await;
    *node.approvals_named.lock().unwrap() = Some("parent".into());
    let (thread, mut events) = thread_on(model, Placement::On(node.clone())).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_wake(&mut events, &mut log, "agent_1").await;
    run_for(&mut events, &mut log, 60).await;
    check_log(&log, true);
    let foreign: Vec<&AgentEvent> = log
        .iter()
        .filter(|e| {
            matches!(e, AgentEvent::Child(_, inner)
                if matches!(&**inner, AgentEvent::ApprovalRequested(r) if !r.id.as_str().starts_with("agent_1-")))
        })
        .collect();
    assert!(foreign.is_empty(), "{foreign:?}");
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Failed, "{envelope:?}");
    assert!(
        envelope
            .error
            .as_deref()
            .is_some_and(|e| e.contains("another agent's name (`parent-approval-1`)")),
        "{envelope:?}"
    );
    assert_eq!(node.runner.live(), 0, "the run goes on on its node");
}

/// Foreign, one level down: the same request in the parent's name, sent
/// inside a `Child` event as a grandchild's — only a top-level request was
/// checked, so it reached the host, and an "approve" went to the parent's
/// own call. A report is checked for what the node's agent cannot emit (a
/// child on a node starts no sub-agent), and a `ToolResult` for a call
/// never started likewise: the run is stopped and the child fails.
#[tokio::test(start_paused = true)]
async fn a_report_its_agent_cannot_have_sent_fails_its_child() {
    let contains_foreign = |event: &AgentEvent| -> bool {
        fn foreign(event: &AgentEvent) -> bool {
            match event {
                AgentEvent::ApprovalRequested(r) => !r.id.as_str().starts_with("agent_1-"),
                AgentEvent::Child(_, inner) => foreign(inner),
                _ => false,
            }
        }
        foreign(event)
    };
    for lie in ["nested approval", "ghost result"] {
        let model = background_poster();
        let node = Loopback::new("b", model.clone()).await;
        let flag = if lie == "nested approval" {
            *node.approvals_named.lock().unwrap() = Some("parent".into());
            &node.nest_approvals
        } else {
            &node.misname_tool_results
        };
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
        let (thread, mut events) = thread_on(model, Placement::On(node.clone())).await;
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        if lie == "ghost result" {
            let request = until_child_approval(&mut events, &mut log).await;
            thread
                .resolve_approval(request.id, subagents::messages::ApprovalDecision::Deny)
                .await
                .unwrap();
        }
        until_wake(&mut events, &mut log, "agent_1").await;
        run_for(&mut events, &mut log, 60).await;
        check_log(&log, true);
        assert!(!log.iter().any(contains_foreign), "{lie}: {log:#?}");
        let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
        assert_eq!(
            envelope.status,
            SubAgentStatus::Failed,
            "{lie}: {envelope:?}"
        );
        assert_eq!(node.runner.live(), 0, "{lie}: the run goes on on its node");
        thread.close_and_wait().await;
    }
}

#[tokio::test(start_paused = true)]
async fn an_approval_is_answered_across_nodes() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run("Poster\nYou post.", "post it")
                .tools(["http_post"])
                .wait(true),
        ),
        Reply::answer("Posted."),
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
    let (thread, mut events) = thread_on(model, Placement::On(node)).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    let request = until_child_approval(&mut events, &mut log).await;
    assert!(request.id.as_str().starts_with("agent_1-approval-"));
    // An id the child never asked for is unknown, as for a local child
    // (a remote one said `Ended`).
    let made_up = subagents::messages::ApprovalId::new("agent_1-approval-9");
    assert_eq!(
        thread
            .resolve_approval(
                made_up.clone(),
                subagents::messages::ApprovalDecision::Approve
            )
            .await,
        Err(subagents::supervisor::ThreadError::Approval(
            subagents::messages::ApprovalRefusal::Unknown(made_up)
        ))
    );
    thread
        .resolve_approval(
            request.id.clone(),
            subagents::messages::ApprovalDecision::Approve,
        )
        .await
        .unwrap();
    let result = until_result(&mut events, &mut log).await;
    assert_eq!(result.text, "Posted.");
    check_log(&log, true);
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Done);
    assert_eq!(envelope.result.as_deref(), Some("posted"));
}

/// Same instant: the host answers a remote child's approval and stops it
/// in one tick. The node applied the stop first (the answer went through a
/// task of its own), so the host was told the answer was taken while the
/// stream said `Cancelled`. The node now takes requests in the order they
/// were sent: the answer, then the stop — as a local child does.
#[tokio::test(start_paused = true)]
async fn an_approval_then_a_stop_in_one_tick_arrive_in_that_order() {
    use subagents::messages::{ApprovalDecision, ApprovalOutcome};
    let model = background_poster();
    let node = Loopback::new("b", model.clone()).await;
    let (thread, mut events) = thread_on(model, Placement::On(node)).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    let request = until_child_approval(&mut events, &mut log).await;
    let agent_1 = AgentId::new("agent_1");
    let hub = thread.hub();
    let (answered, stopped) = tokio::join!(
        hub.resolve_approval(request.id.clone(), ApprovalDecision::Approve),
        hub.stop(&agent_1)
    );
    assert!(answered.is_ok(), "{answered:?}");
    assert_eq!(stopped, Ok(SubAgentStatus::Stopped));
    run_for(&mut events, &mut log, 60).await;
    check_log(&log, true);
    let resolved: Vec<&ApprovalOutcome> = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Child(_, inner) => match &**inner {
                AgentEvent::ApprovalResolved { outcome, .. } => Some(outcome),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(
        resolved,
        [&ApprovalOutcome::Approved],
        "taken, as the host was told"
    );
}

/// Same instant, the other order: a stop of a child on another node, then
/// an answer to its approval, in one tick. The node applied them in that
/// order — the stop cut the turn (`Cancelled` on the stream), the answer
/// came too late — but the proxy had told the host the answer was taken.
/// As a local child does, the answer is refused `Ended`.
#[tokio::test(start_paused = true)]
async fn a_stop_then_an_approval_in_one_tick_refuse_the_answer_as_locally() {
    use subagents::messages::{ApprovalDecision, ApprovalOutcome, ApprovalRefusal};
    use subagents::supervisor::ThreadError;
    let model = background_poster();
    let mut seen = Vec::new();
    for remote in [false, true] {
        let placement = if remote {
            Placement::On(Loopback::new("b", model.clone()).await)
        } else {
            Placement::Local
        };
        let (thread, mut events) = thread_on(model.clone(), placement).await;
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        let request = until_child_approval(&mut events, &mut log).await;
        let agent_1 = AgentId::new("agent_1");
        let (stopped, answered) = tokio::join!(
            thread.stop_child(&agent_1),
            thread.resolve_approval(request.id.clone(), ApprovalDecision::Approve)
        );
        assert_eq!(stopped.unwrap(), SubAgentStatus::Stopped, "remote {remote}");
        assert!(
            matches!(
                answered,
                Err(ThreadError::Approval(ApprovalRefusal::Ended(_)))
            ),
            "remote {remote}: {answered:?}"
        );
        run_for(&mut events, &mut log, 60).await;
        check_log(&log, true);
        let resolved: Vec<bool> = log
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Child(_, inner) => match &**inner {
                    AgentEvent::ApprovalResolved { outcome, .. } => {
                        Some(matches!(outcome, ApprovalOutcome::Cancelled(_)))
                    }
                    _ => None,
                },
                _ => None,
            })
            .collect();
        assert_eq!(resolved, [true], "remote {remote}: cancelled");
        seen.push(remote);
        thread.close_and_wait().await;
    }
    assert_eq!(seen, [false, true]);
}

/// Stopped midway, across nodes: the host answers a remote child's
/// approval, but its node cuts the turn just before the answer reaches its
/// agent (its wall clock ran out in that instant). The proxy said `Ok` as
/// it sent the answer on, while the stream said `Cancelled`. The host now
/// learns the node's word: `Ended`, as from a local child whose turn was
/// cut.
#[tokio::test(start_paused = true)]
async fn an_answer_the_node_cut_first_is_refused_as_ended() {
    use subagents::messages::{ApprovalDecision, ApprovalOutcome, ApprovalRefusal};
    use subagents::supervisor::ThreadError;
    let model = background_poster();
    let node = Loopback::new("b", model.clone()).await;
    node.cut_before_approve.store(true, Ordering::SeqCst);
    let (thread, mut events) = thread_on(model, Placement::On(node)).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    let request = until_child_approval(&mut events, &mut log).await;
    let answered = thread
        .resolve_approval(request.id.clone(), ApprovalDecision::Approve)
        .await;
    assert_eq!(
        answered,
        Err(ThreadError::Approval(ApprovalRefusal::Ended(
            request.id.clone()
        )))
    );
    // Answered again: the first was not taken, so still `Ended`.
    let again = thread
        .resolve_approval(request.id.clone(), ApprovalDecision::Deny)
        .await;
    assert_eq!(
        again,
        Err(ThreadError::Approval(ApprovalRefusal::Ended(request.id)))
    );
    run_for(&mut events, &mut log, 60).await;
    check_log(&log, true);
    let cancelled = log.iter().any(|e| {
        matches!(e, AgentEvent::Child(_, inner) if matches!(&**inner,
            AgentEvent::ApprovalResolved { outcome: ApprovalOutcome::Cancelled(_), .. }))
    });
    assert!(cancelled, "the stream says the node cut it");
    thread.close_and_wait().await;
}

/// Repeated, across nodes: a second answer while the first is on its way
/// learns what became of the first — `AlreadyAnswered` with it, once the
/// node took it — as a local child's second answer does.
#[tokio::test(start_paused = true)]
async fn a_second_answer_on_the_way_is_refused_with_the_first() {
    use subagents::messages::{ApprovalDecision, ApprovalRefusal};
    use subagents::supervisor::ThreadError;
    let model = background_poster();
    let node = Loopback::new("b", model.clone()).await;
    let (thread, mut events) = thread_on(model, Placement::On(node)).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    let request = until_child_approval(&mut events, &mut log).await;
    let (first, second) = tokio::join!(
        thread.resolve_approval(request.id.clone(), ApprovalDecision::Approve),
        thread.resolve_approval(request.id.clone(), ApprovalDecision::Deny)
    );
    assert_eq!(first, Ok(()));
    assert_eq!(
        second,
        Err(ThreadError::Approval(ApprovalRefusal::AlreadyAnswered {
            id: request.id,
            decision: ApprovalDecision::Approve
        }))
    );
    run_for(&mut events, &mut log, 60).await;
    check_log(&log, false);
    thread.close_and_wait().await;
}

/// Repeated, across nodes, as the node is lost: an answer sent on (its
/// node's word not in yet), then the node lost — the run ended here, its
/// request `Cancelled` and the first answer `Ended`; but the proxy still
/// held the first answer as given, so a second one read
/// `AlreadyAnswered` with it (a local child says `Ended` both times).
#[tokio::test(start_paused = true)]
async fn a_second_answer_after_the_node_is_lost_agrees_with_the_first() {
    use subagents::messages::{ApprovalDecision, ApprovalRefusal};
    use subagents::supervisor::ThreadError;
    let model = background_poster();
    let node = Loopback::new("b", model.clone()).await;
    node.lose_approvals.store(true, Ordering::SeqCst);
    let (thread, mut events) = thread_on(model, Placement::On(node.clone())).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    let request = until_child_approval(&mut events, &mut log).await;
    let first = tokio::spawn({
        let (thread, id) = (thread.clone(), request.id.clone());
        async move { thread.resolve_approval(id, ApprovalDecision::Approve).await }
    });
    thread.sync().await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    node.kill();
    // In the same tick: it reaches the proxy after the loss, before the
    // hub has read the child's end.
    let second = thread
        .hub()
        .resolve_approval(request.id.clone(), ApprovalDecision::Deny)
        .await;
    // The first was sent on, the node's word never came: it may have
    // been taken (this session: `Unsettled`, it read `Ended`); the second
    // reached no agent here.
    let unsettled = ThreadError::Approval(ApprovalRefusal::Unsettled(request.id.clone()));
    assert_eq!(first.await.unwrap(), Err(unsettled));
    assert_eq!(second, Err(ApprovalRefusal::Ended(request.id.clone())));
    thread.close_and_wait().await;
}

/// Across nodes (review: approvals at every edge): an answer the node's
/// agent took just before a partition — its word never came back — read
/// `Ended` ("the agent that asked ended first"), and the stream said the
/// request was cancelled, while the run the node kept went on with the
/// approved call. The answer is `Unsettled`: sent, perhaps taken.
#[tokio::test(start_paused = true)]
async fn an_answer_sent_before_its_node_was_lost_is_unsettled_not_ended() {
    use subagents::messages::{ApprovalDecision, ApprovalRefusal};
    use subagents::supervisor::ThreadError;
    let (node, thread, _events, request) = a_child_asking_on_a_node_gone_silent().await;
    let answer = tokio::spawn({
        let (thread, id) = (thread.clone(), request.id.clone());
        async move { thread.resolve_approval(id, ApprovalDecision::Approve).await }
    });
    thread.sync().await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    node.partition();
    let unsettled = ThreadError::Approval(ApprovalRefusal::Unsettled(request.id.clone()));
    assert_eq!(answer.await.unwrap(), Err(unsettled));
    assert_eq!(
        node.runner.live(),
        1,
        "the node's run goes on, the call approved"
    );
    thread.close_and_wait().await;
    node.runner.stop_all();
}

/// A request the background policy answered is never seen by the host;
/// an answer to its id (a guess, a host that numbers) read `Unknown` from
/// a local child, but `Ended` from a remote one while it ran and
/// `Unknown` after — one id, refusals by placement and timing. `Unknown`
/// wherever the child runs, whenever asked.
#[tokio::test(start_paused = true)]
async fn a_request_the_policy_answered_is_unknown_wherever_the_child_runs() {
    use subagents::actors::hub::BackgroundApprovals;
    use subagents::messages::{ApprovalDecision, ApprovalId, ApprovalRefusal};
    use subagents::supervisor::ThreadError;
    for remote in [false, true] {
        let model = background_poster();
        let placement = if remote {
            Placement::On(Loopback::new("b", model.clone()).await)
        } else {
            Placement::Local
        };
        let (thread, mut events) = thread_with(
            DelegationBuilder::new(model)
                .placement(placement)
                .background_approvals(BackgroundApprovals::Deny),
        )
        .await;
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        // In its `sleep`: the request was asked and answered by now.
        run_for(&mut events, &mut log, 5).await;
        let id = ApprovalId::for_agent(&AgentId::new("agent_1"), 1);
        let unknown = Err(ThreadError::Approval(ApprovalRefusal::Unknown(id.clone())));
        let running = thread
            .resolve_approval(id.clone(), ApprovalDecision::Approve)
            .await;
        assert_eq!(running, unknown, "remote {remote}, while it runs");
        thread.close_and_wait().await;
    }
}

/// Forged across nodes (a node that lies, or has a bug): an approval
/// asked again under an id it had asked before. The check of what a node
/// may send let it through: the parent's stream showed two requests and
/// one answer, and the host's answer to the second was refused as given
/// already, while the node's agent waited on it to its wall clock. The
/// run is stopped and the child fails, as for the other reports its
/// agent cannot have sent.
#[tokio::test(start_paused = true)]
async fn an_approval_asked_twice_fails_its_child() {
    let post = || Reply::new().tool_call("http_post", r#"{"url":"https://example.com"}"#);
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run("Poster\nYou post.", "post twice")
                .tools(["http_post"])
                .wait(false),
        ),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script("Poster", vec![post(), post(), Reply::answer("posted")])
    .shared();
    let node = Loopback::new("b", model.clone()).await;
    // Every request of agent_1 numbered 1.
    *node.approvals_named.lock().unwrap() = Some("agent_1".into());
    let (thread, mut events) = thread_on(model, Placement::On(node.clone())).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    let request = until_child_approval(&mut events, &mut log).await;
    thread
        .resolve_approval(request.id, subagents::messages::ApprovalDecision::Approve)
        .await
        .unwrap();
    until_wake(&mut events, &mut log, "agent_1").await;
    run_for(&mut events, &mut log, 60).await;
    check_log(&log, true);
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Failed, "{envelope:?}");
    let error = envelope.error.unwrap_or_default();
    assert!(error.contains("twice"), "{error}");
    assert_eq!(node.runner.live(), 0, "the run goes on on its node");
    thread.close_and_wait().await;
}

/// A tool that needs approval and takes a minute once approved.
pub(super) struct SlowPost;

impl Tool for SlowPost {
    fn name(&self) -> &str {
        "slow_post"
    }
    fn description(&self) -> String {
        "Posts, slowly (the user approves each call).".into()
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn requires_approval(&self, _arguments: &str) -> bool {
        true
    }
    fn call(&self, _call: ToolCallContext) -> ToolFuture {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok("posted".into())
        })
    }
}

/// Review (approvals in every state): a remote child whose approval the
/// host answered said `awaiting_approval` for as long as the approved
/// tool ran, `for_s` counted from the request — the parent's model told
/// the user the child waited on an approval they had given. A local child
/// is in its tool at once; a remote one now too.
#[tokio::test(start_paused = true)]
async fn a_remote_child_is_in_its_tool_once_its_approval_is_answered() {
    use subagents::messages::ApprovalDecision;
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run("Poster\nYou post.", "post it")
                .tools(["slow_post"])
                .wait(false),
        ),
        Reply::answer("Started."),
        Reply::new().use_agent(&UseAgentCall::status("agent_1")),
        Reply::answer("It posts."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Poster",
        vec![
            Reply::new().tool_call("slow_post", "{}"),
            Reply::answer("posted"),
        ],
    )
    .shared();
    let gate = GateHandle::spawn(1).await.unwrap();
    let node = Loopback::with_tools("b", model.clone(), ToolRegistry::new().with(SlowPost), gate);
    let builder = DelegationBuilder::new(model)
        .tools(ToolRegistry::new().with(SlowPost))
        .placement(Placement::On(node));
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let asked = until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ApprovalRequested(_)))
    })
    .await;
    let AgentEvent::Child(_, inner) = asked else {
        unreachable!()
    };
    let AgentEvent::ApprovalRequested(request) = *inner else {
        unreachable!()
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    thread
        .resolve_approval(request.id, ApprovalDecision::Approve)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    thread.send_user("how is it going?").unwrap();
    until_result(&mut events, &mut log).await;
    let status = json(&results_of(&log, "use_agent").pop().unwrap().0);
    assert_eq!(status["now"]["doing"], "in_tool", "{status}");
    assert_eq!(status["now"]["tool"], "slow_post", "{status}");
    assert_eq!(status["now"]["for_s"], 5.0, "{status}");
    thread.close_and_wait().await;
}

/// Review of this session's own diff: children number their approvals in
/// their thread's block — but a child placed on a node numbered from 1 on
/// its node (the block never crossed the wire), so the fix for an id a
/// later session hands out again did not reach it: a host's kept row
/// `agent_1-approval-1` answered the new remote `agent_1`'s first request.
/// The run's spec carries the block.
#[tokio::test(start_paused = true)]
async fn a_remote_child_numbers_its_approvals_in_its_threads_block() {
    use subagents::messages::ThreadId;
    use subagents::supervisor::Threads;
    let model = background_poster();
    let node = Loopback::new("b", model.clone()).await;
    let mut threads = Threads::new();
    let quiet = ScriptedModel::new(vec![Reply::answer("ok")]).shared();
    threads
        .open(ThreadId::new("a"), DelegationBuilder::new(quiet))
        .await
        .unwrap();
    let builder = DelegationBuilder::new(model)
        .tools(
            ToolRegistry::new()
                .with(subagents_demo::Post)
                .with(subagents_demo::Sleep),
        )
        .placement(Placement::On(node.clone()));
    let mut events = threads.open(ThreadId::new("b"), builder).await.unwrap();
    let thread = threads.get(&ThreadId::new("b")).unwrap().clone();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    let asked = until_child_approval(&mut events, &mut log).await;
    assert_eq!(node.runner.live(), 1, "it runs on the node");
    assert_eq!(asked.id.as_str(), "agent_1-approval-1000001", "{log:#?}");
    thread.close_and_wait().await;
}

/// The same on every end here (this session's own review): a node that
/// goes silent after the answer is sent, then never answers the stop
/// (`stop_overdue`), ended the run here with the answer `Ended` — the
/// partition's uncertainty under another word, by whichever timer fired
/// first. `Unsettled`; an answer held behind the first, never sent, is
/// `AlreadyAnswered` with it (it read `Unsettled`, "it may have been"
/// taken).
#[tokio::test(start_paused = true)]
async fn every_end_here_before_the_nodes_word_leaves_the_answer_unsettled() {
    use subagents::messages::{ApprovalDecision, ApprovalRefusal};
    use subagents::supervisor::ThreadError;
    let (node, thread, _events, request) = a_child_asking_on_a_node_gone_silent().await;
    node.lose_stops.store(true, Ordering::SeqCst);
    let answer = |decision| {
        let (thread, id) = (thread.clone(), request.id.clone());
        tokio::spawn(async move { thread.resolve_approval(id, decision).await })
    };
    let first = answer(ApprovalDecision::Approve);
    thread.sync().await.unwrap();
    let second = answer(ApprovalDecision::Deny);
    thread.sync().await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stop = tokio::spawn({
        let thread = thread.clone();
        async move { thread.stop_child(&AgentId::new("agent_1")).await }
    });
    tokio::time::sleep(Duration::from_secs(60)).await;
    let id = request.id.clone();
    let unsettled = ThreadError::Approval(ApprovalRefusal::Unsettled(id.clone()));
    assert_eq!(first.await.unwrap(), Err(unsettled));
    let decision = ApprovalDecision::Approve;
    let held = ThreadError::Approval(ApprovalRefusal::AlreadyAnswered { id, decision });
    assert_eq!(second.await.unwrap(), Err(held));
    assert!(stop.await.unwrap().is_ok());
    thread.close_and_wait().await;
    node.runner.stop_all();
}

/// A background child on node `b` asking to post, the node's reports no
/// longer reaching this node from then on (its word on an answer never
/// comes): the node, the thread, its events and the request.
async fn a_child_asking_on_a_node_gone_silent() -> (
    Arc<Loopback>,
    ThreadHandle,
    subagents::actors::EventStream,
    subagents::messages::ApprovalRequest,
) {
    let model = background_poster();
    let node = Loopback::new("b", model.clone()).await;
    let (thread, mut events) = thread_on(model, Placement::On(node.clone())).await;
    thread.send_user("go").unwrap();
    let request = until_child_approval(&mut events, &mut Vec::new()).await;
    node.silent.store(true, Ordering::SeqCst);
    (node, thread, events, request)
}

/// And when the proxy dies with the answer waiting (the last read of this
/// session's change): a hub killed under its host drops the proxy without
/// its close, and the answer read `Ended` — the node may have taken it
/// before its stop arrived. `Unsettled`, as every end here is.
#[tokio::test(start_paused = true)]
async fn an_answer_waiting_when_its_proxy_dies_is_unsettled() {
    use subagents::messages::{ApprovalDecision, ApprovalRefusal};
    let (node, thread, _events, request) = a_child_asking_on_a_node_gone_silent().await;
    let answer = |decision| thread.hub().resolve_approval(request.id.clone(), decision);
    let first = answer(ApprovalDecision::Approve);
    thread.hub().sync().await.unwrap();
    // Held behind the first, never sent: the first stands (final read of
    // this session's change: a drop answered it `Unsettled` too).
    let second = answer(ApprovalDecision::Deny);
    thread.hub().sync().await.unwrap();
    thread.hub().actor().kill();
    let within = |answer| tokio::time::timeout(Duration::from_secs(60), answer);
    let id = request.id.clone();
    assert_eq!(
        within(first).await,
        Ok(Err(ApprovalRefusal::Unsettled(id.clone())))
    );
    let decision = ApprovalDecision::Approve;
    let held = ApprovalRefusal::AlreadyAnswered { id, decision };
    assert_eq!(within(second).await, Ok(Err(held)));
    thread.close_and_wait().await;
    node.runner.stop_all();
}
