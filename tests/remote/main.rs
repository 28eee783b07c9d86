//! Children on another node, over a loopback link that carries every
//! spec, request and report through the wire codec (bytes, decoded into a
//! `Result`) to a `NodeRunner` — the same seam the ractor_cluster
//! transport uses. The parent's stream, envelopes and wakes must be those
//! of local children; a lost node ends its child failed, its open call
//! answered, with exactly one wake.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod approval_status;
mod approvals;
mod graces;
mod lifecycle;
mod policy;
mod runs;
mod usage;

#[path = "../common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::loopback::Loopback;
use common::*;
use subagents::actors::{DelegationBuilder, Placement};
use subagents::messages::{AgentEvent, AgentId, SubAgentStatus, Transcript};
use subagents::prelude::*;
use subagents::supervisor::ThreadHandle;

/// A child's `ToolStarted`: it is in a tool.
fn in_tool(e: &AgentEvent) -> bool {
    matches!(e, AgentEvent::Child(_, event) if matches!(**event, AgentEvent::ToolStarted(_)))
}

async fn thread_on(model: Arc<dyn Model>, placement: Placement) -> (ThreadHandle, EventStream) {
    thread_with(DelegationBuilder::new(model).placement(placement)).await
}

/// The parent's log folded into a transcript, and each child's envelope
/// (status, result, tool calls).
fn folded(log: &[AgentEvent]) -> String {
    // The thread's stream says the user's turn (`UserMessage`): pushed as
    // well, it came twice.
    let mut transcript = Transcript::new();
    for event in log {
        transcript.apply(event);
    }
    transcript.render()
}

async fn scenario(remote: bool) -> (String, Vec<String>) {
    let model = background_workers(&[30, 5, 60]).shared();
    let node = Loopback::new("b", model.clone()).await;
    let placement = if remote {
        Placement::On(node.clone())
    } else {
        Placement::Local
    };
    let (thread, mut events) = thread_on(model, placement).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    // The first turn, then one wake per child.
    until_result(&mut events, &mut log).await;
    for _ in 0..3 {
        until(&mut events, &mut log, is_wake).await;
        until_result(&mut events, &mut log).await;
    }
    check_log(&log, true);
    let expected = if remote { 3 } else { 0 };
    assert_eq!(node.started.load(Ordering::SeqCst), expected);
    let envelopes = thread
        .hub()
        .envelopes()
        .into_iter()
        .map(|e| {
            format!(
                "{} {} {:?} {} tool call(s)",
                e.id,
                e.status.as_str(),
                e.result,
                e.tool_calls
            )
        })
        .collect();
    (folded(&log), envelopes)
}
