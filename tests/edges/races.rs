//! Races on a multi-threaded runtime, and the typed refusals a host gets.

use super::*;

/// Defect 2 on a multi-threaded runtime, where the parent's turn task can
/// run on one worker while the stop closes the turn on another: for every
/// round, the child's answer reaches the parent exactly once (a tool call
/// that receives the result after its turn was cut must not claim it).
#[test]
fn delivery_is_exactly_once_on_a_multi_threaded_runtime() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut ways = std::collections::BTreeMap::new();
    for round in 0..150u32 {
        let way = runtime.block_on(async move {
            let model = ScriptedModel::new(vec![
                Reply::new().use_agent(&work_call("Worker 1", 0, true)),
                Reply::answer("Noted."),
                Reply::answer("Noted again."),
            ])
            .with_script("Worker 1\n", worker(0));
            let (thread, mut events) = ThreadHandle::spawn(parent(model), None).await.unwrap();
            thread.send_user("start").unwrap();
            let mut log = Vec::new();
            until(&mut events, &mut log, |e| {
                matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::Result(_)))
            })
            .await;
            for _ in 0..(round % 7) {
                tokio::task::yield_now().await;
            }
            thread.stop_parent().unwrap();
            // Until the parent is idle again and the answer has landed (a
            // lost answer never lands: give up after many turns).
            for _ in 0..5_000 {
                let idle = thread.parent_snapshot().await.is_ok_and(|s| !s.busy);
                let ended = thread
                    .hub()
                    .status(&AgentId::new("agent_1"))
                    .is_some_and(|e| e.status.is_terminal());
                thread.sync().await.unwrap();
                while let Some(event) = events.try_recv() {
                    log.push(event);
                }
                let woke_or_took = delivered_inline(&log, "call_1_1") + woken(&log, "agent_1");
                if idle && ended && woke_or_took > 0 {
                    break;
                }
                tokio::task::yield_now().await;
            }
            // A second delivery may still be on its way (the book is
            // ended before the thread reads the finish): the thread reads
            // what it was sent, then the parent's turn (a wake) ends.
            for _ in 0..100 {
                tokio::task::yield_now().await;
            }
            thread.sync().await.unwrap();
            for _ in 0..5_000 {
                if thread.parent_snapshot().await.is_ok_and(|s| !s.busy) {
                    break;
                }
                tokio::task::yield_now().await;
            }
            thread.sync().await.unwrap();
            while let Some(event) = events.try_recv() {
                log.push(event);
            }
            let inline = delivered_inline(&log, "call_1_1");
            let wakes = woken(&log, "agent_1");
            assert_eq!(inline + wakes, 1, "round {round}: {log:#?}");
            thread.close_and_wait().await;
            (inline, wakes)
        });
        *ways.entry(way).or_insert(0) += 1;
    }
    eprintln!("deliveries over 150 rounds: {ways:?}");
}

