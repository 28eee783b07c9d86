//! Surviving a restart (issue 16, point 3), with a real `kill -9`: a
//! process runs a thread whose children are mid-run (two in a tool, one
//! queued) on a store; it is killed; a new thread on the same store finds
//! each of them `interrupted` with its saved conversation, its parent gets
//! one wake listing them, and a message resumes one from its conversation.
//! Every child that ever started has a final envelope; none is lost or
//! stuck.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::store::{copy_dir, resumed_once, thread_on};
use common::*;
use subagents::actors::DelegationBuilder;
use subagents::actors::clock::SystemClock;
use subagents::messages::{AgentEvent, Role, SubAgentStatus};
use subagents::prelude::*;
use subagents::supervisor::store::EnvelopeStore;
use subagents::supervisor::{ThreadConfig, ThreadHandle};
use subagents_demo::Sleep;

const DIR_VAR: &str = "SUBAGENTS_RESTART_TEST_DIR";

fn worker(name: &str) -> UseAgentCall {
    UseAgentCall::run(format!("{name}\nYou work."), format!("{name}'s task"))
        .tools(["sleep"])
        .background()
}

fn open(dir: &str) -> (Arc<EnvelopeStore>, Vec<AgentId>) {
    let (store, report) = EnvelopeStore::open(dir, Arc::new(SystemClock)).unwrap();
    (Arc::new(store), report.interrupted)
}

/// The process to kill: three background children, at most two live —
/// each live one takes a quick step (its conversation is saved after it),
/// then sleeps an hour; the third waits in the queue. Prints `ready` once
/// all of that is on disk, then waits to be killed. Without its
/// environment variable it does nothing.
#[tokio::test]
#[ignore = "helper process for every_child_survives_a_kill_as_interrupted_and_resumes"]
async fn restart_helper_runs_children_until_killed() {
    let Ok(dir) = std::env::var(DIR_VAR) else {
        return;
    };
    let step_then_sleep = || {
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":0}"#),
            Reply::new().tool_call("sleep", r#"{"secs":3600}"#),
            Reply::answer("never reached"),
        ]
    };
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&worker("Alpha"))
            .use_agent(&worker("Beta"))
            .use_agent(&worker("Gamma")),
        Reply::answer("Started."),
    ])
    .with_script("Alpha", step_then_sleep())
    .with_script("Beta", step_then_sleep())
    .with_script("Gamma", step_then_sleep());
    let (store, _) = open(&dir);
    let config = ThreadConfig::new(
        DelegationBuilder::new(model.shared())
            .tools(ToolRegistry::new().with(Sleep))
            .max_live(2),
    )
    .store(store);
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    thread.send_user("start three").unwrap();
    let mut log = Vec::new();
    let mut long_sleeps = 0;
    while long_sleeps < 2 {
        let event = next_event(&mut events, &log).await.unwrap();
        if let AgentEvent::Child(_, inner) = &event
            && let AgentEvent::ToolStarted(call) = &**inner
            && call.arguments.contains("3600")
        {
            long_sleeps += 1;
        }
        log.push(event);
    }
    thread.flush_persistence().await.unwrap();
    println!("ready");
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

