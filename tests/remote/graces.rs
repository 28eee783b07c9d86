//! A remote run's graces (a stop's, a gap's, an `Ended`'s after its
//! `Result`): each bounds a wait on its node, and goes with the run.

use subagents::messages::Limits;

use super::*;

fn tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// Stopped midway, across nodes, the node up, no wall clock: a run's
/// `Ended` lost after its `Result` was bounded only by the run's wall
/// clock and a grace — under `Duration::MAX` (no limit), never: the child
/// stayed `running`, its answer on the stream, its slot held, the parent
/// never woken. Its `Ended` has the grace from its `Result` on, and the
/// run ends with the result its `Result` gave.
#[tokio::test(start_paused = true)]
async fn a_lost_end_after_a_result_ends_the_run_under_no_wall_clock() {
    let model = background_workers(&[5]).shared();
    let node = Loopback::new("b", model.clone()).await;
    node.drop_ended.store(true, Ordering::SeqCst);
    let builder = DelegationBuilder::new(model)
        .placement(Placement::On(node.clone()))
        .child_limits(Limits {
            wall_clock: Duration::MAX,
            ..Limits::default()
        });
    let (thread, mut events) = thread_with(builder).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    run_for(&mut events, &mut log, 3600).await;
    check_log(&log, true);
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(
        (envelope.status, envelope.result.as_deref()),
        (SubAgentStatus::Done, Some("worked 5 s")),
        "{envelope:?}"
    );
    assert_eq!(log.iter().filter(|e| is_wake(e)).count(), 1);
    assert_eq!(thread.hub().snapshot().await.unwrap().live, 0);
    thread.close_and_wait().await;
}

/// A stop's grace was a timer let run: after the node ended the stopped
/// run at once and the thread closed, a task held the stopped proxy for
/// 30 s more — one per child a stop-all or a switch stopped. It goes with
/// the run, as the run's bound does (local children: the control).
#[tokio::test(start_paused = true)]
async fn a_stopped_remote_run_leaves_no_timer_behind() {
    for remote in [false, true] {
        let model = background_workers(&[600]).shared();
        let node = Loopback::new("b", model.clone()).await;
        // The last case's node lets go of its gate meanwhile.
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        let at_rest = tasks();
        let placement = match remote {
            true => Placement::On(node.clone()),
            false => Placement::Local,
        };
        let (thread, mut events) = thread_on(model, placement).await;
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        until_child(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::ToolStarted(_))
        })
        .await;
        thread.stop_child(&AgentId::new("agent_1")).await.unwrap();
        thread.close_and_wait().await;
        drop(events);
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            tasks(),
            at_rest,
            "remote: {remote}: a task outlived the thread"
        );
    }
}

/// Stopped midway, across nodes (review of this session's diff): a remote
/// child's proxy killed after its node's `Result` (`completed`) and
/// before its `Ended` (a second behind, as over a network) — alone, or
/// as its hub stops. The proxy's death dropped the run's reply unsent:
/// the child ended `failed` ("killed"), or `failed` by the stopping
/// hub's own end of the turn, its answer on the stream thrown away. It
/// ends with the result its `Result` gave, as a local child does.
#[tokio::test(start_paused = true)]
async fn a_remote_child_killed_between_its_result_and_its_end_keeps_its_answer() {
    for stop_hub in [false, true] {
        let model = background_workers(&[5]).shared();
        let node = Loopback::new("b", model.clone()).await;
        node.slow_ended.store(true, Ordering::SeqCst);
        let (thread, mut events) = thread_on(model, Placement::On(node.clone())).await;
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        until_child(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::Result(_))
        })
        .await;
        let hub = thread.hub().actor().clone();
        if stop_hub {
            hub.stop(None);
        }
        hub.get_children()[0].kill();
        let id = AgentId::new("agent_1");
        until(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::ChildStatus(at, status) if *at == id && status.is_terminal())
        })
        .await;
        let envelope = thread.hub().status(&id).unwrap();
        assert_eq!(
            (envelope.status, envelope.result.as_deref()),
            (SubAgentStatus::Done, Some("worked 5 s")),
            "the hub stopped: {stop_hub}: {envelope:?}"
        );
        check_log(&log, true);
        thread.close_and_wait().await;
    }
}
