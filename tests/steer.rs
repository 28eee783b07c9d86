//! Steering, interrupting and resuming (issue 16, points 1 and 2):
//! `use_agent send` gives a running child a message it reads at its next
//! model call — never mid-call, in order; a queued child reads it after its
//! task; a finished child goes on from its conversation as a new run; an
//! interrupted child waits for one; a stopped child does not resume. A
//! message racing the child's final answer is read, never lost
//! (`actors/src/agent/turn_state.rs::a_message_racing_completion_is_read_or_refused`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::Value;
use subagents::actors::DelegationBuilder;
use subagents::messages::{AgentEvent, ModelRequest, Role, SubAgentStatus};
use subagents::prelude::*;
use subagents::supervisor::ThreadHandle;

#[path = "steer/cut.rs"]
mod cut;
#[path = "steer/resumed.rs"]
mod resumed;
#[path = "steer/rows.rs"]
mod rows;

const STEER: &str = "[message from the agent that started you]\n";

/// The user messages of a request (the task, then what was sent).
fn user_messages(request: &ModelRequest) -> Vec<String> {
    request
        .messages
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.content.clone())
        .collect()
}

/// The requests the child named `name` made, in order.
fn requests_of(seen: &[ModelRequest], name: &str) -> Vec<ModelRequest> {
    seen.iter()
        .filter(|r| r.messages[0].content.starts_with(name))
        .cloned()
        .collect()
}

/// Two messages sent while the child is in a 30 s tool reach it at its
/// next model call, in order, after the tool's result — not before, and
/// the call in flight is not disturbed.
#[tokio::test(start_paused = true)]
async fn a_running_child_reads_messages_at_its_next_model_call_in_order() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 30, false)),
        Reply::answer("Started."),
        Reply::new()
            .use_agent(&UseAgentCall::send("agent_1", "also check the logs"))
            .use_agent(&UseAgentCall::send("agent_1", "and be brief")),
        Reply::answer("Sent."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker", worker(30));
    let (model, seen) = spy("model", model);
    let (thread, mut events) = thread_with(DelegationBuilder::new(model)).await;
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until_child(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::ToolStarted(_))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    thread.send_user("tell it more").unwrap();
    until_result(&mut events, &mut log).await;
    let sent: Vec<Value> = results_of(&log, "use_agent")
        .iter()
        .skip(1)
        .map(|(o, _)| json(o))
        .collect();
    assert_eq!(sent.len(), 2);
    for answer in &sent {
        assert_eq!(answer["status"], "running", "{answer}");
    }
    until(&mut events, &mut log, is_wake).await;
    until_result(&mut events, &mut log).await;
    check_log(&log, true);
    let worker = requests_of(&seen.lock().unwrap(), "Worker");
    assert_eq!(worker.len(), 2);
    assert_eq!(user_messages(&worker[0]), ["work 30 s"]);
    assert_eq!(
        user_messages(&worker[1]),
        [
            "work 30 s".to_owned(),
            format!("{STEER}also check the logs"),
            format!("{STEER}and be brief"),
        ]
    );
    // After the tool's result: the messages came at the next call, not
    // inside the one in flight.
    let last = &worker[1].messages;
    let tool_at = last.iter().position(|m| m.role == Role::Tool).unwrap();
    let steer_at = last
        .iter()
        .position(|m| m.content.starts_with(STEER))
        .unwrap();
    assert!(tool_at < steer_at);
}

/// A parent that starts `First` and `Second` (10 s workers; with one
/// slot, `Second` queues), sends `Second` "use the new data", then makes
/// the `calls` — all in one answer — and notes whatever comes after.
fn second_queued_then(calls: &[UseAgentCall]) -> ScriptedModel {
    let first = calls.iter().fold(
        Reply::new()
            .use_agent(&work_call("First", 10, false))
            .use_agent(&work_call("Second", 10, false))
            .use_agent(&UseAgentCall::send("agent_2", "use the new data")),
        |reply, call| reply.use_agent(call),
    );
    let mut turns = vec![first, Reply::answer("Started.")];
    turns.extend((0..3).map(|_| Reply::answer("Noted.")));
    ScriptedModel::new(turns)
        .with_script("First", worker(10))
        .with_script("Second", worker(10))
}

/// A queued child reads a message after its task, at its first model
/// call.
#[tokio::test(start_paused = true)]
async fn a_queued_child_reads_a_message_after_its_task() {
    let (model, seen) = spy("model", second_queued_then(&[]));
    let (thread, mut events) = thread_with(DelegationBuilder::new(model).max_live(1)).await;
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let (sent, _) = results_of(&log, "use_agent").remove(2);
    assert_eq!(json(&sent)["status"], "queued");
    run_for(&mut events, &mut log, 120).await;
    check_log(&log, true);
    let second = requests_of(&seen.lock().unwrap(), "Second");
    assert_eq!(
        user_messages(&second[0]),
        ["work 10 s".to_owned(), format!("{STEER}use the new data")]
    );
}

