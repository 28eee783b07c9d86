//! Same instant, on two workers: a child's turn ends on one while the hub
//! adds a child under it on the other.

use subagents::actors::clock::Clock;
use subagents::actors::hub::Refused;
use subagents::messages::{ChildRequest, ToolUseId};
use subagents_demo::Sleep;

use crate::common::held::{Held, until_held};

use super::*;

/// A clock that, once armed, holds the first reading taken after (see
/// [`Held`]). The hub reads it between its check that a requester's turn
/// is open and the `ChildStarted` that check guards — the only host code
/// in that window, so a test can end the turn inside it.
pub(super) struct HeldClock(pub(super) Arc<Held>);

impl Clock for HeldClock {
    fn now_ms(&self) -> u64 {
        self.0.pass();
        1_700_000_000_000
    }
}

pub(super) use crate::common::held::Hold;

/// A host asks for a child in `agent_1`'s name (or `agent_1`'s own
/// `use_agent run` is read) on one worker while `agent_1`'s turn ends on
/// the other, between the hub's check that the requester's turn is open
/// and its `ChildStarted`: the check passed, the turn closed and emitted
/// its `Result`, and the hub then emitted `ChildStarted` into the ended
/// row and started a grandchild for nobody. The start is announced under
/// the requester's turn lock, only while the turn is open; otherwise the
/// request is refused as for a requester whose turn had ended.
#[test]
fn a_child_requested_as_its_requesters_turn_ends_on_another_worker_is_refused() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (held, inside, go) = Held::new();
        let clock = Arc::new(HeldClock(held.clone()));
        let hold = Arc::new(tokio::sync::Notify::new());
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&work_call("Child", 0, false).tools(["hold"])),
            Reply::answer("parent: started"),
        ])
        .with_script(
            "Child\n",
            vec![
                Reply::new().tool_call("hold", "{}"),
                Reply::answer("child: done"),
            ],
        )
        .with_script("Grand\n", vec![Reply::answer("grand: ran")]);
        let (parent, mut events) = DelegationBuilder::new(model.shared())
            .tools(
                ToolRegistry::new()
                    .with(Sleep)
                    .with(Hold(hold.clone())),
            )
            .max_depth(2)
            .clock(clock.clone())
            .spawn()
            .await
            .unwrap();
        parent.agent.send_user("go").unwrap();
        let mut log = Vec::new();
        let child = AgentId::new("agent_1");
        let in_row = |id: &AgentId, what: fn(&AgentEvent) -> bool| {
            let id = id.clone();
            move |e: &AgentEvent| matches!(e, AgentEvent::Child(c, inner) if *c == id && what(inner))
        };
        until(
            &mut events,
            &mut log,
            in_row(&child, |e| matches!(e, AgentEvent::ToolStarted(call) if call.name == "hold")),
        )
        .await;

        held.arm();
        let asked = tokio::spawn({
            let hub = parent.hub.clone();
            let request = ChildRequest::new(
                child.clone(),
                1,
                ToolUseId::new("host"),
                "Grand\nA sub-agent.",
                "w",
            );
            async move { hub.request(request).await }
        });
        until_held(inside, "the hub reads the clock").await;
        // The hub is inside the window: the child's turn ends now, on the
        // other worker.
        hold.notify_one();
        until(
            &mut events,
            &mut log,
            in_row(&child, |e| matches!(e, AgentEvent::Result(_))),
        )
        .await;
        go.send(()).unwrap();
        let answer = asked.await.unwrap();

        parent.shutdown_and_wait().await;
        drain(&mut events, &mut log);
        crate::common::check_log(&log, true);
        let row = row_of(&log, "agent_1");
        let end = row
            .iter()
            .position(|e| matches!(e, AgentEvent::Result(_)))
            .unwrap();
        assert!(
            !row[end + 1..]
                .iter()
                .any(|e| matches!(e, AgentEvent::Child(..) | AgentEvent::ChildStarted(_))),
            "after its Result: {:#?}",
            &row[end..]
        );
        assert!(
            matches!(&answer, Err(Refused::RequesterEnded { id }) if *id == child),
            "{answer:?}"
        );
        assert!(
            !log.iter().any(|e| format!("{e:?}").contains("grand: ran")),
            "the grandchild ran"
        );
    });
}

/// Shuts its agent down when the child `first` finishes: from inside
/// the hub's handler (observers are told there, before the slot is
/// freed), as a host's close lands in the tick a child ends.
struct CloseOnFinish {
    first: AgentId,
    agent: std::sync::OnceLock<subagents::actors::DelegatingAgent>,
}

