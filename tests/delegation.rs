//! Delegation through `use_agent` and the Hub: the event-ordering
//! guarantees of docs/event-ordering.md, the live cap and FIFO queue,
//! stop, claims, status, inline-wait expiry, panics and refusals.

#![allow(clippy::unwrap_used, clippy::expect_used)]

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

#[tokio::test(start_paused = true)]
async fn inline_run_follows_the_fixed_order() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run_call(
            "Fetcher",
            "Title of https://example.com?",
            &["fetch_title"],
            true,
        )),
        Reply::answer("The title is Example Domain."),
    ])
    .with_script(
        "Fetcher",
        vec![
            Reply::new().tool_call("fetch_title", r#"{"url":"https://example.com"}"#),
            Reply::answer("Example Domain"),
        ],
    );
    let (parent, mut events) = delegating(model, 3).await;
    parent.agent.send_user("What is the title?").unwrap();
    let mut log = Vec::new();
    let result = until_result(&mut events, &mut log).await;
    assert_eq!(result.text, "The title is Example Domain.");
    let shape: Vec<String> = log
        .iter()
        .map(|e| match e {
            AgentEvent::ToolStarted(t) => format!("ToolStarted({})", t.name),
            AgentEvent::ToolResult(t) => format!("ToolResult({})", t.name),
            AgentEvent::ChildStarted(i) => format!("ChildStarted({},{})", i.id, i.name),
            AgentEvent::ChildStatus(id, s) => format!("ChildStatus({id},{s})"),
            AgentEvent::Child(id, inner) => match &**inner {
                AgentEvent::ToolStarted(t) => format!("Child({id},ToolStarted({}))", t.name),
                AgentEvent::ToolResult(t) => format!("Child({id},ToolResult({}))", t.name),
                AgentEvent::Text(t) => format!("Child({id},Text({t}))"),
                AgentEvent::Result(r) => format!("Child({id},Result({}))", r.text),
                other => format!("Child({id},{other:?})"),
            },
            AgentEvent::Text(t) => format!("Text({t})"),
            AgentEvent::Result(r) => format!("Result({})", r.text),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        shape,
        [
            "ToolStarted(use_agent)",
            "ChildStarted(agent_1,Fetcher)",
            "ChildStatus(agent_1,running)",
            "Child(agent_1,ToolStarted(fetch_title))",
            "Child(agent_1,ToolResult(fetch_title))",
            "Child(agent_1,Text(Example Domain))",
            "Child(agent_1,Result(Example Domain))",
            "ChildStatus(agent_1,done)",
            "ToolResult(use_agent)",
            "Text(The title is Example Domain.)",
            "Result(The title is Example Domain.)",
        ]
    );
    let (output, is_error) = &tool_result(&log, "use_agent")[0];
    assert!(!is_error);
    let output: serde_json::Value = serde_json::from_str(output).unwrap();
    assert_eq!(output["result"], "Example Domain");
    assert_eq!(output["status"], "done");
    check_log(&log, true);
    check_inline_order(&log);
    let envelope = parent.hub.status(&AgentId::new("agent_1")).unwrap();
    assert!(envelope.claimed, "an inline result claims the wake");
    assert_eq!(envelope.tool_calls, 1);
    assert_eq!(envelope.last_tool.as_deref(), Some("fetch_title"));
    assert_eq!(envelope.tools, ["fetch_title"]);
}

#[tokio::test(start_paused = true)]
async fn a_child_sees_only_its_prompt_and_input() {
    struct Spy(Arc<std::sync::Mutex<Vec<ModelRequest>>>, ScriptedModel);
    impl Model for Spy {
        fn name(&self) -> &str {
            "spy"
        }
        fn stream(&self, request: ModelRequest) -> ModelStream {
            self.0.lock().unwrap().push(request.clone());
            self.1.stream(request)
        }
    }
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let scripted = ScriptedModel::new(vec![
        Reply::new().use_agent(&run_call(
            "Mathematician",
            "What is 2+2?",
            &["calculator"],
            true,
        )),
        Reply::answer("4"),
    ])
    .with_script("Mathematician", vec![Reply::answer("4")]);
    let (parent, mut events) = DelegationBuilder::new(Arc::new(Spy(seen.clone(), scripted)))
        .system_prompt("You are the parent.")
        .tools(
            ToolRegistry::new()
                .with(Calculator)
                .with(PageTitle::default()),
        )
        .instructions("Project rule: be brief.")
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("secret parent history").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    let requests = seen.lock().unwrap();
    let child = requests
        .iter()
        .find(|r| r.system_prompt().unwrap().starts_with("Mathematician"))
        .unwrap();
    assert_eq!(child.messages.len(), 2, "system prompt and input only");
    assert_eq!(child.messages[1].content, "What is 2+2?");
    assert!(
        child
            .system_prompt()
            .unwrap()
            .ends_with("Project rule: be brief.")
    );
    let names: Vec<&str> = child.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["calculator"]);
    assert!(!format!("{child:?}").contains("secret parent history"));
}

