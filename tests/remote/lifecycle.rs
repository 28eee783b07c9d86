//! A child on another node lives as a local one: the same fold, a lost node, a stop.

use super::*;

#[tokio::test(start_paused = true)]
async fn a_scenario_folds_the_same_with_its_children_on_another_node() {
    let (local, local_envelopes) = scenario(false).await;
    let (remote, remote_envelopes) = scenario(true).await;
    assert_eq!(local, remote);
    assert_eq!(local_envelopes, remote_envelopes);
    assert!(local.contains("worked 60 s"), "{local}");
}

#[tokio::test(start_paused = true)]
async fn a_lost_node_ends_its_child_failed_with_one_wake() {
    // The child is in its 600 s sleep on node b when b dies.
    let (thread, mut events, mut log, node) = in_its_tool_on_b().await;
    assert_eq!(node.runner.live(), 1);
    node.kill();
    until(&mut events, &mut log, is_wake).await;
    until_result(&mut events, &mut log).await;
    run_for(&mut events, &mut log, 3600).await;
    check_log(&log, true);
    let wakes = log.iter().filter(|e| is_wake(e)).count();
    assert_eq!(wakes, 1);
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Failed);
    let error = envelope.error.unwrap_or_default();
    assert!(error.starts_with("node lost: node `b`"), "{error}");
    // Its open call got its answer before its end.
    let (_, children) = children(&log);
    let child = &children[&AgentId::new("agent_1")];
    let results: Vec<&AgentEvent> = child
        .events
        .iter()
        .map(|(_, e)| e)
        .filter(|e| matches!(e, AgentEvent::ToolResult(_)))
        .collect();
    assert_eq!(results.len(), 1);
}

/// Stopped midway: the node is lost after the child's `Result` went by
/// and before its `Ended` report. The proxy found nothing left to close
/// and ended nothing: the child stayed `running` for ever, held its slot,
/// never woke the parent, and a stop of it never returned. It now ends
/// with the result it gave.
/// One background worker (`secs`) on node `b`, with the node's `flag`
/// set: the thread, its stream, the log up to the parent's first
/// `Result`, and the node.
pub(super) async fn one_worker_on(
    secs: &[u64],
    flag: impl Fn(&Loopback) -> &std::sync::atomic::AtomicBool,
) -> (ThreadHandle, EventStream, Vec<AgentEvent>, Arc<Loopback>) {
    let model = background_workers(secs).shared();
    let node = Loopback::new("b", model.clone()).await;
    flag(&node).store(true, std::sync::atomic::Ordering::SeqCst);
    let (thread, mut events) = thread_on(model, Placement::On(node.clone())).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    (thread, events, log, node)
}

#[tokio::test(start_paused = true)]
async fn a_node_lost_between_a_childs_result_and_its_end_ends_it() {
    let (thread, mut events, mut log, _node) =
        one_worker_on(&[30], |node| &node.lost_before_ended).await;
    run_for(&mut events, &mut log, 3600).await;
    check_log(&log, true);
    assert_eq!(log.iter().filter(|e| is_wake(e)).count(), 1, "one wake");
    let agent_1 = AgentId::new("agent_1");
    let envelope = thread.hub().status(&agent_1).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Done);
    assert_eq!(envelope.result.as_deref(), Some("worked 30 s"));
    let stopped = tokio::time::timeout(Duration::from_secs(60), thread.stop_child(&agent_1)).await;
    assert_eq!(stopped, Ok(Ok(SubAgentStatus::Done)));
    assert_eq!(
        thread.hub().snapshot().await.unwrap().live,
        0,
        "its slot is free"
    );
}

/// Foreign, across nodes (a node that lies): a run's `Ended` straight
/// after a `ToolStarted`, with no `ToolResult` and no `Result` (valid
/// bytes, numbered on). The proxy emitted only the `Result`: the call
/// never answered on the parent's stream (guarantee 7), whatever ended
/// the turn. What the node left open is answered first, as a local close
/// answers it.
#[tokio::test(start_paused = true)]
async fn a_run_ended_with_a_call_open_has_that_call_answered() {
    let (thread, mut events, mut log, _node) =
        one_worker_on(&[30], |node| &node.end_after_tool_started).await;
    run_for(&mut events, &mut log, 3600).await;
    check_log(&log, true);
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Done, "{envelope:?}");
    thread.close_and_wait().await;
}

