//! An answer of many calls to a tool that never waits.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use common::blocking::Count;

/// An answer of 20,000 calls to a tool ready at its first poll: the calls
/// never yielded, so on a current-thread runtime the stop the host sent
/// at the first `ToolStarted` landed only once all 20,000 had run, and
/// the turn ended `Completed` (in paused time the wall clock could not cut
/// it either). Each call spends the task's budget, as each model chunk
/// does: the stop lands within a few hundred calls.
#[tokio::test(start_paused = true)]
async fn a_stop_lands_inside_an_answer_of_quick_calls() {
    let counted = Arc::new(AtomicUsize::new(0));
    let calls = (0..20_000).fold(Reply::new(), |reply, _| reply.tool_call("count", "{}"));
    let model = ScriptedModel::new(vec![calls, Reply::answer("done")]).shared();
    let (agent, mut events, _gate) = common::spawn_agent(
        model,
        ToolRegistry::new().with(Count(counted.clone())),
        Limits {
            token_budget: 10_000_000,
            ..Limits::default()
        },
    )
    .await;
    let stopper = agent.clone();
    let reader = tokio::spawn(async move {
        let mut stopped = false;
        while let Some(event) = events.recv().await {
            match event {
                AgentEvent::ToolStarted(_) if !stopped => {
                    stopped = true;
                    let _ = stopper.stop_turn();
                }
                AgentEvent::Result(result) => return result.outcome,
                _ => {}
            }
        }
        panic!("the stream ended first")
    });
    agent.send_user("go").unwrap();
    let outcome = reader.await.unwrap();
    let ran = counted.load(Ordering::SeqCst);
    assert_eq!(outcome, Outcome::Stopped, "{ran} calls ran");
    assert!(ran < 2_000, "{ran} of 20,000 calls ran after the stop");
}
