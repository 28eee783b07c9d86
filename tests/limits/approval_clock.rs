//! The wall clock around an approval: the step between the decision and
//! the tool.

use std::sync::atomic::{AtomicUsize, Ordering};

use subagents::actors::agent::ApprovalPolicy;
use subagents::messages::{AgentId, ApprovalDecision};

use super::*;

/// A tool that needs approval and counts its runs.
struct Guarded(Arc<AtomicUsize>);

impl Tool for Guarded {
    fn name(&self) -> &str {
        "guarded"
    }
    fn description(&self) -> String {
        "runs once approved".into()
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn requires_approval(&self, _arguments: &str) -> bool {
        true
    }
    fn call(&self, _call: ToolCallContext) -> ToolFuture {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok("ran".into()) })
    }
}

/// A policy that approves after 10 s of work without waiting (a lookup
/// in a slow store, a synchronous prompt): it moves the paused clock.
struct SlowToApprove;

impl ApprovalPolicy for SlowToApprove {
    fn decide(&self, _agent: &AgentId, _tool: &str, _arguments: &str) -> Option<ApprovalDecision> {
        let advanced = tokio::time::advance(Duration::from_secs(10));
        let _ = futures_util::FutureExt::now_or_never(advanced);
        Some(ApprovalDecision::Approve)
    }
}

fn model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(vec![
        Reply::new().tool_call("guarded", "{}"),
        Reply::answer("finished"),
    ]))
}

/// Misbehaving host code: the wall clock was checked before a call and
/// not again once it was approved, so a decision that took the turn past
/// its limit (a policy working without waiting) started the tool after
/// it — a side effect past the wall clock, which says nothing starts
/// past it. Checked again between the decision and the tool.
#[tokio::test(start_paused = true)]
async fn no_tool_starts_after_an_approval_that_took_past_the_wall_clock() {
    let ran = Arc::new(AtomicUsize::new(0));
    let (agent, mut events) = AgentBuilder::new(model())
        .tools(ToolRegistry::new().with(Guarded(ran.clone())))
        .limits(limits(Duration::from_secs(5)))
        .approvals(Arc::new(SlowToApprove))
        .spawn()
        .await
        .unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.outcome, Outcome::LimitReached(LimitKind::WallClock));
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "the tool started past the limit"
    );
    // The call is answered once, by the close, as the clock's cut says.
    let mut answers = Vec::new();
    while let Some(event) = events.try_recv() {
        if let AgentEvent::ToolResult(r) = event {
            answers.push(r.output);
        }
    }
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert!(answers[0].contains("wall-clock"), "{answers:?}");
}