/// A message to a finished child resumes it: a new run (a new id, its
/// own `ChildStarted` under the send call, naming the run it goes on
/// from) reads the old run's whole conversation, then the message; a later
/// message to the old id reaches the new run. A stopped child does not
/// resume; an unknown id is named.
#[tokio::test(start_paused = true)]
async fn a_finished_child_goes_on_as_a_new_run_from_its_conversation() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 1, true)),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "now the second part")),
        Reply::new()
            .use_agent(&UseAgentCall::send("agent_1", "and be brief"))
            .use_agent(&UseAgentCall::send("agent_7", "hello")),
        Reply::answer("Resumed."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Worker",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":1}"#),
            Reply::answer("worked 1 s"),
            Reply::new().tool_call("sleep", r#"{"secs":5}"#),
            Reply::answer("second part done"),
        ],
    );
    let (model, seen) = spy("model", model);
    let (thread, mut events) = thread_with(DelegationBuilder::new(model)).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let outputs = results_of(&log, "use_agent");
    let resumed = json(&outputs[1].0);
    assert_eq!(resumed["id"], "agent_2");
    assert_eq!(resumed["resumed_from"], "agent_1");
    assert_eq!(resumed["status"], "background");
    let again = json(&outputs[2].0);
    assert_eq!(again["id"], "agent_1", "{again}");
    assert_eq!(again["status"], "running", "reached the new run: {again}");
    assert!(outputs[3].1 && outputs[3].0.contains("no sub-agent with id `agent_7`"));
    let started = log
        .iter()
        .find_map(|e| match e {
            AgentEvent::ChildStarted(info) if info.id.as_str() == "agent_2" => Some(info.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(started.resumed_from, Some(AgentId::new("agent_1")));
    let send_call = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolStarted(s) if s.arguments.contains("second part") => {
                Some(s.tool_use_id.clone())
            }
            _ => None,
        })
        .next()
        .unwrap();
    assert_eq!(started.parent_tool_use_id, send_call);
    until_wake(&mut events, &mut log, "agent_2").await;
    until_result(&mut events, &mut log).await;
    check_log(&log, true);
    let first = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(first.continued_as, Some(AgentId::new("agent_2")));
    assert_eq!(first.result.as_deref(), Some("worked 1 s"));
    let second = thread.hub().status(&AgentId::new("agent_2")).unwrap();
    assert_eq!(second.result.as_deref(), Some("second part done"));
    let requests = requests_of(&seen.lock().unwrap(), "Worker");
    let resumed_first = &requests[2].messages;
    let roles: Vec<Role> = resumed_first.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant,
            Role::User
        ]
    );
    assert_eq!(
        resumed_first.last().unwrap().content,
        format!("{STEER}now the second part")
    );
    assert!(
        requests[3]
            .messages
            .iter()
            .any(|m| m.content == format!("{STEER}and be brief")),
        "the second message reached the new run"
    );
}

/// Repeated (a stop after an interrupt): an interrupted child waits for a
/// message, and "stop cancels it for good" (the tool's own words) — but a
/// stop of it answered `interrupted` and changed nothing, so a later
/// message resumed it, the model's or the host's stop ignored. The stop
/// cancels it (its status stays `interrupted`, the stream's last word on
/// it; its envelope says `cancelled`), and a message is refused as a
/// stopped child's. The host's stop does the same.
#[tokio::test(start_paused = true)]
async fn a_stop_after_an_interrupt_cancels_the_child_for_good() {
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&work_call("Worker", 60, false))
            .use_agent(&work_call("Other", 60, false)),
        Reply::answer("Started."),
        Reply::new()
            .use_agent(&UseAgentCall::interrupt("agent_1"))
            .use_agent(&UseAgentCall::interrupt("agent_2")),
        Reply::answer("Interrupted both."),
        Reply::new().use_agent(&UseAgentCall::stop("agent_1")),
        Reply::answer("Cancelled the first."),
        Reply::new()
            .use_agent(&UseAgentCall::send("agent_1", "go on"))
            .use_agent(&UseAgentCall::send("agent_2", "go on")),
        Reply::answer("Told them."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker", worker(60))
    .with_script("Other", worker(60));
    let (thread, mut events) = thread_with(DelegationBuilder::new(model.shared())).await;
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    thread.send_user("cut them").unwrap();
    until_result(&mut events, &mut log).await;
    thread.send_user("cancel the first").unwrap();
    until_result(&mut events, &mut log).await;
    // The host's stop of the second, after its interrupt, likewise.
    let agent_2 = AgentId::new("agent_2");
    assert_eq!(
        thread.stop_child(&agent_2).await,
        Ok(SubAgentStatus::Interrupted)
    );
    thread.send_user("go on, both").unwrap();
    until_result(&mut events, &mut log).await;
    let outputs = results_of(&log, "use_agent");
    assert_eq!(
        json(&outputs[4].0)["status"],
        "interrupted",
        "{}",
        outputs[4].0
    );
    // The stop says it cancelled it, which `interrupted` alone does not.
    assert_eq!(json(&outputs[4].0)["cancelled"], true, "{}", outputs[4].0);
    for (sent, is_error) in &outputs[5..7] {
        assert!(is_error, "resumed: {sent}");
        assert!(sent.contains("was stopped and does not resume"), "{sent}");
    }
    for id in ["agent_1", "agent_2"] {
        let envelope = thread.hub().status(&AgentId::new(id)).unwrap();
        assert_eq!(envelope.status, SubAgentStatus::Interrupted, "{id}");
        assert!(envelope.cancelled, "{id}");
    }
    let (_, by_id) = check_log(&log, false);
    assert_eq!(by_id.len(), 2, "no new run");
    thread.close_and_wait().await;
}

