//! The `tracing` spans (docs/observability.md), captured by a layer of our
//! own: `invoke_agent` per agent run, `chat` per model call, `execute_tool`
//! per tool call; a child's run under the `execute_tool use_agent` span that
//! requested it (also in the background, after that call returned); the
//! outcome and usage on the run's span; `error.type` on a failed, unrun
//! or cut tool call; `gen_ai.conversation.id` from the thread's id; no
//! message content unless the host opts in.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod closing;
#[path = "../common/mod.rs"]
mod common;
mod edges;
mod sender;
mod tool_close;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use common::*;
use subagents::actors::DelegationBuilder;
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
    /// Closed: no handle holds it any more (an exporter sends it then).
    closed: bool,
    /// Times it was exited (tracing-opentelemetry stamps a span's end at
    /// its last exit; one never exited ends when it closes).
    exits: u32,
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
            closed: false,
            exits: 0,
        });
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, _ctx: Context<'_, S>) {
        let mut spans = self.0.lock().unwrap();
        if let Some(span) = spans.iter_mut().rev().find(|s| s.id == id.into_u64()) {
            span.follows.push(follows.into_u64());
        }
    }

    fn on_exit(&self, id: &Id, _ctx: Context<'_, S>) {
        let mut spans = self.0.lock().unwrap();
        if let Some(span) = spans.iter_mut().rev().find(|s| s.id == id.into_u64()) {
            span.exits += 1;
        }
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        let mut spans = self.0.lock().unwrap();
        if let Some(span) = spans.iter_mut().rev().find(|s| s.id == id.into_u64()) {
            span.closed = true;
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut spans = self.0.lock().unwrap();
        if let Some(span) = spans.iter_mut().rev().find(|s| s.id == id.into_u64()) {
            values.record(&mut Fields(&mut span.fields));
        }
    }
}

/// A capture, set as this thread's subscriber until the guard drops.
fn capture() -> (Capture, tracing::subscriber::DefaultGuard) {
    let capture = Capture::default();
    let guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    (capture, guard)
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
    let (capture, _guard) = capture();
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
    // The turn ended and the child's result was taken inline: nothing of
    // it is held open (an open span is never exported), though the thread
    // goes on.
    for span in [parent, tool, child] {
        assert!(span.closed, "held open: {span:#?}");
    }

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
    let (capture, _guard) = capture();
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
    until(&mut events, &mut log, is_wake).await;
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
    // Held only until the wake linked to it.
    assert!(background.closed, "held open: {background:#?}");
    assert!(calls[0].closed, "held open: {:#?}", calls[0]);
    let victim = run_of(&spans, "agent_2");
    assert_eq!(victim.parent, Some(calls[1].id));
    assert_eq!(field(victim, "subagents.outcome"), "stopped");
    // The victim was in its `sleep` call when stopped: that call's span
    // says it was cut.
    let victim_calls: Vec<&Captured> = children_of(&spans, victim)
        .into_iter()
        .filter(|s| s.name == "execute_tool")
        .collect();
    assert_eq!(victim_calls.len(), 1);
    assert_eq!(field(victim_calls[0], "error.type"), "cancelled");
    assert_eq!(field(calls[2], "gen_ai.tool.name"), "no_such_tool");
    assert_eq!(field(calls[2], "error.type"), "tool_error");
    assert_eq!(field(calls[0], "error.type"), "");
}

/// Calls the model asked for in an answer cut at its token limit never
/// run, yet each still gets its `execute_tool` span, marked `not_run`.
#[tokio::test(start_paused = true)]
async fn a_call_answered_without_running_has_its_span() {
    let (capture, _guard) = capture();
    let model = ScriptedModel::new(vec![
        Reply::new()
            .tool_call("sleep", r#"{"secs":1"#)
            .truncated("length"),
        Reply::answer("Gave up."),
    ]);
    let (thread, mut events) = thread(model).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let spans = capture.spans();
    let parent = run_of(&spans, "parent");
    let steps: Vec<&Captured> = children_of(&spans, parent);
    assert_eq!(
        steps
            .iter()
            .map(|s| field(s, "otel.name"))
            .collect::<Vec<_>>(),
        ["chat scripted", "execute_tool sleep", "chat scripted"]
    );
    assert_eq!(field(steps[1], "error.type"), "not_run");
    assert_eq!(field(steps[1], "gen_ai.tool.call.result"), "", "no content");
}

/// A thread opened through `Threads` names its conversation: every span
/// of the parent and of its children carries the thread's id.
#[tokio::test(start_paused = true)]
async fn every_span_carries_the_threads_id() {
    let (capture, _guard) = capture();
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 1, true)),
        Reply::answer("Done."),
    ])
    .with_script("Worker", worker(1));
    let mut threads = subagents::supervisor::Threads::new();
    let mut events = threads
        .open(
            subagents::messages::ThreadId::new("thread-7"),
            DelegationBuilder::new(model.shared())
                .system_prompt("Planner")
                .tools(ToolRegistry::new().with(Sleep)),
        )
        .await
        .unwrap();
    threads
        .get(&subagents::messages::ThreadId::new("thread-7"))
        .unwrap()
        .send_user("go")
        .unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let spans = capture.spans();
    let ours: Vec<&Captured> = spans
        .iter()
        .filter(|s| ["invoke_agent", "chat", "execute_tool"].contains(&s.name))
        .collect();
    // parent: run, 2 chats, 1 call; child: run, 2 chats, 1 call.
    assert_eq!(ours.len(), 8, "{ours:#?}");
    for span in ours {
        assert_eq!(
            field(span, "gen_ai.conversation.id"),
            "thread-7",
            "{span:#?}"
        );
    }
    // Without a name, the attribute is absent.
    let (plain, mut plain_events) = thread(ScriptedModel::new(vec![Reply::answer("Hi.")])).await;
    let before = capture.spans().len();
    plain.send_user("hello").unwrap();
    until_result(&mut plain_events, &mut log).await;
    for span in &capture.spans()[before..] {
        assert!(!span.fields.contains_key("gen_ai.conversation.id"));
    }
}