/// Stopped midway, across nodes: a report its node never delivered (a
/// transport that dropped it, undecodable) left a gap — every report
/// after it held, the child `running` for ever, and a stop of it never
/// answered: the node's end waited behind the gap. A stop ends the child
/// here once its node has had the grace (30 s) to.
#[tokio::test(start_paused = true)]
async fn a_stop_of_a_child_behind_a_lost_report_answers() {
    let (thread, mut events, mut log, node) =
        one_worker_on(&[600], |node| &node.drop_next_event).await;
    let agent_1 = AgentId::new("agent_1");
    let stopped = tokio::time::timeout(Duration::from_secs(120), thread.stop_child(&agent_1)).await;
    assert_eq!(stopped, Ok(Ok(SubAgentStatus::Stopped)));
    run_for(&mut events, &mut log, 60).await;
    check_log(&log, true);
    assert_eq!(node.runner.live(), 0, "stopped on its node too");
    thread.close_and_wait().await;
}

/// The same gap with no stop: the child stayed `running` for ever, its
/// slot held, the parent never woken. Once a later report shows a report
/// missing, its node has the grace (30 s) to send it; then the run is
/// stopped there and the child fails, saying which report never came.
#[tokio::test(start_paused = true)]
async fn a_lost_report_fails_its_child_after_the_grace() {
    let (thread, mut events, mut log, node) =
        one_worker_on(&[60], |node| &node.drop_next_event).await;
    run_for(&mut events, &mut log, 3600).await;
    check_log(&log, true);
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Failed, "{envelope:?}");
    assert!(
        envelope
            .error
            .as_deref()
            .is_some_and(|e| e.contains("never arrived")),
        "{envelope:?}"
    );
    assert_eq!(log.iter().filter(|e| is_wake(e)).count(), 1, "one wake");
    assert_eq!(node.runner.live(), 0);
    thread.close_and_wait().await;
}

#[tokio::test(start_paused = true)]
async fn a_stop_reaches_the_child_on_its_node() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Victim", 600, false)),
        Reply::answer("Started."),
        Reply::new().use_agent(&UseAgentCall::stop("agent_1")),
        Reply::answer("Stopped it."),
        Reply::answer("Noted."),
    ])
    .with_script("Victim", worker(600))
    .shared();
    let node = Loopback::new("b", model.clone()).await;
    let (thread, mut events) = thread_on(model, Placement::On(node.clone())).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until(&mut events, &mut log, in_tool).await;
    thread.send_user("stop it").unwrap();
    until_result(&mut events, &mut log).await;
    run_for(&mut events, &mut log, 60).await;
    check_log(&log, true);
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Stopped);
    assert_eq!(node.runner.live(), 0, "stopped on its node too");
}

/// Stopped midway, forged by the wire: a run's report the node cannot
/// send (over the wire's limit) goes as `Refused` under its number, and
/// the asking node fails the child with it — but the run went on on its
/// node, unowned: calling tools and the model, holding a slot there, its
/// end sent to nobody. The asking node stops it as it fails the child.
#[tokio::test(start_paused = true)]
async fn a_run_refused_midway_is_stopped_on_its_node() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Victim", 600, false)),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script("Victim", worker(600))
    .shared();
    let node = Loopback::new("b", model.clone()).await;
    node.refuse_next_event.store(true, Ordering::SeqCst);
    let (thread, mut events) = thread_on(model, Placement::On(node.clone())).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    run_for(&mut events, &mut log, 60).await;
    check_log(&log, true);
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Failed, "{envelope:?}");
    assert!(
        envelope
            .error
            .as_deref()
            .unwrap_or("")
            .contains("could not run it"),
        "{envelope:?}"
    );
    assert_eq!(node.runner.live(), 0, "left running on its node");
}