/// Review of this session's cancel (a regression it made, caught before
/// it landed): an interrupt goes through the hub's stop, so once a stop
/// of an ended run cancelled it, an interrupt of a child that had ended —
/// interrupted already, or done in the same instant — cancelled it too,
/// though its answer told the model a message resumes it. Only a stop
/// cancels; and a stop or an interrupt of a resumed child's old id
/// reaches its newest run, as a message does (it stopped the old, ended
/// run and let the new one run on).
#[tokio::test(start_paused = true)]
async fn an_interrupt_of_an_ended_child_leaves_it_resumable_and_a_stop_reaches_the_newest_run() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 60, false)),
        Reply::answer("Started."),
        Reply::new().use_agent(&UseAgentCall::interrupt("agent_1")),
        Reply::answer("Interrupted."),
        Reply::new().use_agent(&UseAgentCall::interrupt("agent_1")),
        Reply::answer("Interrupted again."),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "go on")),
        Reply::answer("Resumed."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Worker",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":60}"#),
            // The interrupted run's cut answer is the second.
            Reply::answer("(not reached: the run was interrupted)"),
            Reply::new().tool_call("sleep", r#"{"secs":60}"#),
            Reply::answer("went on"),
        ],
    );
    let (thread, mut events) = thread_with(DelegationBuilder::new(model.shared())).await;
    let mut log = Vec::new();
    for turn in ["start", "cut it", "cut it again", "go on"] {
        thread.send_user(turn).unwrap();
        until_result(&mut events, &mut log).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    let outputs = results_of(&log, "use_agent");
    let (sent, is_error) = outputs.last().unwrap();
    assert!(!is_error, "{sent}");
    assert_eq!(json(sent)["resumed_from"], "agent_1", "{sent}");
    let agent_1 = AgentId::new("agent_1");
    assert!(!thread.hub().status(&agent_1).unwrap().cancelled);
    // The host stops `agent_1` — the model's id — while its new run runs.
    let agent_2 = AgentId::new("agent_2");
    assert_eq!(
        thread.hub().status(&agent_2).map(|e| e.status),
        Some(SubAgentStatus::Background)
    );
    assert_eq!(
        thread.stop_child(&agent_1).await,
        Ok(SubAgentStatus::Stopped)
    );
    assert_eq!(
        thread.hub().status(&agent_2).map(|e| e.status),
        Some(SubAgentStatus::Stopped)
    );
    thread.close_and_wait().await;
}