/// A parent that starts `n` background workers in one turn; each worker
/// works `child_work` (in a tool, holding no permit) then answers.
fn fan_out(n: usize, child_work: Duration) -> ScriptedModel {
    let mut first = Reply::new();
    for i in 1..=n {
        first = first.use_agent(&run_call(
            &format!("Worker {i}"),
            &format!("task {i}"),
            &["sleep"],
            false,
        ));
    }
    let mut model = ScriptedModel::new(vec![first, Reply::answer("Started them all.")]);
    for i in 1..=n {
        model = model.with_script(
            format!("Worker {i}\n"),
            vec![
                Reply::new()
                    .text(format!("worker {i} starts"))
                    .tool_call("sleep", json!({"secs": child_work.as_secs()}).to_string()),
                Reply::answer(format!("worker {i} done")),
            ],
        );
    }
    model
}

#[tokio::test(start_paused = true)]
async fn the_fourth_child_is_queued_and_children_start_in_request_order() {
    let (parent, mut events) = delegating(fan_out(5, Duration::from_secs(10)), 3).await;
    parent.agent.send_user("fan out").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let mut peak_live = 0;
    loop {
        let snapshot = parent.hub.snapshot().await.unwrap();
        peak_live = peak_live.max(snapshot.live);
        assert!(snapshot.live <= 3, "guarantee 5: {} live", snapshot.live);
        if snapshot.finished == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(peak_live, 3);
    drain(&mut events, &mut log);
    let (order, by_id) = check_log(&log, true);
    let first_status: Vec<SubAgentStatus> =
        order.iter().map(|id| by_id[id].statuses[0].1).collect();
    assert_eq!(
        first_status,
        [
            SubAgentStatus::Running,
            SubAgentStatus::Running,
            SubAgentStatus::Running,
            SubAgentStatus::Queued,
            SubAgentStatus::Queued
        ]
    );
    // Children's first own event comes in request order (FIFO queue and gate).
    let mut by_first: Vec<(usize, AgentId)> = order
        .iter()
        .map(|id| (by_id[id].events[0].0, id.clone()))
        .collect();
    by_first.sort();
    let started: Vec<AgentId> = by_first.into_iter().map(|(_, id)| id).collect();
    assert_eq!(started, order);
    let envelopes = parent.hub.envelopes();
    assert_eq!(envelopes.len(), 5);
    assert!(
        envelopes
            .iter()
            .all(|e| e.status == SubAgentStatus::Done && e.background)
    );
}

#[tokio::test(start_paused = true)]
async fn stopping_a_queued_and_a_running_child() {
    let (parent, mut events) = delegating(fan_out(3, Duration::from_secs(100)), 1).await;
    parent.agent.send_user("fan out").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let (a1, a2, a3) = (
        AgentId::new("agent_1"),
        AgentId::new("agent_2"),
        AgentId::new("agent_3"),
    );
    assert_eq!(parent.hub.stop(&a2).await.unwrap(), SubAgentStatus::Stopped);
    assert_eq!(
        parent.hub.status(&a2).unwrap().error.as_deref(),
        Some("stopped before it started")
    );
    assert_eq!(parent.hub.stop(&a1).await.unwrap(), SubAgentStatus::Stopped);
    assert_eq!(
        parent.hub.stop(&a1).await.unwrap(),
        SubAgentStatus::Stopped,
        "idempotent"
    );
    // Stopping the running child started the next queued one (agent_3).
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::ChildStatus(id, SubAgentStatus::Done) if id.as_str() == "agent_3")
    })
    .await;
    let (_, by_id) = check_log(&log, true);
    assert!(
        by_id[&a2].events.is_empty(),
        "a queued child stopped never ran"
    );
    assert_eq!(by_id[&a1].terminal().unwrap().1, SubAgentStatus::Stopped);
    assert_eq!(by_id[&a3].terminal().unwrap().1, SubAgentStatus::Done);
    let err = parent.hub.stop(&AgentId::new("agent_9")).await.unwrap_err();
    assert_eq!(
        err,
        subagents::actors::hub::Refused::UnknownChild(AgentId::new("agent_9"))
    );
    assert_eq!(
        err.to_string(),
        "there is no sub-agent with id `agent_9`; ids look like `agent_1`"
    );
    let snapshot = parent.hub.snapshot().await.unwrap();
    assert_eq!((snapshot.live, snapshot.queued), (0, 0));
    assert_eq!(parent.gate.snapshot().await.unwrap().in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn result_claims_the_wake_and_status_never_waits() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run_call("Slow", "work", &["calculator"], false)),
        Reply::new().use_agent(&UseAgentCall::status("agent_1")),
        Reply::new().use_agent(&UseAgentCall::result("agent_1")),
        Reply::answer("Got it."),
    ])
    .with_script(
        "Slow",
        vec![
            Reply::new()
                .tool_call("calculator", r#"{"expression":"1+1"}"#)
                .usage(10, 5),
            Reply::new()
                .delay(Duration::from_secs(20))
                .text("slow answer")
                .usage(10, 5),
        ],
    );
    let (parent, mut events) = delegating(model, 3).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let results = tool_result(&log, "use_agent");
    let status: serde_json::Value = serde_json::from_str(&results[1].0).unwrap();
    assert_eq!(status["id"], "agent_1");
    assert!(
        status.get("result").is_none(),
        "no result while running: {status}"
    );
    let claimed: serde_json::Value = serde_json::from_str(&results[2].0).unwrap();
    assert_eq!(claimed["result"], "slow answer");
    let envelope = parent.hub.status(&AgentId::new("agent_1")).unwrap();
    assert!(envelope.claimed);
    assert_eq!(envelope.usage.total(), 30);
    check_log(&log, true);
}

