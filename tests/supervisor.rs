//! The thread supervisor: wakes (FIFO, one in flight, held back while the
//! parent generates or the user types, dropped off screen and on a switch,
//! none for a claimed result), stop-all, detach or cascade on parent stop,
//! approvals from children.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use subagents::actors::DelegationBuilder;
use subagents::messages::AgentEvent;
use subagents::messages::ApprovalRefusal;
use subagents::prelude::*;
use subagents::supervisor::{ThreadError, ThreadHandle};
use subagents_demo::{Post, Sleep};

async fn thread(model: ScriptedModel) -> (ThreadHandle, EventStream) {
    ThreadHandle::spawn(
        DelegationBuilder::new(model.shared())
            .system_prompt("You are the parent.")
            .tools(ToolRegistry::new().with(Sleep).with(Post)),
        None,
    )
    .await
    .unwrap()
}

fn wakes(log: &[AgentEvent]) -> Vec<String> {
    log.iter()
        .filter_map(|e| match e {
            AgentEvent::Wake { child, .. } => Some(child.to_string()),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn wakes_arrive_fifo_one_at_a_time_after_the_parent_is_idle() {
    let (thread, mut events) = thread(background_workers(&[30, 10, 20])).await;
    thread.send_user("start three").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 120).await;
    assert_eq!(
        wakes(&log),
        ["agent_2", "agent_3", "agent_1"],
        "finish order"
    );
    // One in flight: each wake's turn ends (a Result) before the next wake.
    let mut in_flight = false;
    for event in &log {
        match event {
            AgentEvent::Wake { .. } => {
                assert!(!in_flight, "two wakes in flight");
                in_flight = true;
            }
            AgentEvent::Result(_) => in_flight = false,
            _ => {}
        }
    }
    check_log(&log, true);
    let wake = log.iter().find_map(|e| match e {
        AgentEvent::Wake { line, .. } => Some(line.clone()),
        _ => None,
    });
    assert_eq!(
        wake.unwrap(),
        "[use_agent agent_2 finished] Worker 2 (done, 10 s, task: \"work 10 s\")"
    );
}

#[tokio::test(start_paused = true)]
async fn typing_holds_wakes_back_until_the_user_stops() {
    let (thread, mut events) = thread(background_workers(&[10])).await;
    thread.send_user("start").unwrap();
    thread.typing(true).unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 60).await;
    assert!(wakes(&log).is_empty(), "a wake came while the user typed");
    thread.typing(false).unwrap();
    run_for(&mut events, &mut log, 10).await;
    assert_eq!(wakes(&log), ["agent_1"]);
}

#[tokio::test(start_paused = true)]
async fn off_screen_drops_wakes() {
    let (thread, mut events) = thread(background_workers(&[10])).await;
    thread.send_user("start").unwrap();
    thread.on_screen(false).unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 60).await;
    thread.on_screen(true).unwrap();
    run_for(&mut events, &mut log, 60).await;
    assert!(wakes(&log).is_empty());
    check_log(&log, true);
}

#[tokio::test(start_paused = true)]
async fn a_switch_stops_every_child_and_drops_wakes() {
    let (thread, mut events) = thread(background_workers(&[100, 100, 100, 100, 100])).await;
    thread.send_user("start five").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    assert_eq!(thread.switch_away().await.unwrap(), 5);
    run_for(&mut events, &mut log, 300).await;
    let (order, by_id) = check_log(&log, true);
    assert_eq!(order.len(), 5);
    for id in &order {
        assert_eq!(by_id[id].terminal().unwrap().1, SubAgentStatus::Stopped);
    }
    assert!(wakes(&log).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_switch_racing_a_completion_leaves_one_terminal_status_and_no_wake() {
    for at in [9_999u64, 10_000, 10_001] {
        let (thread, mut events) = thread(background_workers(&[10])).await;
        thread.send_user("start").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        tokio::time::sleep_until(
            tokio::time::Instant::now() + Duration::from_millis(at) - Duration::from_millis(1),
        )
        .await;
        thread.switch_away().await.unwrap();
        run_for(&mut events, &mut log, 60).await;
        check_log(&log, true);
        assert!(
            wakes(&log).is_empty(),
            "a wake after the switch (at {at} ms)"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_claimed_result_produces_no_wake() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 10, false)),
        Reply::new().use_agent(&UseAgentCall::result("agent_1")),
        Reply::answer("Got it."),
        Reply::answer("(a wake would land here)"),
    ])
    .with_script("Worker", worker(10));
    let (thread, mut events) = thread(model).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 120).await;
    assert!(wakes(&log).is_empty());
}

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

