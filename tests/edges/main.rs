//! The edges: one named test per defect found by driving the public API as
//! an independent host would (same-instant races, stop paths, shared
//! resources, closing, forged input, replay). Each test is named after the
//! behaviour it guarantees; docs/testing.md maps them to the defects.

#![cfg(feature = "test-util")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod approval_race;
mod approvals;
mod cut_calls;
mod forged;
mod host_panics;
mod killed_mid_handler;
mod ownership;
mod parent_cut;
mod payload_drops;
mod races;
mod replay_store;
mod requester_ends;
mod sent_cut;
mod stopped_task;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use subagents::actors::DelegationBuilder;
use subagents::actors::clock::ManualClock;
use subagents::actors::hub::HubObserver;
use subagents::messages::{AgentEvent, Envelope};
use subagents::prelude::*;
use subagents::simulation::{HostAction, Scenario};
use subagents::supervisor::store::EnvelopeStore;
use subagents::supervisor::{ThreadConfig, ThreadHandle};
use subagents_demo::{Post, Sleep};

fn parent(model: ScriptedModel) -> DelegationBuilder {
    DelegationBuilder::new(model.shared())
        .system_prompt("You are the parent.")
        .tools(ToolRegistry::new().with(Sleep).with(Post))
}

fn store(dir: &std::path::Path) -> Arc<EnvelopeStore> {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    Arc::new(EnvelopeStore::open(dir, clock).unwrap().0)
}

fn started(log: &[AgentEvent]) -> Vec<AgentId> {
    log.iter()
        .filter_map(|e| match e {
            AgentEvent::ChildStarted(info) => Some(info.id.clone()),
            _ => None,
        })
        .collect()
}

fn tool_results<'a>(log: &'a [AgentEvent], call: &str) -> Vec<&'a subagents::messages::ToolResult> {
    log.iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult(r) if r.tool_use_id.as_str() == call => Some(r),
            _ => None,
        })
        .collect()
}

fn delivered_inline(log: &[AgentEvent], call: &str) -> usize {
    log.iter()
        .filter(|e| matches!(e, AgentEvent::ToolResult(r) if r.tool_use_id.as_str() == call))
        .filter(|e| finished_result(e).is_some_and(|(_, status)| status == "done"))
        .count()
}

fn woken(log: &[AgentEvent], child: &str) -> usize {
    log.iter()
        .filter(|e| matches!(e, AgentEvent::Wake { child: woke, .. } if woke.as_str() == child))
        .count()
}