/// Found by the property test's soak: the parent stopped while its
/// `use_agent` waited for the hub to make the child (the hub replied, the
/// call was cut before it read the id): nobody waited on the child, it was
/// not in the background, and its answer never reached the parent. Now a
/// child whose requester gives up before learning its id goes to the
/// background (Detach) and wakes the parent; with Cascade it is stopped.
#[test]
fn a_child_requested_as_its_parents_turn_is_cut_is_not_lost() {
    use subagents::actors::ParentStopPolicy;
    use subagents::simulation::{Moment, Trigger};
    let mut reached = std::collections::BTreeSet::new();
    for cascade in [false, true] {
        for yields in 0..12 {
            let policy = if cascade {
                ParentStopPolicy::Cascade
            } else {
                ParentStopPolicy::Detach
            };
            let report = Scenario::new(vec![
                Reply::new()
                    .use_agent(&work_call("Worker 1", 1, true))
                    .use_agent(&work_call("Worker 2", 0, true)),
                Reply::answer("Noted."),
                Reply::answer("Noted again."),
                Reply::answer("Noted once more."),
            ])
            .child_script("Worker 1\n", worker(1))
            .child_script("Worker 2\n", worker(0))
            .tools(ToolRegistry::new().with(Sleep))
            .configure(move |b| b.parent_stop(policy))
            .on(
                Trigger::new(Some(AgentId::new("agent_1")), Moment::Ended, |_, _| {
                    Some(HostAction::StopParent)
                })
                .after_yields(yields),
            )
            .at(Duration::ZERO, HostAction::User("two".into()))
            .run_for(Duration::from_secs(120))
            .run(0);
            let log = report.events();
            check_log(&log, true);
            for (call, child) in [("call_1_1", "agent_1"), ("call_1_2", "agent_2")] {
                let Some(envelope) = report.envelopes.iter().find(|e| e.id.as_str() == child)
                else {
                    continue;
                };
                let deliveries = delivered_inline(&log, call) + woken(&log, child);
                if envelope.status == SubAgentStatus::Done && !cascade {
                    assert_eq!(
                        deliveries,
                        1,
                        "{child} after {yields} turns: {}",
                        report.render()
                    );
                } else {
                    assert!(deliveries <= 1, "{child}: {}", report.render());
                }
                if child == "agent_2" {
                    reached.insert((cascade, envelope.status.as_str(), deliveries));
                }
            }
        }
    }
    assert!(reached.len() > 2, "{reached:?}");
}

/// The host stops one child through its thread: a typed answer — the
/// status after, or `UnknownChild` with the id — never a bare sentence.
#[tokio::test(start_paused = true)]
async fn stopping_one_child_through_the_thread_is_typed() {
    use subagents::supervisor::ThreadError;
    let (thread, mut events) = ThreadHandle::spawn(parent(background_workers(&[600])), None)
        .await
        .unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 10).await;
    assert_eq!(
        thread.stop_child(&AgentId::new("agent_1")).await,
        Ok(SubAgentStatus::Stopped)
    );
    assert_eq!(
        thread.stop_child(&AgentId::new("agent_1")).await,
        Ok(SubAgentStatus::Stopped),
        "a second stop reads the status it ended with"
    );
    assert_eq!(
        thread.stop_child(&AgentId::new("agent_9")).await,
        Err(ThreadError::UnknownChild(AgentId::new("agent_9")))
    );
    run_for(&mut events, &mut log, 10).await;
    check_log(&log, true);
    thread.close_and_wait().await;
    assert_eq!(
        thread.stop_child(&AgentId::new("agent_1")).await,
        Err(ThreadError::Closed)
    );
}

/// A refusal is typed and says what was wrong: a request too deep, a tool
/// the hub does not offer, and — once the hub is gone — `Closed`, not
/// "unknown".
#[tokio::test(start_paused = true)]
async fn the_hub_refuses_with_typed_reasons_and_a_closed_hub_says_closed() {
    use subagents::actors::hub::Refused;
    use subagents::messages::ChildRequest;
    let (parts, mut events) = parent(background_workers(&[100])).spawn().await.unwrap();
    // The parent starts `agent_1` in the background (depth 1, the limit).
    parts.agent.send_user("go").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    let request = |requester: &str| {
        ChildRequest::new(
            AgentId::new(requester),
            0,
            ToolUseId::new("c"),
            "Child",
            "task",
        )
    };
    assert_eq!(
        parts.hub.request(request("agent_1")).await,
        Err(Refused::TooDeep { max_depth: 1 })
    );
    let mut with_tool = request("parent");
    with_tool.tools = Some(vec!["shell".into()]);
    let refused = parts.hub.request(with_tool).await.unwrap_err();
    assert!(
        matches!(refused, Refused::UnknownTool(ToolError::Unknown { ref name, .. }) if name == "shell"),
        "{refused:?}"
    );
    let stranger = request("nobody");
    assert_eq!(
        parts.hub.request(stranger).await,
        Err(Refused::UnknownRequester(AgentId::new("nobody")))
    );
    parts.shutdown_and_wait().await;
    assert_eq!(
        parts.hub.request(request("parent")).await,
        Err(Refused::Closed)
    );
    assert_eq!(
        parts.hub.stop(&AgentId::new("agent_1")).await,
        Err(Refused::Closed)
    );
}

