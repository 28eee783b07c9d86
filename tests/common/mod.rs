//! Helpers shared by the integration tests: event collection and the
//! checks of docs/event-ordering.md over a whole log.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

pub mod blocking;
mod checks;
pub mod held;
pub mod host;
pub mod loopback;
pub mod store;

/// A multi-threaded runtime of `n` workers (a window only two workers
/// reach: one held, the other going on).
pub fn workers(n: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(n)
        .enable_all()
        .build()
        .unwrap()
}

/// A parent's model that starts a background child on model `m`, then
/// notes its result — registered as `m` (capacity 1) in a new registry:
/// the model, the registry and `m`'s gate (one model, one gate).
pub async fn a_model_registered_as_m() -> (
    Arc<dyn Model>,
    subagents::actors::registry::ModelRegistry,
    subagents::actors::GateHandle,
) {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run("Worker\nYou work.", "work")
                .model("m")
                .background(),
        ),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker", vec![Reply::answer("done")])
    .shared();
    let mut registry = subagents::actors::registry::ModelRegistry::new();
    registry
        .register("local", "m", model.clone(), 1)
        .await
        .unwrap();
    let gate = registry.gate("local", "m").unwrap().clone();
    (model, registry, gate)
}

#[allow(unused_imports)] // not every test crate checks a whole log
pub use checks::*;

use std::sync::{Arc, Mutex};

use subagents::actors::{Model, ModelStream};
use subagents::messages::{AgentEvent, AgentResult, ModelRequest};
use subagents::prelude::{
    EventStream, Reply, ScriptedModel, Tool, ToolCallContext, ToolFuture, UseAgentCall,
};

/// A panic payload whose `Drop` panics: host code may panic with any
/// value (`std::panic::panic_any`), and a guard that drops what it caught
/// outside itself lets this one unwind on.
pub struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("the payload's drop panicked");
    }
}

/// Panics with a [`Bomb`].
pub fn explode() -> ! {
    std::panic::panic_any(Bomb)
}

/// A host tool of the given name, which says it ran (named like a
/// delegation tool, it is what foreign registries hold).
pub struct HostTool(pub &'static str);

impl Tool for HostTool {
    fn name(&self) -> &str {
        self.0
    }
    fn description(&self) -> String {
        format!("the host's own {}", self.0)
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn call(&self, _call: ToolCallContext) -> ToolFuture {
        let ran = format!("the host's {} ran", self.0);
        Box::pin(async move { Ok(ran) })
    }
}

/// Records every request a model saw.
struct Spy {
    name: String,
    inner: ScriptedModel,
    seen: Arc<Mutex<Vec<ModelRequest>>>,
}

impl Model for Spy {
    fn name(&self) -> &str {
        &self.name
    }
    fn stream(&self, request: ModelRequest) -> ModelStream {
        self.seen.lock().unwrap().push(request.clone());
        self.inner.stream(request)
    }
}

/// `inner` behind a spy named `name`, and the requests it sees.
pub fn spy(name: &str, inner: ScriptedModel) -> (Arc<dyn Model>, Arc<Mutex<Vec<ModelRequest>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let model = Spy {
        name: name.into(),
        inner,
        seen: seen.clone(),
    };
    (Arc::new(model), seen)
}

/// The `(output, is_error)` of every result of the tool `tool`, in order.
pub fn results_of(log: &[AgentEvent], tool: &str) -> Vec<(String, bool)> {
    log.iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult(r) if r.name == tool => Some((r.output.clone(), r.is_error)),
            _ => None,
        })
        .collect()
}

/// A child named `name` that works `secs` seconds in the `sleep` tool.
pub fn work_call(name: &str, secs: u64, wait: bool) -> UseAgentCall {
    UseAgentCall::run(format!("{name}\nYou work."), format!("work {secs} s"))
        .tools(["sleep"])
        .wait(wait)
}

/// A child's script: sleep `secs`, then answer "worked N s".
pub fn worker(secs: u64) -> Vec<Reply> {
    vec![
        Reply::new().tool_call("sleep", format!(r#"{{"secs":{secs}}}"#)),
        Reply::answer(format!("worked {secs} s")),
    ]
}

/// A parent that starts background workers of these durations, then
/// answers every later turn (wakes) with "Noted".
pub fn background_workers(durations: &[u64]) -> ScriptedModel {
    let mut first = Reply::new();
    for (i, secs) in durations.iter().enumerate() {
        first = first.use_agent(&work_call(&format!("Worker {}", i + 1), *secs, false));
    }
    let mut turns = vec![first, Reply::answer("Started.")];
    for _ in 0..10 {
        turns.push(Reply::answer("Noted."));
    }
    let mut model = ScriptedModel::new(turns);
    for (i, secs) in durations.iter().enumerate() {
        model = model.with_script(format!("Worker {}\n", i + 1), worker(*secs));
    }
    model
}

/// Kills `thread`'s hub (no stop: a crash, a kill) and waits until the
/// thread has read its death.
pub async fn kill_the_hub(thread: &subagents::supervisor::ThreadHandle) {
    thread.hub().actor().kill();
    thread.hub().actor().wait(None).await.ok();
    thread.sync().await.unwrap();
}

/// Reads events for `secs` of virtual time.
pub async fn run_for(events: &mut EventStream, log: &mut Vec<AgentEvent>, secs: u64) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
    while let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.recv()).await {
        log.push(event);
    }
}

/// How long (virtual time) a helper waits before calling the test failed
/// instead of hanging: a bug that loses an event fails fast.
pub const PATIENCE: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// The next event, or a failure after [`PATIENCE`] of virtual time.
pub async fn next_event(events: &mut EventStream, log: &[AgentEvent]) -> Option<AgentEvent> {
    match tokio::time::timeout(PATIENCE, events.recv()).await {
        Ok(event) => event,
        Err(_) => panic!("no event for a day of virtual time; the log so far: {log:?}"),
    }
}