/// An interrupted child ends `interrupted` — its tool call cut and
/// answered, its own `Result(stopped)` first — and wakes nobody; a message
/// resumes it. A stopped child does not resume. A stop of a running child
/// answers `stopped` and nothing more: no `cancelled` and no "it had
/// already ended" note, which belong to a child that ended before its stop.
#[tokio::test(start_paused = true)]
async fn interrupt_leaves_a_child_waiting_for_a_message_and_stop_ends_it() {
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&work_call("Worker", 60, false))
            .use_agent(&work_call("Other", 60, false)),
        Reply::answer("Started."),
        Reply::new()
            .use_agent(&UseAgentCall::interrupt("agent_1"))
            .use_agent(&UseAgentCall::stop("agent_2")),
        Reply::answer("Interrupted one, stopped the other."),
        Reply::new()
            .use_agent(&UseAgentCall::send(
                "agent_1",
                "change of plan: stop sleeping",
            ))
            .use_agent(&UseAgentCall::send("agent_2", "go on")),
        Reply::answer("Told them."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Worker",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":60}"#),
            // The scripted model picks a reply by the assistant messages
            // so far: the interrupted run's cut answer is the second.
            Reply::answer("(not reached: the run was interrupted)"),
            Reply::answer("changed plan"),
        ],
    )
    .with_script("Other", worker(60));
    let (thread, mut events) = thread_with(DelegationBuilder::new(model.shared())).await;
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    thread.send_user("cut them").unwrap();
    until_result(&mut events, &mut log).await;
    let outputs = results_of(&log, "use_agent");
    assert_eq!(json(&outputs[2].0)["status"], "interrupted");
    assert_eq!(json(&outputs[3].0)["status"], "stopped");
    // The stop itself ended the running child: its answer does not say
    // it had already ended and was cancelled (guards the stop's answer
    // taking every terminal status, `stopped` too, for an ended one).
    let stopped = json(&outputs[3].0);
    assert_eq!(stopped.get("cancelled"), None, "{stopped}");
    assert_eq!(stopped.get("note"), None, "{stopped}");
    let (_, by_id) = check_log(&log, false);
    assert_eq!(
        by_id[&AgentId::new("agent_1")].terminal().map(|(_, s)| s),
        Some(SubAgentStatus::Interrupted)
    );
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert!(envelope.error.unwrap().contains("interrupted"));
    run_for(&mut events, &mut log, 120).await;
    assert!(
        !log.iter().any(is_wake),
        "an interrupt or a stop wakes nobody"
    );
    thread.send_user("go on").unwrap();
    until_result(&mut events, &mut log).await;
    let outputs = results_of(&log, "use_agent");
    assert_eq!(json(&outputs[4].0)["resumed_from"], "agent_1");
    assert!(outputs[5].1);
    assert!(
        outputs[5].0.contains("was stopped and does not resume"),
        "{}",
        outputs[5].0
    );
    until_wake(&mut events, &mut log, "agent_3").await;
    until_result(&mut events, &mut log).await;
    check_log(&log, true);
    assert_eq!(
        thread
            .hub()
            .status(&AgentId::new("agent_3"))
            .unwrap()
            .result
            .as_deref(),
        Some("changed plan")
    );
}

/// A message sent as the child gives its final answer is read: by the
/// running turn (it answers again, having read it) or, once the run ended,
/// by a new run that goes on from its conversation — never taken and
/// lost: the parent's send and the child's last answer land 15 ms apart
/// either way, and at the same virtual instant (a gate of 2, so neither
/// model call waits behind the other). The exact-instant race under the
/// turn's lock is `a_message_racing_completion_is_read_or_refused`.
#[tokio::test(start_paused = true)]
async fn a_message_racing_the_final_answer_is_read_never_lost() {
    let (mut read, mut resumed) = (0, 0);
    for k in 0..31u64 {
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&work_call("Worker", 1, false)),
            Reply::answer("Started."),
            Reply::new()
                .use_agent(&UseAgentCall::send("agent_1", "one more thing"))
                .delay(Duration::from_secs(10)),
            Reply::answer("Sent."),
            Reply::answer("Noted."),
        ])
        .with_script(
            "Worker",
            vec![
                Reply::new().tool_call("sleep", r#"{"secs":1}"#),
                Reply::answer("worked 1 s").delay(Duration::from_millis(9_985 + k)),
                Reply::answer("read it"),
            ],
        );
        let (model, seen) = spy("model", model);
        let gate = GateHandle::spawn(2).await.unwrap();
        let (thread, mut events) = thread_with(DelegationBuilder::new(model).gate(gate)).await;
        thread.send_user("start").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        until_child(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::ToolResult(_))
        })
        .await;
        thread.send_user("tell it").unwrap();
        until_result(&mut events, &mut log).await;
        run_for(&mut events, &mut log, 60).await;
        check_log(&log, true);
        let (sent, is_error) = results_of(&log, "use_agent").pop().unwrap();
        assert!(!is_error, "{sent}");
        let worker = requests_of(&seen.lock().unwrap(), "Worker");
        let saw_it = worker
            .iter()
            .any(|r| r.messages.iter().any(|m| m.content.starts_with(STEER)));
        assert!(saw_it, "taken ({sent}), never read: {log:#?}");
        if json(&sent).get("resumed_from").is_some() {
            resumed += 1;
        } else {
            read += 1;
        }
        thread.close_and_wait().await;
    }
    eprintln!("read by the running turn {read}, by a new run {resumed}");
    assert!(read > 0 && resumed > 0, "both orders: {read} and {resumed}");
}