/// Stopped midway: a hub killed (or whose handler crashed) with children
/// on another node. ractor kills its children with no `post_stop`, and a
/// proxy closed its turn only there: each child's call in flight was
/// never answered, no `Result` came, and the runs went on on their node,
/// unowned. As local children do, each ends its turn in order — its call
/// answered, a failed `Result`, then its terminal status — and its run is
/// stopped on its node.
#[tokio::test(start_paused = true)]
async fn a_killed_hub_ends_its_remote_childrens_turns_and_runs() {
    let model = background_workers(&[600, 600]).shared();
    let node = Loopback::new("b", model.clone()).await;
    let (thread, mut events) = thread_on(model, Placement::On(node.clone())).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    while node.runner.live() < 2 || log.iter().filter(|e| in_tool(e)).count() < 2 {
        until(&mut events, &mut log, in_tool).await;
    }
    kill_the_hub(&thread).await;
    run_for(&mut events, &mut log, 1).await;
    check_log(&log, true);
    let closing: Vec<String> = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Child(id, inner) if matches!(**inner, AgentEvent::Result(_)) => {
                Some(format!("{id} Result"))
            }
            AgentEvent::ChildStatus(id, status) if status.is_terminal() => {
                Some(format!("{id} {}", status.as_str()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        closing,
        [
            "agent_1 Result",
            "agent_1 failed",
            "agent_2 Result",
            "agent_2 failed"
        ]
    );
    assert_eq!(node.runner.live(), 0, "left running on its node");
}

/// Same instant, across nodes, under `Cascade`: the parent stopped after
/// the child it waits on inline gave its `Result` and before its node's
/// `Ended` report — several hops on another node. The hub saw a turn not
/// yet over and stopped the child; the stop came too late (its turn had
/// closed on its node), so it ended `done` — never handed to the
/// background: no wake, its answer reaching nobody, though the cut call
/// said "if it had already finished, its result will arrive as a
/// message". A stop that comes as the turn ends makes its result a wake.
/// (Its node's `Ended` a second behind its events, as over a network: on
/// the loopback it came in the same tick, and the window never opened.)
#[tokio::test(start_paused = true)]
async fn a_cascade_stop_as_a_remote_child_answers_makes_its_result_a_wake() {
    use subagents::actors::ParentStopPolicy;
    use subagents::simulation::{HostAction, Moment, Scenario, Trigger};
    let mut reached = std::collections::BTreeSet::new();
    for (moment, yields) in [Moment::ToolResult, Moment::Result]
        .into_iter()
        .flat_map(|m| (0..24).map(move |y| (m, y)))
    {
        let node_model = ScriptedModel::new(vec![])
            .with_script("Worker\n", worker(5))
            .shared();
        let node = Loopback::new("b", node_model).await;
        node.slow_ended.store(true, Ordering::SeqCst);
        let scenario = Scenario::new(vec![
            Reply::new().use_agent(&work_call("Worker", 5, true)),
            Reply::answer("Noted."),
            Reply::answer("Noted again."),
        ])
        .child_script("Worker\n", worker(5))
        .tools(ToolRegistry::new().with(subagents_demo::Sleep))
        .configure(move |b| {
            b.parent_stop(ParentStopPolicy::Cascade)
                .placement(Placement::On(node.clone()))
        })
        .at(Duration::ZERO, HostAction::User("go".into()))
        .on(Trigger::new(Some(AgentId::new("agent_1")), moment, |_, _| {
            Some(HostAction::StopParent)
        })
        .after_yields(yields))
        .run_for(Duration::from_secs(600));
        let report = tokio::spawn(async move { scenario.run_async(0).await })
            .await
            .unwrap();
        let log = report.events();
        check_log(&log, true);
        let (output, _) = results_of(&log, "use_agent").remove(0);
        let said = json(&output);
        let child = report
            .envelopes
            .iter()
            .find(|e| e.id.as_str() == "agent_1")
            .unwrap();
        let wakes = log.iter().filter(|e| is_wake(e)).count();
        if said["stopping"] == true {
            assert!(
                matches!(
                    (child.status, wakes),
                    (SubAgentStatus::Stopped, 0) | (SubAgentStatus::Done, 1)
                ),
                "{yields}: the call said it stops with the turn unless it had finished: {:?}\n{}",
                (child.status, wakes),
                report.render()
            );
        } else {
            assert_eq!((child.status, wakes), (SubAgentStatus::Done, 0), "{output}");
        }
        reached.insert((said["stopping"] == true, child.status.as_str(), wakes));
    }
    eprintln!("reached: {reached:?}");
    assert!(reached.contains(&(true, "done", 1)), "{reached:?}");
}

/// Stopped midway, across nodes: a stop of a background child on its way
/// (the node has not ended the run yet), then the node is lost. The loss
/// ignored the stop under way: the child ended `failed` ("node lost") and
/// woke the parent, though the stop was taken — a stop whose node never
/// answers ends it `stopped`, with no wake. So does a loss during a stop.
#[tokio::test(start_paused = true)]
async fn a_node_lost_during_a_stop_ends_the_child_stopped() {
    let (thread, mut events, mut log, node) = one_worker_on(&[600], |node| &node.lose_stops).await;
    until(&mut events, &mut log, in_tool).await;
    let agent_1 = AgentId::new("agent_1");
    let stopped = thread.stop_child(&agent_1);
    run_for(&mut events, &mut log, 1).await;
    node.kill();
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(60), stopped).await,
        Ok(Ok(SubAgentStatus::Stopped))
    );
    run_for(&mut events, &mut log, 60).await;
    check_log(&log, true);
    assert!(!log.iter().any(is_wake), "a stopped child wakes nobody");
    thread.close_and_wait().await;
}