/// With `record_content(true)` the spans carry the conversation in the
/// conventions' shape: system instructions, each model call's input and
/// output messages, each tool call's arguments and result — for the
/// parent and for its children.
#[tokio::test(start_paused = true)]
async fn content_is_recorded_when_the_host_opts_in() {
    let (capture, _guard) = capture();
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 1, true)),
        Reply::answer("Done."),
    ])
    .with_script("Worker", worker(1));
    let (thread, mut events) = ThreadHandle::spawn(
        DelegationBuilder::new(model.shared())
            .system_prompt("Planner")
            .tools(ToolRegistry::new().with(Sleep))
            .record_content(true),
        None,
    )
    .await
    .unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let spans = capture.spans();

    let parent = run_of(&spans, "parent");
    let steps = children_of(&spans, parent);
    let first_chat = steps[0];
    let json = |span: &Captured, name: &str| -> serde_json::Value {
        serde_json::from_str(field(span, name))
            .unwrap_or_else(|e| panic!("{name} is not JSON ({e}): {span:#?}"))
    };
    assert_eq!(
        json(first_chat, "gen_ai.system_instructions")[0]["content"],
        "Planner"
    );
    let input = json(first_chat, "gen_ai.input.messages");
    assert_eq!(input[0]["role"], "user");
    assert_eq!(input[0]["parts"][0]["content"], "go");
    let output = json(first_chat, "gen_ai.output.messages");
    assert_eq!(output[0]["role"], "assistant");
    assert_eq!(output[0]["parts"][0]["type"], "tool_call");
    assert_eq!(output[0]["parts"][0]["name"], "use_agent");
    let tool = steps[1];
    assert!(field(tool, "gen_ai.tool.call.arguments").contains("work 1 s"));
    assert!(field(tool, "gen_ai.tool.call.result").contains("worked 1 s"));
    // The last chat reads the tool's answer and says "Done.".
    let last = json(steps[2], "gen_ai.input.messages");
    let answered = last.as_array().unwrap().last().unwrap();
    assert_eq!(answered["role"], "tool");
    assert_eq!(answered["parts"][0]["type"], "tool_call_response");
    assert_eq!(
        json(steps[2], "gen_ai.output.messages")[0]["parts"][0]["content"],
        "Done."
    );

    // The child inherits the setting.
    let child = run_of(&spans, "agent_1");
    let child_steps = children_of(&spans, child);
    let child_input = json(child_steps[0], "gen_ai.input.messages");
    assert_eq!(child_input[0]["parts"][0]["content"], "work 1 s");
    assert_eq!(
        field(child_steps[1], "gen_ai.tool.call.arguments"),
        r#"{"secs":1}"#
    );
}

/// A user turn's run sits under the host's span current where it sent
/// the turn — across the thread and agent actors — and otherwise starts a
/// trace of its own: never under ractor's per-actor span, which lives as
/// long as the agent (a trace that would never end).
#[tokio::test(start_paused = true)]
async fn a_turn_runs_under_the_senders_span_or_as_a_root() {
    let (capture, _guard) = capture();
    let model = ScriptedModel::new(vec![Reply::answer("One."), Reply::answer("Two.")]);
    let (thread, mut events) = thread(model).await;
    let request = tracing::info_span!("host_request");
    request.in_scope(|| thread.send_user("first").unwrap());
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    thread.send_user("second").unwrap();
    until_result(&mut events, &mut log).await;
    let spans = capture.spans();
    let host = spans.iter().find(|s| s.name == "host_request").unwrap();
    let runs: Vec<&Captured> = spans.iter().filter(|s| s.name == "invoke_agent").collect();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].parent, Some(host.id), "under the sender's span");
    assert_eq!(runs[1].parent, None, "a root: {:#?}", runs[1]);
}
