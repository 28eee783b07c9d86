//! A model call cut mid-stream still costs what the server did: its
//! tokens are counted (an estimate when the server reported none), as the
//! call itself is.

use super::*;

/// A wall clock, a stop or a broken stream cut a call that had streamed
/// 4,000 characters and reported no usage yet (OpenAI says it in the last
/// chunk, llama-cpp-python never): the call was counted, its tokens were
/// not — "1 model call(s)" for 0 tokens, the costliest call of a turn free.
#[tokio::test(start_paused = true)]
async fn a_call_cut_mid_stream_counts_an_estimate_of_its_tokens() {
    let long = "x".repeat(4_000);
    // The wall clock.
    let model = ScriptedModel::new(vec![Reply::new().text(long.clone()).hang()]);
    let (agent, _events) = AgentBuilder::new(model.shared())
        .limits(limits(Duration::from_secs(10)))
        .spawn()
        .await
        .unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.outcome, Outcome::LimitReached(LimitKind::WallClock));
    assert_eq!(result.model_calls, 1);
    assert!(
        result.usage.completion_tokens >= 1_000,
        "{:?}",
        result.usage
    );
    assert!(result.usage.prompt_tokens >= 1, "{:?}", result.usage);

    // A broken stream.
    let model = ScriptedModel::new(vec![
        Reply::new().text(long.clone()).error("connection reset"),
    ]);
    let (agent, _events) = AgentBuilder::new(model.shared()).spawn().await.unwrap();
    let result = agent.run("go").await.unwrap();
    assert!(
        matches!(result.outcome, Outcome::Failed(_)),
        "{:?}",
        result.outcome
    );
    assert_eq!(result.model_calls, 1);
    assert!(
        result.usage.completion_tokens >= 1_000,
        "{:?}",
        result.usage
    );

    // A call that reported its usage before the cut is not estimated on
    // top; one refused before a byte streamed costs nothing.
    let model = ScriptedModel::new(vec![Reply::new().text(long).usage(7, 3).error("reset")]);
    let (agent, _events) = AgentBuilder::new(model.shared()).spawn().await.unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.usage.total(), 10, "{:?}", result.usage);
    let model = ScriptedModel::new(vec![Reply::new().error("connection refused")]);
    let (agent, _events) = AgentBuilder::new(model.shared()).spawn().await.unwrap();
    assert_eq!(agent.run("go").await.unwrap().usage.total(), 0);
}

/// Accounting (review: accounting): a usage that came first — the
/// prompt's (Anthropic's `message_start`; front-ends.md: each `Usage` is
/// an increment) — marked the call counted, all of it: cut by the wall
/// clock or a broken stream after 4,000 characters, its `Result` said
/// the prompt's 10 tokens and 0 for what the host saw it write. What it
/// wrote after its last count is estimated; what a count covered is not.
#[tokio::test(start_paused = true)]
async fn a_call_cut_after_an_early_usage_counts_what_it_wrote_since() {
    let long = "x".repeat(4_000);
    let model = ScriptedModel::new(vec![Reply::new().usage(10, 0).text(long.clone()).hang()]);
    let (agent, _events) = AgentBuilder::new(model.shared())
        .limits(limits(Duration::from_secs(10)))
        .spawn()
        .await
        .unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.outcome, Outcome::LimitReached(LimitKind::WallClock));
    assert_eq!(result.usage.prompt_tokens, 10, "{:?}", result.usage);
    assert!(
        result.usage.completion_tokens >= 1_000,
        "{:?}",
        result.usage
    );

    let model = ScriptedModel::new(vec![
        Reply::new().usage(10, 0).text(long.clone()).error("reset"),
    ]);
    let (agent, _events) = AgentBuilder::new(model.shared()).spawn().await.unwrap();
    let result = agent.run("go").await.unwrap();
    assert!(
        result.usage.completion_tokens >= 1_000,
        "{:?}",
        result.usage
    );

    // Counted early and late: only what came after the last count.
    let model = ScriptedModel::new(vec![
        Reply::new()
            .usage(10, 0)
            .text(long.clone())
            .usage(0, 900)
            .text("y".repeat(400))
            .error("reset"),
    ]);
    let (agent, _events) = AgentBuilder::new(model.shared()).spawn().await.unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(
        result.usage,
        Usage {
            prompt_tokens: 10,
            completion_tokens: 1_000
        }
    );
}

/// Accounting (review: accounting): a call the gate never let through (it
/// had closed) counted as a model call — the turn's failure said "after 1
/// model call(s)", none made, and `model_calls` was 1. A call never sent
/// counts nothing.
#[tokio::test(start_paused = true)]
async fn a_call_the_gate_never_let_through_is_no_model_call() {
    use subagents::actors::GateHandle;
    let gate = GateHandle::spawn(1).await.unwrap();
    let model = ScriptedModel::new(vec![Reply::answer("never")]);
    let (agent, _events) = AgentBuilder::new(model.shared())
        .gate(gate.clone())
        .spawn()
        .await
        .unwrap();
    gate.actor().stop_and_wait(None, None).await.unwrap();
    let result = agent.run("go").await.unwrap();
    assert!(
        matches!(result.outcome, Outcome::Failed(_)),
        "{:?}",
        result.outcome
    );
    assert_eq!(result.model_calls, 0, "{}", result.text);
    assert_eq!(result.usage.total(), 0);
}
