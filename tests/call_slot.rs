//! A tool's hold on its call: what `ToolCallContext::settle` and
//! `on_cut` reach. A model may reuse a tool-use id within one turn (some
//! servers number calls per answer), and a tool may keep its context after
//! its call returned; the context still reaches only its own call.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use serde_json::json;
use subagents::actors::model::ModelStream;
use subagents::messages::{ModelChunk, ModelRequest, ToolResult};
use subagents::prelude::*;

/// Gives every tool call the same id, as a server that numbers calls per
/// answer does across the answers of one turn.
struct SameIds(ScriptedModel);

impl Model for SameIds {
    fn name(&self) -> &str {
        "same-ids"
    }
    fn stream(&self, request: ModelRequest) -> ModelStream {
        Box::pin(self.0.stream(request).map(|chunk| match chunk {
            Ok(ModelChunk::ToolCall(mut call)) => {
                call.id = ToolUseId::new("call_0");
                Ok(ModelChunk::ToolCall(call))
            }
            other => other,
        }))
    }
}

/// Keeps the context of its first call; on its second, settles and marks
/// the *first* call through that kept context, then waits for ever.
#[derive(Default)]
struct Keeper {
    first: Mutex<Option<ToolCallContext>>,
    /// What the stale `settle` returned.
    stale_settled: Arc<Mutex<Option<bool>>>,
}

impl Tool for Keeper {
    fn name(&self) -> &str {
        "keeper"
    }
    fn description(&self) -> String {
        "keeps its context".into()
    }
    fn parameters(&self) -> serde_json::Value {
        json!({"type": "object"})
    }
    fn call(&self, call: ToolCallContext) -> ToolFuture {
        let mut first = self.first.lock().unwrap();
        match first.take() {
            None => {
                *first = Some(call);
                Box::pin(async { Ok("first".to_owned()) })
            }
            Some(stale) => {
                stale.on_cut("stale note");
                let settled = stale.settle(&Ok("stale output".into()));
                *self.stale_settled.lock().unwrap() = Some(settled);
                Box::pin(std::future::pending())
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_kept_context_never_reaches_a_later_call_with_the_same_id() {
    let script = ScriptedModel::new(vec![
        Reply::new().tool_call("keeper", "{}"),
        Reply::new().tool_call("keeper", "{}"),
        Reply::answer("unreached"),
    ]);
    let keeper = Keeper::default();
    let stale_settled = keeper.stale_settled.clone();
    let (agent, mut events) = AgentBuilder::new(Arc::new(SameIds(script)))
        .tools(ToolRegistry::new().with(keeper))
        .spawn()
        .await
        .unwrap();
    agent.send_user("go").unwrap();
    let mut results: Vec<ToolResult> = Vec::new();
    let mut started = 0;
    while started < 2 {
        if let AgentEvent::ToolStarted(call) = events.recv().await.expect("open") {
            assert_eq!(call.tool_use_id.as_str(), "call_0");
            started += 1;
        }
    }
    // The second call waits; its kept-over first context has tried.
    tokio::task::yield_now().await;
    assert_eq!(
        *stale_settled.lock().unwrap(),
        Some(false),
        "the first call's context settled the second call"
    );
    agent.stop_turn().unwrap();
    loop {
        match events.recv().await.expect("open") {
            AgentEvent::ToolResult(r) => results.push(r),
            AgentEvent::Result(_) => break,
            _ => {}
        }
    }
    assert_eq!(results.len(), 1, "the second call's answer: {results:?}");
    let cut = &results[0];
    assert!(
        cut.is_error && cut.output.contains("stopped"),
        "the second call is answered as cut, not with the first call's output or note: {cut:?}"
    );
}

/// Settles `kept`, then fails as it returns.
struct SettlesThenFails;

impl Tool for SettlesThenFails {
    fn name(&self) -> &str {
        "settler"
    }
    fn description(&self) -> String {
        "settles, then panics".into()
    }
    fn parameters(&self) -> serde_json::Value {
        json!({"type": "object"})
    }
    fn call(&self, call: ToolCallContext) -> ToolFuture {
        Box::pin(async move {
            assert!(call.settle(&Ok("kept".into())));
            panic!("after settling")
        })
    }
}

/// `settle` fixes what the model reads — and says so with `true` — but
/// what the tool returned after it won when the turn was not cut: the
/// answer depended on whether a stop landed in between. The settled
/// output is the answer either way.
#[tokio::test(start_paused = true)]
async fn a_settled_call_is_answered_with_what_it_settled() {
    let model = ScriptedModel::new(vec![
        Reply::new().tool_call("settler", "{}"),
        Reply::answer("done"),
    ]);
    let (agent, mut events) = AgentBuilder::new(model.shared())
        .tools(ToolRegistry::new().with(SettlesThenFails))
        .spawn()
        .await
        .unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.text, "done");
    let mut results = Vec::new();
    while let Some(event) = events.try_recv() {
        if let AgentEvent::ToolResult(r) = event {
            results.push((r.output, r.is_error));
        }
    }
    assert_eq!(results, [("kept".to_owned(), false)]);
}
