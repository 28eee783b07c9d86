//! Delegation deeper than one level (issue 13): a child that may still
//! delegate gets the delegation tools, its children fold under its row,
//! stops and switches reach them, and the limit is a readable refusal.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod ceiling;
mod killed;
mod models;
mod reach;
mod usage;

use common::*;
use subagents::actors::DelegationBuilder;
use subagents::actors::hub::Refused;
use subagents::messages::ChildRequest;
use subagents::prelude::*;
use subagents::supervisor::ThreadHandle;
use subagents_demo::{Calculator, Sleep};

fn run(name: &str, input: &str, wait: bool) -> UseAgentCall {
    UseAgentCall::run(format!("{name}\nYou are a sub-agent."), input).wait(wait)
}

/// Parent → Child → Grand, with these scripts for the child and the
/// grandchild.
fn tree_with(child: Vec<Reply>, grand: Vec<Reply>) -> ScriptedModel {
    ScriptedModel::new(vec![
        Reply::new().use_agent(&run("Child", "ask your own sub-agent", true)),
        Reply::answer("parent: done"),
    ])
    .with_script("Child", child)
    .with_script("Grand", grand)
}

fn asks_grand(wait: bool) -> Vec<Reply> {
    vec![
        Reply::new().use_agent(&run("Grand", "compute 6*7", wait)),
        Reply::answer("child: the grandchild said 42"),
    ]
}

/// The grandchild computes, the child reports it, the parent answers.
fn tree() -> ScriptedModel {
    tree_with(
        asks_grand(true),
        vec![
            Reply::new().tool_call("calculator", r#"{"expression":"6*7"}"#),
            Reply::answer("42"),
        ],
    )
}

fn sleeps() -> Vec<Reply> {
    worker(1000)
}

fn builder(model: ScriptedModel, depth: u32) -> DelegationBuilder {
    DelegationBuilder::new(model.shared())
        .tools(ToolRegistry::new().with(Calculator).with(Sleep))
        .max_depth(depth)
}

#[tokio::test(start_paused = true)]
async fn a_depth_two_tree_runs_and_folds_under_the_child() {
    let (parent, mut events) = builder(tree(), 2).spawn().await.unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    let result = until_result(&mut events, &mut log).await;
    assert_eq!(result.text, "parent: done");
    check_log(&log, true);

    // The grandchild's whole life is inside the child's row.
    let (top, by_id) = children(&log);
    assert_eq!(top, vec![AgentId::new("agent_1")], "one child at the top");
    let child = &by_id[&AgentId::new("agent_1")];
    let inner = child.row();
    let (nested, grand) = children(&inner);
    assert_eq!(nested, vec![AgentId::new("agent_2")]);
    let grand = &grand[&AgentId::new("agent_2")];
    assert!(grand.events.iter().any(|(_, e)| matches!(e,
        AgentEvent::ToolResult(r) if r.name == "calculator" && r.output == "42")));
    assert_eq!(grand.terminal().map(|t| t.1), Some(SubAgentStatus::Done));
    assert!(child.events.iter().any(|(_, e)| matches!(e,
        AgentEvent::ToolResult(r) if r.name == "use_agent" && r.output.contains("\"result\":\"42\""))));

    let envelopes = parent.hub.envelopes();
    let depth = |id: &str| {
        envelopes
            .iter()
            .find(|e| e.id.as_str() == id)
            .map(|e| e.depth)
    };
    assert_eq!((depth("agent_1"), depth("agent_2")), (Some(1), Some(2)));
    parent.shutdown_and_wait().await;
}

#[tokio::test(start_paused = true)]
async fn at_the_limit_a_delegation_call_is_a_readable_refusal() {
    // Depth 2 allowed: the grandchild (depth 2) tries to go one deeper.
    let model = tree_with(
        asks_grand(true),
        vec![
            Reply::new().use_agent(&run("Great", "x", true)),
            Reply::answer("42 anyway"),
        ],
    );
    let (parent, mut events) = builder(model, 2).spawn().await.unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let inner = row_of(&log, "agent_1");
    let (_, grand) = children(&inner);
    assert!(
        grand[&AgentId::new("agent_2")]
            .events
            .iter()
            .any(|(_, e)| matches!(e,
            AgentEvent::ToolResult(r) if r.is_error && r.output.contains(
                "`use_agent` is not available to this sub-agent: it runs at depth 2"))),
        "{inner:#?}"
    );
    assert_eq!(parent.hub.envelopes().len(), 2, "no great-grandchild");
    parent.shutdown_and_wait().await;
}

/// Parent → Child (inline) → Grand (sleeps long): a switch stops both,
/// each with one final envelope.
#[tokio::test(start_paused = true)]
async fn a_switch_reaches_the_grandchild() {
    let model = tree_with(asks_grand(true), sleeps());
    let (thread, mut events) = ThreadHandle::spawn(builder(model, 2), None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::Child(_, inner) if matches!(&**inner,
            AgentEvent::Child(_, inner) if matches!(&**inner, AgentEvent::ToolStarted(_))))
    })
    .await;
    assert_eq!(thread.switch_away().await.unwrap(), 2, "both were stopped");
    for id in ["agent_1", "agent_2"] {
        let envelope = thread.envelope(&AgentId::new(id)).await.unwrap().unwrap();
        assert_eq!(envelope.status, SubAgentStatus::Stopped, "{id}");
    }
    thread.close_and_wait().await;
}