/// What was not delivered comes back: a turn sent to a stopped agent.
#[tokio::test(start_paused = true)]
async fn a_turn_sent_to_a_stopped_agent_comes_back() {
    let (agent, _events) = AgentBuilder::new(ScriptedModel::new(vec![]).shared())
        .spawn()
        .await
        .unwrap();
    agent.shutdown();
    agent.actor().wait(None).await.ok();
    assert_eq!(
        agent.send_user("are you there?"),
        Err(AgentError::Undelivered {
            agent: AgentId::new("parent"),
            text: "are you there?".into()
        })
    );
}

/// Same instant, on a multi-threaded runtime: the thread closed while the
/// supervisor hands the user's turn to the parent. The parent was stopped
/// through its stop port, read before its mailbox: the turn was dropped
/// unrun and the stream's `UserMessage` never got its `Result`. The close
/// drains the parent: a turn already in its mailbox is taken, then ends
/// as stopped. Half the rounds close at once, half once the `UserMessage`
/// is seen.
#[test]
fn a_user_message_is_answered_when_the_thread_closes_as_it_is_handed_over() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut unanswered = 0;
    for round in 0..200u32 {
        let answered = runtime.block_on(async move {
            let model = ScriptedModel::new(vec![Reply::new().hang()]);
            let (thread, mut events) = ThreadHandle::spawn(parent(model), None).await.unwrap();
            thread.send_user("hello").unwrap();
            let mut log = Vec::new();
            if round % 2 == 1 {
                while !log.iter().any(|e| matches!(e, AgentEvent::UserMessage(_))) {
                    tokio::task::yield_now().await;
                    drain(&mut events, &mut log);
                }
            }
            thread.close_and_wait().await;
            drain(&mut events, &mut log);
            let asked = log
                .iter()
                .filter(|e| matches!(e, AgentEvent::UserMessage(_)))
                .count();
            let results = log
                .iter()
                .filter(|e| matches!(e, AgentEvent::Result(_)))
                .count();
            assert!(results <= asked, "round {round}: {log:#?}");
            results == asked
        });
        unanswered += usize::from(!answered);
    }
    assert_eq!(
        unanswered, 0,
        "UserMessages left without a Result in 200 rounds"
    );
}

/// Same instant: a host stops the thread's hub (`HubHandle::actor`'s docs:
/// "stop it (every child stops with it)") and switches away, or stops a
/// child, in one tick. The thread read a hub in its `post_stop` (ractor's
/// `Stopping`) as a dead one: it closed every child's turn as a killed
/// actor's, `failed`, under the hub's own stop — whose wait on each
/// child's end then never came, so the hub never stopped and the thread's
/// close hung. A stopping hub ends its children itself, `stopped`; the
/// thread answers once it has.
#[tokio::test(start_paused = true)]
async fn a_hub_stopped_by_the_host_as_the_thread_switches_stops_its_children() {
    for stop_child in [false, true] {
        let (thread, mut events) =
            ThreadHandle::spawn(parent(background_workers(&[600, 600])), None)
                .await
                .unwrap();
        thread.send_user("start").unwrap();
        let mut log = Vec::new();
        run_for(&mut events, &mut log, 10).await;
        thread.hub().actor().stop(None);
        if stop_child {
            let status = thread.stop_child(&AgentId::new("agent_1")).await;
            assert_eq!(status.ok(), Some(SubAgentStatus::Stopped), "{log:#?}");
        } else {
            thread.switch_away().await.unwrap();
        }
        let stopped =
            tokio::time::timeout(Duration::from_secs(60), thread.hub().actor().wait(None)).await;
        assert!(stopped.is_ok(), "the hub never stopped");
        run_for(&mut events, &mut log, 1).await;
        for id in ["agent_1", "agent_2"] {
            let statuses: Vec<_> = log
                .iter()
                .filter_map(|e| match e {
                    AgentEvent::ChildStatus(of, status) if of.as_str() == id => Some(*status),
                    _ => None,
                })
                .collect();
            assert_eq!(
                statuses.last(),
                Some(&SubAgentStatus::Stopped),
                "{id}: {log:#?}"
            );
            // Guarantee 8: its call answered and its `Result(stopped)`,
            // then its status (review: the status alone was read).
            let at = |pred: &dyn Fn(&AgentEvent) -> bool| log.iter().position(pred);
            let of = |e: &AgentEvent, inner: fn(&AgentEvent) -> bool| matches!(e, AgentEvent::Child(c, event) if c.as_str() == id && inner(event));
            let answered = at(&|e| of(e, |e| matches!(e, AgentEvent::ToolResult(_))));
            let result = at(&|e| {
                of(
                    e,
                    |e| matches!(e, AgentEvent::Result(r) if r.outcome == subagents::messages::Outcome::Stopped),
                )
            });
            let status = at(
                &|e| matches!(e, AgentEvent::ChildStatus(c, SubAgentStatus::Stopped) if c.as_str() == id),
            );
            assert!(answered.is_some() && result.is_some(), "{id}: {log:#?}");
            assert!(answered < result && result < status, "{id}: {log:#?}");
        }
        check_log(&log, true);
        let closed = tokio::time::timeout(Duration::from_secs(60), thread.close_and_wait()).await;
        assert!(closed.is_ok(), "the thread's close hung");
    }
}

