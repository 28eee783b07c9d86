//! A stop that lands while the turn's task is running on another worker:
//! `abort` cancels a task only where it next waits, so the task may go on
//! for a while after the turn closed. Nothing it does then may start.

use std::sync::Arc;

use super::*;
use common::blocking::stopped_while_blocked;

pub(super) use crate::common::workers;

/// The stop answers the turn `stopped` while its task is held inside a
/// tool on the other worker; once the tool returns, the answer's next call
/// is not run and the model is not asked again: the host was told the turn
/// stopped, so nothing of it happens after.
#[test]
fn a_turn_stopped_while_its_task_runs_starts_nothing_after() {
    let runtime = workers(2);
    runtime.block_on(async {
        let model = Arc::new(ScriptedModel::new(vec![
            Reply::new()
                .tool_call("block", "{}")
                .tool_call("count", "{}"),
            Reply::answer("done"),
        ]));
        let mut seen = stopped_while_blocked(model.clone()).await;
        assert_eq!(seen.result.outcome, Outcome::Stopped, "{:#?}", seen.log);
        assert_eq!(seen.counted, 0, "a call ran after the stop");
        assert_eq!(model.calls(), 1, "the model was asked after the stop");
        // Nothing reached the stream after the result, and the agent is
        // still there for the next turn.
        assert!(seen.events.try_recv().is_none());
        assert!(!seen.agent.snapshot().await.unwrap().busy);
    });
}

/// A parent that starts a child holding the gate in a model call that
/// never ends (`Holder`) and one that waits at it (`Waiter`).
fn holder_and_waiter() -> ScriptedModel {
    ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&UseAgentCall::run("Holder\nYou hold.", "hold").background())
            .use_agent(&UseAgentCall::run("Waiter\nYou wait.", "wait").background()),
        Reply::answer("Started."),
        Reply::answer("Noted."),
        Reply::answer("Noted."),
    ])
    .with_script("Holder", vec![Reply::new().hang()])
    .with_script("Waiter", vec![Reply::answer("done")])
}

/// After a close or shutdown with calls waiting at the gate: every child
/// stopped or done, every turn stopped or completed — none `failed` by the
/// gate closing under it.
fn stopped_not_failed(round: usize, envelopes: Vec<Envelope>, log: &[AgentEvent]) {
    for envelope in envelopes {
        assert!(
            matches!(
                envelope.status,
                SubAgentStatus::Stopped | SubAgentStatus::Done
            ),
            "round {round}: {envelope:#?}"
        );
    }
    let failed = log.iter().any(|e| {
        matches!(e, AgentEvent::Result(r) if r.outcome != Outcome::Stopped
            && r.outcome != Outcome::Completed)
    });
    assert!(!failed, "round {round}: {log:#?}");
}

/// Stopped midway (a close while calls wait at the thread's own gate):
/// the close drained the parent and the hub but stopped the gate at once,
/// so a call waiting for a permit read "the model gate is closed" and its
/// turn ended `failed` — on another worker, before the hub's stop reached
/// it: a child ended `failed` (resumable by a message, which a stopped
/// one is not) and the parent's turn `Failed`, where a close is meant and
/// ends them `stopped`. The gate is stopped once parent and hub are.
#[test]
fn a_close_while_calls_wait_at_the_gate_stops_them_not_fails_them() {
    let runtime = workers(2);
    runtime.block_on(async {
        let mut reached = 0;
        for round in 0..60 {
            let model = holder_and_waiter();
            let (thread, mut events) = ThreadHandle::spawn(parent(model).max_live(2), None)
                .await
                .unwrap();
            thread.send_user("go").unwrap();
            // The holder in its model call, the waiter or the parent
            // queued behind it — unless the waiter went first and
            // finished, and the parent with it (nothing is left waiting).
            let waiter = AgentId::new("agent_2");
            loop {
                let gate = thread.gate().snapshot().await.unwrap();
                if gate.in_flight == 1 && gate.queued >= 1 {
                    reached += 1;
                    break;
                }
                let waiter_done = thread
                    .hub()
                    .status(&waiter)
                    .is_some_and(|e| e.status.is_terminal());
                if waiter_done && !thread.parent_snapshot().await.unwrap().busy {
                    break;
                }
                tokio::task::yield_now().await;
            }
            thread.close_and_wait().await;
            let mut log = Vec::new();
            while let Some(event) = events.recv().await {
                log.push(event);
            }
            stopped_not_failed(round, thread.hub().envelopes(), &log);
        }
        assert!(
            reached > 0,
            "no round closed with a call waiting at the gate"
        );
    });
}