impl HubObserver for CloseOnFinish {
    fn finished(&self, envelope: &Envelope) {
        if envelope.id == self.first {
            self.agent.get().unwrap().shutdown();
        }
    }
}

/// Stopped midway, a close × a queued child: a close drains the hub (what
/// it had read before is handled first), and a child's finish read then
/// freed its slot for the next in the queue — started under the closing
/// hub, its link refused, it failed "its supervisor is stopping"
/// (resumable by a later message), and so did every child queued behind
/// it. A close stops them, before they started.
#[tokio::test(start_paused = true)]
async fn a_close_as_a_child_finishes_stops_the_queued_ones_it_freed_a_slot_for() {
    let observer = Arc::new(CloseOnFinish {
        first: AgentId::new("agent_1"),
        agent: std::sync::OnceLock::new(),
    });
    let (parent, mut events) = DelegationBuilder::new(background_workers(&[5, 600, 600]).shared())
        .tools(ToolRegistry::new().with(Sleep))
        .max_live(1)
        .observer(observer.clone())
        .spawn()
        .await
        .unwrap();
    let _ = observer.agent.set(parent.clone());
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 30).await;
    parent.shutdown_and_wait().await;
    for id in ["agent_2", "agent_3"] {
        let envelope = parent.hub.status(&AgentId::new(id)).unwrap();
        assert_eq!(
            envelope.status,
            subagents::messages::SubAgentStatus::Stopped,
            "{envelope:#?}"
        );
        assert_eq!(envelope.error.as_deref(), Some("stopped before it started"));
    }
}

/// Arms its hold when the child `id` finishes: observers are told after
/// the hub's handler read its clock for that finish and before the slot
/// is freed, so the next reading is the start of the child it admits.
struct ArmOnFinish {
    id: AgentId,
    held: Arc<Held>,
}

impl HubObserver for ArmOnFinish {
    fn finished(&self, envelope: &Envelope) {
        if envelope.id == self.id {
            self.held.arm();
        }
    }
}

/// A queued grandchild admitted (its sibling finished) on one worker as
/// its requester's turn ends on the other, between the hub's check that
/// the turn is open and the grandchild's `ChildRunning`: the check
/// passed, the turn closed with its `Result`, and the hub then said
/// `ChildRunning` into the ended row and started the grandchild for
/// nobody (a model call, then "stopped while running"). Its start is
/// said under the requester's turn lock, only while the turn is open —
/// as a request's `ChildStarted` is; otherwise it stops before it
/// started.
#[test]
fn a_queued_grandchild_admitted_as_its_requesters_turn_ends_on_another_worker_is_not_started() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (held, inside, go) = Held::new();
        let hold = Arc::new(tokio::sync::Notify::new());
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&work_call("Child", 0, true).tools(["hold", "sleep"])),
            Reply::answer("parent: done"),
        ])
        .with_script(
            "Child\n",
            vec![
                Reply::new()
                    .use_agent(&work_call("Holder", 1, false))
                    .use_agent(&work_call("Waiter", 0, false)),
                Reply::new().tool_call("hold", "{}"),
                Reply::answer("child: done"),
            ],
        )
        .with_script("Holder\n", worker(1))
        .with_script("Waiter\n", vec![Reply::answer("waiter: ran")]);
        let (parent, mut events) = DelegationBuilder::new(model.shared())
            .tools(ToolRegistry::new().with(Sleep).with(Hold(hold.clone())))
            .max_depth(2)
            .max_live(1)
            .clock(Arc::new(HeldClock(held.clone())))
            .observer(Arc::new(ArmOnFinish {
                id: AgentId::new("agent_2"),
                held,
            }))
            .spawn()
            .await
            .unwrap();
        parent.agent.send_user("go").unwrap();
        let mut log = Vec::new();
        let child = AgentId::new("agent_1");
        let waiter = AgentId::new("agent_3");
        until(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::Child(c, inner) if *c == child
                && matches!(&**inner, AgentEvent::ToolStarted(call) if call.name == "hold"))
        })
        .await;
        assert!(
            row_of(&log, "agent_1").iter().any(|e| matches!(e,
                AgentEvent::ChildStatus(id, SubAgentStatus::Queued) if *id == waiter)),
            "the waiter is queued: {log:#?}"
        );
        // The holder finishes (a second of sleep); the hub then admits the
        // waiter and is held reading its clock for its start.
        until_held(inside, "the hub starts the queued grandchild").await;
        hold.notify_one();
        until(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::Child(c, inner) if *c == child
                && matches!(&**inner, AgentEvent::Result(_)))
        })
        .await;
        go.send(()).unwrap();
        until(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::Result(_))
        })
        .await;

        parent.shutdown_and_wait().await;
        drain(&mut events, &mut log);
        crate::common::check_log(&log, true);
        let row = row_of(&log, "agent_1");
        let end = row
            .iter()
            .position(|e| matches!(e, AgentEvent::Result(_)))
            .unwrap();
        assert!(
            !row[end + 1..].iter().any(|e| matches!(e,
                AgentEvent::ChildRunning(id) | AgentEvent::Child(id, _) if *id == waiter)),
            "after its Result: {:#?}",
            &row[end..]
        );
        let envelope = parent.hub.status(&waiter).unwrap();
        assert_eq!(envelope.status, SubAgentStatus::Stopped, "{envelope:#?}");
        assert_eq!(envelope.error.as_deref(), Some("stopped before it started"));
        assert!(envelope.started_at_ms.is_none(), "{envelope:#?}");
        assert!(
            !log.iter().any(|e| format!("{e:?}").contains("waiter: ran")),
            "the waiter ran"
        );
    });
}