/// A worker whose last allowed model call (its second) takes `last_call`,
/// sent "one more thing" 6 s in, during that call; its log checked after
/// `settle` more seconds — each check of a message during the last call,
/// whatever the call's length.
async fn a_message_during_the_last_call(last_call: u64, settle: u64) -> ThreadHandle {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 1, false).max_iterations(2)),
        Reply::answer("Started."),
        Reply::new()
            .use_agent(&UseAgentCall::send("agent_1", "one more thing"))
            .delay(Duration::from_secs(5)),
        Reply::answer("Sent."),
        Reply::answer("Noted."),
        Reply::answer("Noted."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Worker",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":1}"#),
            Reply::answer("worked 1 s").delay(Duration::from_secs(last_call)),
            Reply::answer("read it"),
        ],
    );
    let (model, seen) = spy("model", model);
    let gate = GateHandle::spawn(2).await.unwrap();
    let (thread, mut events) = thread_with(DelegationBuilder::new(model).gate(gate)).await;
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until_child(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::ToolResult(_))
    })
    .await;
    thread.send_user("tell it").unwrap();
    until_result(&mut events, &mut log).await;
    run_for(&mut events, &mut log, settle).await;
    check_log(&log, true);
    let (sent, is_error) = results_of(&log, "use_agent").pop().unwrap();
    assert!(!is_error, "{sent}");
    assert_eq!(json(&sent)["resumed_from"], "agent_1", "{sent}");
    let worker = requests_of(&seen.lock().unwrap(), "Worker");
    let saw_it = worker.iter().any(|r| {
        r.messages
            .iter()
            .any(|m| m.content == format!("{STEER}one more thing"))
    });
    assert!(saw_it, "taken ({sent}), never read: {worker:#?}");
    thread
}

/// Same instant, a long last call: a message sent during a child's last
/// allowed model call waited for its end only up to the inline wait (45 s)
/// and then handed the model "is ending … send it again" — a slow local
/// model's call, or any call of a `max_iterations: 1` child, outlasts
/// that. The send waits for the run's end (the parent's own wall clock
/// bounds it), and a new run reads the message.
#[tokio::test(start_paused = true)]
async fn a_message_during_a_last_call_longer_than_the_inline_wait_is_read_by_a_new_run() {
    // Its last allowed call: 100 s; the send lands at about 6 s.
    let thread = a_message_during_the_last_call(100, 240).await;
    thread.close_and_wait().await;
}

/// A message sent during the child's last allowed model call could not be
/// read by that run: it was taken ("running") and never read, and it made
/// the child's final answer a model-call-limit partial. The run takes no
/// message from its last call on: the send waits for it to end, and a new
/// run reads it.
#[tokio::test(start_paused = true)]
async fn a_message_during_the_last_allowed_model_call_is_read_by_a_new_run() {
    // Its second and last allowed call: 10 s; the send lands at 6 s.
    let thread = a_message_during_the_last_call(10, 120).await;
    let first = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(
        first.result.as_deref(),
        Some("worked 1 s"),
        "a message made it partial"
    );
    thread.close_and_wait().await;
}

/// A parent that starts `Worker` in the background (5 model calls at
/// most) and, at its user's second turn, 5 s in, sends it "one more
/// thing": during the worker's second answer, if that one takes 10 s.
fn told_during_its_second_answer(worker: Vec<Reply>) -> ScriptedModel {
    ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 1, false).max_iterations(5)),
        Reply::answer("Started."),
        Reply::new()
            .use_agent(&UseAgentCall::send("agent_1", "one more thing"))
            .delay(Duration::from_secs(5)),
        Reply::answer("Sent."),
        Reply::answer("Noted."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker", worker)
}

/// A thread whose children's budget is 1,000 tokens, on `model`: the
/// user starts the worker, then has the parent send it "one more thing";
/// a minute later, at rest, the thread and what the send answered.
async fn told_within_its_budget(model: ScriptedModel) -> (ThreadHandle, String) {
    use subagents::messages::Limits;
    let gate = GateHandle::spawn(2).await.unwrap();
    let (thread, mut events) = thread_with(
        DelegationBuilder::new(model.shared())
            .gate(gate)
            .child_limits(Limits {
                token_budget: 1_000,
                ..Limits::default()
            }),
    )
    .await;
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    thread.send_user("tell it").unwrap();
    until_result(&mut events, &mut log).await;
    run_for(&mut events, &mut log, 60).await;
    check_log(&log, true);
    let (sent, _) = results_of(&log, "use_agent").pop().unwrap();
    (thread, sent)
}