mod persistence_and_policies {
    use super::*;
    use std::sync::Arc;
    use subagents::actors::clock::ManualClock;
    use subagents::actors::hub::BackgroundApprovals;
    use subagents::supervisor::store::EnvelopeStore;
    use subagents::supervisor::{ThreadConfig, Threads};

    fn store(dir: &std::path::Path) -> Arc<EnvelopeStore> {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        Arc::new(EnvelopeStore::open(dir, clock).unwrap().0)
    }

    #[tokio::test(start_paused = true)]
    async fn a_restart_reloads_envelopes_and_ids_stay_unique() {
        let dir = tempfile::tempdir().unwrap();
        {
            let config = ThreadConfig::new(
                DelegationBuilder::new(background_workers(&[5]).shared())
                    .tools(ToolRegistry::new().with(Sleep)),
            )
            .store(store(dir.path()));
            let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
            thread.send_user("start").unwrap();
            let mut log = Vec::new();
            run_for(&mut events, &mut log, 60).await;
            thread.flush_persistence().await.unwrap();
            thread.close();
        }
        assert!(dir.path().join("agent_1.json").exists());
        let config = ThreadConfig::new(
            DelegationBuilder::new(background_workers(&[5]).shared())
                .tools(ToolRegistry::new().with(Sleep)),
        )
        .store(store(dir.path()));
        let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
        let old = thread
            .envelope(&AgentId::new("agent_1"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(old.status, SubAgentStatus::Done);
        assert_eq!(old.result.as_deref(), Some("worked 5 s"));
        thread.send_user("start again").unwrap();
        let mut log = Vec::new();
        run_for(&mut events, &mut log, 60).await;
        let (order, _) = check_log(&log, true);
        assert_eq!(
            order,
            [AgentId::new("agent_2")],
            "ids continue after the archived ones"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_write_is_surfaced_and_the_envelope_stays_answerable() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        std::fs::remove_dir_all(dir.path()).unwrap();
        let config = ThreadConfig::new(
            DelegationBuilder::new(background_workers(&[5]).shared())
                .tools(ToolRegistry::new().with(Sleep)),
        )
        .store(store);
        let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
        thread.send_user("start").unwrap();
        let mut log = Vec::new();
        run_for(&mut events, &mut log, 60).await;
        thread.flush_persistence().await.unwrap();
        let errors = thread.persist_errors().await.unwrap();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("agent_1.json"), "{}", errors[0]);
        let envelope = thread
            .envelope(&AgentId::new("agent_1"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(envelope.status, SubAgentStatus::Done);
    }

    fn background_poster() -> ScriptedModel {
        ScriptedModel::new(vec![
            Reply::new().use_agent(
                &UseAgentCall::run("Poster", "post")
                    .tools(["http_post"])
                    .background(),
            ),
            Reply::answer("Started."),
            Reply::answer("Noted."),
        ])
        .with_script(
            "Poster",
            vec![
                Reply::new().tool_call("http_post", "{}"),
                Reply::answer("finished"),
            ],
        )
    }

    async fn poster_outcome(policy: BackgroundApprovals) -> (Vec<AgentEvent>, String) {
        let (thread, mut events) = ThreadHandle::spawn(
            DelegationBuilder::new(background_poster().shared())
                .tools(ToolRegistry::new().with(Post))
                .background_approvals(policy),
            None,
        )
        .await
        .unwrap();
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        run_for(&mut events, &mut log, 30).await;
        let output = log
            .iter()
            .find_map(|e| match e {
                AgentEvent::Child(_, inner) => match &**inner {
                    AgentEvent::ToolResult(r) => Some(r.output.clone()),
                    _ => None,
                },
                _ => None,
            })
            .unwrap_or_default();
        (log, output)
    }

    fn asked(log: &[AgentEvent]) -> bool {
        log.iter().any(|e| {
            matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ApprovalRequested(_)))
        })
    }

    #[tokio::test(start_paused = true)]
    async fn background_approvals_follow_the_policy() {
        let (log, output) = poster_outcome(BackgroundApprovals::Deny).await;
        assert!(!asked(&log));
        assert!(output.starts_with("the user denied this call"), "{output}");
        let (log, output) = poster_outcome(BackgroundApprovals::Approve).await;
        assert!(!asked(&log));
        assert_eq!(output, "posted");
        let (log, output) = poster_outcome(BackgroundApprovals::Ask).await;
        assert!(asked(&log), "ask is the default and asks the host");
        assert_eq!(output, "", "still waiting for the host");
    }

    #[tokio::test(start_paused = true)]
    async fn an_approval_pending_when_its_child_stops_is_gone_and_nothing_waits() {
        let (thread, mut events) = ThreadHandle::spawn(
            DelegationBuilder::new(background_poster().shared())
                .tools(ToolRegistry::new().with(Post)),
            None,
        )
        .await
        .unwrap();
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        let request = until(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ApprovalRequested(_)))
        })
        .await;
        let AgentEvent::Child(_, inner) = request else {
            unreachable!()
        };
        let AgentEvent::ApprovalRequested(request) = *inner else {
            unreachable!()
        };
        assert_eq!(thread.switch_away().await.unwrap(), 1);
        assert_eq!(
            thread
                .resolve_approval(request.id.clone(), ApprovalDecision::Approve)
                .await,
            Err(ThreadError::Approval(ApprovalRefusal::Ended(request.id))),
            "the child ended: the request is closed, the thread is not"
        );
        run_for(&mut events, &mut log, 30).await;
        let (_, by_id) = check_log(&log, true);
        assert_eq!(
            by_id[&AgentId::new("agent_1")].terminal().unwrap().1,
            SubAgentStatus::Stopped
        );
    }

    #[tokio::test(start_paused = true)]
    async fn switching_threads_stops_the_children_of_the_thread_left() {
        let mut threads = Threads::new();
        let a = subagents::messages::ThreadId::new("a");
        let b = subagents::messages::ThreadId::new("b");
        let builder = || {
            DelegationBuilder::new(background_workers(&[100, 100]).shared())
                .tools(ToolRegistry::new().with(Sleep))
        };
        let mut events_a = threads.open(a.clone(), builder()).await.unwrap();
        threads.get(&a).unwrap().send_user("start").unwrap();
        let mut log_a = Vec::new();
        until_result(&mut events_a, &mut log_a).await;
        let _events_b = threads.open(b.clone(), builder()).await.unwrap();
        assert_eq!(threads.on_screen(), Some(&b));
        run_for(&mut events_a, &mut log_a, 200).await;
        let (order, by_id) = check_log(&log_a, true);
        assert_eq!(order.len(), 2);
        assert!(
            order
                .iter()
                .all(|id| by_id[id].terminal().unwrap().1 == SubAgentStatus::Stopped)
        );
        assert!(wakes(&log_a).is_empty());
        threads.switch_to(&a).await.unwrap();
        threads.delete(&b).await.unwrap();
        assert!(matches!(
            threads.get(&b),
            Err(subagents::supervisor::ThreadError::UnknownThread(_))
        ));
        assert!(
            threads.open(a.clone(), builder()).await.is_err(),
            "a is already open"
        );
    }

    /// A thread on screen that closed by itself (closed through its
    /// handle, or its supervisor died) has nothing left to switch away
    /// from: opening or switching to another thread still works — the
    /// new thread is not spawned and then dropped on an error.
    #[tokio::test(start_paused = true)]
    async fn a_closed_thread_on_screen_does_not_block_the_next() {
        let mut threads = Threads::new();
        let a = subagents::messages::ThreadId::new("a");
        let b = subagents::messages::ThreadId::new("b");
        let c = subagents::messages::ThreadId::new("c");
        let builder = || DelegationBuilder::new(background_workers(&[]).shared());
        let _events_a = threads.open(a.clone(), builder()).await.unwrap();
        threads.get(&a).unwrap().close_and_wait().await;
        let _events_b = threads
            .open(b.clone(), builder())
            .await
            .expect("a closed thread on screen does not stop another opening");
        assert_eq!(threads.on_screen(), Some(&b));
        let _events_c = threads.open(c.clone(), builder()).await.unwrap();
        threads.get(&c).unwrap().close_and_wait().await;
        threads
            .switch_to(&b)
            .await
            .expect("switching away from a closed thread on screen");
        assert_eq!(threads.on_screen(), Some(&b));
        // Switching *to* a closed thread is refused, and changes nothing.
        assert!(threads.switch_to(&a).await.is_err());
        assert_eq!(threads.on_screen(), Some(&b));
        // A closed thread can still be deleted.
        threads
            .delete(&a)
            .await
            .expect("deleting a thread that closed by itself");
        assert!(threads.get(&a).is_err());
        threads.delete(&b).await.unwrap();
    }

    /// Same instant: a thread closed, then switched to with no await in
    /// between (its supervisor has not read the stop). The switch left the
    /// thread on screen — stopping its children — and then failed, with
    /// nothing on screen. It is refused first, and nothing changes.
    #[tokio::test(start_paused = true)]
    async fn switching_to_a_thread_closed_in_the_same_tick_is_refused_first() {
        let mut threads = Threads::new();
        let a = subagents::messages::ThreadId::new("a");
        let b = subagents::messages::ThreadId::new("b");
        let _events_a = threads
            .open(
                a.clone(),
                DelegationBuilder::new(background_workers(&[]).shared()),
            )
            .await
            .unwrap();
        let mut events_b = threads
            .open(
                b.clone(),
                DelegationBuilder::new(background_workers(&[100]).shared())
                    .tools(ToolRegistry::new().with(Sleep)),
            )
            .await
            .unwrap();
        threads.get(&b).unwrap().send_user("start").unwrap();
        let mut log = Vec::new();
        until_result(&mut events_b, &mut log).await;
        threads.get(&a).unwrap().close();
        assert_eq!(threads.switch_to(&a).await, Err(ThreadError::Closed));
        assert_eq!(threads.on_screen(), Some(&b));
        run_for(&mut events_b, &mut log, 10).await;
        assert!(
            !log.iter().any(|e| matches!(e, AgentEvent::SwitchedAway)),
            "b was left: {log:?}"
        );
        let child = first_child_started(&log).id;
        let child = threads.get(&b).unwrap().envelope(&child).await;
        assert_eq!(
            child.unwrap().unwrap().status,
            SubAgentStatus::Background,
            "{log:?}"
        );
        threads.delete(&b).await.unwrap();
    }
}

