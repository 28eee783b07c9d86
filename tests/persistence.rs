//! The store at the edges: what is on disk at every instant a process
//! could die (a copy of the directory is what a `kill -9` then leaves), a
//! store shared or misused, and writes that fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::store::{copy_dir, resumed_once, thread_on};
use common::*;
use subagents::actors::DelegationBuilder;
use subagents::actors::clock::SystemClock;
use subagents::prelude::*;
use subagents::supervisor::store::EnvelopeStore;
use subagents::supervisor::{ThreadConfig, ThreadHandle};

fn open(dir: &std::path::Path) -> Arc<EnvelopeStore> {
    Arc::new(EnvelopeStore::open(dir, Arc::new(SystemClock)).unwrap().0)
}

/// Stopped midway: a child resumed by a message (`agent_1` continued as
/// `agent_2`) had the link written only when its thread closed, so a
/// process killed before that left `agent_1` on disk with no successor: a
/// message after the restart resumed `agent_1`'s own run and forked the
/// chain, losing `agent_2`'s work. The link is on disk with the resume.
#[tokio::test]
async fn a_resume_is_on_disk_before_the_thread_closes() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    let model = resumed_once();
    let (thread, mut events) = thread_on(model.shared(), open(&live), 3).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until_wake(&mut events, &mut log, "agent_2").await;
    until_result(&mut events, &mut log).await;
    thread.flush_persistence().await.unwrap();
    let killed = tmp.path().join("killed");
    copy_dir(&live, &killed);
    let store = open(&killed);
    assert_eq!(
        store.get(&AgentId::new("agent_1")).unwrap().continued_as,
        Some(AgentId::new("agent_2")),
        "agent_1 on disk: {:?}",
        store.get(&AgentId::new("agent_1"))
    );
    // The change is not a second finish: one wake, for the resumed run.
    assert_eq!(woken_children(&log), vec!["agent_2".to_owned()]);
    thread.close_and_wait().await;
}

/// The link written at the resume tells the thread of the old run again;
/// after a restart that run is one the thread never saw finish (a
/// background child of the earlier session, its wake long delivered), so
/// the notice must not wake the parent for it a second time: only the new
/// run wakes it.
#[tokio::test]
async fn resuming_an_earlier_sessions_child_wakes_the_parent_once_for_the_new_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&UseAgentCall::run("Worker\nYou work.", "the first part").background()),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker", vec![Reply::answer("first part done")]);
    let (thread, mut events) = thread_on(model.shared(), open(&dir), 3).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_wake(&mut events, &mut log, "agent_1").await;
    until_result(&mut events, &mut log).await;
    thread.flush_persistence().await.unwrap();
    thread.close_and_wait().await;
    drop(thread);

    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "the second part")),
        Reply::answer("Resumed."),
        Reply::answer("Noted again."),
    ])
    .with_script("Worker", vec![Reply::answer("second part done")]);
    let (thread, mut events) = thread_on(model.shared(), open(&dir), 3).await;
    thread.send_user("more").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until_wake(&mut events, &mut log, "agent_2").await;
    until_result(&mut events, &mut log).await;
    thread.flush_persistence().await.unwrap();
    drain(&mut events, &mut log);
    assert_eq!(woken_children(&log), vec!["agent_2".to_owned()], "{log:#?}");
    thread.close_and_wait().await;
}

