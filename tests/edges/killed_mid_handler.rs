//! Same instant, on two workers: a thread is killed while its hub is
//! inside a handler that moves a child forward.

use std::sync::mpsc;

use super::requester_ends::{HeldClock, Hold};
use super::stopped_task::workers;
use super::*;
use crate::common::held::{Held, until_held};

/// The rest of the stream, once it is quiet for 5 s (or ends).
async fn drain_quiet(events: &mut EventStream, log: &mut Vec<AgentEvent>) {
    while let Ok(Some(event)) = tokio::time::timeout(Duration::from_secs(5), events.recv()).await {
        log.push(event);
    }
}

/// The hold let go with the hub's clock armed; once the hub is held
/// there, the thread killed; once `id`'s `failed` is on the stream, the
/// hub let go, the handle dropped, the rest of the stream read.
async fn kill_while_the_hub_is_held(
    (held, inside, go): (&Held, mpsc::Receiver<()>, mpsc::Sender<()>),
    hold: &tokio::sync::Notify,
    thread: ThreadHandle,
    events: &mut EventStream,
    log: &mut Vec<AgentEvent>,
    id: &'static str,
) {
    held.arm();
    hold.notify_one();
    until_held(inside, "the hub reads the clock").await;
    thread.actor().kill();
    let failed = move |e: &AgentEvent| matches!(e, AgentEvent::ChildStatus(c, SubAgentStatus::Failed) if c.as_str() == id);
    tokio::time::timeout(Duration::from_secs(30), until(events, log, failed))
        .await
        .expect("the kill fails the child");
    go.send(()).unwrap();
    drop(thread);
    drain_quiet(events, log).await;
}

/// A thread killed (its ractor host stopped, `actor().kill()`) while its
/// hub, on the other worker, finished a child and was about to start the
/// queued one in its slot: the parent's kill hook ended every child on the
/// stream — the queued one `failed`, its only word — and the hub's handler,
/// which a kill interrupts only at its next await, then said it started:
/// `ChildRunning` and `ChildStatus(running)` after its terminal status, a
/// row a host's transcript shows running for good. A child's statuses are
/// emitted beside its own sink, only while that sink is open: the hook's
/// close takes every later one.
#[test]
fn a_queued_child_failed_by_a_kill_is_not_started_after_it() {
    let runtime = workers(2);
    runtime.block_on(async {
        let (held, inside, go) = Held::new();
        let clock = Arc::new(HeldClock(held.clone()));
        let hold = Arc::new(tokio::sync::Notify::new());
        let model = ScriptedModel::new(vec![
            Reply::new()
                .use_agent(&work_call("First", 0, false).tools(["hold"]))
                .use_agent(&work_call("Second", 0, true)),
            Reply::answer("parent: done"),
        ])
        .with_script(
            "First\n",
            vec![
                Reply::new().tool_call("hold", "{}"),
                Reply::answer("first: done"),
            ],
        )
        .with_script("Second\n", vec![Reply::answer("second: done")]);
        let builder = DelegationBuilder::new(model.shared())
            .tools(ToolRegistry::new().with(Sleep).with(Hold(hold.clone())))
            .max_live(1)
            .inline_wait(Duration::from_secs(600))
            .clock(clock.clone());
        let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        let second = AgentId::new("agent_2");
        let queued = until(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::ChildStatus(id, SubAgentStatus::Queued) if id.as_str() == "agent_2")
        });
        tokio::time::timeout(Duration::from_secs(30), queued)
            .await
            .expect("the second child waits in the queue");

        // The first child's end: the hub reads the clock finishing it,
        // before it starts the queued one — held there.
        let hub_held = (&*held, inside, go);
        kill_while_the_hub_is_held(hub_held, &hold, thread, &mut events, &mut log, "agent_2")
            .await;
        let failed = |e: &AgentEvent| {
            matches!(e, AgentEvent::ChildStatus(id, SubAgentStatus::Failed) if id.as_str() == "agent_2")
        };
        let end = log.iter().position(failed).unwrap();
        let after: Vec<&AgentEvent> = log[end + 1..]
            .iter()
            .filter(|e| match e {
                AgentEvent::ChildRunning(id) | AgentEvent::ChildStatus(id, _) => *id == second,
                AgentEvent::Child(id, _) => *id == second,
                _ => false,
            })
            .collect();
        assert!(after.is_empty(), "after its `failed`: {after:#?}");
    });
}