// `a_completion_reported_after_the_switch_does_not_wake` is a unit test of
// the supervisor crate now: it forges the supervisor's own sealed message.

#[tokio::test(start_paused = true)]
async fn envelopes_past_the_retention_are_pruned_as_the_session_goes() {
    use std::sync::Arc;
    use subagents::actors::clock::ManualClock;
    use subagents::supervisor::ThreadConfig;
    use subagents::supervisor::store::EnvelopeStore;

    let dir = tempfile::tempdir().unwrap();
    let day = 24 * 3600 * 1000;
    let clock = Arc::new(ManualClock::new(100 * day));
    let store = Arc::new(EnvelopeStore::open(dir.path(), clock.clone()).unwrap().0);
    let config = ThreadConfig::new(
        DelegationBuilder::new(background_workers(&[5, 50]).shared())
            .tools(ToolRegistry::new().with(Sleep))
            .clock(clock.clone()),
    )
    .store(store.clone());
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 20).await;
    thread.flush_persistence().await.unwrap();
    assert!(store.get(&AgentId::new("agent_1")).is_some());
    clock.advance(day + 1); // the first envelope is now past 24 h
    run_for(&mut events, &mut log, 60).await; // the second finishes and is saved
    thread.flush_persistence().await.unwrap();
    assert!(
        store.get(&AgentId::new("agent_1")).is_none(),
        "pruned as the session went"
    );
    assert!(!dir.path().join("agent_1.json").exists());
    assert!(store.get(&AgentId::new("agent_2")).is_some());
}

