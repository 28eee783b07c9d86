//! Helpers shared by the integration tests: event collection and the
//! checks of docs/event-ordering.md over a whole log.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

pub mod loopback;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use subagents::actors::{Model, ModelStream};
use subagents::messages::{
    AgentEvent, AgentId, AgentResult, ModelRequest, SubAgentStatus, ToolUseId,
};
use subagents::prelude::{EventStream, Reply, ScriptedModel, UseAgentCall};

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

/// Per child, in log order: everything seen about it.
#[derive(Debug, Default, Clone)]
pub struct ChildLog {
    pub started_at: Option<usize>,
    /// Where its `ChildRunning` came (it waited in the queue).
    pub running_at: Vec<usize>,
    pub statuses: Vec<(usize, SubAgentStatus)>,
    pub events: Vec<(usize, AgentEvent)>,
    pub parent_call: Option<ToolUseId>,
    pub background: bool,
}

impl ChildLog {
    pub fn terminal(&self) -> Option<(usize, SubAgentStatus)> {
        self.statuses.iter().copied().find(|(_, s)| s.is_terminal())
    }
}

/// Groups a top-level log by child.
pub fn children(log: &[AgentEvent]) -> (Vec<AgentId>, HashMap<AgentId, ChildLog>) {
    let mut order = Vec::new();
    let mut by_id: HashMap<AgentId, ChildLog> = HashMap::new();
    for (i, event) in log.iter().enumerate() {
        match event {
            AgentEvent::ChildStarted(info) => {
                if !by_id.contains_key(&info.id) {
                    order.push(info.id.clone());
                }
                let child = by_id.entry(info.id.clone()).or_default();
                assert!(
                    child.started_at.is_none(),
                    "guarantee 1: ChildStarted twice for {}",
                    info.id
                );
                assert!(
                    child.statuses.is_empty() && child.events.is_empty(),
                    "guarantee 1: {} had events before ChildStarted",
                    info.id
                );
                child.started_at = Some(i);
                child.parent_call = Some(info.parent_tool_use_id.clone());
                child.background = info.background;
            }
            AgentEvent::ChildStatus(id, status) => {
                let child = by_id.entry(id.clone()).or_default();
                child.statuses.push((i, *status));
            }
            AgentEvent::Child(id, inner) => {
                let child = by_id.entry(id.clone()).or_default();
                child.events.push((i, (**inner).clone()));
            }
            AgentEvent::ChildRunning(id) => {
                let child = by_id.entry(id.clone()).or_default();
                child.running_at.push(i);
            }
            _ => {}
        }
    }
    (order, by_id)
}

/// Every `ToolStarted` of one agent's own events is answered by exactly one
/// `ToolResult` before that agent's next `Result`, every
/// `ApprovalRequested` by exactly one `ApprovalResolved` (after it, before
/// the call's `ToolResult`); at rest nothing is left open. `who` names the
/// agent in failures.
pub fn check_pairs<'a>(who: &str, events: impl IntoIterator<Item = &'a AgentEvent>, at_rest: bool) {
    let mut open_calls: Vec<ToolUseId> = Vec::new();
    let mut open_approvals: Vec<(subagents::messages::ApprovalId, ToolUseId)> = Vec::new();
    for event in events {
        match event {
            AgentEvent::ToolStarted(call) => {
                assert!(
                    !open_calls.contains(&call.tool_use_id),
                    "{who}: ToolStarted {} twice before its ToolResult",
                    call.tool_use_id
                );
                open_calls.push(call.tool_use_id.clone());
            }
            AgentEvent::ToolResult(result) => {
                let at = open_calls
                    .iter()
                    .position(|c| *c == result.tool_use_id)
                    .unwrap_or_else(|| {
                        panic!(
                            "{who}: ToolResult {} with no open ToolStarted",
                            result.tool_use_id
                        )
                    });
                open_calls.remove(at);
                assert!(
                    !open_approvals.iter().any(|(_, c)| *c == result.tool_use_id),
                    "{who}: ToolResult {} before its approval was resolved",
                    result.tool_use_id
                );
            }
            AgentEvent::ApprovalRequested(request) => {
                open_approvals.push((request.id.clone(), request.tool_use_id.clone()));
            }
            AgentEvent::ApprovalResolved { id: resolved, .. } => {
                let at = open_approvals
                    .iter()
                    .position(|(id, _)| id == resolved)
                    .unwrap_or_else(|| {
                        panic!("{who}: ApprovalResolved {resolved} with no open request")
                    });
                open_approvals.remove(at);
            }
            AgentEvent::Result(_) => {
                assert!(
                    open_calls.is_empty(),
                    "{who}: the turn's Result came with calls unanswered: {open_calls:?}"
                );
                assert!(
                    open_approvals.is_empty(),
                    "{who}: the turn's Result came with approvals open: {open_approvals:?}"
                );
            }
            _ => {}
        }
    }
    if at_rest {
        assert!(
            open_calls.is_empty(),
            "{who}: at rest, calls unanswered: {open_calls:?}"
        );
        assert!(
            open_approvals.is_empty(),
            "{who}: at rest, approvals open: {open_approvals:?}"
        );
    }
}