/// A worker whose second answer, 10 s long, brings its tokens to 1,000
/// (its budget, in the tests that use it).
fn spending_its_budget() -> Vec<Reply> {
    vec![
        Reply::new()
            .tool_call("sleep", r#"{"secs":1}"#)
            .usage(400, 100),
        Reply::answer("worked 1 s")
            .usage(400, 100)
            .delay(Duration::from_secs(10)),
    ]
}

/// The same at a limit no turn can foresee (review: models that
/// misbehave): a child whose last answer brings its tokens to exactly its
/// budget, a message sent during that call — the answer is final, yet the
/// turn went on "to read it", and the budget ended it there: the answer
/// became a partial ("stopped by the token budget") and no call read the
/// message. The answer stands; the message is kept after its end.
#[tokio::test(start_paused = true)]
async fn a_message_during_a_call_that_spends_the_budget_leaves_the_answer_final() {
    let model = told_during_its_second_answer(spending_its_budget());
    let (thread, sent) = told_within_its_budget(model).await;
    assert_eq!(json(&sent)["status"], "running", "{sent}");
    let child = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(child.status, SubAgentStatus::Done, "{child:#?}");
    assert_eq!(child.result.as_deref(), Some("worked 1 s"), "{child:#?}");
    let conversation = thread.hub().conversation(&AgentId::new("agent_1")).unwrap();
    let last = conversation.last().unwrap();
    assert!(
        last.role == Role::User && last.content.ends_with("one more thing"),
        "{conversation:#?}"
    );
    thread.close_and_wait().await;
}

/// Stopped midway: a message sent to a queued child is kept for its start
/// ("queued"); interrupted before it started, the child ended with the
/// message only in the hub's memory of it, dropped with it — the run a
/// later message resumed read the task and that later message, not the
/// one the requester was told was queued. It is in the run's conversation.
#[tokio::test(start_paused = true)]
async fn a_message_to_a_queued_child_interrupted_before_it_starts_is_kept() {
    let (model, seen) = spy(
        "model",
        second_queued_then(&[
            UseAgentCall::interrupt("agent_2"),
            UseAgentCall::send("agent_2", "go on"),
        ]),
    );
    let (thread, mut events) = thread_with(DelegationBuilder::new(model).max_live(1)).await;
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let outputs = results_of(&log, "use_agent");
    assert_eq!(json(&outputs[2].0)["status"], "queued", "{outputs:?}");
    assert_eq!(json(&outputs[4].0)["id"], "agent_3", "{outputs:?}");
    run_for(&mut events, &mut log, 120).await;
    check_log(&log, true);
    let second = requests_of(&seen.lock().unwrap(), "Second");
    assert_eq!(
        user_messages(&second[0]),
        [
            "work 10 s".to_owned(),
            format!("{STEER}use the new data"),
            format!("{STEER}go on")
        ]
    );
}

/// Closes the thread, or stops all its children as a switch does, at a
/// child's first step once armed (the test arms it as it sends the turn
/// that cuts the child: the child's answer with its call, a step too,
/// came before).
struct AtArmedStep {
    thread: Arc<std::sync::OnceLock<ThreadHandle>>,
    /// This child's steps only (any child's: `None`).
    of: Option<&'static str>,
    switch: bool,
    armed: std::sync::atomic::AtomicBool,
    /// The child's steps before it was armed (its answer with its call:
    /// one; the armed step is then the cut's).
    before_arm: std::sync::atomic::AtomicUsize,
    done: std::sync::atomic::AtomicBool,
    /// The switch's count of children it stopped.
    switched: Arc<std::sync::Mutex<Option<tokio::task::JoinHandle<usize>>>>,
}

impl subagents::actors::hub::HubObserver for AtArmedStep {
    fn finished(&self, _envelope: &subagents::messages::Envelope) {}

    fn stepped(&self, id: &AgentId) {
        if self.of.is_some_and(|of| id.as_str() != of) {
            return;
        }
        if !self.armed.load(std::sync::atomic::Ordering::SeqCst) {
            self.before_arm
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            return;
        }
        if self.done.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let Some(thread) = self.thread.get().cloned() else {
            return;
        };
        if self.switch {
            // What a switch sends the hub (the thread's `SwitchAway`
            // would reach it a turn later, after the child's end).
            let (tx, rx) = tokio::sync::oneshot::channel();
            thread.hub().stop_all_replying(Some(tx.into())).unwrap();
            let task = tokio::spawn(async move { rx.await.unwrap() });
            *self.switched.lock().unwrap() = Some(task);
        } else {
            thread.close();
        }
    }
}

/// Once a child is in its sleep (its answer's step taken), arms the
/// observer and sends the turn that cuts the child, for 120 s: the
/// observer fired once armed, at the cut, the answer's step before it.
async fn cut_it_at_its_step(
    observer: &AtArmedStep,
    thread: &ThreadHandle,
    events: &mut EventStream,
    log: &mut Vec<AgentEvent>,
) {
    use std::sync::atomic::Ordering::SeqCst;
    let sleeping = |mut e: &AgentEvent| {
        while let AgentEvent::Child(_, inner) = e {
            e = inner;
        }
        matches!(e, AgentEvent::ToolStarted(s) if s.name == "sleep")
    };
    if !log.iter().any(sleeping) {
        until(events, log, sleeping).await;
    }
    observer.armed.store(true, SeqCst);
    thread.send_user("cut it").unwrap();
    run_for(events, log, 120).await;
    assert_eq!(observer.before_arm.load(SeqCst), 1);
    assert!(observer.done.load(SeqCst), "fired");
}

/// Same instant: an interrupt under way (the hub told the child to stop;
/// its end not read yet), then a close or a stop of all (a switch's) —
/// both stops, and "a
/// stop that comes while an interrupt is under way wins". Only the
/// one-child stop cleared the interrupt, so the child ended `interrupted`
/// (kept so in the store), and a later message resumed a child the host
/// had stopped. Fired at the interrupted call's answer, in the child's
/// close.
#[tokio::test(start_paused = true)]
async fn a_close_or_switch_during_an_interrupt_ends_the_child_stopped() {
    for switch in [false, true] {
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&work_call("Worker", 60, false)),
            Reply::answer("Started."),
            Reply::new().use_agent(&UseAgentCall::interrupt("agent_1")),
            Reply::answer("Interrupted."),
        ])
        .with_script("Worker", worker(60));
        let cell = Arc::new(std::sync::OnceLock::new());
        let observer = Arc::new(AtArmedStep {
            thread: cell.clone(),
            of: None,
            switch,
            armed: Default::default(),
            before_arm: Default::default(),
            done: Default::default(),
            switched: Default::default(),
        });
        let switched = observer.switched.clone();
        let (thread, mut events) =
            thread_with(DelegationBuilder::new(model.shared()).observer(observer.clone())).await;
        let _ = cell.set(thread.clone());
        thread.send_user("start").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        cut_it_at_its_step(&observer, &thread, &mut events, &mut log).await;
        let (_, by_id) = check_log(&log, true);
        let task = switched.lock().unwrap().take();
        if let Some(task) = task {
            assert_eq!(task.await.unwrap(), 1, "the switch found the child ending");
        }
        assert_eq!(
            by_id[&AgentId::new("agent_1")].terminal().map(|(_, s)| s),
            Some(SubAgentStatus::Stopped),
            "switch: {switch}"
        );
        // The interrupt's own answer, when it came: not "it had already
        // ended; action result reads its answer" (there is none).
        let answers = results_of(&log, "use_agent");
        if let Some((interrupt, _)) = answers.get(1).filter(|(o, _)| o.contains("\"status\"")) {
            assert!(
                !interrupt.contains("already ended"),
                "switch: {switch}: {interrupt}"
            );
        }
    }
}