struct SlowTool;

impl Tool for SlowTool {
    fn name(&self) -> &str {
        "slow"
    }
    fn description(&self) -> String {
        "takes 100 s".into()
    }
    fn parameters(&self) -> serde_json::Value {
        json!({"type": "object"})
    }
    fn call(&self, _call: ToolCallContext) -> ToolFuture {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(100)).await;
            Ok("slow done".into())
        })
    }
}

#[tokio::test(start_paused = true)]
async fn status_answers_at_once_while_every_child_is_busy() {
    let mut first = Reply::new();
    for i in 1..=3 {
        first = first.use_agent(&run_call(&format!("Busy {i}"), "work", &["slow"], false));
    }
    let mut model = ScriptedModel::new(vec![
        first,
        Reply::new().use_agent(&UseAgentCall::status("agent_2")),
        Reply::answer("ok"),
    ]);
    for i in 1..=3 {
        model = model.with_script(
            format!("Busy {i}"),
            vec![Reply::new().tool_call("slow", "{}"), Reply::answer("done")],
        );
    }
    let (parent, mut events) = DelegationBuilder::new(model.shared())
        .tools(ToolRegistry::new().with(SlowTool))
        .spawn()
        .await
        .unwrap();
    let start = tokio::time::Instant::now();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "the parent's status call waited on a child"
    );
    let status: serde_json::Value =
        serde_json::from_str(&tool_result(&log, "use_agent")[3].0).unwrap();
    assert_eq!(status["status"], "background");
    assert_eq!(status["last_tool"], "slow");
    let direct = parent.hub.status(&AgentId::new("agent_3")).unwrap();
    assert_eq!(direct.tool_calls, 1);
}