/// Checks guarantees 1 and 2 (and, at rest, that every child ended) over
/// a whole log. Returns the per-child view for further checks.
pub fn check_log(log: &[AgentEvent], at_rest: bool) -> (Vec<AgentId>, HashMap<AgentId, ChildLog>) {
    let (order, by_id) = children(log);
    for (id, child) in &by_id {
        let started = child
            .started_at
            .unwrap_or_else(|| panic!("guarantee 1: {id} has events but no ChildStarted"));
        let indices = child
            .statuses
            .iter()
            .map(|(i, _)| *i)
            .chain(child.events.iter().map(|(i, _)| *i));
        for i in indices {
            assert!(i > started, "guarantee 1: {id} event before ChildStarted");
        }
        let ranks: Vec<u8> = child.statuses.iter().map(|(_, s)| s.rank()).collect();
        assert!(
            ranks.windows(2).all(|w| w[0] < w[1]),
            "guarantee 2: statuses of {id} do not move strictly forward: {:?}",
            child.statuses
        );
        let terminals = child
            .statuses
            .iter()
            .filter(|(_, s)| s.is_terminal())
            .count();
        assert!(
            terminals <= 1,
            "guarantee 2: {id} has {terminals} terminal statuses"
        );
        if let Some((t, _)) = child.terminal() {
            assert!(
                child.events.iter().all(|(i, _)| *i < t),
                "guarantee 2: {id} has events after its terminal status"
            );
        }
        if at_rest {
            assert_eq!(terminals, 1, "at rest, {id} has no terminal status");
        }
        // A queued child's start is on the stream: one ChildRunning, after
        // its queued status, before any of its own events.
        let queued_at = child
            .statuses
            .iter()
            .find(|(_, s)| *s == SubAgentStatus::Queued)
            .map(|(i, _)| *i);
        assert!(child.running_at.len() <= 1, "ChildRunning twice for {id}");
        if let Some(&running) = child.running_at.first() {
            let queued = queued_at
                .unwrap_or_else(|| panic!("ChildRunning for {id}, which was never queued"));
            assert!(
                running > queued,
                "ChildRunning for {id} before it was queued"
            );
            assert!(
                child.events.iter().all(|(i, _)| *i > running),
                "{id} ran before its ChildRunning"
            );
        } else if queued_at.is_some() {
            assert!(
                child.events.is_empty(),
                "{id} was queued and ran with no ChildRunning"
            );
        }
        check_pairs(id.as_str(), child.events.iter().map(|(_, e)| e), at_rest);
        if at_rest && !child.events.is_empty() {
            let results = child
                .events
                .iter()
                .filter(|(_, e)| matches!(e, AgentEvent::Result(_)))
                .count();
            assert_eq!(
                results, 1,
                "at rest, {id} ran and has {results} Results of its own"
            );
        }
    }
    check_pairs("the parent", log.iter(), at_rest);
    (order, by_id)
}