/// A thread killed while its hub finished a grandchild stopped because
/// its requester's turn had ended — the hub about to finish that
/// requester too: the parent's kill hook closed the requester's row with
/// `failed` first, on the other worker, and the hub then recorded its
/// own `done` (with the child's answer) in the book, its waiters and
/// observers — `use_agent status` and a persisting host said `done`
/// where the stream's one terminal status said `failed`. A finish whose
/// close a kill took first records what the stream says.
#[test]
fn a_child_failed_by_a_kill_reads_failed_in_its_envelope_too() {
    let runtime = workers(2);
    runtime.block_on(async {
        let (held, inside, go) = Held::new();
        let clock = Arc::new(HeldClock(held.clone()));
        let hold = Arc::new(tokio::sync::Notify::new());
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&work_call("Child", 0, true).tools(["hold", "sleep"])),
            Reply::answer("parent: done"),
        ])
        .with_script(
            "Child\n",
            vec![
                Reply::new().use_agent(&work_call("Grand", 600, false)),
                Reply::new().tool_call("hold", "{}"),
                Reply::answer("child: done"),
            ],
        )
        .with_script("Grand\n", worker(600));
        let builder = DelegationBuilder::new(model.shared())
            .tools(ToolRegistry::new().with(Sleep).with(Hold(hold.clone())))
            .max_depth(2)
            .inline_wait(Duration::from_secs(600))
            .clock(clock.clone());
        let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
        let hub = thread.hub().clone();
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        let in_row = |child: &'static str, tool: &'static str| {
            move |e: &AgentEvent| {
                matches!(e, AgentEvent::Child(c, inner) if c.as_str() == child
                    && matches!(&**inner, AgentEvent::ToolStarted(t) if t.name == tool))
            }
        };
        let started = async {
            until(&mut events, &mut log, in_row("agent_1", "hold")).await;
        };
        tokio::time::timeout(Duration::from_secs(30), started)
            .await
            .expect("the child holds");
        // The child's answer ends its turn; its grandchild is stopped,
        // and the hub, finishing it, reads the clock: held there.
        let hub_held = (&*held, inside, go);
        kill_while_the_hub_is_held(hub_held, &hold, thread, &mut events, &mut log, "agent_1").await;
        let ends: Vec<SubAgentStatus> = log
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ChildStatus(id, status)
                    if id.as_str() == "agent_1" && status.is_terminal() =>
                {
                    Some(*status)
                }
                _ => None,
            })
            .collect();
        assert_eq!(ends, [SubAgentStatus::Failed]);
        let envelope = hub.status(&AgentId::new("agent_1")).unwrap();
        assert_eq!(envelope.status, SubAgentStatus::Failed, "{envelope:#?}");
    });
}

/// Holds the first cut step of `agent_2` once armed — the kill's hook
/// ending its turn, deepest first, before it reaches `agent_1`.
struct StepHold(Arc<Held>);

impl subagents::actors::hub::HubObserver for StepHold {
    fn finished(&self, _envelope: &Envelope) {}

    fn stepped(&self, id: &AgentId) {
        if id.as_str() == "agent_2" {
            self.0.pass();
        }
    }
}

