//! The proxy's own steps, against a link the test drives.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use subagents_messages::remote::{ReportBody, RunReport, RunRequest, RunSpec};
use subagents_messages::{
    AgentEvent, ApprovalDecision, ApprovalId, ApprovalOutcome, ApprovalRequest, Outcome,
    ToolStarted, ToolUseId,
};

use crate::agent::{AgentBuilder, AsksAtFirst};
use crate::remote::link::{NodeLink, RunReports};
use crate::remote::proxy::{Remote, spawn_remote};
use crate::scripted::ScriptedModel;
use crate::sink::EventSink;

/// A node that runs nothing: the test reports for it.
#[derive(Default)]
struct Driven {
    started: Mutex<Option<(u64, RunReports)>>,
    requests: Mutex<Vec<RunRequest>>,
}

impl NodeLink for Driven {
    fn node(&self) -> &str {
        "b"
    }
    fn start(&self, spec: RunSpec, reports: RunReports) -> Result<(), String> {
        *self.started.lock().unwrap() = Some((spec.key, reports));
        Ok(())
    }
    fn request(&self, _: u64, request: RunRequest) -> Result<(), String> {
        self.requests.lock().unwrap().push(request);
        Ok(())
    }
}

/// A proxy for `agent_1` on `node` (approvals by `policy`, looked at
/// again), its turn started: the run's key and where its reports go.
async fn started_on(
    node: &Arc<Driven>,
    policy: Option<Arc<AsksAtFirst>>,
) -> (crate::agent::AgentHandle, u64, RunReports) {
    let (agent, reply, key, reports) = replying(node, policy).await;
    // Its turn's reply is not awaited: the test reports for the node.
    std::mem::forget(reply);
    (agent, key, reports)
}

/// The turn's reply a test awaits.
type Reply = std::pin::Pin<
    Box<
        dyn Future<Output = Result<subagents_messages::AgentResult, crate::agent::AgentError>>
            + Send,
    >,
>;

/// [`started_on`], with its turn's reply.
async fn replying(
    node: &Arc<Driven>,
    policy: Option<Arc<AsksAtFirst>>,
) -> (crate::agent::AgentHandle, Reply, u64, RunReports) {
    let mut builder = AgentBuilder::new(Arc::new(ScriptedModel::new(Vec::new()))).id("agent_1");
    if let Some(policy) = policy {
        builder = builder.approvals(policy);
    }
    let mut config = builder.config().await.unwrap();
    config.approvals_recheck = true;
    let remote = Remote {
        node: node.clone(),
        keep_if_orphaned: false,
        delegation: Vec::new(),
        approvals_after: 0,
    };
    let (events, _stream) = EventSink::channel();
    let agent = spawn_remote(remote, Arc::new(config), events, Vec::new(), None)
        .await
        .unwrap();
    let reply: Reply = Box::pin(agent.queue_turn("go").unwrap());
    let (key, reports) = loop {
        if let Some(started) = node.started.lock().unwrap().take() {
            break started;
        }
        tokio::task::yield_now().await;
    };
    (agent, reply, key, reports)
}

/// Reports `events` for the node, in order from `seq` 0.
fn report_all(reports: &RunReports, key: u64, bodies: impl IntoIterator<Item = ReportBody>) {
    for (seq, body) in bodies.into_iter().enumerate() {
        reports.report(RunReport {
            key,
            seq: seq as u64,
            body,
        });
    }
}

/// A call `call_1` of `guarded` and its approval `agent_1-approval-1`, asked.
fn asking() -> [ReportBody; 2] {
    let call = ToolUseId::new("call_1");
    [
        ReportBody::Event(AgentEvent::ToolStarted(ToolStarted {
            tool_use_id: call.clone(),
            name: "guarded".into(),
            arguments: "{}".into(),
        })),
        ReportBody::Event(AgentEvent::ApprovalRequested(Box::new(ApprovalRequest {
            id: ApprovalId::new("agent_1-approval-1"),
            tool_use_id: call,
            tool_name: "guarded".into(),
            arguments: "{}".into(),
        }))),
    ]
}

/// The run ended with a stop sent to its node.
fn stop_sent(node: &Driven) -> bool {
    (node.requests.lock().unwrap().iter()).any(|r| matches!(r, RunRequest::Stop))
}