/// An actor-based host links a thread under its own actor: the thread's
/// end reaches the host as a supervision event, and the host lives on.
#[tokio::test(start_paused = true)]
async fn a_thread_can_be_linked_under_a_host_actor() {
    use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};

    struct Host;
    impl Actor for Host {
        type Msg = ();
        type State = tokio::sync::mpsc::UnboundedSender<String>;
        type Arguments = tokio::sync::mpsc::UnboundedSender<String>;
        async fn pre_start(
            &self,
            _myself: ActorRef<()>,
            seen: Self::Arguments,
        ) -> Result<Self::State, ActorProcessingErr> {
            Ok(seen)
        }
        async fn handle_supervisor_evt(
            &self,
            _myself: ActorRef<()>,
            event: SupervisionEvent,
            seen: &mut Self::State,
        ) -> Result<(), ActorProcessingErr> {
            if let SupervisionEvent::ActorTerminated(..) = event {
                let _ = seen.send("thread ended".into());
            }
            Ok(())
        }
    }

    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel();
    let (host, _) = Actor::spawn(None, Host, seen_tx).await.unwrap();
    let (thread, mut events) = ThreadHandle::spawn(
        DelegationBuilder::new(background_workers(&[5]).shared())
            .tools(ToolRegistry::new().with(Sleep)),
        Some(host.get_cell()),
    )
    .await
    .unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 30).await;
    assert_eq!(wakes(&log), ["agent_1"]);
    thread.close();
    assert_eq!(seen_rx.recv().await.as_deref(), Some("thread ended"));
    assert!(
        host.get_status() == ractor::ActorStatus::Running,
        "the host lives on"
    );
}