/// Same instant, the other order: a switch or a child's stop the thread
/// read just before a host stopped its hub. The thread passed it on to
/// the hub while the hub still ran; the hub read its stop first (a stop
/// is read before the mailbox) and dropped the message with its reply
/// port — the host got `Closed`, though the thread was open and its
/// children stopped. The thread answers once the hub has stopped, as it
/// does when the stop came first.
#[tokio::test(start_paused = true)]
async fn a_switch_read_just_before_a_hosts_hub_stop_is_answered() {
    for stop_child in [false, true] {
        for yields in 0..6 {
            let (thread, mut events) =
                ThreadHandle::spawn(parent(background_workers(&[600, 600])), None)
                    .await
                    .unwrap();
            thread.send_user("start").unwrap();
            let mut log = Vec::new();
            run_for(&mut events, &mut log, 10).await;
            let agent_1 = AgentId::new("agent_1");
            let answered = if stop_child {
                let stop = thread.stop_child(&agent_1);
                tokio::pin!(stop);
                assert!(futures_util::poll!(&mut stop).is_pending());
                for _ in 0..yields {
                    tokio::task::yield_now().await;
                }
                thread.hub().actor().stop(None);
                stop.await.map(|status| format!("{status:?}"))
            } else {
                let switch = thread.switch_away();
                tokio::pin!(switch);
                assert!(futures_util::poll!(&mut switch).is_pending());
                for _ in 0..yields {
                    tokio::task::yield_now().await;
                }
                thread.hub().actor().stop(None);
                switch.await.map(|n| n.to_string())
            };
            assert!(
                answered.is_ok(),
                "stop_child {stop_child}, {yields} yields: {answered:?}"
            );
            let closed =
                tokio::time::timeout(Duration::from_secs(60), thread.close_and_wait()).await;
            assert!(closed.is_ok(), "the thread's close hung");
        }
    }
}

/// Cancel safety (review: cancel safety at the host boundary, thirty-fourth
/// session): `DelegatingAgent::shutdown_and_wait` did nothing until first
/// polled — a `select!` that took another branch dropped it unpolled, and
/// the parent, its hub and a background child ran on, the stream never
/// ending. The stop is sent when it is called.
#[tokio::test(start_paused = true)]
async fn a_shutdown_dropped_unpolled_still_stops_the_agent() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 3600, false)),
        Reply::answer("Started."),
    ])
    .with_script("Worker", worker(3600));
    let (parent, mut events) = DelegationBuilder::new(model.shared())
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    drop(parent.shutdown_and_wait());
    let stopped = tokio::time::timeout(std::time::Duration::from_secs(3600), async {
        parent.agent.actor().wait(None).await.ok();
        parent.hub.actor().wait(None).await.ok();
    })
    .await;
    assert!(stopped.is_ok(), "still running after an hour");
}