/// Review of this session's own change, the same instant with both stops:
/// a stop by name and the parent's cut under `Cascade` reach a remote
/// child whose answer was given (its node's `Ended` on the way). What
/// each stop meant was one slot, the later erasing the earlier: stopped
/// by name then cut, the child was not cancelled (a message resumed it);
/// cut then stopped, no wake came, though the cut call promised one. Both
/// hold now: cancelled, and its result a wake.
#[tokio::test(start_paused = true)]
async fn a_stop_by_name_and_a_cascade_cut_at_once_both_hold() {
    use subagents::actors::ParentStopPolicy;
    for by_name_first in [true, false] {
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&work_call("Worker", 5, true)),
            Reply::answer("Noted."),
            Reply::answer("Noted again."),
        ])
        .with_script("Worker\n", worker(5))
        .shared();
        let node = Loopback::new("b", model.clone()).await;
        node.slow_ended.store(true, Ordering::SeqCst);
        let (thread, mut events) = thread_with(
            DelegationBuilder::new(model)
                .placement(Placement::On(node.clone()))
                .parent_stop(ParentStopPolicy::Cascade),
        )
        .await;
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        let agent_1 = AgentId::new("agent_1");
        // Its answer given; its node's `Ended` a second away.
        until(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::Child(id, event)
                if id.as_str() == "agent_1" && matches!(**event, AgentEvent::Result(_)))
        })
        .await;
        let stopped = if by_name_first {
            let stopped = thread.stop_child(&agent_1);
            thread.stop_parent().unwrap();
            stopped
        } else {
            thread.stop_parent().unwrap();
            thread.stop_child(&agent_1)
        };
        run_for(&mut events, &mut log, 600).await;
        assert_eq!(stopped.await, Ok(SubAgentStatus::Done));
        check_log(&log, true);
        let child = thread.hub().status(&agent_1).unwrap();
        let wakes = log.iter().filter(|e| is_wake(e)).count();
        assert_eq!(
            (child.status, child.cancelled, wakes),
            (SubAgentStatus::Done, true, 1),
            "by name first: {by_name_first}"
        );
        thread.close_and_wait().await;
    }
}

