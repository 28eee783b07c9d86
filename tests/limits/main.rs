//! Limits that hold under any model (issue 13): a stream that is always
//! ready, usage that grows mid-stream, an answer that ends over budget.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod approval_clock;
mod caps;
mod caps_cut;
mod cut_calls;
mod empty_chunks;
mod gate_clock;
mod panics;
mod unreported;

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use subagents::actors::model::ModelStream;
use subagents::messages::{LimitKind, Limits, ModelChunk, ModelRequest, Outcome, Usage};
use subagents::prelude::*;
use subagents_demo::Calculator;

/// A model whose stream always has the next chunk ready: it never returns
/// `Pending`, so only the co-operative budget gives the scheduler back.
struct AlwaysReady(ModelChunk);

impl Model for AlwaysReady {
    fn name(&self) -> &str {
        "always-ready"
    }

    fn stream(&self, _request: ModelRequest) -> ModelStream {
        futures_util::stream::repeat(self.0.clone()).map(Ok).boxed()
    }
}

/// A model that answers `text` and reports `usage`, once.
struct Answers(&'static str, Usage);

impl Model for Answers {
    fn name(&self) -> &str {
        "answers"
    }

    fn stream(&self, _request: ModelRequest) -> ModelStream {
        futures_util::stream::iter([
            Ok(ModelChunk::Text(self.0.into())),
            Ok(ModelChunk::Usage(self.1)),
        ])
        .boxed()
    }
}

fn limits(wall_clock: Duration) -> Limits {
    Limits {
        wall_clock,
        ..Limits::default()
    }
}

/// A runtime of two workers: a spinning turn can hold one, the test runs
/// on the other, so a regression fails by the outer timeout instead of
/// hanging. Shut down in the background: a task that never yields would
/// keep a blocking shutdown waiting.
fn two_workers<F: std::future::Future<Output = ()>>(test: F) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| runtime.block_on(test)));
    // Not a blocking drop, even when the test failed: that would wait for
    // the spinning task forever.
    runtime.shutdown_background();
    if let Err(panic) = ran {
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn the_wall_clock_ends_a_turn_whose_stream_never_yields() {
    two_workers(async {
        let model = Arc::new(AlwaysReady(ModelChunk::Text("x".into())));
        let (agent, _events) = AgentBuilder::new(model)
            .limits(Limits {
                // Not the budget first: its streamed text is held against
                // it (`an_answer_streaming_past_the_budget_ends_there`).
                token_budget: u64::MAX,
                ..limits(Duration::from_millis(200))
            })
            .spawn()
            .await
            .unwrap();
        let result = tokio::time::timeout(Duration::from_secs(20), agent.run("go"))
            .await
            .expect("the wall clock ends the turn")
            .unwrap();
        assert_eq!(result.outcome, Outcome::LimitReached(LimitKind::WallClock));
        agent.shutdown();
    });
}

#[test]
fn a_stop_ends_a_turn_whose_stream_never_yields_and_frees_the_permit() {
    two_workers(async {
        let model = Arc::new(AlwaysReady(ModelChunk::Text("x".into())));
        let gate = GateHandle::spawn(1).await.unwrap();
        let (agent, mut events) = AgentBuilder::new(model)
            .gate(gate.clone())
            .spawn()
            .await
            .unwrap();
        agent.send_user("go").unwrap();
        // The model is streaming: its text is on the stream.
        loop {
            match events.recv().await.unwrap() {
                AgentEvent::Text(_) => break,
                _ => continue,
            }
        }
        agent.stop_turn().unwrap();
        let ended = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                if let AgentEvent::Result(result) = events.recv().await.unwrap() {
                    return *result;
                }
            }
        })
        .await
        .expect("the stop ends the turn");
        assert_eq!(ended.outcome, Outcome::Stopped);
        // The turn's task is gone with its permit: the next caller gets one.
        let next = tokio::time::timeout(Duration::from_secs(20), gate.acquire("next"))
            .await
            .expect("the stopped turn's permit came back")
            .unwrap();
        drop(next);
        agent.shutdown();
    });
}

#[test]
fn usage_growing_mid_stream_ends_the_call_at_the_budget() {
    two_workers(usage_growing_mid_stream());
}

async fn usage_growing_mid_stream() {
    let chunk = ModelChunk::Usage(Usage {
        prompt_tokens: 1_000,
        completion_tokens: 1_000,
    });
    let (agent, _events) = AgentBuilder::new(Arc::new(AlwaysReady(chunk)))
        .limits(limits(Duration::from_secs(5)))
        .spawn()
        .await
        .unwrap();
    let result = tokio::time::timeout(Duration::from_secs(20), agent.run("go"))
        .await
        .expect("the turn ends")
        .unwrap();
    assert_eq!(result.outcome, Outcome::LimitReached(LimitKind::Tokens));
    let budget = Limits::default().token_budget;
    assert!(
        result.usage.total() <= budget + 2_000,
        "ended within one chunk of the budget, used {}",
        result.usage.total()
    );
    assert!(result.text.contains("token budget"), "{}", result.text);
    assert_eq!(result.model_calls, 1, "the call was cut, no other was made");
}