/// Same instant, one level down: an interrupted child that has a child of
/// its own waits for it to stop (its ending kept) — a close or a switch
/// then (both stops) cleared the interrupt but not the ending kept, so the
/// child still ended `interrupted`, and a later message resumed a child
/// the host had stopped. Fired at the grandchild's cut step, inside its
/// stop.
#[tokio::test(start_paused = true)]
async fn a_stop_while_an_interrupted_child_waits_for_its_own_ends_it_stopped() {
    for switch in [false, true] {
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&work_call("Worker A", 60, false)),
            Reply::answer("Started."),
            Reply::new().use_agent(&UseAgentCall::interrupt("agent_1")),
            Reply::answer("Interrupted."),
        ])
        .with_script(
            "Worker A",
            vec![
                Reply::new().use_agent(&work_call("Worker B", 60, false)),
                Reply::new().tool_call("sleep", r#"{"secs":60}"#),
                Reply::answer("A done"),
            ],
        )
        .with_script("Worker B", worker(60));
        let cell = Arc::new(std::sync::OnceLock::new());
        let observer = Arc::new(AtArmedStep {
            thread: cell.clone(),
            of: Some("agent_2"),
            switch,
            armed: Default::default(),
            before_arm: Default::default(),
            done: Default::default(),
            switched: Default::default(),
        });
        let (thread, mut events) = thread_with(
            DelegationBuilder::new(model.shared())
                .max_depth(2)
                .observer(observer.clone()),
        )
        .await;
        let _ = cell.set(thread.clone());
        thread.send_user("start").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        run_for(&mut events, &mut log, 1).await;
        cut_it_at_its_step(&observer, &thread, &mut events, &mut log).await;
        let (_, by_id) = check_log(&log, true);
        assert_eq!(
            thread
                .hub()
                .status(&AgentId::new("agent_2"))
                .map(|e| e.status),
            Some(SubAgentStatus::Stopped),
            "switch: {switch}: the grandchild ran"
        );
        assert_eq!(
            by_id[&AgentId::new("agent_1")].terminal().map(|(_, s)| s),
            Some(SubAgentStatus::Stopped),
            "switch: {switch}"
        );
        // The switch's count: `agent_1`, its ending kept interrupted, made
        // stopped by it, counts; `agent_2`, its stop under way (the
        // interrupt's), does not.
        let task = observer.switched.lock().unwrap().take();
        assert_eq!(task.is_some(), switch, "the switch was sent");
        if let Some(task) = task {
            assert_eq!(task.await.unwrap(), 1);
        }
    }
}