/// A thread killed while its hub, on another worker, announced a
/// grandchild: the kill's hook took its list of children to end before
/// the new one was in the book, and had not yet ended its requester's
/// turn — the hub announced the grandchild in that row, which the hook
/// then closed `failed`; the grandchild's own `failed`, later, went into
/// the closed row and was dropped: `ChildStarted` and `running` with no
/// terminal status, for good. A child is put in the book and announced
/// while no kill's ends run.
#[test]
fn a_grandchild_announced_as_a_kill_ends_the_tree_gets_its_terminal_status() {
    let runtime = workers(3);
    // The window opens only when the parent's hook, not the grandchild's
    // own drop, ends the grandchild's turn: a few rounds.
    for round in 0..16 {
        runtime.block_on(async {
            let (held, inside, go) = Held::new();
            let clock = Arc::new(HeldClock(held.clone()));
            let (step_held, step_inside, step_go) = Held::new();
            let hold = Arc::new(tokio::sync::Notify::new());
            let model = ScriptedModel::new(vec![
                Reply::new().use_agent(&work_call("Child", 0, true).tools(["hold", "sleep"])),
                Reply::answer("parent: done"),
            ])
            .with_script(
                "Child\n",
                vec![
                    Reply::new().use_agent(&work_call("GrandA", 600, false)),
                    Reply::new().tool_call("hold", "{}"),
                    Reply::new().use_agent(&work_call("GrandB", 0, false)),
                    Reply::answer("child: done"),
                ],
            )
            .with_script("GrandA\n", worker(600))
            .with_script("GrandB\n", worker(0));
            let builder = DelegationBuilder::new(model.shared())
                .tools(ToolRegistry::new().with(Sleep).with(Hold(hold.clone())))
                .max_depth(2)
                .inline_wait(Duration::from_secs(600))
                .clock(clock.clone())
                .observer(Arc::new(StepHold(step_held.clone())));
            let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
            thread.send_user("go").unwrap();
            let mut log = Vec::new();
            let in_tool = |child: &'static str, tool: &'static str| {
                move |e: &AgentEvent| {
                    matches!(e, AgentEvent::Child(c, inner) if c.as_str() == "agent_1"
                        && match &**inner {
                            AgentEvent::ToolStarted(t) => child == "agent_1" && t.name == tool,
                            AgentEvent::Child(g, deeper) => g.as_str() == child
                                && matches!(&**deeper, AgentEvent::ToolStarted(t) if t.name == tool),
                            _ => false,
                        })
                }
            };
            let ready = async {
                until(&mut events, &mut log, in_tool("agent_2", "sleep")).await;
                if !log.iter().any(in_tool("agent_1", "hold")) {
                    until(&mut events, &mut log, in_tool("agent_1", "hold")).await;
                }
            };
            tokio::time::timeout(Duration::from_secs(30), ready)
                .await
                .expect("the grandchild sleeps and the child holds");
            // The child asks for a second grandchild: the hub reads the clock
            // adding it — held there.
            held.arm();
            hold.notify_one();
            until_held(inside, "the hub reads the clock").await;
            // The kill's hook ends the deepest turn first: held there.
            step_held.arm();
            thread.actor().kill();
            let hooked =
                tokio::task::spawn_blocking(move || step_inside.recv_timeout(Duration::from_secs(10)))
                    .await
                    .unwrap();
            go.send(()).unwrap();
            // Let go once the grandchild is announced, or after a second —
            // from a thread of its own: with the fix, the hub's worker waits
            // for the hook, and every worker may be held (no tokio timer
            // would run).
            let (seen, seen_rx) = mpsc::channel::<()>();
            let letting_go = std::thread::spawn(move || {
                let _ = seen_rx.recv_timeout(Duration::from_secs(1));
                let _ = step_go.send(());
            });
            let announced = |e: &AgentEvent| {
                matches!(e, AgentEvent::Child(c, inner) if c.as_str() == "agent_1"
                    && matches!(&**inner, AgentEvent::ChildStarted(info) if info.id.as_str() == "agent_3"))
            };
            let _ = tokio::time::timeout(Duration::from_secs(2), async {
                while let Some(event) = events.recv().await {
                    let hit = announced(&event);
                    log.push(event);
                    if hit {
                        let _ = seen.send(());
                        break;
                    }
                }
            })
            .await;
            letting_go.join().unwrap();
            drop(thread);
            drain_quiet(&mut events, &mut log).await;
            crate::common::check_log(&log, true);
            let ended = |e: &AgentEvent| {
                matches!(e, AgentEvent::Child(c, inner) if c.as_str() == "agent_1"
                    && matches!(&**inner, AgentEvent::ChildStatus(g, s)
                        if g.as_str() == "agent_3" && s.is_terminal()))
            };
            assert!(hooked.is_ok(), "round {round}: the grandchild's turn never ended");
            assert!(
                !log.iter().any(announced) || log.iter().any(ended),
                "round {round}: agent_3 announced with no terminal status: {log:#?}"
            );
        });
    }
}
