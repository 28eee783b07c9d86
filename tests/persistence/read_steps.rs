//! A message a running child read is written as it is read: with the
//! answer before it, here and on another node.

use std::time::Duration;

use super::remote::a_thread_placing_with;
use super::*;

const STEERED: &str = "[message from the agent that started you]\nalso check X";

/// A parent that starts `Worker` in the background and, at its user's
/// second turn, sends it "also check X"; the worker's replies `worker`.
fn a_parent_that_tells(worker: Vec<Reply>) -> Arc<dyn subagents::actors::Model> {
    ScriptedModel::new(vec![
        starting_the_worker(),
        Reply::answer("Started."),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "also check X")),
        Reply::answer("Told it."),
    ])
    .with_script("Worker", worker)
    .shared()
}

fn a_child_read(e: &AgentEvent) -> bool {
    matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::Steered(_)))
}

/// The child's saved run, each message as `role: content`.
fn saved(store: &Arc<EnvelopeStore>) -> Vec<String> {
    let (_, conversation) = store.run(&AgentId::new("agent_1")).unwrap();
    conversation
        .iter()
        .map(|m| format!("{:?}: {}", m.role, m.content))
        .collect()
}

/// (Review of the last session's change.) An answer with no call that
/// goes on because a message waits (it reads it at its next call) was
/// written by no step — the answer's new step is only for one with calls:
/// a kill in the next call resumed without an answer the host had seen
/// streamed. Nor was a remote child's, read where its node read the
/// message. Written as it goes on, here and on another node alike.
#[tokio::test(start_paused = true)]
async fn an_answer_that_goes_on_to_read_a_message_is_written_before_the_next_call() {
    let mut both = Vec::new();
    for remote in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let model = a_parent_that_tells(vec![
            Reply::answer("a draft").delay(Duration::from_secs(10)),
            Reply::answer("done").delay(Duration::from_secs(3600)),
        ]);
        // Capacity 2: the parent's calls do not wait on the child's.
        let (thread, mut events, _node) = a_thread_placing_with(model, &store, remote, 2).await;
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        thread.send_user("tell it").unwrap();
        until_result(&mut events, &mut log).await;
        let sent = results_of(&log, "use_agent").pop().unwrap();
        assert_eq!(
            json(&sent.0)["status"],
            "running",
            "remote {remote}: {}",
            sent.0
        );
        until(&mut events, &mut log, a_child_read).await;
        thread.sync().await.unwrap();
        thread.flush_persistence().await.unwrap();
        let saved = saved(&store);
        let draft = saved.iter().position(|m| m == "Assistant: a draft");
        let read = saved.iter().position(|m| m == &format!("User: {STEERED}"));
        assert!(
            draft.is_some() && draft < read,
            "remote {remote}: the answer, then the message: {saved:?}"
        );
        both.push(saved);
        thread.close_and_wait().await;
    }
    assert_eq!(both[0], both[1], "local, then remote");
}

/// (Review: what is on disk.) A remote child's node can read a message
/// before its verdict leaves (the verdict goes from a task of its own):
/// the proxy folded the read into the conversation, and the verdict that
/// came after found it read and wrote nothing — the message was on no
/// disk until the node's next call or its end, and a kill in between lost
/// an instruction its parent was told was taken. The read is a step.
#[tokio::test(start_paused = true)]
async fn a_message_a_remote_child_read_before_its_verdict_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    // A nap shorter than the parent's wall clock: its send waits on the
    // verdict, which comes after the read, after the nap.
    let model = a_parent_that_tells(vec![
        Reply::new().tool_call("sleep", r#"{"secs":100}"#),
        Reply::answer("done").delay(Duration::from_secs(3600)),
    ]);
    let (thread, mut events, node) = a_thread_placing_with(model, &store, true, 2).await;
    node.verdict_after_read
        .store(true, std::sync::atomic::Ordering::SeqCst);
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ToolStarted(_)))
    })
    .await;
    thread.send_user("tell it").unwrap();
    until(&mut events, &mut log, a_child_read).await;
    until_result(&mut events, &mut log).await;
    let sent = results_of(&log, "use_agent").pop().unwrap();
    assert_eq!(json(&sent.0)["status"], "running", "{}", sent.0);
    thread.sync().await.unwrap();
    thread.flush_persistence().await.unwrap();
    let saved = saved(&store);
    assert_eq!(
        saved.last().map(String::as_str),
        Some(&*format!("User: {STEERED}")),
        "{saved:?}"
    );
    thread.close_and_wait().await;
}

/// Same instant, across nodes: a remote child's node read a message (its
/// `Steered` event came, folded into the run's conversation) and the run
/// ended here before the node's verdict on it came (its node lost). The
/// end refused every message still waiting for a verdict: the sender was
/// told "it had finished", sent again, and the run resumed from a
/// conversation that held the message already read it a second time. A
/// message its node read is taken: its sender hears `running`, as from a
/// local child that read it before its turn ended.
#[tokio::test(start_paused = true)]
async fn a_message_a_remote_child_read_is_taken_though_its_run_ends_before_the_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    let model = a_parent_that_tells(vec![
        Reply::new().tool_call("sleep", r#"{"secs":100}"#),
        Reply::answer("done").delay(Duration::from_secs(3600)),
        Reply::answer("resumed"),
    ]);
    let (thread, mut events, node) = a_thread_placing_with(model, &store, true, 2).await;
    for knob in [&node.verdict_after_read, &node.lose_verdict_after_read] {
        knob.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ToolStarted(_)))
    })
    .await;
    thread.send_user("tell it").unwrap();
    until(&mut events, &mut log, a_child_read).await;
    // Read there; its verdict is not here yet, and the node is lost.
    node.kill();
    until_result(&mut events, &mut log).await;
    let sent = results_of(&log, "use_agent").pop().unwrap();
    assert_eq!(json(&sent.0)["status"], "running", "{}", sent.0);
    thread.sync().await.unwrap();
    thread.flush_persistence().await.unwrap();
    let saved = saved(&store);
    let read = saved
        .iter()
        .filter(|m| **m == format!("User: {STEERED}"))
        .count();
    assert_eq!(read, 1, "{saved:?}");
    assert!(
        store.get(&AgentId::new("agent_2")).is_none(),
        "no second run: {log:#?}"
    );
    thread.close_and_wait().await;
}