/// Stopped midway, by the retention: a child still running had its
/// envelope and run pruned once the time since it was asked passed the
/// retention (a later save pruned it), so a crash then left no trace of
/// it at all. A child of this session that has not finished is never
/// pruned; it ages from its end.
#[tokio::test(start_paused = true)]
async fn a_running_child_is_never_pruned() {
    use subagents::actors::clock::ManualClock;
    use subagents_demo::Sleep;
    const HOUR: u64 = 3_600_000;
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let store = Arc::new(
        EnvelopeStore::open_with_retention(
            tmp.path(),
            clock.clone(),
            std::time::Duration::from_millis(HOUR),
        )
        .unwrap()
        .0,
    );
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Long", 3 * 3600, false)),
        Reply::answer("Started."),
        Reply::new().use_agent(&work_call("Short", 1, false)),
        Reply::answer("Started another."),
        Reply::answer("Noted."),
    ])
    .with_script("Long\n", worker(3 * 3600))
    .with_script("Short\n", worker(1));
    let config = ThreadConfig::new(
        DelegationBuilder::new(model.shared())
            .system_prompt("You are the parent.")
            .tools(ToolRegistry::new().with(Sleep))
            .clock(clock.clone()),
    )
    .store(store.clone());
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    thread.send_user("start the long one").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    clock.advance(2 * HOUR);
    thread.send_user("start the short one").unwrap();
    until_wake(&mut events, &mut log, "agent_2").await;
    thread.flush_persistence().await.unwrap();
    let long = AgentId::new("agent_1");
    assert!(
        store.get(&long).is_some(),
        "agent_1 was pruned while running"
    );
    assert!(tmp.path().join("agent_1.json").exists());
    assert!(store.run(&long).is_some(), "its run was pruned");
    thread.close_and_wait().await;
}

/// A write that failed was never tried again — not even at close, which
/// skipped every envelope the store's memory already held as it was (a
/// failed save is still kept in memory). After a disk that came back, the
/// child was missing from the next session. The close retries every
/// write whose last attempt failed.
#[tokio::test(start_paused = true)]
async fn a_write_that_failed_is_tried_again_at_close() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 10, false)),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker\n", worker(10));
    let (thread, mut events) = thread_on(model.shared(), open(&dir), 3).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    thread.flush_persistence().await.unwrap();
    // The disk goes away while the child works (a file where the
    // directory was: every write fails), and comes back.
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::write(&dir, b"not a directory").unwrap();
    until_wake(&mut events, &mut log, "agent_1").await;
    thread.flush_persistence().await.unwrap();
    let errors = thread.persist_errors().await.unwrap();
    assert!(
        !errors.is_empty(),
        "the finished envelope could not be written"
    );
    std::fs::remove_file(&dir).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    thread.close_and_wait().await;
    drop(thread);

    let (store, _) = EnvelopeStore::open(&dir, Arc::new(SystemClock)).unwrap();
    let envelope = store.get(&AgentId::new("agent_1"));
    assert_eq!(
        envelope.map(|e| e.status),
        Some(subagents::messages::SubAgentStatus::Done),
        "agent_1 after the close"
    );
}

/// Foreign input on disk: a child interrupted by a crash whose run file is
/// missing (or not a run) was "no sub-agent with id `agent_1`" to a
/// message, while `status` and `result` answered for it. The message now
/// says it cannot resume, and why.
#[tokio::test(start_paused = true)]
async fn a_child_whose_run_was_lost_is_not_resumable_rather_than_unknown() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 3600, false)),
        Reply::answer("Started."),
    ])
    .with_script("Worker\n", worker(3600));
    let (thread, mut events) = thread_on(model.shared(), open(&live), 3).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    thread.flush_persistence().await.unwrap();
    let killed = tmp.path().join("killed");
    copy_dir(&live, &killed);
    thread.close_and_wait().await;
    std::fs::remove_file(killed.join("runs").join("agent_1.json")).unwrap();

    // The restart wake lists it; the parent's model sends it a message.
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "go on")),
        Reply::answer("Noted."),
    ]);
    let (thread, mut events) = thread_on(model.shared(), open(&killed), 3).await;
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let (said, refused) = &results_of(&log, "use_agent")[0];
    assert!(*refused, "{said}");
    assert!(said.contains("cannot resume"), "{said}");
    assert!(
        thread
            .envelope(&AgentId::new("agent_1"))
            .await
            .unwrap()
            .is_some()
    );
    thread.close_and_wait().await;
}