/// A child that ends stops its own background child: nobody would read
/// that result, and it never wakes the thread's parent.
#[tokio::test(start_paused = true)]
async fn a_childs_children_stop_with_it_and_never_wake_the_parent() {
    let model = tree_with(asks_grand(false), sleeps());
    let (thread, mut events) = ThreadHandle::spawn(builder(model, 2), None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    run_for(&mut events, &mut log, 2_000).await;
    let grand = thread
        .envelope(&AgentId::new("agent_2"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(grand.status, SubAgentStatus::Stopped);
    let wakes = log.iter().filter(|e| is_wake(e)).count();
    assert_eq!(wakes, 0, "no wake for a grandchild");
    check_log(&log, true);
    // Its end is on the stream too, inside its child's row and before the
    // child's own end (the child's sink was closed first, so the
    // grandchild's cut tool call and terminal status were dropped).
    let inner = row_of(&log, "agent_1");
    let (_, nested) = children(&inner);
    assert_eq!(
        nested[&AgentId::new("agent_2")].terminal().map(|t| t.1),
        Some(SubAgentStatus::Stopped),
        "{inner:#?}"
    );
    check_log(&inner, true);
    thread.close_and_wait().await;
}

/// A grandchild that finishes in the background while its child still
/// works never wakes the thread's parent; the child's own result does.
#[tokio::test(start_paused = true)]
async fn only_the_parents_own_children_wake_it() {
    let model = tree_with(
        vec![
            Reply::new().use_agent(&run("Grand", "quick", false)),
            Reply::new().tool_call("sleep", r#"{"secs":100}"#),
            Reply::answer("child: done"),
        ],
        vec![Reply::answer("grand: done")],
    );
    let (thread, mut events) = ThreadHandle::spawn(
        builder(model, 2).inline_wait(std::time::Duration::from_secs(1)),
        None,
    )
    .await
    .unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 1_000).await;
    let woken = woken_children(&log);
    assert_eq!(woken, vec!["agent_1".to_owned()], "{log:#?}");
    thread.close_and_wait().await;
}

/// The hub decides a request's depth from what it knows of the requester
/// (the parent is 0, a child is one below its own requester), not from
/// the depth the request claims: a host cannot claim a shallower depth to
/// go past `max_depth`, nor a deeper one to be refused.
#[tokio::test(start_paused = true)]
async fn a_claimed_requester_depth_is_not_believed() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run("Child", "work", false)),
        Reply::answer("parent: started"),
    ])
    .with_script("Child", sleeps())
    .with_script("Other", sleeps());
    let (parent, mut events) = builder(model, 1).spawn().await.unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let child = AgentId::new("agent_1");
    // The child runs at depth 1 = max_depth: it may not delegate, whatever
    // its request says.
    let forged = ChildRequest::new(
        child.clone(),
        0,
        ToolUseId::new("forged"),
        "Grand\nYou are a sub-agent.",
        "go deeper",
    );
    assert_eq!(
        parent.hub.request(forged).await,
        Err(Refused::TooDeep { max_depth: 1 }),
        "a child at the limit claimed depth 0"
    );
    // The parent is at depth 0, whatever its request says.
    let modest = ChildRequest::new(
        AgentId::new("parent"),
        7,
        ToolUseId::new("modest"),
        "Other\nYou are a sub-agent.",
        "work",
    );
    let other = parent
        .hub
        .request(modest)
        .await
        .expect("the parent may delegate");
    assert_eq!(parent.hub.envelopes().len(), 2, "no grandchild");
    assert_eq!(parent.hub.stop(&other).await, Ok(SubAgentStatus::Stopped));
    parent.shutdown_and_wait().await;
}

