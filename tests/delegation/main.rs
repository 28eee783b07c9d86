//! Delegation through `use_agent` and the Hub: the event-ordering
//! guarantees of docs/event-ordering.md, the live cap and FIFO queue,
//! stop, claims, status, inline-wait expiry, panics and refusals.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod failures;
mod order;
mod queue;
mod resources;

#[path = "../common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use serde_json::json;
use subagents::actors::{DelegatingAgent, DelegationBuilder, Model, ModelStream};
use subagents::messages::{ModelRequest, Transcript};
use subagents::prelude::*;
use subagents_demo::{Calculator, PageTitle, Sleep};

fn run_call(name: &str, input: &str, tools: &[&str], wait: bool) -> UseAgentCall {
    UseAgentCall::run(format!("{name}\nYou are a sub-agent."), input)
        .tools(tools.iter().copied())
        .wait(wait)
}

async fn delegating(model: ScriptedModel, max_live: usize) -> (DelegatingAgent, EventStream) {
    DelegationBuilder::new(model.shared())
        .system_prompt("You are the parent. Delegate.")
        .tools(
            ToolRegistry::new()
                .with(Calculator)
                .with(PageTitle::default())
                .with(Sleep),
        )
        .max_live(max_live)
        .spawn()
        .await
        .unwrap()
}

fn tool_result(log: &[AgentEvent], name: &str) -> Vec<(String, bool)> {
    log.iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult(r) if r.name == name => Some((r.output.clone(), r.is_error)),
            _ => None,
        })
        .collect()
}

/// A parent that starts `n` background workers in one turn; each worker
/// works `child_work` (in a tool, holding no permit) then answers.
fn fan_out(n: usize, child_work: Duration) -> ScriptedModel {
    fan_out_with(n, child_work, Duration::ZERO)
}

/// `fan_out`, each model call streaming for `latency` before its first
/// chunk (a call then stays open across an await, as a server's does).
fn fan_out_with(n: usize, child_work: Duration, latency: Duration) -> ScriptedModel {
    let reply = || {
        if latency.is_zero() {
            Reply::new()
        } else {
            Reply::new().delay(latency)
        }
    };
    let mut first = reply();
    for i in 1..=n {
        first = first.use_agent(&run_call(
            &format!("Worker {i}"),
            &format!("task {i}"),
            &["sleep"],
            false,
        ));
    }
    let mut model = ScriptedModel::new(vec![first, reply().text("Started them all.")]);
    for i in 1..=n {
        model = model.with_script(
            format!("Worker {i}\n"),
            vec![
                reply()
                    .text(format!("worker {i} starts"))
                    .tool_call("sleep", json!({"secs": child_work.as_secs()}).to_string()),
                reply().text(format!("worker {i} done")),
            ],
        );
    }
    model
}