/// Closing a thread stops everything it made — its gate too — and leaves
/// a gate the host shares between threads running.
#[tokio::test(start_paused = true)]
async fn closing_a_thread_stops_what_it_made_and_spares_a_shared_gate() {
    let shared = GateHandle::spawn(1).await.unwrap();
    let (own, _events) = ThreadHandle::spawn(
        DelegationBuilder::new(ScriptedModel::new(vec![]).shared()),
        None,
    )
    .await
    .unwrap();
    let (sharing, _events2) = ThreadHandle::spawn(
        DelegationBuilder::new(ScriptedModel::new(vec![]).shared()).gate(shared.clone()),
        None,
    )
    .await
    .unwrap();
    let (own_gate, own_hub) = (own.gate().clone(), own.hub().clone());
    own.close_and_wait().await;
    sharing.close_and_wait().await;
    assert!(
        own_gate.snapshot().await.is_err(),
        "the thread's own gate stopped"
    );
    assert!(own_hub.snapshot().await.is_err(), "the hub stopped");
    assert!(own.parent_snapshot().await.is_err(), "the parent stopped");
    assert!(
        shared.snapshot().await.is_ok(),
        "a shared gate keeps running"
    );
}

/// Same instant: a user turn sent right after `close()` (the actor has not
/// read the stop yet) was taken and dropped with the mailbox: `Ok(())`,
/// and no `UserMessage`, no answer. It comes back, through the handle that
/// closed and through a clone.
#[tokio::test(start_paused = true)]
async fn a_turn_sent_in_the_tick_of_a_close_comes_back() {
    let (thread, mut events) = thread(background_workers(&[])).await;
    let clone = thread.clone();
    thread.close();
    assert_eq!(
        thread.send_user("hello?"),
        Err(ThreadError::Undelivered("hello?".into()))
    );
    assert_eq!(
        clone.send_user("anyone?"),
        Err(ThreadError::Undelivered("anyone?".into()))
    );
    thread.actor().wait(None).await.ok();
    while let Some(event) = events.recv().await {
        assert!(!matches!(event, AgentEvent::UserMessage(_)), "{event:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_on_a_closed_thread_is_a_clear_error() {
    let (thread, _events) = thread(background_workers(&[])).await;
    thread.close_and_wait().await;
    let err = thread.send_user("hello?").unwrap_err();
    assert_eq!(
        err,
        ThreadError::Undelivered("hello?".into()),
        "the text comes back"
    );
    assert_eq!(
        err.to_string(),
        "the thread is closed; the user turn was not delivered"
    );
    assert_eq!(thread.typing(true), Err(ThreadError::Closed));
    assert!(thread.switch_away().await.is_err());
    assert!(
        thread
            .resolve_approval(
                ApprovalId::new("parent-approval-1"),
                ApprovalDecision::Approve
            )
            .await
            .is_err()
    );
}