/// Stopped midway, across nodes, the node up: a run's last report lost
/// (its `Ended`, after its `Result` went by), or no report after its
/// start — nothing bounded the wait: the child stayed `running`, its slot
/// held, the parent never woken (a gap is seen only once a later report
/// arrives, and its wall clock runs on its node). Past its wall clock and
/// the grace, the run ends here: with the result its `Result` gave, or
/// failed, saying so.
#[tokio::test(start_paused = true)]
async fn a_silent_run_on_a_reachable_node_ends_past_its_wall_clock() {
    let (thread, mut events, mut log, _node) = one_worker_on(&[5], |node| &node.drop_ended).await;
    run_for(&mut events, &mut log, 3600).await;
    check_log(&log, true);
    let agent_1 = AgentId::new("agent_1");
    let envelope = thread.hub().status(&agent_1).unwrap();
    assert_eq!(
        (envelope.status, envelope.result.as_deref()),
        (SubAgentStatus::Done, Some("worked 5 s")),
        "{envelope:?}"
    );
    assert_eq!(log.iter().filter(|e| is_wake(e)).count(), 1);
    thread.close_and_wait().await;

    let (thread, mut events, mut log, _node) = one_worker_on(&[600], |node| &node.silent).await;
    run_for(&mut events, &mut log, 3600).await;
    check_log(&log, true);
    let envelope = thread.hub().status(&agent_1).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Failed, "{envelope:?}");
    let error = envelope.error.unwrap_or_default();
    assert!(
        error.contains("did not end the run within its wall clock"),
        "{error}"
    );
    assert_eq!(
        thread.hub().snapshot().await.unwrap().live,
        0,
        "its slot is free"
    );
    thread.close_and_wait().await;
}

/// A node that stops its runs itself (`NodeRunner::stop_all`: its host
/// going away, as `ClusterNode::shutdown` does) is not a stop the parent
/// asked for: the child ended `stopped`, which wakes nobody ("stopped on
/// purpose"), and the parent's model, told its result would come as a
/// message, never heard of the work again — where the same node's crash
/// fails the child with one wake. It fails, saying its node stopped it —
/// also when a stop from here comes between its `Result` (shown
/// `failed`) and its node's `Ended`: the end read the stop and said
/// `stopped`, no wake, while the stream had said `failed`.
#[tokio::test(start_paused = true)]
async fn a_run_its_node_stops_on_its_own_fails_with_one_wake() {
    for stop_after_its_result in [false, true] {
        let (thread, mut events, mut log, node) = in_its_tool_on_b().await;
        let agent_1 = AgentId::new("agent_1");
        node.slow_ended
            .store(stop_after_its_result, Ordering::SeqCst);
        node.runner.stop_all();
        if stop_after_its_result {
            until(&mut events, &mut log, |e| {
                matches!(e, AgentEvent::Child(id, event)
                    if id.as_str() == "agent_1" && matches!(**event, AgentEvent::Result(_)))
            })
            .await;
            let stopped = thread.stop_child(&agent_1);
            run_for(&mut events, &mut log, 60).await;
            assert_eq!(stopped.await, Ok(SubAgentStatus::Failed));
        } else {
            until(&mut events, &mut log, is_wake).await;
            until_result(&mut events, &mut log).await;
        }
        run_for(&mut events, &mut log, 3600).await;
        check_log(&log, true);
        let what = format!("a stop after its result: {stop_after_its_result}");
        assert_eq!(log.iter().filter(|e| is_wake(e)).count(), 1, "{what}");
        let envelope = thread.hub().status(&agent_1).unwrap();
        assert_eq!(envelope.status, SubAgentStatus::Failed, "{what}");
        let error = envelope.error.unwrap_or_default();
        assert!(
            error.contains("node `b` stopped the run"),
            "{what}: {error}"
        );
        thread.close_and_wait().await;
    }
}

