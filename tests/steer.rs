//! Steering (issue 16, point 1): `use_agent send` gives a running child a
//! message it reads at its next model call — never mid-call, in order; a
//! queued child reads it after its task; a finished child refuses it. A
//! message racing the child's final answer is read or refused, never lost
//! (`actors/src/agent/turn_state.rs::a_message_racing_completion_is_read_or_refused`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::Value;
use subagents::actors::DelegationBuilder;
use subagents::messages::{AgentEvent, ModelRequest, Role};
use subagents::prelude::*;
use subagents::supervisor::ThreadHandle;
use subagents_demo::Sleep;

const STEER: &str = "[message from the agent that started you]\n";

async fn thread_with(builder: DelegationBuilder) -> (ThreadHandle, EventStream) {
    ThreadHandle::spawn(
        builder
            .system_prompt("You are the parent.")
            .tools(ToolRegistry::new().with(Sleep)),
        None,
    )
    .await
    .unwrap()
}

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
    until(&mut events, &mut log, |e| matches!(e, AgentEvent::Wake(_))).await;
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

/// A queued child reads a message after its task, at its first model
/// call.
#[tokio::test(start_paused = true)]
async fn a_queued_child_reads_a_message_after_its_task() {
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&work_call("First", 10, false))
            .use_agent(&work_call("Second", 10, false))
            .use_agent(&UseAgentCall::send("agent_2", "use the new data")),
        Reply::answer("Started."),
        Reply::answer("Noted."),
        Reply::answer("Noted."),
    ])
    .with_script("First", worker(10))
    .with_script("Second", worker(10));
    let (model, seen) = spy("model", model);
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

/// A finished child refuses a message, saying so; an unknown id is named.
#[tokio::test(start_paused = true)]
async fn a_finished_or_unknown_child_refuses_a_message() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 1, true)),
        Reply::new()
            .use_agent(&UseAgentCall::send("agent_1", "one more thing"))
            .use_agent(&UseAgentCall::send("agent_7", "hello")),
        Reply::answer("Done."),
    ])
    .with_script("Worker", worker(1));
    let (thread, mut events) = thread_with(DelegationBuilder::new(model.shared())).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    check_log(&log, true);
    let outputs = results_of(&log, "use_agent");
    assert_eq!(
        outputs[1],
        (
            "the tool `use_agent` failed: the sub-agent `agent_1` has finished and reads no more messages; read its answer with action result".to_owned(),
            true
        )
    );
    assert!(outputs[2].1);
    assert!(
        outputs[2]
            .0
            .contains("there is no sub-agent with id `agent_7`"),
        "{}",
        outputs[2].0
    );
}

/// A message sent as the child gives its final answer is either read (it
/// answers again, having read it) or refused as finished, never taken and
/// lost: the parent's send and the child's last answer land 15 ms apart
/// either way, and at the same virtual instant (a gate of 2, so neither
/// model call waits behind the other). The exact-instant race under the
/// turn's lock is `a_message_racing_completion_is_read_or_refused`.
#[tokio::test(start_paused = true)]
async fn a_message_racing_the_final_answer_is_read_or_refused_never_lost() {
    let (mut read, mut refused) = (0, 0);
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
        let worker = requests_of(&seen.lock().unwrap(), "Worker");
        let saw_it = worker
            .iter()
            .any(|r| r.messages.iter().any(|m| m.content.starts_with(STEER)));
        if is_error {
            assert!(sent.contains("has finished"), "{sent}");
            assert!(!saw_it, "refused, yet read");
            refused += 1;
        } else {
            assert!(saw_it, "taken ({sent}), never read: {log:#?}");
            read += 1;
        }
        thread.close_and_wait().await;
    }
    eprintln!("read {read}, refused {refused}");
    assert!(
        read > 0 && refused > 0,
        "both orders: read {read}, refused {refused}"
    );
}