/// Reads events until the parent's (top-level) `Result`.
pub async fn until_result(events: &mut EventStream, log: &mut Vec<AgentEvent>) -> AgentResult {
    while let Some(event) = next_event(events, log).await {
        log.push(event.clone());
        if let AgentEvent::Result(result) = event {
            return *result;
        }
    }
    panic!("the stream ended without a result: {log:?}");
}

/// A `Wake` event (a finished background child woke the parent).
pub fn is_wake(e: &AgentEvent) -> bool {
    matches!(e, AgentEvent::Wake { .. })
}

/// Reads events until a child asks for approval; its request.
pub async fn until_child_approval(
    events: &mut EventStream,
    log: &mut Vec<AgentEvent>,
) -> subagents::messages::ApprovalRequest {
    let asked = until(events, log, |e| {
        matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ApprovalRequested(_)))
    })
    .await;
    match asked {
        AgentEvent::Child(_, inner) => match *inner {
            AgentEvent::ApprovalRequested(request) => *request,
            other => panic!("not an approval: {other:?}"),
        },
        other => panic!("not a child event: {other:?}"),
    }
}

/// Reads events until `pred` matches one (returned, also logged).
pub async fn until(
    events: &mut EventStream,
    log: &mut Vec<AgentEvent>,
    pred: impl Fn(&AgentEvent) -> bool,
) -> AgentEvent {
    while let Some(event) = next_event(events, log).await {
        log.push(event.clone());
        if pred(&event) {
            return event;
        }
    }
    panic!("the stream ended first: {log:?}");
}

/// [`until`], or the event `pred` matches already in `log`: one that came
/// while the test waited for another (a background child's first call
/// ahead of its parent's next: the two share a gate, and which goes first
/// is not fixed) is not waited for again, for ever.
pub async fn until_logged(
    events: &mut EventStream,
    log: &mut Vec<AgentEvent>,
    pred: impl Fn(&AgentEvent) -> bool,
) -> AgentEvent {
    match log.iter().find(|e| pred(e)) {
        Some(seen) => seen.clone(),
        None => until(events, log, pred).await,
    }
}

/// The children whose results woke the parent, in the order they did.
pub fn woken_children(log: &[AgentEvent]) -> Vec<String> {
    log.iter()
        .filter_map(|e| match e {
            AgentEvent::Wake { child, .. } => Some(child.to_string()),
            _ => None,
        })
        .collect()
}

/// The first `ChildStarted` of the log (of the parent's own children).
pub fn first_child_started(log: &[AgentEvent]) -> subagents::messages::SubAgentInfo {
    log.iter()
        .find_map(|e| match e {
            AgentEvent::ChildStarted(info) => Some((**info).clone()),
            _ => None,
        })
        .expect("a child started")
}

/// Reads events until the parent is woken by `child`'s result.
pub async fn until_wake(events: &mut EventStream, log: &mut Vec<AgentEvent>, child: &str) {
    until(
        events,
        log,
        |e| matches!(e, AgentEvent::Wake { child: woke, .. } if woke.as_str() == child),
    )
    .await;
}

/// Reads events until a child's own event matches `pred`; returns that
/// inner event (the whole event is logged).
pub async fn until_child(
    events: &mut EventStream,
    log: &mut Vec<AgentEvent>,
    pred: impl Fn(&AgentEvent) -> bool,
) -> AgentEvent {
    match until(
        events,
        log,
        |e| matches!(e, AgentEvent::Child(_, inner) if pred(inner)),
    )
    .await
    {
        AgentEvent::Child(_, inner) => *inner,
        other => other,
    }
}

/// A thread whose parent ("You are the parent.") has the demo's `sleep`
/// and `http_post` tools, over `builder`.
pub async fn thread_with(
    builder: subagents::actors::DelegationBuilder,
) -> (subagents::supervisor::ThreadHandle, EventStream) {
    subagents::supervisor::ThreadHandle::spawn(
        builder.system_prompt("You are the parent.").tools(
            subagents::actors::ToolRegistry::new()
                .with(subagents_demo::Sleep)
                .with(subagents_demo::Post),
        ),
        None,
    )
    .await
    .unwrap()
}

/// A tool's JSON output, parsed (a failure names the text).
pub fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Drains what is ready.
pub fn drain(events: &mut EventStream, log: &mut Vec<AgentEvent>) {
    while let Some(event) = events.try_recv() {
        log.push(event);
    }
}

/// An agent on a gate of its own (capacity 1), the gate beside it.
pub async fn spawn_agent(
    model: Arc<dyn Model>,
    tools: subagents::prelude::ToolRegistry,
    limits: subagents::messages::Limits,
) -> (
    subagents::prelude::AgentHandle,
    EventStream,
    subagents::prelude::GateHandle,
) {
    let gate = subagents::prelude::GateHandle::spawn(1).await.unwrap();
    let (agent, events) = subagents::prelude::AgentBuilder::new(model)
        .system_prompt("You are the parent.")
        .tools(tools)
        .limits(limits)
        .gate(gate.clone())
        .spawn()
        .await
        .unwrap();
    (agent, events, gate)
}

/// No gate permit held or queued (nothing leaked).
pub async fn assert_gate_free(gate: &subagents::prelude::GateHandle) {
    let snapshot = gate.snapshot().await.unwrap();
    assert_eq!(snapshot.in_flight, 0, "a gate permit leaked");
    assert_eq!(snapshot.queued, 0);
}