#[tokio::test(start_paused = true)]
async fn inline_wait_expiry_hands_the_child_to_the_background() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run_call("Long", "work", &["sleep"], true)),
        Reply::answer("It continues in the background."),
    ])
    .with_script(
        "Long",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":60}"#),
            Reply::answer("late answer"),
        ],
    );
    let (parent, mut events) = delegating(model, 3).await;
    let start = tokio::time::Instant::now();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    assert_eq!(start.elapsed(), Duration::from_secs(45));
    let (output, _) = &tool_result(&log, "use_agent")[0];
    assert!(output.contains("\"pending\":true"), "{output}");
    until(
        &mut events,
        &mut log,
        |e| matches!(e, AgentEvent::ChildStatus(_, s) if s.is_terminal()),
    )
    .await;
    let (_, by_id) = check_log(&log, true);
    let child = &by_id[&AgentId::new("agent_1")];
    let statuses: Vec<SubAgentStatus> = child.statuses.iter().map(|(_, s)| *s).collect();
    assert_eq!(
        statuses,
        [
            SubAgentStatus::Running,
            SubAgentStatus::Background,
            SubAgentStatus::Done
        ]
    );
    // Guarantee 4: the parent's ToolResult came early, after the hand-off;
    // the child's events still arrive, in order, and fold into its row.
    let tool_result_at = log
        .iter()
        .position(|e| matches!(e, AgentEvent::ToolResult(_)))
        .unwrap();
    assert!(child.statuses[1].0 < tool_result_at);
    assert!(child.terminal().unwrap().0 > tool_result_at);
    assert!(child.events.iter().any(|(i, _)| *i > tool_result_at));
    let transcript = Transcript::from_events(&log);
    let row = transcript.child(&AgentId::new("agent_1")).unwrap();
    assert_eq!(row.status, Some(SubAgentStatus::Done));
    assert!(transcript.render().contains("assistant: late answer"));
    assert!(!parent.hub.status(&AgentId::new("agent_1")).unwrap().claimed);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_child_fails_alone() {
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&run_call("Crasher", "crash", &[], true))
            .use_agent(&run_call("Steady", "work", &[], true)),
        Reply::answer("One failed, one worked."),
    ])
    .with_script("Crasher", vec![Reply::new().panic("segfault in adapter")])
    .with_script("Steady", vec![Reply::answer("steady result")]);
    let (parent, mut events) = delegating(model, 1).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    let result = until_result(&mut events, &mut log).await;
    assert_eq!(result.text, "One failed, one worked.");
    let envelopes = parent.hub.envelopes();
    assert_eq!(envelopes[0].status, SubAgentStatus::Failed);
    assert!(
        envelopes[0]
            .error
            .as_deref()
            .unwrap()
            .contains("segfault in adapter")
    );
    assert_eq!(envelopes[1].status, SubAgentStatus::Done);
    let outputs = tool_result(&log, "use_agent");
    assert!(
        outputs[0].0.contains("\"status\":\"failed\""),
        "{}",
        outputs[0].0
    );
    assert!(outputs[1].0.contains("steady result"));
    check_log(&log, true);
    check_inline_order(&log);
    assert_eq!(parent.hub.snapshot().await.unwrap().live, 0);
}