#[tokio::test]
async fn every_child_survives_a_kill_as_interrupted_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let dir_text = dir.to_str().unwrap().to_owned();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "restart_helper_runs_children_until_killed",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(DIR_VAR, &dir_text)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.ends_with("ready") {
                let _ = tx.send(());
            }
        }
    });
    let ready = rx.recv_timeout(Duration::from_secs(120));
    child.kill().unwrap(); // SIGKILL, only the process this test started
    child.wait().unwrap();
    ready.expect("the helper process never got its children running");

    // A new process's view: every child is interrupted, with what it had.
    let (store, interrupted) = open(&dir_text);
    let ids: Vec<String> = interrupted.iter().map(|i| i.to_string()).collect();
    assert_eq!(ids, ["agent_1", "agent_2", "agent_3"]);
    for id in &interrupted {
        let envelope = store.get(id).unwrap();
        assert_eq!(envelope.status, SubAgentStatus::Interrupted, "{id}");
        assert!(
            envelope
                .error
                .unwrap()
                .contains("process running it stopped")
        );
        let (request, conversation) = store.run(id).expect("its run was saved");
        assert!(request.input.ends_with("'s task"));
        if id.as_str() != "agent_3" {
            // Saved after its first step: the task, the call, its result.
            assert!(conversation.len() >= 3, "{id}: {conversation:?}");
            assert_eq!(conversation[2].content, "slept 0 s");
        }
    }

    // The new thread's parent is woken once, with the list; it resumes
    // Alpha, which goes on from its saved conversation.
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "go on, briefly")),
        Reply::answer("Alpha goes on."),
        Reply::answer("Alpha is done."),
    ])
    .with_script(
        "Alpha",
        vec![
            Reply::answer("unused"),
            Reply::answer("resumed and done"),
            Reply::answer("resumed and done"),
        ],
    );
    let (model, seen) = spy("model", model);
    let config = ThreadConfig::new(
        DelegationBuilder::new(model)
            .system_prompt("You are the parent.")
            .tools(ToolRegistry::new().with(Sleep)),
    )
    .store(store.clone());
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    let mut log = Vec::new();
    let wake = tokio::time::timeout(
        Duration::from_secs(60),
        until(&mut events, &mut log, is_wake),
    )
    .await
    .unwrap_or_else(|_| panic!("no restart wake"));
    let AgentEvent::Wake { line, .. } = wake else {
        unreachable!()
    };
    for listed in [
        r#"agent_1 "Alpha""#,
        r#"agent_2 "Beta""#,
        r#"agent_3 "Gamma""#,
    ] {
        assert!(line.contains(listed), "{listed} not in {line}");
    }
    until_result(&mut events, &mut log).await;
    let resumed = json(&results_of(&log, "use_agent")[0].0);
    assert_eq!(resumed["id"], "agent_4", "ids go on after the stored ones");
    assert_eq!(resumed["resumed_from"], "agent_1");
    until_wake(&mut events, &mut log, "agent_4").await;
    until_result(&mut events, &mut log).await;
    check_log(&log, true);
    let wakes = log
        .iter()
        .filter(|e| matches!(e, AgentEvent::Wake { line, .. } if line.contains("interrupted")))
        .count();
    assert_eq!(wakes, 1, "one wake lists them all");
    let alpha = requests_of_alpha(&seen.lock().unwrap());
    let first = &alpha[0].messages;
    assert_eq!(first[1].content, "Alpha's task");
    assert!(
        first
            .iter()
            .any(|m| m.role == Role::Tool && m.content == "slept 0 s")
    );
    assert!(first.last().unwrap().content.ends_with("go on, briefly"));
    thread.flush_persistence().await.unwrap();
    thread.close_and_wait().await;
    drop((thread, store));
    let (store, again) = open(&dir_text);
    assert!(again.is_empty(), "nothing left unfinished: {again:?}");
    for n in 1..=4 {
        let id = AgentId::new(format!("agent_{n}"));
        let envelope = store.get(&id).unwrap();
        assert!(envelope.status.is_terminal(), "{id} {:?}", envelope.status);
    }
    assert_eq!(
        store
            .get(&AgentId::new("agent_4"))
            .unwrap()
            .result
            .as_deref(),
        Some("resumed and done")
    );
    assert_eq!(
        store.get(&AgentId::new("agent_1")).unwrap().continued_as,
        Some(AgentId::new("agent_4"))
    );
}

fn requests_of_alpha(
    seen: &[subagents::messages::ModelRequest],
) -> Vec<subagents::messages::ModelRequest> {
    seen.iter()
        .filter(|r| r.messages[0].content.starts_with("Alpha"))
        .cloned()
        .collect()
}

/// Defect: a child still queued (or in its first model call) when the
/// process died had its run saved with an empty conversation, and a
/// message after the restart resumed it from that: the new run never read
/// its task. It now goes on from its task, as it would in the session.
#[tokio::test]
async fn a_child_interrupted_before_its_first_step_resumes_with_its_task() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let (store, _) = open(dir.to_str().unwrap());
    // Alpha holds the one slot (in a tool for an hour; the test runs in
    // real time, so it stays there); Beta queues.
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&worker("Alpha"))
            .use_agent(&worker("Beta")),
        Reply::answer("Started."),
    ])
    .with_script(
        "Alpha",
        vec![Reply::new().tool_call("sleep", r#"{"secs":3600}"#)],
    );
    let (thread, mut events) = thread_on(model.shared(), store, 1).await;
    thread.send_user("start two").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    thread.flush_persistence().await.unwrap();
    let copy = tmp.path().join("after-kill");
    copy_dir(&dir, &copy);
    thread.close_and_wait().await;

    let (store, interrupted) = open(copy.to_str().unwrap());
    assert_eq!(
        interrupted,
        [AgentId::new("agent_1"), AgentId::new("agent_2")]
    );
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::send("agent_2", "go on")),
        Reply::answer("Beta goes on."),
        Reply::answer("Beta is done."),
    ])
    .with_script("Beta", vec![Reply::answer("Beta done")]);
    let (model, seen) = spy("model", model);
    let (thread, mut events) = thread_on(model, store, 3).await;
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let resumed = json(&results_of(&log, "use_agent")[0].0);
    assert_eq!(resumed["resumed_from"], "agent_2", "{resumed}");
    until_wake(&mut events, &mut log, "agent_3").await;
    let beta: Vec<_> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.messages[0].content.starts_with("Beta"))
        .cloned()
        .collect();
    let first = &beta[0].messages;
    assert!(
        first.iter().any(|m| m.content == "Beta's task"),
        "the resumed run never read its task: {first:?}"
    );
    assert!(first.last().unwrap().content.ends_with("go on"));
    thread.close_and_wait().await;
}

