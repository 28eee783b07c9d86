//! A stopped parent: detach or cascade; approvals from children.

use super::*;

fn inline_parent() -> ScriptedModel {
    ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 30, true)),
        Reply::answer("Noted."),
        Reply::answer("Noted again."),
    ])
    .with_script("Worker", worker(30))
}

#[tokio::test(start_paused = true)]
async fn stopping_the_parent_detaches_the_child_which_wakes_it_later() {
    let (thread, mut events) = thread(inline_parent()).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 5).await;
    thread.stop_parent().unwrap();
    let stopped = until_result(&mut events, &mut log).await;
    assert_eq!(stopped.outcome, Outcome::Stopped);
    run_for(&mut events, &mut log, 120).await;
    let (_, by_id) = check_log(&log, true);
    let statuses: Vec<SubAgentStatus> = by_id[&AgentId::new("agent_1")]
        .statuses
        .iter()
        .map(|(_, s)| *s)
        .collect();
    assert_eq!(
        statuses,
        [
            SubAgentStatus::Running,
            SubAgentStatus::Background,
            SubAgentStatus::Done
        ]
    );
    assert_eq!(wakes(&log), ["agent_1"]);
}

#[tokio::test(start_paused = true)]
async fn the_cascade_policy_stops_the_child_with_the_parent() {
    let (thread, mut events) = ThreadHandle::spawn(
        DelegationBuilder::new(inline_parent().shared())
            .tools(ToolRegistry::new().with(Sleep))
            .parent_stop(subagents::actors::ParentStopPolicy::Cascade),
        None,
    )
    .await
    .unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 5).await;
    thread.stop_parent().unwrap();
    run_for(&mut events, &mut log, 120).await;
    let (_, by_id) = check_log(&log, true);
    assert_eq!(
        by_id[&AgentId::new("agent_1")].terminal().unwrap().1,
        SubAgentStatus::Stopped
    );
    assert!(wakes(&log).is_empty());
}

#[tokio::test(start_paused = true)]
async fn an_approval_from_a_child_is_resolved_through_the_thread() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run("Poster", "post").tools(["http_post"])),
        Reply::answer("Posted via the child."),
    ])
    .with_script(
        "Poster",
        vec![
            Reply::new().tool_call("http_post", "{}"),
            Reply::answer("posted it"),
        ],
    );
    let (thread, mut events) = thread(model).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    let request = until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ApprovalRequested(_)))
    })
    .await;
    let AgentEvent::Child(child, inner) = request else {
        unreachable!()
    };
    let AgentEvent::ApprovalRequested(request) = *inner else {
        unreachable!()
    };
    assert_eq!(child.as_str(), "agent_1");
    assert_eq!(
        thread
            .resolve_approval(
                ApprovalId::new("agent_9-approval-1"),
                ApprovalDecision::Approve
            )
            .await,
        Err(ThreadError::Approval(ApprovalRefusal::Unknown(
            ApprovalId::new("agent_9-approval-1")
        )))
    );
    thread
        .resolve_approval(request.id, ApprovalDecision::Approve)
        .await
        .unwrap();
    let result = until_result(&mut events, &mut log).await;
    assert_eq!(result.text, "Posted via the child.");
    let (_, by_id) = check_log(&log, true);
    assert!(
        by_id[&child]
            .events
            .iter()
            .any(|(_, e)| matches!(e, AgentEvent::ToolResult(r) if r.output == "posted"))
    );
}

/// Same instant: an approval answered through the thread and a stop of the
/// parent sent right after it, in one tick. The answer went to the parent
/// from a task of its own, so the stop overtook it: the host was told
/// `Ended` and the stream read `Cancelled`, though it answered first. The
/// answer is in the parent's mailbox the moment it is given.
#[tokio::test(start_paused = true)]
async fn an_approval_then_a_stop_in_one_tick_arrive_in_that_order() {
    let model = ScriptedModel::new(vec![
        Reply::new().tool_call("http_post", "{}"),
        Reply::answer("Posted."),
    ]);
    let (thread, mut events) = thread(model).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    let request = until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::ApprovalRequested(_))
    })
    .await;
    let AgentEvent::ApprovalRequested(request) = request else {
        unreachable!()
    };
    let (answered, stopped) = tokio::join!(
        thread.resolve_approval(request.id.clone(), ApprovalDecision::Approve),
        async { thread.stop_parent() }
    );
    stopped.unwrap();
    assert_eq!(answered, Ok(()), "the answer came first");
    until_result(&mut events, &mut log).await;
    let resolved: Vec<&AgentEvent> = log
        .iter()
        .filter(|e| matches!(e, AgentEvent::ApprovalResolved { .. }))
        .collect();
    assert_eq!(resolved.len(), 1, "{log:#?}");
    let text = format!("{:?}", resolved[0]);
    assert!(text.contains("Approve"), "{text}");
}