/// Shared: the live cap was one pool for every depth, so a child holding
/// the only slot while it waited on its own child left that child queued
/// behind it: a deadlock until the wait or the wall clock ran out (with
/// `delegate_task` or `agent`, the whole wall clock), and the grandchild
/// never ran. The cap holds per requester: a child's children wait only
/// for its own earlier children.
#[tokio::test(start_paused = true)]
async fn a_child_waiting_on_its_own_child_does_not_starve_it_of_a_slot() {
    let model = tree();
    let (parent, mut events) = builder(model, 2).max_live(1).spawn().await.unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    let started = tokio::time::Instant::now();
    let result = until_result(&mut events, &mut log).await;
    assert_eq!(result.text, "parent: done");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(1),
        "waited {:?} for a slot",
        started.elapsed()
    );
    let grand = parent.hub.status(&AgentId::new("agent_2")).unwrap();
    assert_eq!(grand.result.as_deref(), Some("42"), "{grand:?}");
    check_log(&log, true);
    parent.shutdown_and_wait().await;
}

/// Stopped midway, as the hub stops: a child whose turn had ended while
/// its own child still stopped (it waits for it) had its spent result
/// receiver awaited again when the hub stopped — a panic in the hub's
/// stop — and the hub finished children in number order, so a grandchild
/// still running lost its end to its child's closed row. The hub stopped
/// at each of a range of scheduler turns after the child's turn ends: both
/// end, the grandchild first, inside the child's row, and the child keeps
/// its own answer.
#[tokio::test(start_paused = true)]
async fn stopping_the_hub_while_a_child_waits_for_its_own_child() {
    for turns in 0..12 {
        tokio::spawn(stop_hub_as_the_child_ends(turns))
            .await
            .unwrap();
    }
}

async fn stop_hub_as_the_child_ends(turns: usize) {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run("Child", "ask your own sub-agent", false)),
        Reply::answer("parent: started"),
    ])
    .with_script("Child", asks_grand(false))
    .with_script("Grand", sleeps());
    let (parent, mut events) = builder(model, 2).spawn().await.unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::Child(id, inner)
            if id.as_str() == "agent_1" && matches!(**inner, AgentEvent::Result(_)))
    })
    .await;
    for _ in 0..turns {
        tokio::task::yield_now().await;
    }
    parent.shutdown_and_wait().await;
    drain(&mut events, &mut log);
    let (_, by_id) = children(&log);
    let child = &by_id[&AgentId::new("agent_1")];
    let inner = child.row();
    let (_, nested) = children(&inner);
    assert!(
        nested[&AgentId::new("agent_2")].terminal().is_some(),
        "after {turns} turns, the grandchild's end is in its child's row: {inner:#?}"
    );
    check_log(&inner, true);
    // The deepest end first: the grandchild's inside the child's row,
    // before the child's own (review: the row alone was read).
    assert!(child.terminal().is_some(), "after {turns} turns: {log:#?}");
    check_log(&log, true);
    let first = parent.hub.status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(
        first.result.as_deref(),
        Some("child: the grandchild said 42"),
        "after {turns} turns: {first:?}"
    );
}