/// Checks guarantee 3 for every inline (non-background, never handed off)
/// child: ToolStarted(use_agent) → ChildStarted → status → Child* →
/// terminal → ToolResult(use_agent). Tool-use ids are only unique within
/// a model answer, so the call is the last `ToolStarted` with that id
/// before `ChildStarted`, and its result the first `ToolResult` after.
pub fn check_inline_order(log: &[AgentEvent]) {
    check_inline(log, false);
}

/// Guarantee 3 for the inline children whose parent's `ToolResult` has
/// come (a child still running inline has none yet).
pub fn check_inline_order_settled(log: &[AgentEvent]) {
    check_inline(log, true);
}

fn check_inline(log: &[AgentEvent], skip_unsettled: bool) {
    let (_, by_id) = children(log);
    for (id, child) in &by_id {
        let handed_off = child.background
            || child
                .statuses
                .iter()
                .any(|(_, s)| *s == SubAgentStatus::Background);
        if handed_off {
            continue;
        }
        let call = child.parent_call.clone().unwrap();
        let started = child.started_at.unwrap();
        let tool_started = log[..started]
            .iter()
            .rposition(|e| matches!(e, AgentEvent::ToolStarted(t) if t.tool_use_id == call))
            .unwrap_or_else(|| panic!("guarantee 3: no ToolStarted before {id}'s ChildStarted"));
        let tool_result = log[started..]
            .iter()
            .position(|e| matches!(e, AgentEvent::ToolResult(t) if t.tool_use_id == call))
            .map(|p| p + started);
        let Some(tool_result) = tool_result else {
            if skip_unsettled {
                continue;
            }
            panic!("guarantee 3: no ToolResult for {id}'s call");
        };
        if is_a_cut_answer(&log[tool_result]) {
            // The parent's turn was cut while it waited: the call was
            // answered at the cut (the child goes on, or was stopped with
            // it), not after the child's end.
            continue;
        }
        let (terminal, _) = child.terminal().unwrap_or_else(|| {
            panic!("guarantee 3: {id}'s call answered before its terminal status")
        });
        assert!(tool_started < started);
        let first_status = child.statuses.first().unwrap();
        assert!(
            matches!(
                first_status.1,
                SubAgentStatus::Queued | SubAgentStatus::Running
            ),
            "guarantee 3: {id} first status {:?}",
            first_status.1
        );
        assert!(
            child
                .events
                .iter()
                .all(|(i, _)| *i > first_status.0 && *i < terminal)
        );
        assert!(
            terminal < tool_result,
            "guarantee 3: ToolResult before the terminal status of {id}"
        );
    }
}

/// The child and status a `use_agent` `ToolResult` carries when it holds a
/// finished child's result — not a `pending` or cut note, not a `status`
/// snapshot, not a sentence.
pub fn finished_result(event: &AgentEvent) -> Option<(AgentId, String)> {
    let AgentEvent::ToolResult(result) = event else {
        return None;
    };
    if result.name != "use_agent" || result.is_error {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&result.output).ok()?;
    let status = v["status"].as_str()?;
    let note = ["pending", "note", "elapsed_s"]
        .iter()
        .any(|k| v.get(k).is_some());
    let finished = matches!(status, "done" | "failed" | "stopped");
    (finished && !note).then(|| {
        (
            AgentId::new(v["id"].as_str().unwrap_or("")),
            status.to_owned(),
        )
    })
}

/// True when a `ToolResult` answers a call its turn cut while it waited:
/// a `pending` or stop note, or the sentence of a cut call.
pub fn is_a_cut_answer(event: &AgentEvent) -> bool {
    let AgentEvent::ToolResult(result) = event else {
        return false;
    };
    let note = serde_json::from_str::<serde_json::Value>(&result.output)
        .is_ok_and(|v| v.get("pending").is_some() || v.get("note").is_some());
    note || result.output.ends_with("before this call finished")
}