/// The same through `DelegatingAgent::shutdown`, called from a thread
/// outside the runtime (a UI's thread, a host type's `Drop` there): the
/// gate's stop, meant to wait for parent and hub, found no runtime on the
/// calling thread and stopped the gate at once — a call waiting for a
/// permit read "the model gate is closed", its child ended `failed` and
/// the parent's turn `Failed`. It waits on the runtime the builder
/// spawned them on.
#[test]
fn a_shutdown_from_outside_the_runtime_stops_calls_waiting_at_the_gate_not_fails_them() {
    let runtime = workers(2);
    let mut reached = 0;
    for round in 0..60 {
        let (delegating, events, waiting) = runtime.block_on(async {
            let model = holder_and_waiter();
            let (delegating, events) = parent(model).max_live(2).spawn().await.unwrap();
            delegating.agent.send_user("go").unwrap();
            let waiter = AgentId::new("agent_2");
            loop {
                let gate = delegating.gate.snapshot().await.unwrap();
                if gate.in_flight == 1 && gate.queued >= 1 {
                    break (delegating, events, true);
                }
                let waiter_done = delegating
                    .hub
                    .status(&waiter)
                    .is_some_and(|e| e.status.is_terminal());
                if waiter_done && !delegating.agent.snapshot().await.unwrap().busy {
                    break (delegating, events, false);
                }
                tokio::task::yield_now().await;
            }
        });
        reached += usize::from(waiting);
        // On the test's own thread: no runtime here.
        delegating.shutdown();
        runtime.block_on(async {
            let mut events = events;
            delegating.agent.actor().wait(None).await.ok();
            delegating.hub.actor().wait(None).await.ok();
            delegating.gate.actor().wait(None).await.ok();
            let mut log = Vec::new();
            while let Ok(Some(event)) =
                tokio::time::timeout(Duration::from_secs(5), events.recv()).await
            {
                log.push(event);
            }
            stopped_not_failed(round, delegating.hub.envelopes(), &log);
        });
    }
    assert!(
        reached > 0,
        "no round shut down with a call waiting at the gate"
    );
}

/// Stopped midway, two workers (a claim written to disk): a tool call
/// taking an earlier session's child's result recorded the claim in the
/// archive — the store's update, two fsyncs behind its io lock — while
/// holding the parent's turn lock. A stop of that turn took the lock in
/// the agent's handler and blocked its worker until the disk answered:
/// the host's `Result(stopped)` waited on the write (on a hung disk, for
/// ever). The archive is written once the lock is let go.
#[test]
fn a_claim_written_to_the_archive_does_not_hold_a_stop_of_its_turn() {
    use std::sync::mpsc;
    use subagents::actors::hub::EnvelopeArchive;
    /// An archive whose write of a claim takes as long as the test says.
    struct SlowDisk {
        entered: tokio::sync::mpsc::UnboundedSender<()>,
        release: Mutex<mpsc::Receiver<()>>,
    }
    impl EnvelopeArchive for SlowDisk {
        fn get(&self, id: &AgentId) -> Option<Envelope> {
            (id.as_str() == "agent_9").then(|| {
                let mut done = common::store::finished_envelope("agent_9", 2);
                done.wake_owed = true;
                done
            })
        }
        fn claim(&self, _: &AgentId) {
            let _ = self.entered.send(());
            let release = self.release.lock().unwrap();
            let _ = release.recv_timeout(Duration::from_secs(30));
        }
    }
    // Three workers: the claiming task holds one, the agent's handler
    // (before the fix) another; the third runs the timers.
    let runtime = workers(3);
    runtime.block_on(async {
        let (entered_tx, mut entered) = tokio::sync::mpsc::unbounded_channel();
        let (release, release_rx) = mpsc::channel();
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&UseAgentCall::result("agent_9")),
            Reply::answer("Read."),
        ]);
        let (parts, mut events) = parent(model)
            .archive(Arc::new(SlowDisk {
                entered: entered_tx,
                release: Mutex::new(release_rx),
            }))
            .spawn()
            .await
            .unwrap();
        parts.agent.send_user("read agent_9").unwrap();
        entered.recv().await.unwrap();
        parts.agent.stop_turn().unwrap();
        let stopped = tokio::time::timeout(Duration::from_secs(5), async {
            while let Some(event) = events.recv().await {
                if let AgentEvent::Result(result) = event {
                    return Some(result.outcome);
                }
            }
            None
        })
        .await;
        let _ = release.send(());
        assert_eq!(
            stopped,
            Ok(Some(Outcome::Stopped)),
            "the stop waited on the archive's write"
        );
        parts.shutdown_and_wait().await;
    });
}

/// Stopped midway, two workers (a hub killed while its children work):
/// three callers end the children's turns as killed at once — each
/// child's kill hook, the thread seeing its hub gone, and the hub's own
/// state as it is dropped. One took a turn's ends and had not emitted
/// yet when another, finding them taken, closed the child's sink with its
/// terminal status: the `Result` and the cut call's answer went nowhere.
/// The ends run one caller at a time.
#[test]
fn a_hub_killed_while_its_children_work_ends_each_turn_before_its_status() {
    let runtime = workers(2);
    runtime.block_on(async {
        for round in 0..100 {
            let (thread, mut events) =
                ThreadHandle::spawn(parent(background_workers(&[600, 600, 600])), None)
                    .await
                    .unwrap();
            thread.send_user("start").unwrap();
            let mut log = Vec::new();
            let mut in_tools = 0;
            while in_tools < 3 {
                let event = events.recv().await.unwrap();
                if matches!(&event, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ToolStarted(_)))
                {
                    in_tools += 1;
                }
                log.push(event);
            }
            thread.hub().actor().kill();
            let mut ended = 0;
            while ended < 3 {
                let event = events.recv().await.unwrap();
                if matches!(&event, AgentEvent::ChildStatus(_, s) if s.is_terminal()) {
                    ended += 1;
                }
                log.push(event);
            }
            thread.close_and_wait().await;
            while let Some(event) = events.recv().await {
                log.push(event);
            }
            let checked = std::panic::catch_unwind(|| check_log(&log, true));
            assert!(checked.is_ok(), "round {round}: {log:#?}");
        }
    });
}
