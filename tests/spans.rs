//! The `tracing` spans (docs/observability.md), captured by a layer of our
//! own: `invoke_agent` per agent run, `chat` per model call, `execute_tool`
//! per tool call; a child's run under the `execute_tool use_agent` span that
//! requested it (also in the background, after that call returned); the
//! outcome and usage on the run's span; `error.type` on a failed tool; no
//! message content.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use common::*;
use subagents::actors::DelegationBuilder;
use subagents::messages::AgentEvent;
use subagents::prelude::*;
use subagents::supervisor::ThreadHandle;
use subagents_demo::Sleep;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

#[derive(Debug, Clone)]
struct Captured {
    id: u64,
    name: &'static str,
    parent: Option<u64>,
    fields: BTreeMap<String, String>,
    /// Spans it follows from.
    follows: Vec<u64>,
}

/// Every span created, with its parent and fields (updated as recorded).
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Captured>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S> Layer<S> for Capture
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let parent = ctx
            .span(id)
            .and_then(|s| s.parent())
            .map(|p| p.id().into_u64());
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(Captured {
            id: id.into_u64(),
            name: attrs.metadata().name(),
            parent,
            fields,
            follows: Vec::new(),
        });
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, _ctx: Context<'_, S>) {
        let mut spans = self.0.lock().unwrap();
        if let Some(span) = spans.iter_mut().rev().find(|s| s.id == id.into_u64()) {
            span.follows.push(follows.into_u64());
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut spans = self.0.lock().unwrap();
        if let Some(span) = spans.iter_mut().rev().find(|s| s.id == id.into_u64()) {
            values.record(&mut Fields(&mut span.fields));
        }
    }
}

impl Capture {
    fn spans(&self) -> Vec<Captured> {
        self.0.lock().unwrap().clone()
    }
}

fn field<'a>(span: &'a Captured, name: &str) -> &'a str {
    span.fields.get(name).map(String::as_str).unwrap_or("")
}

/// The `invoke_agent` span of agent `id` (its first run).
fn run_of<'a>(spans: &'a [Captured], id: &str) -> &'a Captured {
    spans
        .iter()
        .find(|s| s.name == "invoke_agent" && field(s, "gen_ai.agent.id") == id)
        .unwrap_or_else(|| panic!("no invoke_agent span for {id}: {spans:#?}"))
}

fn children_of<'a>(spans: &'a [Captured], parent: &Captured) -> Vec<&'a Captured> {
    spans
        .iter()
        .filter(|s| s.parent == Some(parent.id))
        .collect()
}