/// A background child in its 600 s sleep on node `b`: the thread, its
/// stream, the log so far, and the node.
async fn in_its_tool_on_b() -> (ThreadHandle, EventStream, Vec<AgentEvent>, Arc<Loopback>) {
    let model = background_workers(&[600]).shared();
    let node = Loopback::new("b", model.clone()).await;
    let (thread, mut events) = thread_on(model, Placement::On(node.clone())).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until(&mut events, &mut log, in_tool).await;
    (thread, events, log, node)
}

/// Held at rest, across nodes: each remote run set a timer for its bound
/// (its wall clock and 30 s) and let it run to its end — a task holding
/// the proxy's cell for the wall clock after the child had ended and its
/// thread closed, for ever under `Duration::MAX` (no limit). The timer
/// goes with the run.
#[tokio::test(start_paused = true)]
async fn a_remote_run_leaves_no_timer_behind() {
    let tasks = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let model = background_workers(&[5]).shared();
    let node = Loopback::new("b", model.clone()).await;
    let at_rest = tasks();
    let limits = Limits {
        wall_clock: Duration::MAX,
        ..Limits::default()
    };
    let builder = DelegationBuilder::new(model)
        .placement(Placement::On(node.clone()))
        .child_limits(limits);
    let (thread, mut events) = thread_with(builder).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_wake(&mut events, &mut log, "agent_1").await;
    until_result(&mut events, &mut log).await;
    thread.close_and_wait().await;
    drop(events);
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert_eq!(tasks(), at_rest, "a task outlived the thread");
}

/// Host code that panics, across nodes: a transport whose `request` (or
/// `start`) panicked — an `expect` on a link that is down, where the trait
/// asks for `Err` — crashed the proxy in its stop, and its close (the
/// proxy's drop, or a kill's ordered ends) took the closing events out of
/// the mirror before calling it again: the child's open call had no
/// `ToolResult`, the child no `Result`, and a kill's ends were cut short.
/// A panic there is read as the `Err` it should have been — its payload
/// dropped inside the guard, whatever its `Drop` does.
#[tokio::test(start_paused = true)]
async fn a_transport_that_panics_loses_no_closing_event() {
    let agent_1 = AgentId::new("agent_1");
    let cases = [false, true].map(|bombs| ["start", "stop", "kill"].map(|how| (bombs, how)));
    for (bombs, how) in cases.into_iter().flatten() {
        let model = background_workers(&[30]).shared();
        let node = Loopback::new("b", model.clone()).await;
        node.bombs.store(bombs, Ordering::SeqCst);
        node.panics.store(how == "start", Ordering::SeqCst);
        let (thread, mut events) = thread_on(model, Placement::On(node.clone())).await;
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        if how != "start" {
            until(&mut events, &mut log, in_tool).await;
            node.panics.store(true, Ordering::SeqCst);
            if how == "stop" {
                let stop = thread.stop_child(&agent_1);
                let stopped = tokio::time::timeout(Duration::from_secs(60), stop).await;
                assert!(
                    stopped.is_ok(),
                    "{how} (bombs: {bombs}): the stop never answered"
                );
            } else {
                kill_the_hub(&thread).await;
            }
        }
        run_for(&mut events, &mut log, 3600).await;
        check_log(&log, true);
        let child = |e: &AgentEvent, inner: fn(&AgentEvent) -> bool| matches!(e, AgentEvent::Child(c, event) if *c == agent_1 && inner(event));
        let result = log
            .iter()
            .any(|e| child(e, |e| matches!(e, AgentEvent::Result(_))));
        assert!(
            result,
            "{how} (bombs: {bombs}): the child has no `Result`: {log:?}"
        );
        if how != "start" {
            let answered = |e: &AgentEvent| matches!(e, AgentEvent::ToolResult(_));
            assert!(
                log.iter().any(|e| child(e, answered)),
                "{how} (bombs: {bombs}): its call unanswered"
            );
        }
        let ended = log.iter().any(
            |e| matches!(e, AgentEvent::ChildStatus(c, s) if *c == agent_1 && s.is_terminal()),
        );
        assert!(ended, "{how} (bombs: {bombs}): no terminal status: {log:?}");
    }
}