/// Misleading a model: a child that started its own child in the
/// background was told "its result will arrive as a message", the words
/// a parent reads — but only the parent's own children wake it, and a
/// child's children stop when it ends. The child, trusting the promise,
/// answered without the result. At depth ≥ 1 the words say to ask for
/// it before answering; the parent's own still promise the message.
#[tokio::test(start_paused = true)]
async fn a_child_is_never_promised_its_own_childs_result_as_a_message() {
    let model = tree_with(asks_grand(false), sleeps());
    let (thread, mut events) = ThreadHandle::spawn(builder(model, 2), None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    run_for(&mut events, &mut log, 2_000).await;
    let inner = row_of(&log, "agent_1");
    let (said, _) = results_of(&inner, "use_agent")
        .into_iter()
        .next()
        .expect("the child's call was answered");
    let said = json(&said);
    assert_eq!(said["id"], "agent_2", "{said}");
    let note = said["note"].as_str().unwrap_or_default();
    assert!(!note.contains("as a message"), "{note}");
    assert!(note.contains("action result"), "{note}");
    assert!(note.contains("stops when you"), "{note}");
    thread.close_and_wait().await;
}

/// Misleading a model: the parent asked for a grandchild's result (any
/// child of the thread is the parent's to reach) while it ran, and read
/// "its result will arrive as a message" — the note for its own children.
/// A grandchild never wakes the parent, and it stops when the child that
/// started it ends: the result reached nobody.
#[tokio::test(start_paused = true)]
async fn the_parent_is_never_promised_a_grandchilds_result_as_a_message() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run("Child", "start yours", false)),
        Reply::answer("Started."),
        Reply::new().use_agent(&UseAgentCall::result("agent_2")),
        Reply::answer("Checked."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Child",
        vec![
            Reply::new().use_agent(&run("Grand", "work long", false)),
            Reply::new().tool_call("sleep", r#"{"secs":100}"#),
            Reply::answer("child: done"),
        ],
    )
    .with_script(
        "Grand",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":50}"#),
            Reply::answer("grand: done"),
        ],
    );
    let (thread, mut events) = ThreadHandle::spawn(
        builder(model, 2).inline_wait(std::time::Duration::from_secs(1)),
        None,
    )
    .await
    .unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    thread.send_user("check the grandchild").unwrap();
    until_result(&mut events, &mut log).await;
    let (output, _) = results_of(&log, "use_agent").pop().unwrap();
    assert!(output.contains("\"pending\":true"), "{output}");
    assert!(!output.contains("as a message"), "{output}");
    thread.close_and_wait().await;
}

/// A delegation tool listed in a call's `tools` below the depth limit was
/// refused with "a sub-agent cannot start sub-agents" — false there: the
/// depth decides, and the child gets the delegation tools anyway. It
/// starts, with them.
#[tokio::test(start_paused = true)]
async fn a_delegation_tool_listed_below_the_depth_limit_is_not_refused() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run("Child", "work", true).tools(["calculator", "use_agent"])),
        Reply::answer("parent: done"),
    ])
    .with_script("Child", vec![Reply::answer("child: done")]);
    let (parent, mut events) = builder(model, 2).spawn().await.unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let (output, is_error) = &results_of(&log, "use_agent")[0];
    assert!(!is_error, "{output}");
    let tools = parent.hub.status(&AgentId::new("agent_1")).unwrap().tools;
    assert_eq!(tools, ["calculator", "use_agent"]);
    parent.shutdown_and_wait().await;
}

/// `max_depth(0)`, a host turning delegation off: `use_agent` was still
/// offered (its schema in every model call), and every call was refused
/// with "a sub-agent cannot start sub-agents" — the top-level agent told
/// it was a sub-agent. At depth 0 no delegation tool is offered.
#[tokio::test(start_paused = true)]
async fn max_depth_zero_offers_no_delegation_tool() {
    let (model, seen) = spy("spy", ScriptedModel::new(vec![Reply::answer("ok")]));
    let (parent, mut events) = DelegationBuilder::new(model)
        .tools(ToolRegistry::new().with(Calculator))
        .delegate_task_tool(true)
        .max_depth(0)
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("hi").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    let offered: Vec<String> = seen.lock().unwrap()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(offered, ["calculator"]);
    assert!(!parent.offers_use_agent());
}