async fn thread(model: ScriptedModel) -> (ThreadHandle, EventStream) {
    ThreadHandle::spawn(
        DelegationBuilder::new(model.shared())
            .system_prompt("Planner\nYou are the parent.")
            .tools(ToolRegistry::new().with(Sleep)),
        None,
    )
    .await
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn an_inline_childs_run_sits_under_the_call_that_requested_it() {
    let capture = Capture::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&work_call("Worker", 1, true))
            .usage(10, 5),
        Reply::answer("Done.").usage(3, 1),
    ])
    .with_script(
        "Worker",
        vec![
            Reply::new()
                .tool_call("sleep", r#"{"secs":1}"#)
                .usage(100, 20),
            Reply::answer("worked 1 s").usage(50, 10),
        ],
    );
    let (thread, mut events) = thread(model).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let spans = capture.spans();

    let parent = run_of(&spans, "parent");
    assert_eq!(field(parent, "otel.name"), "invoke_agent Planner");
    assert_eq!(field(parent, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(field(parent, "subagents.outcome"), "completed");
    assert_eq!(field(parent, "gen_ai.usage.input_tokens"), "13");
    assert_eq!(field(parent, "subagents.depth"), "0");
    let steps: Vec<&str> = children_of(&spans, parent)
        .iter()
        .map(|s| field(s, "otel.name"))
        .collect();
    assert_eq!(
        steps,
        ["chat scripted", "execute_tool use_agent", "chat scripted"]
    );
    let tool = children_of(&spans, parent)[1];
    assert_eq!(field(tool, "gen_ai.tool.name"), "use_agent");
    assert!(field(tool, "gen_ai.tool.call.id").starts_with("call_"));

    let child = run_of(&spans, "agent_1");
    assert_eq!(
        child.parent,
        Some(tool.id),
        "the child's run under the call"
    );
    assert_eq!(field(child, "otel.name"), "invoke_agent Worker");
    assert_eq!(field(child, "subagents.parent_agent.id"), "parent");
    assert_eq!(field(child, "subagents.mode"), "inline");
    assert_eq!(field(child, "subagents.depth"), "1");
    assert_eq!(field(child, "subagents.outcome"), "completed");
    assert_eq!(field(child, "gen_ai.usage.input_tokens"), "150");
    assert_eq!(field(child, "gen_ai.usage.output_tokens"), "30");
    let child_steps: Vec<&Captured> = children_of(&spans, child);
    assert_eq!(
        child_steps
            .iter()
            .map(|s| field(s, "otel.name"))
            .collect::<Vec<_>>(),
        ["chat scripted", "execute_tool sleep", "chat scripted"]
    );
    let chat = child_steps[0];
    assert_eq!(field(chat, "otel.kind"), "client");
    assert_eq!(field(chat, "gen_ai.usage.input_tokens"), "100");
    assert!(!field(chat, "subagents.gate_wait_ms").is_empty());

    // No content: neither a task, an answer nor a tool's arguments.
    for span in &spans {
        for (name, value) in &span.fields {
            for text in ["work 1 s", "worked 1 s", "Done.", "secs", "go"] {
                assert!(
                    value != text && !value.contains(&format!("\"{text}")),
                    "content in {}.{name}: {value}",
                    span.name
                );
            }
        }
    }
}

/// A background child's run sits under the call that started it, though
/// that call (and the parent's whole turn) returned long before; the wake
/// turn it causes links to its run; a stopped child's run says so; a
/// failed tool call carries `error.type`.
#[tokio::test(start_paused = true)]
async fn background_stopped_and_failed_runs_are_told_apart() {
    let capture = Capture::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&work_call("Background", 5, false))
            .use_agent(&work_call("Victim", 600, false))
            .tool_call("no_such_tool", "{}"),
        Reply::answer("Started."),
        Reply::new().use_agent(&UseAgentCall::stop("agent_2")),
        Reply::answer("Stopped it."),
        Reply::answer("Noted."),
    ])
    .with_script("Background", worker(5))
    .with_script("Victim", worker(600));
    let (thread, mut events) = thread(model).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until(&mut events, &mut log, |e| matches!(e, AgentEvent::Wake(_))).await;
    until_result(&mut events, &mut log).await;
    thread.send_user("stop the victim").unwrap();
    until_result(&mut events, &mut log).await;
    let spans = capture.spans();

    let parent = run_of(&spans, "parent");
    let calls: Vec<&Captured> = children_of(&spans, parent)
        .into_iter()
        .filter(|s| s.name == "execute_tool")
        .collect();
    assert_eq!(calls.len(), 3);
    let background = run_of(&spans, "agent_1");
    assert_eq!(background.parent, Some(calls[0].id));
    assert_eq!(field(background, "subagents.mode"), "background");
    assert_eq!(field(background, "subagents.outcome"), "completed");
    // The wake turn it caused links to its run.
    let wake_run = spans
        .iter()
        .find(|s| s.name == "invoke_agent" && s.follows.contains(&background.id))
        .expect("the wake turn's run follows from the child's");
    assert_eq!(field(wake_run, "gen_ai.agent.id"), "parent");
    let victim = run_of(&spans, "agent_2");
    assert_eq!(victim.parent, Some(calls[1].id));
    assert_eq!(field(victim, "subagents.outcome"), "stopped");
    assert_eq!(field(calls[2], "gen_ai.tool.name"), "no_such_tool");
    assert_eq!(field(calls[2], "error.type"), "tool_error");
    assert_eq!(field(calls[0], "error.type"), "");
}