#[tokio::test(start_paused = true)]
async fn an_answer_that_ends_over_budget_is_a_partial_naming_the_budget() {
    let usage = Usage {
        prompt_tokens: 1_000_000_000_000,
        completion_tokens: 1_000_000_000_000,
    };
    let (agent, _events) = AgentBuilder::new(Arc::new(Answers("Done.", usage)))
        .spawn()
        .await
        .unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.outcome, Outcome::LimitReached(LimitKind::Tokens));
    assert!(
        result
            .text
            .starts_with("Partial result: stopped by the token budget"),
        "{}",
        result.text
    );
    assert!(result.text.contains("Done."), "what it wrote is kept");

    // Exactly at the budget is still within it. (Its output counted:
    // `completion_tokens: 0` for the "Done." it wrote now leaves that
    // output to the estimate — a usage said last that counts no output.)
    let exact = Usage {
        prompt_tokens: Limits::default().token_budget - 1,
        completion_tokens: 1,
    };
    let (agent, _events) = AgentBuilder::new(Arc::new(Answers("Done.", exact)))
        .spawn()
        .await
        .unwrap();
    assert_eq!(agent.run("go").await.unwrap().outcome, Outcome::Completed);
}

/// The output of the parent's call of `tool` with `arguments`, and
/// whether it was an error (a `Worker…` child answers at once).
async fn tool_output(tool: &str, arguments: &str) -> (String, bool) {
    let (result, _) = through(
        tool,
        arguments,
        Reply::new(),
        vec![Reply::answer("the child ran")],
        Limits::default(),
    )
    .await;
    (result.output, result.is_error)
}

