//! A stop that lands while the turn's task is running on another worker:
//! `abort` cancels a task only where it next waits, so the task may go on
//! for a while after the turn closed. Nothing it does then may start.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::*;
use common::blocking::{Block, Count};

/// The stop answers the turn `stopped` while its task is held inside a
/// tool on the other worker; once the tool returns, the answer's next call
/// is not run and the model is not asked again: the host was told the turn
/// stopped, so nothing of it happens after.
#[test]
fn a_turn_stopped_while_its_task_runs_starts_nothing_after() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let model = Arc::new(ScriptedModel::new(vec![
            Reply::new()
                .tool_call("block", "{}")
                .tool_call("count", "{}"),
            Reply::answer("done"),
        ]));
        let entered = Arc::new(AtomicBool::new(false));
        let release = Arc::new(AtomicBool::new(false));
        let counted = Arc::new(AtomicUsize::new(0));
        let tools = ToolRegistry::new()
            .with(Block {
                entered: entered.clone(),
                release: release.clone(),
            })
            .with(Count(counted.clone()));
        let (agent, mut events, _gate) = spawn_agent(model.clone(), tools, Limits::default()).await;
        let metrics = tokio::runtime::Handle::current().metrics();
        let idle = metrics.num_alive_tasks();
        agent.send_user("go").unwrap();
        while !entered.load(Ordering::SeqCst) {
            tokio::task::yield_now().await;
        }
        agent.stop_turn().unwrap();
        let mut log = Vec::new();
        let result = loop {
            let event = events.recv().await.expect("the stream ended");
            if let AgentEvent::Result(result) = &event {
                break (**result).clone();
            }
            log.push(event);
        };
        assert_eq!(result.outcome, Outcome::Stopped, "{log:#?}");
        release.store(true, Ordering::SeqCst);
        // Until the turn's task is gone (it ends either way: the old code
        // ran the rest of the turn first).
        tokio::time::timeout(Duration::from_secs(30), async {
            while metrics.num_alive_tasks() > idle {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the turn's task never ended");
        assert_eq!(
            counted.load(Ordering::SeqCst),
            0,
            "a call ran after the stop"
        );
        assert_eq!(model.calls(), 1, "the model was asked after the stop");
        // Nothing reached the stream after the result, and the agent is
        // still there for the next turn.
        assert!(events.try_recv().is_none());
        assert!(!agent.snapshot().await.unwrap().busy);
    });
}
