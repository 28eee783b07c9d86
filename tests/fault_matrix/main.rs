//! The fault matrix: one named test per fault. Expected everywhere: a
//! clear error that names what went wrong, and nothing lost — every child
//! requested ends in exactly one terminal status and one envelope, no gate
//! permit is held and no slot reserved at rest.

#![cfg(feature = "test-util")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod children;
mod disk;
mod input;
mod soak;

#[path = "../common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use subagents::actors::DelegationBuilder;
use subagents::actors::clock::ManualClock;
use subagents::actors::profile::{ProfileSet, ProfileWarning};
use subagents::messages::Envelope;
use subagents::prelude::*;
use subagents::simulation::{HostAction, Scenario, SimulationReport};
use subagents::supervisor::store::EnvelopeStore;
use subagents_demo::Calculator;

fn run_call(name: &str, wait: bool, tools: &[&str]) -> UseAgentCall {
    UseAgentCall::run(format!("{name}\nYou work."), format!("task for {name}"))
        .tools(tools.iter().copied())
        .wait(wait)
}

/// Nothing lost: one terminal status and one envelope per child; at rest
/// no permit held, no slot reserved.
fn assert_nothing_lost(report: &SimulationReport) {
    let events = report.events();
    let (order, _) = common::check_log(&events, true);
    assert_eq!(
        report.envelopes.len(),
        order.len(),
        "one envelope per child"
    );
    assert!(report.envelopes.iter().all(|e| e.status.is_terminal()));
    assert_eq!(report.gate.in_flight, 0, "a gate permit leaked");
    assert_eq!(report.gate.queued, 0);
    assert_eq!(
        (report.hub.live, report.hub.queued),
        (0, 0),
        "a slot leaked"
    );
}

fn tool_outputs(report: &SimulationReport, name: &str) -> Vec<String> {
    report
        .events()
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult(r) if r.name == name => Some(r.output.clone()),
            _ => None,
        })
        .collect()
}

fn envelope<'a>(report: &'a SimulationReport, id: &str) -> &'a Envelope {
    report
        .envelopes
        .iter()
        .find(|e| e.id.as_str() == id)
        .unwrap()
}

fn one_child(child: Vec<Reply>, tools: ToolRegistry, tool_names: &[&str]) -> SimulationReport {
    Scenario::new(vec![
        Reply::new().use_agent(&run_call("Worker", true, tool_names)),
        Reply::answer("Reported."),
    ])
    .child_script("Worker", child)
    .tools(tools)
    .at(Duration::ZERO, HostAction::User("go".into()))
    .run_for(Duration::from_secs(600))
    .run(1)
}