/// Review (hostile peers, thirty-seventh session): a report far ahead
/// (`seq` u64::MAX) sent early by a node, then its reports in order: each
/// one moved the gap, and each gap's timer was kept with the run until it
/// ended — one more task holding the proxy's cell per report. One gap is
/// watched at a time, its timer replaced.
#[tokio::test(start_paused = true)]
async fn a_report_far_ahead_holds_one_timer_not_one_per_report() {
    let node = Arc::new(Driven::default());
    let (agent, key, reports) = started_on(&node, None).await;
    let text = |seq: u64| RunReport {
        key,
        seq,
        body: ReportBody::Event(AgentEvent::Text(format!("{seq}"))),
    };
    reports.report(text(0));
    let _ = agent.snapshot().await;
    let before = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    reports.report(text(u64::MAX));
    for seq in 1..=300 {
        reports.report(text(seq));
    }
    let _ = agent.snapshot().await;
    let after = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    assert!(after <= before + 1, "{before} tasks before, {after} after");
    // The one it keeps is the gap's: report 301 never comes, and the run
    // ends at its grace (a proxy that watched no gap ran on).
    tokio::time::sleep(crate::defaults::REMOTE_STOP_GRACE + std::time::Duration::from_secs(1))
        .await;
    assert!(
        !agent.snapshot().await.unwrap().busy,
        "the gap's grace ended the run"
    );
}

/// [`crate::agent::call`]'s window on a remote child: the proxy's policy
/// looked at the node's request ("ask"), and the child was handed to the
/// background before the request reached the book — the hub found it
/// not asked. Looked at again as it is passed on, it is answered on the
/// node by the policy.
#[tokio::test(start_paused = true)]
async fn a_remote_request_its_policy_came_to_answer_as_it_was_passed_on_is_answered() {
    let node = Arc::new(Driven::default());
    let policy = Arc::new(AsksAtFirst(AtomicUsize::new(0)));
    let (agent, key, reports) = started_on(&node, Some(policy)).await;
    let call = ToolUseId::new("call_1");
    let id = ApprovalId::new("agent_1-approval-1");
    let bodies = [
        AgentEvent::ToolStarted(ToolStarted {
            tool_use_id: call.clone(),
            name: "guarded".into(),
            arguments: "{}".into(),
        }),
        AgentEvent::ApprovalRequested(Box::new(ApprovalRequest {
            id: id.clone(),
            tool_use_id: call,
            tool_name: "guarded".into(),
            arguments: "{}".into(),
        })),
    ];
    for (seq, event) in bodies.into_iter().enumerate() {
        reports.report(RunReport {
            key,
            seq: seq as u64,
            body: ReportBody::Event(event),
        });
    }
    // Read once the proxy has handled both (a snapshot behind them).
    let _ = agent.snapshot().await;
    let answered: Vec<_> = (node.requests.lock().unwrap().iter())
        .filter_map(|r| match r {
            RunRequest::Approve { id, decision } => Some((id.clone(), *decision)),
            _ => None,
        })
        .collect();
    assert_eq!(answered, vec![(id, ApprovalDecision::Deny)]);
}

/// Consistency (review: a model that misbehaves, thirty-eighth session): a
/// remote child's last text was every answer's text appended; a local
/// child's is its last answer's (read by no path for a remote child yet:
/// its partial and stopped results are its node's words). The same here:
/// each answer's text starts it again, and an answer with calls alone
/// keeps the one before.
#[test]
fn a_remote_childs_last_text_is_its_last_answers() {
    use subagents_messages::{AgentEvent, ToolResult, ToolStarted};
    let mut state = crate::agent::TurnState::new(Vec::new());
    let call = |id: &str| {
        [
            AgentEvent::ToolStarted(ToolStarted {
                tool_use_id: id.into(),
                name: "sleep".into(),
                arguments: "{}".into(),
            }),
            AgentEvent::ToolResult(ToolResult {
                tool_use_id: id.into(),
                name: "sleep".into(),
                output: "slept".into(),
                is_error: false,
            }),
        ]
    };
    let events = [
        AgentEvent::Text("first ".into()),
        AgentEvent::Text("answer".into()),
    ]
    .into_iter()
    .chain(call("c1"))
    .chain(call("c2"))
    .chain([AgentEvent::Text("second".into())]);
    let mut seen = Vec::new();
    for event in events {
        super::actor::progress_held(&mut state, &event);
        seen.push(state.progress.last_text.clone());
    }
    assert_eq!(
        seen,
        [
            "first ",
            "first answer",
            "first answer",
            "first answer",
            "first answer",
            "first answer",
            "second"
        ]
    );
}

