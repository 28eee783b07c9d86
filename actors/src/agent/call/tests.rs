//! A request asked in the instant its policy came to answer it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use subagents_messages::{AgentEvent, AgentId, ApprovalDecision, ApprovalOutcome, Limits, Outcome};

use crate::agent::config::spawn_numbered;
use crate::agent::{AgentBuilder, ApprovalPolicy};
use crate::scripted::{Reply, ScriptedModel};
use crate::sink::{EventSink, EventStream};
use crate::tool::{Tool, ToolCallContext, ToolFuture, ToolRegistry};

/// A tool that needs approval.
struct Guarded;

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
        Box::pin(async { Ok("ran".into()) })
    }
}

/// Says "ask" at its first look and denies at every later one — a child's
/// background policy whose child was handed to the background (on another
/// worker) just after it looked. Counts its looks.
pub(crate) struct AsksAtFirst(pub(crate) AtomicUsize);

impl ApprovalPolicy for AsksAtFirst {
    fn decide(&self, _: &AgentId, _: &str, _: &str) -> Option<ApprovalDecision> {
        (self.0.fetch_add(1, Ordering::SeqCst) > 0).then_some(ApprovalDecision::Deny)
    }
}

/// An agent calling `guarded` once, then answering, under `policy`
/// (looked at again after asking when `recheck`), with a minute of wall
/// clock.
async fn agent(
    policy: Arc<AsksAtFirst>,
    recheck: bool,
) -> (crate::agent::AgentHandle, EventStream) {
    let model = Arc::new(ScriptedModel::new(vec![
        Reply::new().tool_call("guarded", "{}"),
        Reply::answer("done"),
    ]));
    let mut config = AgentBuilder::new(model)
        .tools(ToolRegistry::new().with(Guarded))
        .limits(Limits {
            wall_clock: Duration::from_secs(60),
            ..Limits::default()
        })
        .approvals(policy)
        .config()
        .await
        .unwrap();
    config.approvals_recheck = recheck;
    let (events, stream) = EventSink::channel();
    let handle = spawn_numbered(Arc::new(config), events, Vec::new(), None, 0)
        .await
        .unwrap();
    (handle, stream)
}

fn resolutions(stream: &mut EventStream) -> Vec<ApprovalOutcome> {
    let mut outcomes = Vec::new();
    while let Some(event) = stream.try_recv() {
        if let AgentEvent::ApprovalResolved { outcome, .. } = event {
            outcomes.push(outcome);
        }
    }
    outcomes
}

/// The hub hands a child to the background and answers, by its policy,
/// the request it finds the child asked; a request asked in the same
/// instant on another worker — the policy looked ("ask"), then the child
/// went, then the request reached the book — was found by nobody: it
/// waited for a host that chose never to be asked, to the wall clock.
/// Looked at again once asked, it is answered by the policy.
#[tokio::test(start_paused = true)]
async fn a_request_its_policy_came_to_answer_as_it_was_asked_is_answered() {
    let policy = Arc::new(AsksAtFirst(AtomicUsize::new(0)));
    let (agent, mut stream) = agent(policy.clone(), true).await;
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.outcome, Outcome::Completed);
    assert_eq!(resolutions(&mut stream), vec![ApprovalOutcome::Denied]);
    assert_eq!(policy.0.load(Ordering::SeqCst), 2);
}

/// A host's own policy is looked at once: it said "ask", and the host
/// answers.
#[tokio::test(start_paused = true)]
async fn a_hosts_policy_is_looked_at_once() {
    let policy = Arc::new(AsksAtFirst(AtomicUsize::new(0)));
    let (agent, mut stream) = agent(policy.clone(), false).await;
    let turn = agent.queue_turn("go").unwrap();
    let id = loop {
        if let Some(AgentEvent::ApprovalRequested(request)) = stream.recv().await {
            break request.id;
        }
    };
    agent
        .resolve_approval(id, ApprovalDecision::Approve)
        .await
        .unwrap();
    assert_eq!(turn.await.unwrap().outcome, Outcome::Completed);
    assert_eq!(resolutions(&mut stream), vec![ApprovalOutcome::Approved]);
    assert_eq!(policy.0.load(Ordering::SeqCst), 1);
}
