//! Case 5: gate capacity. 16 agents share one gate; each runs `TURNS`
//! turns on a scripted model that answers after a fixed 10 ms (tokio time
//! on the real clock: `tokio::time::sleep`, not paused). Throughput is
//! model calls per second; the case compares capacity 4 with capacity 1.
//!
//! The floor does the same with a `tokio::sync::Semaphore` and 16 tasks
//! sleeping 10 ms per permit.

use std::sync::Arc;
use std::time::{Duration, Instant};

use subagents::prelude::*;

/// Agents calling at once.
pub(crate) const AGENTS: usize = 16;
/// Turns (one model call each) per agent.
pub(crate) const TURNS: usize = 3;
/// The model's latency.
pub(crate) const LATENCY: Duration = Duration::from_millis(10);

/// Wall time for `AGENTS` × `TURNS` model calls through a gate of
/// `capacity`.
pub(crate) async fn ours(capacity: usize) -> Duration {
    let turns = vec![Reply::new().delay(LATENCY).text("ok"); TURNS];
    let model = ScriptedModel::new(turns).shared();
    let gate = GateHandle::spawn(capacity).await.expect("spawn gate");
    let (sink, mut stream) = EventSink::channel();
    let mut agents = Vec::with_capacity(AGENTS);
    for i in 0..AGENTS {
        agents.push(
            AgentBuilder::new(model.clone())
                .id(format!("agent_{i}"))
                .system_prompt("You answer.")
                .gate(gate.clone())
                .spawn_into(sink.nested(AgentId::new(format!("agent_{i}"))), None)
                .await
                .expect("spawn agent"),
        );
    }
    // The host reads the stream as it goes.
    let reader = tokio::spawn(async move { while stream.recv().await.is_some() {} });
    drop(sink);
    let start = Instant::now();
    let runs: Vec<_> = agents
        .iter()
        .cloned()
        .map(|agent| {
            tokio::spawn(async move {
                for _ in 0..TURNS {
                    let result = agent.run("go").await.expect("a result");
                    assert_eq!(result.outcome, Outcome::Completed);
                }
            })
        })
        .collect();
    for run in runs {
        run.await.expect("an agent's runs");
    }
    let elapsed = start.elapsed();
    for agent in &agents {
        agent.shutdown();
    }
    gate.actor().stop(None);
    reader.abort();
    elapsed
}

/// The same calls through a raw semaphore of `capacity`.
pub(crate) async fn floor(capacity: usize) -> Duration {
    let permits = Arc::new(tokio::sync::Semaphore::new(capacity));
    let start = Instant::now();
    let runs: Vec<_> = (0..AGENTS)
        .map(|_| {
            let permits = permits.clone();
            tokio::spawn(async move {
                for _ in 0..TURNS {
                    let _permit = permits.acquire().await.expect("open");
                    tokio::time::sleep(LATENCY).await;
                }
            })
        })
        .collect();
    for run in runs {
        run.await.expect("a task");
    }
    start.elapsed()
}

/// Model calls per second.
pub(crate) fn calls_per_second(elapsed: Duration) -> f64 {
    (AGENTS * TURNS) as f64 / elapsed.as_secs_f64()
}