#[tokio::test(start_paused = true)]
async fn argument_errors_name_the_field_and_typos_are_refused() {
    let (output, is_error) = tool_output("use_agent", r#"{"action":"run","input":5}"#).await;
    assert!(is_error);
    assert!(
        output.contains("`input` must be a string, not the number 5"),
        "{output}"
    );

    let (output, is_error) = tool_output(
        "use_agent",
        r#"{"action":"run","input":"x","system_prompt":"Worker\nw","wiat":false}"#,
    )
    .await;
    assert!(is_error, "a typo does not run the child inline: {output}");
    assert!(output.contains("did you mean `wait`?"), "{output}");

    let (output, _) = tool_output(
        "delegate_task",
        r#"{"task":"x","system_prompt":"Worker\nw","max_iterations":0}"#,
    )
    .await;
    assert!(
        output.contains("`max_iterations` must be at least 1"),
        "{output}"
    );

    let (output, _) = tool_output("agent", r#"{"tsak":"x"}"#).await;
    assert!(output.contains("did you mean `task`?"), "{output}");

    let (output, is_error) = tool_output("agent", r#"{"task":"x"}"#).await;
    assert!(!is_error, "good arguments still run: {output}");
}

/// The parent's `ToolResult` for its first call, and its own result, with
/// these scripts (the child's system prompt is `Worker…`).
async fn through(
    tool: &str,
    arguments: &str,
    parent_first: Reply,
    child: Vec<Reply>,
    limits: Limits,
) -> (subagents::messages::ToolResult, AgentResult) {
    let model = ScriptedModel::new(vec![
        parent_first.tool_call(tool, arguments),
        Reply::answer("the parent read it"),
    ])
    .with_script("Worker", child)
    .with_script("You are a focused sub-agent", vec![Reply::new().hang()]);
    let (parent, mut events) = DelegationBuilder::new(model.shared())
        .limits(limits)
        .delegate_task_tool(true)
        .agent_tool(true)
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut output = None;
    let result = loop {
        match events.recv().await.unwrap() {
            AgentEvent::ToolResult(r) if output.is_none() => output = Some(r),
            AgentEvent::Result(result) => break *result,
            _ => {}
        }
    };
    parent.shutdown_and_wait().await;
    (output.expect("the call was answered"), result)
}

/// An answer cut by the model's output limit (`finish_reason: length`)
/// is a partial naming the cause, not a completed answer.
#[tokio::test(start_paused = true)]
async fn an_answer_cut_by_the_output_limit_is_a_partial() {
    let model = ScriptedModel::new(vec![
        Reply::new().text("The capital of").truncated("length"),
    ]);
    let (agent, _events) = AgentBuilder::new(model.shared()).spawn().await.unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.outcome, Outcome::LimitReached(LimitKind::Output));
    assert!(
        result.text.starts_with(
            "Partial result: stopped by the model's output limit (finish_reason `length`)"
        ),
        "{}",
        result.text
    );
    assert!(result.text.contains("The capital of"), "{}", result.text);
}

/// An answer cut by the output limit was kept in the conversation, and
/// the turn's partial result after it: two assistant messages in a row,
/// which chat templates that want roles to alternate refuse (and the
/// scripted model, which counts them, answered the next turn with the
/// wrong reply). The result takes the cut answer's place.
#[tokio::test(start_paused = true)]
async fn a_cut_answer_and_its_partial_are_one_message() {
    let model = ScriptedModel::new(vec![
        Reply::new().text("The capital of").truncated("length"),
        Reply::answer("Paris"),
    ]);
    let (agent, _events) = AgentBuilder::new(model.shared()).spawn().await.unwrap();
    let cut = agent.run("go").await.unwrap();
    assert_eq!(cut.outcome, Outcome::LimitReached(LimitKind::Output));
    let next = agent.run("again").await.unwrap();
    assert_eq!(next.outcome, Outcome::Completed, "{}", next.text);
    assert_eq!(next.text, "Paris");
}

/// A tool call cut by the output limit is never run: the model reads why
/// and goes on.
#[tokio::test(start_paused = true)]
async fn a_tool_call_cut_by_the_output_limit_is_never_run() {
    let model = ScriptedModel::new(vec![
        Reply::new()
            .tool_call("calculator", r#"{"expression":"6*"#)
            .truncated("length"),
        Reply::answer("I will answer without it."),
    ]);
    let (agent, mut events) = AgentBuilder::new(model.shared())
        .tools(ToolRegistry::new().with(Calculator))
        .spawn()
        .await
        .unwrap();
    agent.send_user("go").unwrap();
    let mut results = Vec::new();
    let result = loop {
        match events.recv().await.unwrap() {
            AgentEvent::ToolResult(r) => results.push(r),
            AgentEvent::Result(result) => break *result,
            _ => {}
        }
    };
    assert_eq!(results.len(), 1);
    assert!(results[0].is_error);
    assert!(
        results[0]
            .output
            .starts_with("not run: your output was cut (finish_reason `length`)"),
        "{}",
        results[0].output
    );
    assert_eq!(result.outcome, Outcome::Completed);
    assert_eq!(result.tool_calls, 0, "the cut call did not run");
}

/// A call whose arguments are not JSON never reaches its tool (a server
/// may cut a call at its token limit and still say `tool_calls`, as
/// llama-cpp-python does).
#[tokio::test(start_paused = true)]
async fn a_tool_call_whose_arguments_are_not_json_is_never_run() {
    let model = ScriptedModel::new(vec![
        Reply::new().tool_call("calculator", r#"{"expression":"6*"#),
        Reply::answer("ok"),
    ]);
    let (agent, mut events) = AgentBuilder::new(model.shared())
        .tools(ToolRegistry::new().with(Calculator))
        .spawn()
        .await
        .unwrap();
    agent.send_user("go").unwrap();
    let output = loop {
        if let AgentEvent::ToolResult(r) = events.recv().await.unwrap() {
            break r.output;
        }
    };
    assert!(
        output.starts_with("invalid arguments: not run, they are not valid JSON"),
        "{output}"
    );
}

/// A tool whose call does 10 s of work without waiting (a synchronous
/// `Command::output()`, a large parse): it moves the paused clock on its
/// first poll and returns.
struct Busy;

impl Tool for Busy {
    fn name(&self) -> &str {
        "busy"
    }
    fn description(&self) -> String {
        "works 10 s without waiting".into()
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn call(&self, _call: ToolCallContext) -> ToolFuture {
        Box::pin(async {
            let advanced = tokio::time::advance(Duration::from_secs(10));
            let _ = futures_util::FutureExt::now_or_never(advanced);
            Ok("worked".into())
        })
    }
}

/// Misbehaving tool: the wall clock's timer fires only where the turn
/// waits (tokio polls the turn before its timer), so a tool that worked
/// past the limit without waiting let the turn go on — the answer's next
/// call ran, the model was called again, and the turn ended `Completed`
/// 5 s past its wall clock. A step about to start past it waits for the
/// timer instead.
#[tokio::test(start_paused = true)]
async fn nothing_starts_after_the_wall_clock_ran_out() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let counted = Arc::new(AtomicUsize::new(0));
    let model = Arc::new(ScriptedModel::new(vec![
        Reply::new()
            .tool_call("busy", "{}")
            .tool_call("count", "{}"),
        Reply::answer("finished"),
    ]));
    let tools = ToolRegistry::new()
        .with(Busy)
        .with(common::blocking::Count(counted.clone()));
    let (agent, _events, gate) =
        common::spawn_agent(model.clone(), tools, limits(Duration::from_secs(5))).await;
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.outcome, Outcome::LimitReached(LimitKind::WallClock));
    assert_eq!(
        counted.load(Ordering::SeqCst),
        0,
        "a call started past the limit"
    );
    assert_eq!(model.calls(), 1, "a model call started past the limit");
    common::assert_gate_free(&gate).await;
}