#[tokio::test(start_paused = true)]
async fn unknown_tools_recursion_and_bad_arguments_are_sentences_and_spawn_nothing() {
    let calls = [
        run_call("A", "x", &["shell"], true).to_json(),
        run_call("B", "x", &["use_agent"], true).to_json(),
        // Malformed on purpose: written by hand.
        json!({"action": "run", "system_prompt": "C"}).to_string(),
        json!({"action": "dance"}).to_string(),
        UseAgentCall::status("agent_42").to_json(),
        json!({"action": "result"}).to_string(),
        json!({"input": "no action"}).to_string(),
        "[1,2]".to_owned(),
    ];
    let mut turn = Reply::new();
    for call in &calls {
        turn = turn.tool_call("use_agent", call.clone());
    }
    let model = ScriptedModel::new(vec![turn, Reply::answer("I could not delegate.")]);
    let (parent, mut events) = delegating(model, 3).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let outputs = tool_result(&log, "use_agent");
    let expected = [
        "the tool `shell` is not one of your tools, so a sub-agent cannot get it; your tools are: calculator, fetch_title, sleep",
        "a sub-agent cannot start sub-agents or be given a delegation tool (the maximum depth is 1)",
        "`input` is required for action run",
        "unknown action `dance`: use run, status, result, send, interrupt, stop or agents",
        "there is no sub-agent with id `agent_42`",
        "`id` is required for action result",
        "`action` is required: run, status, result, send, interrupt, stop or agents",
        "invalid arguments",
    ];
    for ((output, is_error), want) in outputs.iter().zip(expected) {
        assert!(is_error, "{output}");
        assert!(output.contains(want), "{output:?} should contain {want:?}");
    }
    assert!(!log.iter().any(|e| matches!(e, AgentEvent::ChildStarted(_))));
    assert_eq!(parent.hub.snapshot().await.unwrap().requested, 0);
}

#[tokio::test(start_paused = true)]
async fn a_child_calling_use_agent_is_refused() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run_call("Nester", "try to nest", &[], true)),
        Reply::answer("done"),
    ])
    .with_script(
        "Nester",
        vec![
            Reply::new().use_agent(&run_call("Grandchild", "x", &[], true)),
            Reply::answer("could not nest"),
        ],
    );
    let (parent, mut events) = delegating(model, 3).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let (_, by_id) = check_log(&log, true);
    let child = &by_id[&AgentId::new("agent_1")];
    assert!(
        child.events.iter().any(|(_, e)| matches!(e,
        AgentEvent::ToolResult(r) if r.is_error && r.output.contains(
            "`use_agent` is not available to this sub-agent: it runs at depth 1, as deep as delegation goes here"
        )))
    );
    assert_eq!(parent.hub.envelopes().len(), 1, "no grandchild was spawned");
}

/// Wraps a model and counts calls in flight.
struct Counting {
    inner: ScriptedModel,
    in_flight: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

struct Guard(Arc<AtomicUsize>);
impl Drop for Guard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Model for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    fn stream(&self, request: ModelRequest) -> ModelStream {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let guard = Guard(self.in_flight.clone());
        let inner = self.inner.stream(request);
        Box::pin(futures_util::StreamExt::map(inner, move |chunk| {
            let _ = &guard;
            chunk
        }))
    }
}

#[tokio::test(start_paused = true)]
async fn a_capacity_one_gate_never_has_two_model_calls_in_flight() {
    let peak = Arc::new(AtomicUsize::new(0));
    let model = Counting {
        inner: fan_out(6, Duration::from_secs(3)),
        in_flight: Arc::new(AtomicUsize::new(0)),
        peak: peak.clone(),
    };
    let (parent, mut events) = DelegationBuilder::new(Arc::new(model))
        .tools(ToolRegistry::new().with(Sleep))
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    while parent.hub.snapshot().await.unwrap().finished < 6 {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(peak.load(Ordering::SeqCst), 1, "guarantee 6");
    let gate = parent.gate.snapshot().await.unwrap();
    assert_eq!(gate.granted_total, 2 + 6 * 2);
    assert_eq!(gate.in_flight, 0);
}

/// A child actor that dies without reporting (killed here; a panic in its
/// handler takes the same path) fails through the hub's supervision
/// handler: the hub survives, the slot frees and the queued child starts.
#[tokio::test(start_paused = true)]
async fn a_child_actor_that_dies_fails_and_frees_its_slot() {
    let (parent, mut events) = delegating(fan_out(2, Duration::from_secs(100)), 1).await;
    parent.agent.send_user("fan out").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let children = parent.hub.actor().get_children();
    assert_eq!(children.len(), 1, "one live child (the cap is 1)");
    children[0].kill();
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::ChildStatus(id, SubAgentStatus::Done) if id.as_str() == "agent_2")
    })
    .await;
    let dead = parent.hub.status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(dead.status, SubAgentStatus::Failed);
    assert!(
        dead.error
            .as_deref()
            .unwrap()
            .starts_with("the sub-agent stopped before it reported a result"),
        "{dead:?}"
    );
    check_log(&log, true);
    assert_eq!(parent.hub.snapshot().await.unwrap().live, 0);
    assert_eq!(parent.gate.snapshot().await.unwrap().in_flight, 0);
}

