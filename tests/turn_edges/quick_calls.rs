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
    let calls = (0..20_000).fold(Reply::new(), |reply, _| reply.tool_call("count", "{}"));
    let (outcome, ran, refused) = stopped_at_the_first_call(calls).await;
    assert_eq!(outcome, Outcome::Stopped, "{ran} calls ran");
    assert!(ran < 2_000, "{ran} of 20,000 calls ran after the stop");
    assert_eq!(refused, 0);
}

/// The same for an answer the output limit cut: each of its calls is
/// refused ("not run: your output was cut…"), and the refusals did not
/// yield either — 20,000 were answered before the stop landed.
#[tokio::test(start_paused = true)]
async fn a_stop_lands_inside_the_refusals_of_a_cut_answer() {
    let calls = (0..20_000)
        .fold(Reply::new(), |reply, _| reply.tool_call("count", "{}"))
        .truncated("length");
    let (outcome, ran, refused) = stopped_at_the_first_call(calls).await;
    assert_eq!(outcome, Outcome::Stopped, "{refused} calls refused");
    assert_eq!(ran, 0, "a cut answer's calls never run");
    assert!(
        refused < 2_000,
        "{refused} of 20,000 refused after the stop"
    );
}

/// Runs `answer` on an agent with the `count` tool, stopping its turn at
/// the first `ToolStarted`: how the turn ended, how many calls ran, and
/// how many were refused.
async fn stopped_at_the_first_call(answer: Reply) -> (Outcome, usize, usize) {
    let counted = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new(vec![answer, Reply::answer("done")]).shared();
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
        let mut refused = 0;
        while let Some(event) = events.recv().await {
            match event {
                AgentEvent::ToolStarted(_) if !stopped => {
                    stopped = true;
                    let _ = stopper.stop_turn();
                }
                AgentEvent::ToolResult(result)
                    if result.output.starts_with("not run: your output was cut") =>
                {
                    refused += 1;
                }
                AgentEvent::Result(result) => return (result.outcome, refused),
                _ => {}
            }
        }
        panic!("the stream ended first")
    });
    agent.send_user("go").unwrap();
    let (outcome, refused) = reader.await.unwrap();
    (outcome, counted.load(Ordering::SeqCst), refused)
}