/// Same instant, on two workers (review: steering against limits): the
/// parent's message to a queued grandchild read after its requester's
/// turn had closed (stopped; its end not read yet, held here in its
/// handler): kept for the grandchild's start and answered `queued` — "it
/// reads your message after its task, when it starts" — but a child whose
/// requester's turn is over never starts: stopped "before it started",
/// the message read by no run. Refused as one that ended: the send waits
/// for its end, and a stopped child does not resume, which the call says.
#[test]
fn a_message_to_a_queued_grandchild_whose_requester_ended_is_not_kept_for_nothing() {
    use crate::common::held::HoldStepped;
    let runtime = workers(2);
    runtime.block_on(async {
        let (held, inside, go) = Held::new();
        let run = |name: &str, tools: &[&str]| {
            UseAgentCall::run(format!("{name}\nYou work."), "work")
                .tools(tools.iter().copied())
                .background()
        };
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&run("Child", &["sleep"])),
            Reply::answer("parent: started"),
            Reply::new().use_agent(&UseAgentCall::send("agent_3", "also X")),
            Reply::answer("parent: sent"),
            Reply::answer("parent: noted"),
        ])
        .with_script(
            "Child\n",
            vec![
                Reply::new().use_agent(&run("Holder", &["sleep"])),
                Reply::new().use_agent(&run("Waiter", &[])),
                Reply::new().tool_call("sleep", r#"{"secs":1000}"#),
                Reply::answer("child: never"),
            ],
        )
        .with_script(
            "Holder\n",
            vec![Reply::new().tool_call("sleep", r#"{"secs":1000}"#)],
        )
        .with_script("Waiter\n", vec![Reply::answer("waiter: ran")]);
        let (thread, mut events) = subagents::supervisor::ThreadHandle::spawn(
            DelegationBuilder::new(model.shared())
                .tools(ToolRegistry::new().with(Sleep))
                .max_depth(2)
                .max_live(1)
                .observer(Arc::new(HoldStepped(held.clone()))),
            None,
        )
        .await
        .unwrap();
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        let (child, waiter) = (AgentId::new("agent_1"), AgentId::new("agent_3"));
        until(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::Child(at, inner) if at.as_str() == "agent_1"
                && matches!(&**inner, AgentEvent::ToolStarted(s) if s.name == "sleep"))
        })
        .await;
        assert_eq!(thread.hub().queue_position(&waiter), Some(1));
        // The child's stop cuts its call (a step): held in its handler,
        // its turn closed, its end not yet told to the hub.
        held.arm();
        let stop = tokio::spawn(thread.hub().stop(&child));
        until_held(inside, "the child's cut call is told as a step").await;
        thread.send_user("tell it").unwrap();
        until(
            &mut events,
            &mut log,
            |e| matches!(e, AgentEvent::ToolStarted(s) if s.arguments.contains("also X")),
        )
        .await;
        // Answered at once before (`queued`), while the child is held.
        for _ in 0..50 {
            thread.hub().sync().await.unwrap();
            tokio::task::yield_now().await;
        }
        while let Some(Some(event)) = futures_util::FutureExt::now_or_never(events.recv()) {
            log.push(event);
        }
        let early = results_of(&log, "use_agent");
        assert!(
            !early.iter().any(|(output, _)| output.contains("queued")),
            "the message was kept for a start that never comes: {early:?}"
        );
        go.send(()).unwrap();
        let _ = stop.await;
        until_result(&mut events, &mut log).await;
        let (sent, _) = results_of(&log, "use_agent").pop().unwrap();
        assert!(!sent.contains("queued"), "{sent}");
        assert!(sent.contains("stopped"), "{sent}");
        thread.close_and_wait().await;
    });
}
