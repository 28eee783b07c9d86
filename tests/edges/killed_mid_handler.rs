//! Same instant, on two workers: a thread is killed while its hub is
//! inside a handler that moves a child forward.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use super::requester_ends::{HeldClock, Hold};
use super::*;

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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (inside_tx, inside) = mpsc::channel();
        let (go, go_rx) = mpsc::channel();
        let clock = Arc::new(HeldClock {
            armed: AtomicBool::new(false),
            inside: Mutex::new(inside_tx),
            go: Mutex::new(go_rx),
        });
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
        clock.armed.store(true, Ordering::SeqCst);
        hold.notify_one();
        tokio::task::spawn_blocking(move || inside.recv_timeout(Duration::from_secs(60)))
            .await
            .unwrap()
            .expect("the hub reads the clock");
        thread.actor().kill();
        let failed = |e: &AgentEvent| {
            matches!(e, AgentEvent::ChildStatus(id, SubAgentStatus::Failed) if id.as_str() == "agent_2")
        };
        tokio::time::timeout(Duration::from_secs(30), until(&mut events, &mut log, failed))
            .await
            .expect("the kill fails the queued child");
        go.send(()).unwrap();
        drop(thread);
        while let Ok(Some(event)) =
            tokio::time::timeout(Duration::from_secs(5), events.recv()).await
        {
            log.push(event);
        }
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
