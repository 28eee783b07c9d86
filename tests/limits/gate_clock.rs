//! The wall clock around the gate: the step between a permit and the
//! model call.

use super::*;

/// Same instant (review: the gate and the limits): a turn waiting at a
/// shared gate whose wall clock ran out in the tick the gate let it in —
/// a holder that worked past it without waiting, or two workers — made
/// its model call all the same (tokio polls a timeout's future before its
/// timer), and with an answer ready at once ended `Completed` 5 s past
/// its wall clock. A call the gate lets in past it is not made: the turn
/// ends as its timer would, the permit given back.
#[tokio::test(start_paused = true)]
async fn a_call_the_gate_lets_in_past_the_wall_clock_is_not_made() {
    let model = Arc::new(ScriptedModel::new(vec![Reply::answer("late")]));
    let (agent, _events, gate) = common::spawn_agent(
        model.clone(),
        ToolRegistry::new(),
        limits(Duration::from_secs(5)),
    )
    .await;
    let held = gate
        .acquire(subagents::messages::AgentId::new("host"))
        .await
        .unwrap();
    let turn = tokio::spawn(async move { agent.run("go").await });
    // It waits at the gate.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(gate.snapshot().await.unwrap().queued, 1);
    // Past its deadline, and no timer fired yet: the holder worked on
    // without waiting, then let the permit go.
    let advanced = tokio::time::advance(Duration::from_secs(10));
    let _ = futures_util::FutureExt::now_or_never(advanced);
    drop(held);
    let result = turn.await.unwrap().unwrap();
    assert_eq!(result.outcome, Outcome::LimitReached(LimitKind::WallClock));
    assert_eq!(model.calls(), 0, "a model call started past the limit");
    common::assert_gate_free(&gate).await;
}
