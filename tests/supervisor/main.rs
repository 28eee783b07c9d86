//! The thread supervisor: wakes (FIFO, one in flight, held back while the
//! parent generates or the user types, dropped off screen and on a switch,
//! none for a claimed result), stop-all, detach or cascade on parent stop,
//! approvals from children.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod growth;
mod leaving;
mod lifecycle;
mod persistence_and_policies;
mod stops;
mod switching;
mod wakes;

use std::time::Duration;

use common::*;
use subagents::actors::DelegationBuilder;
use subagents::messages::AgentEvent;
use subagents::messages::ApprovalRefusal;
use subagents::prelude::*;
use subagents::supervisor::{ThreadError, ThreadHandle};
use subagents_demo::{Post, Sleep};

async fn thread(model: ScriptedModel) -> (ThreadHandle, EventStream) {
    ThreadHandle::spawn(
        DelegationBuilder::new(model.shared())
            .system_prompt("You are the parent.")
            .tools(ToolRegistry::new().with(Sleep).with(Post)),
        None,
    )
    .await
    .unwrap()
}

fn wakes(log: &[AgentEvent]) -> Vec<String> {
    log.iter()
        .filter_map(|e| match e {
            AgentEvent::Wake { child, .. } => Some(child.to_string()),
            _ => None,
        })
        .collect()
}