/// Forged (review: hostile peers, thirty-ninth session): a node said its
/// agent took `Approved` for a request the host answered `Deny`. The host
/// read `Ok` for its denial while the stream and the envelope said the
/// call was approved. A local agent says a decision only as it takes the
/// host's: the node's word is a lie, the child fails and its run is
/// stopped there; the host's answer is not `Ok`.
#[tokio::test(start_paused = true)]
async fn a_node_saying_approved_over_the_hosts_deny_fails_the_child() {
    let node = Arc::new(Driven::default());
    let (agent, reply, key, reports) = replying(&node, None).await;
    report_all(&reports, key, asking());
    let _ = agent.snapshot().await;
    let id = ApprovalId::new("agent_1-approval-1");
    let answer = agent.resolve_approval(id.clone(), ApprovalDecision::Deny);
    let _ = agent.snapshot().await;
    reports.report(RunReport {
        key,
        seq: 2,
        body: ReportBody::Event(AgentEvent::ApprovalResolved {
            id,
            tool_use_id: ToolUseId::new("call_1"),
            outcome: ApprovalOutcome::Approved,
        }),
    });
    let result = reply.await.unwrap();
    assert!(
        matches!(&result.outcome, Outcome::Failed(why) if why.contains("its answer was denied")),
        "{:?}",
        result.outcome
    );
    assert!(answer.await.is_err(), "the host's denial read as taken");
    assert!(stop_sent(&node));
}

/// Forged: a node said `Denied` for a request nobody answered.
#[tokio::test(start_paused = true)]
async fn a_node_deciding_an_approval_nobody_answered_fails_the_child() {
    let node = Arc::new(Driven::default());
    let (_agent, reply, key, reports) = replying(&node, None).await;
    let [started, asked] = asking();
    let resolved = ReportBody::Event(AgentEvent::ApprovalResolved {
        id: ApprovalId::new("agent_1-approval-1"),
        tool_use_id: ToolUseId::new("call_1"),
        outcome: ApprovalOutcome::Denied,
    });
    report_all(&reports, key, [started, asked, resolved]);
    let result = reply.await.unwrap();
    assert!(
        matches!(&result.outcome, Outcome::Failed(why) if why.contains("nobody answered it")),
        "{:?}",
        result.outcome
    );
    assert!(stop_sent(&node));
}

/// Forged: a node said its agent read a message (`Steered`) its parent
/// never sent. It went onto the parent's stream as the parent's words,
/// and into the conversation a resume goes on from. A message sent and
/// taken reads as before.
#[tokio::test(start_paused = true)]
async fn a_node_reading_a_message_nobody_sent_fails_the_child() {
    let node = Arc::new(Driven::default());
    let (agent, reply, key, reports) = replying(&node, None).await;
    // Sent, then read: coherent.
    let (tx, steered) = tokio::sync::oneshot::channel();
    let steer = crate::agent::AgentMsg::Steer {
        text: "look at b.rs".into(),
        asking: crate::agent::CallSlot::default(),
        reply: tx.into(),
    };
    agent.actor_ref().cast(steer).unwrap();
    let _ = agent.snapshot().await;
    report_all(
        &reports,
        key,
        [
            ReportBody::Steered { n: 1, taken: true },
            ReportBody::Event(AgentEvent::Steered("look at b.rs".into())),
        ],
    );
    assert!(steered.await.unwrap().is_ok());
    // A read of a message sent is no lie (review of this session's
    // diff: the test passed with every read refused).
    assert!(
        agent.snapshot().await.unwrap().busy,
        "a legitimate read failed the child"
    );
    // Read twice: sent once.
    reports.report(RunReport {
        key,
        seq: 2,
        body: ReportBody::Event(AgentEvent::Steered("look at b.rs".into())),
    });
    let result = reply.await.unwrap();
    assert!(
        matches!(&result.outcome, Outcome::Failed(why) if why.contains("never sent")),
        "{:?}",
        result.outcome
    );
    assert!(stop_sent(&node));
}

/// Incoherent (review: hostile peers, thirty-ninth session): a node sent
/// its `Result` (`completed`, "A"), then an `Ended` saying `failed`, "B".
/// The stream showed "A" completed; the turn's reply — the envelope, the
/// tool's answer, the wake — said "B" failed. A local agent's reply is
/// its `Result`: what the stream showed is how it ended.
#[tokio::test(start_paused = true)]
async fn an_ended_after_its_result_does_not_rewrite_it() {
    let node = Arc::new(Driven::default());
    let (_agent, reply, key, reports) = replying(&node, None).await;
    let said = |text: &str, outcome: Outcome| subagents_messages::AgentResult {
        text: text.into(),
        outcome,
        model_calls: 1,
        tool_calls: 0,
        usage: Default::default(),
        children_usage: Default::default(),
        elapsed: std::time::Duration::ZERO,
    };
    report_all(
        &reports,
        key,
        [
            ReportBody::Event(AgentEvent::Result(Box::new(said("A", Outcome::Completed)))),
            ReportBody::Ended {
                result: said("B", Outcome::Failed("B".into())),
                conversation: Vec::new(),
            },
        ],
    );
    let result = reply.await.unwrap();
    assert_eq!(
        (result.text.as_str(), result.outcome),
        ("A", Outcome::Completed)
    );
}
