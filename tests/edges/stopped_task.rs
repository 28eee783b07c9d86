//! A stop that lands while the turn's task is running on another worker:
//! `abort` cancels a task only where it next waits, so the task may go on
//! for a while after the turn closed. Nothing it does then may start.

use std::sync::Arc;

use super::*;
use common::blocking::stopped_while_blocked;

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