/// A tool the host releases.
struct Held(std::sync::Arc<tokio::sync::Notify>);

impl Tool for Held {
    fn name(&self) -> &str {
        "held"
    }
    fn description(&self) -> String {
        "waits for the host".into()
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn call(&self, _call: ToolCallContext) -> ToolFuture {
        let held = self.0.clone();
        Box::pin(async move {
            held.notified().await;
            Ok("released".into())
        })
    }
}

/// Same instant: the parent stopped in the tick its turn asks for
/// approval. The stop reached the agent before the turn's notice that the
/// approval was pending: the request was closed once (cancelled), then
/// filed as pending on an idle parent — `pending_approvals` 1 for good.
/// Fired 0–5 scheduler turns after the stop.
#[tokio::test(start_paused = true)]
async fn a_stop_in_the_tick_an_approval_is_asked_leaves_none_pending() {
    let mut asked_at_all = 0;
    for turns in 0..6 {
        let release = std::sync::Arc::new(tokio::sync::Notify::new());
        let model = ScriptedModel::new(vec![
            Reply::new()
                .tool_call("held", "{}")
                .tool_call("http_post", "{}"),
        ]);
        let builder = DelegationBuilder::new(model.shared())
            .system_prompt("You are the parent.")
            .tools(ToolRegistry::new().with(Held(release.clone())).with(Post));
        let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        until(
            &mut events,
            &mut log,
            |e| matches!(e, AgentEvent::ToolStarted(s) if s.name == "held"),
        )
        .await;
        thread.stop_parent().unwrap();
        for _ in 0..turns {
            tokio::task::yield_now().await;
        }
        release.notify_one();
        until_result(&mut events, &mut log).await;
        thread.sync().await.unwrap();
        let asked: Vec<ApprovalId> = log
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ApprovalRequested(r) => Some(r.id.clone()),
                _ => None,
            })
            .collect();
        let snapshot = thread.parent_snapshot().await.unwrap();
        assert!(!snapshot.busy);
        assert_eq!(
            snapshot.pending_approvals, 0,
            "after {turns} turns: {log:#?}"
        );
        if let Some(id) = asked.first() {
            asked_at_all += 1;
            assert_eq!(
                thread
                    .resolve_approval(id.clone(), ApprovalDecision::Approve)
                    .await,
                Err(ThreadError::Approval(ApprovalRefusal::Ended(id.clone())))
            );
        }
        check_log(&log, true);
        thread.close_and_wait().await;
    }
    // Some ordering asked after the stop was sent (a guard on the sweep's
    // reach: the request was made in some round, so the check on it ran).
    assert!(asked_at_all > 0, "no round asked for the approval");
}

/// The typed host boundary (review): a delegating agent spawned under a
/// ractor host that is stopping was refused by ractor — and came back as
/// `AgentError::Spawn("Actor panicked during startup 'Supervisor is
/// shutting down'")`, a string saying a panic where there was none: a
/// host could not tell its own shutdown from a failure without matching
/// ractor's words.
#[tokio::test(start_paused = true)]
async fn a_spawn_under_a_stopping_host_says_so() {
    use subagents::actors::{AgentError, EventSink};
    let host = common::host::Host::spawn().await;
    host.cell().stop_and_wait(None, None).await.unwrap();
    let model = ScriptedModel::new(vec![Reply::answer("Noted.")]);
    let (sink, _events) = EventSink::channel();
    let refused = DelegationBuilder::new(model.shared())
        .spawn_into(sink, Some(host.cell()))
        .await
        .err();
    assert_eq!(refused, Some(AgentError::SupervisorStopping));
    assert_eq!(
        AgentError::SupervisorStopping.to_string(),
        "the agent could not be started: its supervisor is stopping"
    );
}

/// Repeated: a stop-all sent while a stop of one child is under way (a
/// host's stop, a `use_agent stop` in flight) counted that child as one
/// it stopped: `stop_child` said `Stopped` and the switch said 1 — a host
/// adding them up showed two sub-agents stopped for one. It waits for the
/// child's end, and counts only what it stopped.
#[tokio::test(start_paused = true)]
async fn a_stop_all_does_not_count_a_child_a_stop_was_already_ending() {
    let (thread, mut events) = thread(background_workers(&[600])).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let id = AgentId::new("agent_1");
    let one = thread.hub().stop(&id);
    let all = thread.hub().stop_all();
    assert_eq!(all.await, Ok(0), "the stop-all stopped nothing");
    assert_eq!(
        thread.hub().status(&id).map(|e| e.status),
        Some(SubAgentStatus::Stopped),
        "the stop-all answered once the child had ended"
    );
    assert_eq!(one.await, Ok(SubAgentStatus::Stopped));
    run_for(&mut events, &mut log, 60).await;
    check_log(&log, true);
    thread.close_and_wait().await;
}