/// Killed in the middle of a model call, a child's turn still ends: the
/// gate permit it held comes back and the parent's next call goes through.
#[tokio::test(start_paused = true)]
async fn a_child_killed_mid_model_call_returns_its_permit() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run_call("Hanger", "hang", &[], false)),
        Reply::answer("started"),
        Reply::answer("still here"),
    ])
    .with_script("Hanger", vec![Reply::new().text("…").hang()]);
    let (parent, mut events) = delegating(model, 3).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until(
        &mut events,
        &mut log,
        |e| matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::Text(_))),
    )
    .await;
    // The child holds the gate inside its hanging call.
    assert_eq!(parent.gate.snapshot().await.unwrap().in_flight, 1);
    parent.hub.actor().get_children()[0].kill();
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::ChildStatus(_, SubAgentStatus::Failed))
    })
    .await;
    assert_eq!(
        parent.gate.snapshot().await.unwrap().in_flight,
        0,
        "the permit came back"
    );
    parent.agent.send_user("are you there?").unwrap();
    let result = until_result(&mut events, &mut log).await;
    assert_eq!(
        result.text, "still here",
        "the parent's next call went through"
    );
    check_log(&log, true);
}

/// A host tool named like a delegation tool.
struct FakeUseAgent;

impl Tool for FakeUseAgent {
    fn name(&self) -> &str {
        "use_agent"
    }
    fn description(&self) -> String {
        "the host's own".into()
    }
    fn parameters(&self) -> serde_json::Value {
        json!({"type": "object"})
    }
    fn call(&self, _call: ToolCallContext) -> ToolFuture {
        Box::pin(async { Ok("the host's tool ran".into()) })
    }
}

/// Foreign input: the host's registry holds a tool named `use_agent`. The
/// delegation tool replaces it for the parent, and children did not get
/// the delegation tool (they sit at the depth limit) but got the host's
/// under that name: "inherits all but the delegation tools" broken, and a
/// child's call ran something else than its name says. Now a child has
/// neither, and its call is the depth refusal.
#[tokio::test(start_paused = true)]
async fn a_host_tool_named_like_a_delegation_tool_reaches_no_child() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run("Child\nYou work.", "try to delegate")),
        Reply::answer("Done."),
    ])
    .with_script(
        "Child",
        vec![
            Reply::new().tool_call("use_agent", r#"{"action":"agents"}"#),
            Reply::answer("child: done"),
        ],
    );
    let (parent, mut events) = DelegationBuilder::new(model.shared())
        .tools(ToolRegistry::new().with(FakeUseAgent).with(Calculator))
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let started = first_child_started(&log);
    assert_eq!(started.tools, ["calculator"], "{started:?}");
    let child_said: Vec<AgentEvent> = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Child(_, inner) => Some((**inner).clone()),
            _ => None,
        })
        .collect();
    let (output, is_error) = tool_result(&child_said, "use_agent").remove(0);
    assert!(
        is_error && !output.contains("the host's tool ran"),
        "{output}"
    );
    check_log(&log, true);
}