/// Stops `agent_1` by name at `agent_2`'s step at its cut (its second:
/// its answer with its call is the first), and keeps the stop's answer.
struct StopAtCutStep {
    thread: Arc<std::sync::OnceLock<ThreadHandle>>,
    steps: std::sync::atomic::AtomicUsize,
    answer: std::sync::Mutex<Option<tokio::task::JoinHandle<SubAgentStatus>>>,
}

impl subagents::actors::hub::HubObserver for StopAtCutStep {
    fn finished(&self, _envelope: &subagents::messages::Envelope) {}

    fn stepped(&self, id: &AgentId) {
        let mut answer = self.answer.lock().unwrap();
        if id.as_str() != "agent_2"
            || self.steps.fetch_add(1, std::sync::atomic::Ordering::SeqCst) != 1
        {
            return;
        }
        let Some(thread) = self.thread.get() else {
            return;
        };
        let stop = thread.hub().stop(&AgentId::new("agent_1"));
        *answer = Some(tokio::spawn(async move { stop.await.unwrap() }));
    }
}

/// Same instant: a stop by name that reaches a child whose turn is over
/// (its answer given, its own child still stopping) does not stop it — it
/// ends `done` all the same. "A stop cancels it for good", and the model's
/// `use_agent stop` said `"cancelled": true`, but the stop answered `done`
/// with nothing cancelled, and a later message resumed the child the host
/// had stopped.
#[tokio::test(start_paused = true)]
async fn a_stop_as_a_childs_turn_ends_cancels_it_all_the_same() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker A", 60, false)),
        Reply::answer("Started."),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "go on")),
        Reply::answer("Told it."),
    ])
    .with_script(
        "Worker A",
        vec![
            Reply::new().use_agent(&work_call("Worker B", 60, false)),
            Reply::answer("A done"),
        ],
    )
    .with_script("Worker B", worker(60));
    let cell = Arc::new(std::sync::OnceLock::new());
    let observer = Arc::new(StopAtCutStep {
        thread: cell.clone(),
        steps: Default::default(),
        answer: Default::default(),
    });
    let (thread, mut events) = thread_with(
        DelegationBuilder::new(model.shared())
            .max_depth(2)
            .observer(observer.clone()),
    )
    .await;
    let _ = cell.set(thread.clone());
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    // Its result wakes the parent (a cancel keeps the wake), whose wake
    // turn sends it a message.
    run_for(&mut events, &mut log, 120).await;
    let stop = observer
        .answer
        .lock()
        .unwrap()
        .take()
        .expect("the stop was sent");
    assert_eq!(
        stop.await.unwrap(),
        SubAgentStatus::Done,
        "its turn was over"
    );
    let agent_1 = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert!(agent_1.cancelled, "{agent_1:?}");
    check_log(&log, true);
    let answers = results_of(&log, "use_agent");
    let (send, _) = answers.last().unwrap();
    assert!(send.contains("was stopped"), "{send}");
    assert!(
        !log.iter()
            .any(|e| matches!(e, AgentEvent::ChildStarted(info) if info.id.as_str() == "agent_3")),
        "resumed after its stop"
    );
}

/// Same instant, a limit the turn knows (review: steering against
/// limits): a child's answer brings its tokens to exactly its budget and
/// asks for a 10 s call; a message sent during that call was taken
/// (`running`: "it reads your message at its next model call") — but no
/// next call can come, the budget ends the turn at the loop's top, and
/// the message was kept after the end, read by no run. Past the budget
/// with calls to run, the turn takes no message, as in its last allowed
/// call: the send waits for the end, and a new run reads it.
#[tokio::test(start_paused = true)]
async fn a_message_during_the_calls_of_an_answer_that_spends_the_budget_is_read_by_a_new_run() {
    let worker = vec![
        Reply::new()
            .tool_call("sleep", r#"{"secs":1}"#)
            .usage(400, 100),
        Reply::new()
            .tool_call("sleep", r#"{"secs":10}"#)
            .usage(400, 100),
        Reply::answer("read it"),
        Reply::answer("read it"),
    ];
    let model = told_during_its_second_answer(worker);
    let (thread, sent) = told_within_its_budget(model).await;
    assert_ne!(json(&sent)["status"], "running", "{sent}");
    assert_eq!(json(&sent)["resumed_from"], "agent_1", "{sent}");
    let next = thread.hub().conversation(&AgentId::new("agent_2")).unwrap();
    assert!(
        next.iter()
            .any(|m| m.role == Role::User && m.content.ends_with("one more thing")),
        "{next:#?}"
    );
    thread.close_and_wait().await;
}