/// Defect: after a restart, a message to a child that had already been
/// resumed in an earlier session (`agent_1` continued as `agent_2`) was
/// refused every time: the chain led to a run the new hub had not taken
/// from the store. It reaches the newest run, as in the session.
#[tokio::test]
async fn a_message_after_a_restart_reaches_the_newest_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let dir = dir.to_str().unwrap();
    let (store, _) = open(dir);
    let model = resumed_once();
    let (thread, mut events) = thread_on(model.shared(), store, 3).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until_wake(&mut events, &mut log, "agent_2").await;
    until_result(&mut events, &mut log).await;
    thread.flush_persistence().await.unwrap();
    thread.close_and_wait().await;
    drop(thread);

    let (store, interrupted) = open(dir);
    assert!(interrupted.is_empty(), "{interrupted:?}");
    assert_eq!(
        store.get(&AgentId::new("agent_1")).unwrap().continued_as,
        Some(AgentId::new("agent_2"))
    );
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "the third part")),
        Reply::answer("Resumed again."),
        Reply::answer("Noted again."),
    ])
    .with_script("Worker", vec![Reply::answer("third part done")]);
    let (model, seen) = spy("model", model);
    let (thread, mut events) = thread_on(model, store, 3).await;
    thread.send_user("more").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let (output, is_error) = &results_of(&log, "use_agent")[0];
    assert!(!is_error, "refused: {output}");
    let resumed = json(output);
    assert_eq!(resumed["id"], "agent_3", "{resumed}");
    // The output names the id asked for; the new run's start names the
    // run it goes on from.
    assert_eq!(resumed["resumed_from"], "agent_1", "{resumed}");
    let started = first_child_started(&log);
    assert_eq!(started.resumed_from, Some(AgentId::new("agent_2")));
    until_wake(&mut events, &mut log, "agent_3").await;
    let worker = seen
        .lock()
        .unwrap()
        .iter()
        .find(|r| r.messages[0].content.starts_with("Worker"))
        .cloned()
        .unwrap();
    let said: Vec<&str> = worker.messages.iter().map(|m| m.content.as_str()).collect();
    for earlier in ["the first part", "first part done", "second part done"] {
        assert!(
            said.iter().any(|m| m.contains(earlier)),
            "{earlier} not in {said:?}"
        );
    }
    thread.close_and_wait().await;
}

/// Closes a thread from inside the hub's finish of a child: the
/// supervisor's own end notice for it is then still in its mailbox when
/// the stop comes, as when a host closes a thread at that instant.
struct CloseOnFinish(Arc<std::sync::OnceLock<ThreadHandle>>);

impl subagents::actors::hub::HubObserver for CloseOnFinish {
    fn finished(&self, _envelope: &subagents::messages::Envelope) {
        if let Some(thread) = self.0.get() {
            thread.close();
        }
    }
}

/// Stopped midway: a thread closed at the instant its child ended. The
/// child's end notice was still in the supervisor's mailbox, which a stop
/// drops: its envelope was written from the hub's map, but its run file
/// kept the conversation of its last step, without its final answer — a
/// later `send` resumed it from there. The close writes every run whose
/// last write had not come.
#[tokio::test(start_paused = true)]
async fn a_thread_closed_as_its_child_ends_keeps_the_childs_final_conversation() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let (store, _) = open(dir.to_str().unwrap());
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&worker("Alpha")),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Alpha",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":1}"#),
            Reply::answer("alpha's final answer"),
        ],
    );
    let handle = Arc::new(std::sync::OnceLock::new());
    let config = ThreadConfig::new(
        DelegationBuilder::new(model.shared())
            .tools(ToolRegistry::new().with(Sleep))
            .observer(Arc::new(CloseOnFinish(handle.clone()))),
    )
    .store(store.clone());
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    let _ = handle.set(thread.clone());
    thread.send_user("go").unwrap();
    while events.recv().await.is_some() {}
    thread.actor().wait(None).await.ok();
    let envelope = store.get(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Done);
    let (_, conversation) = store
        .run(&AgentId::new("agent_1"))
        .expect("its run was saved");
    assert_eq!(
        conversation.last().map(|m| m.content.as_str()),
        Some("alpha's final answer"),
        "{conversation:?}"
    );
}
