//! The store at the edges: what is on disk at every instant a process
//! could die (a copy of the directory is what a `kill -9` then leaves), a
//! store shared or misused, and writes that fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod claims;
mod clocks;
#[path = "../common/mod.rs"]
mod common;
mod copies;
mod deleted;
mod hub_death;
mod in_flight;
mod isolation;
mod killed;
mod read_steps;
mod remote;
mod reopened;
mod restart_list;
mod restore;
mod runtime_drop;
mod shared;
mod stale_copies;
mod unwritten;

use std::sync::Arc;

use common::store::{copy_dir, resumed_once, thread_on};
use common::*;
use subagents::actors::DelegationBuilder;
use subagents::actors::clock::SystemClock;
use subagents::prelude::*;
use subagents::supervisor::store::EnvelopeStore;
use subagents::supervisor::{ThreadConfig, ThreadHandle};

/// The parent's answer that starts `Worker` in the background, with
/// `sleep` (the scripted parents of the step and kill tests).
fn starting_the_worker() -> Reply {
    Reply::new().use_agent(
        &UseAgentCall::run("Worker\nYou work.", "work")
            .tools(["sleep"])
            .background(),
    )
}

fn open(dir: &std::path::Path) -> Arc<EnvelopeStore> {
    Arc::new(EnvelopeStore::open(dir, Arc::new(SystemClock)).unwrap().0)
}

/// A session on `dir` whose background child `agent_1` finished (and
/// woke its parent) before the thread closed: after it, `agent_1` is a
/// child of an earlier session (it used 100 tokens there).
async fn an_earlier_session_with_one_finished_child(dir: &std::path::Path) {
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&UseAgentCall::run("Worker\nYou work.", "the first part").background()),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Worker",
        vec![Reply::answer("first part done").usage(100, 0)],
    );
    let (thread, mut events) = thread_on(model.shared(), open(dir), 3).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_wake(&mut events, &mut log, "agent_1").await;
    until_result(&mut events, &mut log).await;
    thread.flush_persistence().await.unwrap();
    thread.close_and_wait().await;
}

/// [`an_earlier_session_with_one_finished_child`], then a second session
/// that resumes `agent_1` as `agent_2`, which finishes.
async fn resumed_in_a_second_session(dir: &std::path::Path) {
    an_earlier_session_with_one_finished_child(dir).await;
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "one more")),
        Reply::answer("Sent."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker", vec![Reply::answer("one more done"); 3]);
    let (thread, mut events) = thread_on(model.shared(), open(dir), 3).await;
    thread.send_user("send it more").unwrap();
    let mut log = Vec::new();
    until_wake(&mut events, &mut log, "agent_2").await;
    until_result(&mut events, &mut log).await;
    thread.close_and_wait().await;
}

/// A session on `dir` whose background child `agent_1` ran on the model
/// `cheap` (registered there, not after it), finished and woke its
/// parent before the thread closed.
async fn an_earlier_session_on_a_model_since_gone(dir: &std::path::Path) {
    use subagents::actors::registry::ModelRegistry;
    let worker = ScriptedModel::new(vec![]).with_script(
        "Worker",
        vec![Reply::answer("first part done"), Reply::answer("more")],
    );
    let mut models = ModelRegistry::new();
    models
        .register("local", "cheap", worker.shared(), 1)
        .await
        .unwrap();
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run("Worker\nYou work.", "the first part")
                .model("cheap")
                .background(),
        ),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ]);
    let config =
        ThreadConfig::new(DelegationBuilder::new(model.shared()).models(models)).store(open(dir));
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_wake(&mut events, &mut log, "agent_1").await;
    until_result(&mut events, &mut log).await;
    thread.close_and_wait().await;
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
    an_earlier_session_with_one_finished_child(&dir).await;

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

/// An hour.
const HOUR: u64 = 3_600_000;

/// A store on `dir` keeping envelopes an hour by a manual clock, and a
/// thread on it whose parent runs `model` with the demo's `sleep`.
async fn an_hours_retention(
    dir: &std::path::Path,
    model: ScriptedModel,
) -> (
    Arc<subagents::actors::clock::ManualClock>,
    Arc<EnvelopeStore>,
    ThreadHandle,
    EventStream,
) {
    let clock = Arc::new(subagents::actors::clock::ManualClock::new(
        1_700_000_000_000,
    ));
    let retention = std::time::Duration::from_millis(HOUR);
    let store = EnvelopeStore::open_with_retention(dir, clock.clone(), retention);
    let store = Arc::new(store.unwrap().0);
    let config = ThreadConfig::new(
        DelegationBuilder::new(model.shared())
            .system_prompt("You are the parent.")
            .tools(ToolRegistry::new().with(subagents_demo::Sleep))
            .clock(clock.clone()),
    )
    .store(store.clone());
    let (thread, events) = ThreadHandle::spawn(config, None).await.unwrap();
    (clock, store, thread, events)
}

/// Stopped midway, by the retention: a child still running had its
/// envelope and run pruned once the time since it was asked passed the
/// retention (a later save pruned it), so a crash then left no trace of
/// it at all. A child of this session that has not finished is never
/// pruned; it ages from its end.
#[tokio::test(start_paused = true)]
async fn a_running_child_is_never_pruned() {
    let tmp = tempfile::tempdir().unwrap();
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Long", 3 * 3600, false)),
        Reply::answer("Started."),
        Reply::new().use_agent(&work_call("Short", 1, false)),
        Reply::answer("Started another."),
        Reply::answer("Noted."),
    ])
    .with_script("Long\n", worker(3 * 3600))
    .with_script("Short\n", worker(1));
    let (clock, store, thread, mut events) = an_hours_retention(tmp.path(), model).await;
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
    a_file_in_the_stores_place(&dir);
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

/// A parent that starts `Worker`, working 600 s, in the background.
fn a_worker_running_600_s() -> ScriptedModel {
    ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 600, false)),
        Reply::answer("Started."),
    ])
    .with_script("Worker\n", worker(600))
}

/// Tab `id` of `threads` on `store` (its parent with `sleep`), its first
/// turn ("go") answered and its writes flushed.
async fn a_tab_that_went(
    threads: &mut subagents::supervisor::Threads,
    id: &str,
    model: ScriptedModel,
    store: Arc<EnvelopeStore>,
) -> subagents::messages::ThreadId {
    let id = subagents::messages::ThreadId::new(id);
    let config = ThreadConfig::new(
        DelegationBuilder::new(model.shared())
            .tools(ToolRegistry::new().with(subagents_demo::Sleep)),
    )
    .store(store);
    let mut events = threads.open(id.clone(), config).await.unwrap();
    threads.get(&id).unwrap().send_user("go").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    threads.get(&id).unwrap().flush_persistence().await.unwrap();
    id
}

/// The store's directory gone, a file in its place: every write fails.
fn a_file_in_the_stores_place(dir: &std::path::Path) {
    std::fs::remove_dir_all(dir).unwrap();
    std::fs::write(dir, b"not a directory").unwrap();
}

/// Stopped midway (a disk gone at the close): a child still running when
/// the thread closes on a full disk ends `stopped`, and its final envelope
/// and conversation are written by the close — a write whose failure was
/// only logged: `persist_errors` answered `Closed` once the thread had
/// gone, and a host that closed and exited lost them untold. The close's
/// failed writes are listed, after the close too.
#[tokio::test(start_paused = true)]
async fn a_close_whose_writes_fail_says_so_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let model = a_worker_running_600_s();
    let (thread, mut events) = thread_on(model.shared(), open(&dir), 3).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    thread.flush_persistence().await.unwrap();
    assert_eq!(thread.persist_errors().await, Ok(Vec::new()));
    a_file_in_the_stores_place(&dir);
    thread.close_and_wait().await;
    let errors = thread
        .persist_errors()
        .await
        .expect("answered after the close");
    assert!(
        errors.iter().any(|e| e.contains("agent_1")),
        "the final envelope was not written: {errors:?}"
    );
}

/// The same through `Threads::delete` (review of the host's registry):
/// it returned `Ok(())` and took the only handle whose `persist_errors`
/// said what the close could not write — the children stayed `running`
/// on disk, unsaid. `delete` says so, naming the writes.
#[tokio::test]
async fn a_delete_whose_writes_fail_says_so() {
    use subagents::supervisor::{ThreadError, Threads};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let mut threads = Threads::new();
    let a = a_tab_that_went(&mut threads, "a", a_worker_running_600_s(), open(&dir)).await;
    a_file_in_the_stores_place(&dir);
    match threads.delete(&a).await {
        Err(ThreadError::NotSaved(errors)) => {
            assert!(errors.iter().any(|e| e.contains("agent_1")), "{errors:?}")
        }
        other => panic!("the failed writes were not said: {other:?}"),
    }
}

/// Repeated (review of this session's own change to what a close says): a
/// child's final writes failed while the thread ran (a disk gone) and
/// failed again at the close; the close's failure was the same sentence,
/// dropped as one already named, and `delete` — which said only what was
/// new since it began — answered `Ok` with the child `running` on disk.
/// A failure that comes again is said again.
#[tokio::test(start_paused = true)]
async fn a_delete_says_a_write_that_failed_before_and_fails_again() {
    use subagents::supervisor::{ThreadError, Threads};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 5, false)),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker\n", worker(5));
    let mut threads = Threads::new();
    let a = a_tab_that_went(&mut threads, "a", model, open(&dir)).await;
    a_file_in_the_stores_place(&dir);
    tokio::time::sleep(std::time::Duration::from_secs(10)).await;
    let thread = threads.get(&a).unwrap();
    thread.flush_persistence().await.unwrap();
    let said = thread.persist_errors().await.unwrap();
    assert!(said.iter().any(|e| e.contains("agent_1")), "{said:?}");
    match threads.delete(&a).await {
        Err(ThreadError::NotSaved(errors)) => {
            assert!(errors.iter().any(|e| e.contains("agent_1")), "{errors:?}")
        }
        other => panic!("the close's failed writes were not said: {other:?}"),
    }
}

/// Shared (review: a ractor host embedding threads, two threads on one
/// store): a close retries every failed write of the store — useful, the
/// disk may be back — and counted what still failed as its own: deleting
/// a thread whose own writes all went through said `NotSaved`, naming
/// the other thread's child. A close says only its own.
#[tokio::test]
async fn a_delete_says_only_its_own_threads_failed_writes() {
    use subagents::supervisor::{ThreadError, Threads};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let store = open(&dir);
    let mut threads = Threads::new();
    let (a, b) = (
        subagents::messages::ThreadId::new("a"),
        subagents::messages::ThreadId::new("b"),
    );
    let config_b = ThreadConfig::new(
        DelegationBuilder::new(a_worker_running_600_s().shared())
            .tools(ToolRegistry::new().with(subagents_demo::Sleep)),
    )
    .store(store.clone());
    let mut events_b = threads.open(b.clone(), config_b).await.unwrap();
    let model_a = ScriptedModel::new(vec![Reply::answer("Hi.")]);
    let config_a = ThreadConfig::new(DelegationBuilder::new(model_a.shared())).store(store.clone());
    let _events_a = threads.open(a.clone(), config_a).await.unwrap();
    threads.get(&b).unwrap().send_user("go").unwrap();
    until_result(&mut events_b, &mut Vec::new()).await;
    threads.get(&b).unwrap().flush_persistence().await.unwrap();
    a_file_in_the_stores_place(&dir);
    match threads.delete(&b).await {
        Err(ThreadError::NotSaved(errors)) => {
            assert!(errors.iter().any(|e| e.contains("agent_1")), "{errors:?}")
        }
        other => panic!("b's failed writes were not said: {other:?}"),
    }
    assert_eq!(
        threads.delete(&a).await,
        Ok(()),
        "a's close named b's writes"
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

/// Killed midway (review: children that outlive a process): a child's
/// end writes its envelope, then its run; a kill between the two renames
/// left a `done` envelope (its answer in `result`, its wake owed) beside
/// a run that stopped at its last tool result — a final answer with no
/// calls writes no step of its own. A message then resumed it from a
/// conversation without its own answer, and it did its task again. A
/// finished run's answer is put back where its turn would have kept it.
#[tokio::test(start_paused = true)]
async fn a_done_child_whose_last_run_write_was_lost_resumes_with_its_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 1, false)),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Worker\n",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":1}"#),
            Reply::answer("worked 1 s").delay(std::time::Duration::from_secs(10)),
        ],
    );
    let (thread, mut events) = thread_on(model.shared(), open(&live), 3).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ToolResult(_)))
    })
    .await;
    thread.flush_persistence().await.unwrap();
    let run = live.join("runs").join("agent_1.json");
    let before_the_answer = std::fs::read(&run).unwrap();
    assert!(
        !String::from_utf8_lossy(&before_the_answer).contains("worked 1 s"),
        "the run was read after the answer"
    );
    until_wake(&mut events, &mut log, "agent_1").await;
    until_result(&mut events, &mut log).await;
    thread.flush_persistence().await.unwrap();
    let killed = tmp.path().join("killed");
    copy_dir(&live, &killed);
    thread.close_and_wait().await;
    // What a kill between the envelope's rename and the run's leaves.
    std::fs::write(killed.join("runs").join("agent_1.json"), before_the_answer).unwrap();

    let (model, seen) = spy(
        "model",
        ScriptedModel::new(vec![
            Reply::new().use_agent(&UseAgentCall::send("agent_1", "shorten it")),
            Reply::answer("Sent."),
            Reply::answer("Noted."),
        ])
        .with_script("Worker\n", vec![Reply::answer("short")]),
    );
    let (thread, mut events) = thread_on(model, open(&killed), 3).await;
    thread.send_user("tell it").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    run_for(&mut events, &mut log, 10).await;
    let resumed = seen
        .lock()
        .unwrap()
        .iter()
        .find(|r| {
            r.messages.iter().any(|m| m.content.contains("shorten it"))
                && r.system_prompt().is_some_and(|p| p.starts_with("Worker"))
        })
        .cloned()
        .expect("the resumed run called its model");
    let roles: Vec<String> = resumed
        .messages
        .iter()
        .map(|m| format!("{:?}: {}", m.role, m.content))
        .collect();
    let answer = roles.iter().position(|m| m == "Assistant: worked 1 s");
    let message = roles.iter().position(|m| m.ends_with("shorten it"));
    assert!(
        answer.is_some() && answer < message,
        "its own answer, then the message: {roles:#?}"
    );
    thread.close_and_wait().await;
}

/// Foreign input on disk (review: children that outlive a process): a
/// chain `agent_1` → `agent_2` → `agent_3` whose middle run file was lost.
/// `status` and a stop followed the chain's links to `agent_3`, but a
/// message stopped at `agent_2` — the first run the book could not take —
/// and refused: "cannot resume", though the newest run was whole. A
/// message follows the links past a run it cannot take, as they do.
#[tokio::test(start_paused = true)]
async fn a_message_follows_a_chain_past_a_run_whose_file_was_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    resumed_in_a_second_session(&dir).await;
    let sending = || {
        ScriptedModel::new(vec![
            Reply::new().use_agent(&UseAgentCall::send("agent_1", "one more")),
            Reply::answer("Sent."),
            Reply::answer("Noted."),
        ])
        .with_script("Worker", vec![Reply::answer("one more done"); 3])
    };
    for newest in ["agent_3", "agent_4"] {
        let (thread, mut events) = thread_on(sending().shared(), open(&dir), 3).await;
        thread.send_user("send it more").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        let (said, refused) = results_of(&log, "use_agent").pop().unwrap();
        assert!(!refused, "{said}");
        assert_eq!(json(&said)["id"], newest, "{said}");
        until_wake(&mut events, &mut log, newest).await;
        until_result(&mut events, &mut log).await;
        thread.close_and_wait().await;
        std::fs::remove_file(dir.join("runs").join("agent_2.json")).ok();
    }
}

/// Waits until the thread has written `id`'s final envelope.
async fn until_on_disk_finished(thread: &ThreadHandle, store: &EnvelopeStore, id: &str) {
    let id = AgentId::new(id);
    while !store.get(&id).is_some_and(|e| e.status.is_terminal()) {
        thread.sync().await.unwrap();
        thread.flush_persistence().await.unwrap();
        tokio::task::yield_now().await;
    }
}

/// A thread on a store at `live` whose background children `agent_1`
/// (Alpha) and `agent_2` (Beta) finished while the user typed: both
/// wakes held, owed on disk. The thread, its store and its log.
async fn two_owed_wakes(
    live: &std::path::Path,
) -> (ThreadHandle, Arc<EnvelopeStore>, Vec<AgentEvent>) {
    let worker = |name: &str| UseAgentCall::run(format!("{name}\nYou work."), "go").background();
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&worker("Alpha"))
            .use_agent(&worker("Beta")),
        Reply::answer("Started."),
    ])
    .with_script("Alpha", vec![Reply::answer("alpha done")])
    .with_script("Beta", vec![Reply::answer("beta done")]);
    let store = open(live);
    let (thread, mut events) = thread_on(model.shared(), store.clone(), 3).await;
    thread.typing(true).unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until_on_disk_finished(&thread, &store, "agent_1").await;
    until_on_disk_finished(&thread, &store, "agent_2").await;
    (thread, store, log)
}

/// Stopped midway: background children that finished while their wakes
/// were held (the user typing) had only their envelopes on disk, so a
/// process killed before the wakes went out left the parent never told —
/// the reopened thread woke only for children the kill interrupted. An
/// owed wake is on disk with the finish: a restart delivers it, once; one
/// whose result a tool call claimed meanwhile is not delivered; wakes
/// dropped on purpose (off screen) are not owed.
#[tokio::test]
async fn a_wake_owed_when_the_process_died_is_delivered_after_the_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    let (thread, store, log) = two_owed_wakes(&live).await;
    let killed = tmp.path().join("killed");
    copy_dir(&live, &killed);
    thread.on_screen(false).unwrap();
    thread.flush_persistence().await.unwrap();
    let dropped = tmp.path().join("dropped");
    copy_dir(&live, &dropped);
    thread.close_and_wait().await;
    drop((thread, store));
    assert!(woken_children(&log).is_empty(), "{log:#?}");
    assert!(
        open(&dropped).owed_wakes().is_empty(),
        "dropped wakes are not owed"
    );

    // The restarted process: Alpha's wake goes out; its turn reads Beta's
    // result, so Beta's wake does not follow.
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::result("agent_2")),
        Reply::answer("Both noted."),
    ]);
    let (model, seen) = spy("model", model);
    let store = open(&killed);
    let (thread, mut events) = thread_on(model, store.clone(), 3).await;
    let mut log = Vec::new();
    thread.sync().await.unwrap(); // post_start, where wakes go out, has run
    drain(&mut events, &mut log);
    assert_eq!(
        woken_children(&log),
        ["agent_1"],
        "no wake after the restart: {log:#?}"
    );
    // The wake turn may have ended meanwhile (the scripted model is quick).
    if !log.iter().any(|e| matches!(e, AgentEvent::Result(_))) {
        until_result(&mut events, &mut log).await;
    }
    thread.sync().await.unwrap();
    thread.flush_persistence().await.unwrap();
    drain(&mut events, &mut log);
    assert_eq!(woken_children(&log), ["agent_1"], "{log:#?}");
    let said = seen.lock().unwrap()[0]
        .messages
        .last()
        .unwrap()
        .content
        .clone();
    assert!(said.contains("alpha done"), "{said}");
    let (read, _) = &results_of(&log, "use_agent")[0];
    assert!(read.contains("beta done"), "{read}");
    thread.close_and_wait().await;
    drop((thread, store));

    // Delivered or claimed once: a third process owes the parent nothing.
    let store = open(&killed);
    assert!(store.owed_wakes().is_empty());
    assert!(store.get(&AgentId::new("agent_2")).unwrap().claimed);
}

/// Two threads on `store` send a message to `agent_1` (an earlier
/// session's child) at once: each thread, once its turn ended and its
/// writes are on disk, with what its `use_agent` calls answered.
async fn two_threads_send_to_agent_1(
    store: &Arc<EnvelopeStore>,
) -> Vec<(ThreadHandle, Vec<(String, bool)>)> {
    let mut threads = Vec::new();
    for _ in 0..2 {
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&UseAgentCall::send("agent_1", "the second part")),
            Reply::answer("Sent."),
            Reply::answer("Noted."),
        ])
        .with_script("Worker", vec![Reply::answer("second part done")]);
        threads.push(thread_on(model.shared(), store.clone(), 3).await);
    }
    for (thread, _) in &threads {
        thread.send_user("more").unwrap();
    }
    let mut answered = Vec::new();
    for (thread, mut events) in threads {
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        thread.flush_persistence().await.unwrap();
        answered.push((thread, results_of(&log, "use_agent")));
    }
    answered
}

/// Shared, same instant: two threads on one store each send a message to
/// the same child of an earlier session in the same instant. Each hub
/// read the archive before the other's link reached it, and both resumed
/// the child: the chain forked (two runs continued `agent_1`, and the
/// next session resumed whichever link was written last). One resumes
/// it; the other is told it was resumed elsewhere.
#[tokio::test]
async fn two_threads_resuming_one_earlier_child_at_once_do_not_fork_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    an_earlier_session_with_one_finished_child(&dir).await;

    let store = open(&dir);
    let threads = two_threads_send_to_agent_1(&store).await;
    let answers: Vec<(String, bool)> = threads
        .iter()
        .flat_map(|(_, answers)| answers.clone())
        .collect();
    let resumed = answers
        .iter()
        .filter(|(text, error)| !error && text.contains("resumed_from"))
        .count();
    assert_eq!(resumed, 1, "{answers:#?}");
    assert!(
        answers
            .iter()
            .any(|(text, error)| *error && text.contains("another thread has resumed it")),
        "{answers:#?}"
    );
    let runs: Vec<_> = store
        .all()
        .into_iter()
        .filter(|e| e.id.as_str() != "agent_1")
        .map(|e| e.id)
        .collect();
    assert_eq!(runs.len(), 1, "one run continues agent_1: {runs:?}");
    for (thread, _) in threads {
        thread.close_and_wait().await;
    }
}

/// Shared, one after the other: a thread resumed an earlier session's
/// child and the link reached the store; another thread's message to the
/// same child then followed the link to a run of this session it cannot
/// reach, and read "there is no sub-agent with id `agent_2`" — an id the
/// model never heard of. It reads that another thread resumed it; so does
/// a stop (review: replay determinism — it read the same unknown id), and
/// an interrupt (review: the contract — it read the same).
#[tokio::test]
async fn a_message_to_a_child_another_thread_resumed_says_so() {
    for call in [
        UseAgentCall::send("agent_1", "the second part"),
        UseAgentCall::stop("agent_1"),
        UseAgentCall::interrupt("agent_1"),
    ] {
        let (text, is_error) = a_call_to_a_child_another_thread_resumed(call).await;
        assert!(is_error, "{text}");
        assert!(text.contains("another thread has resumed it"), "{text}");
        assert!(!text.contains("agent_2"), "{text}");
    }
}

/// This session's own review (`continued_as` in an old run's answers): a
/// thread's `status` of an earlier session's child another thread had
/// resumed named that thread's run as where the reply is — a run this
/// thread cannot read or reach. Named only when reachable here.
#[tokio::test]
async fn a_status_of_a_child_another_thread_resumed_names_no_run_of_it() {
    let (text, is_error) =
        a_call_to_a_child_another_thread_resumed(UseAgentCall::status("agent_1")).await;
    assert!(!is_error, "{text}");
    assert!(!text.contains("agent_2"), "{text}");
}

/// The answer to `call`, made in a second thread on the store after the
/// first resumed the earlier session's `agent_1` (as `agent_2`).
async fn a_call_to_a_child_another_thread_resumed(call: UseAgentCall) -> (String, bool) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    an_earlier_session_with_one_finished_child(&dir).await;
    let store = open(&dir);
    let send = || {
        ScriptedModel::new(vec![
            Reply::new().use_agent(&UseAgentCall::send("agent_1", "the second part")),
            Reply::answer("Sent."),
            Reply::answer("Noted."),
        ])
        .with_script("Worker", vec![Reply::answer("second part done")])
    };
    let (first, mut events) = thread_on(send().shared(), store.clone(), 3).await;
    first.send_user("more").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    first.flush_persistence().await.unwrap();
    assert_eq!(
        store
            .get(&AgentId::new("agent_1"))
            .and_then(|e| e.continued_as),
        Some(AgentId::new("agent_2"))
    );
    let asks = ScriptedModel::new(vec![
        Reply::new().use_agent(&call),
        Reply::answer("Asked."),
        Reply::answer("Noted."),
    ]);
    let (second, mut events) = thread_on(asks.shared(), store.clone(), 3).await;
    second.send_user("more").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let answer = results_of(&log, "use_agent").swap_remove(0);
    first.close_and_wait().await;
    second.close_and_wait().await;
    answer
}

/// Foreign input (another builder on the store): an earlier session's
/// child ran on a model this thread's builder does not register (a deploy
/// renamed it). A message to it was refused in `run`'s words — "or omit
/// `model` to run on your own model" — advice a `send`, which names no
/// model, cannot follow: retried, the same. It says the run cannot go on
/// here, and why.
#[tokio::test]
async fn a_run_whose_model_is_gone_says_it_cannot_go_on_here() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    an_earlier_session_on_a_model_since_gone(&dir).await;
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "the second part")),
        Reply::answer("Sent."),
    ]);
    let (thread, mut events) = thread_on(model.shared(), open(&dir), 3).await;
    thread.send_user("more").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let answers = results_of(&log, "use_agent");
    let (text, is_error) = &answers[0];
    assert!(*is_error, "{text}");
    assert!(text.contains("cannot go on here"), "{text}");
    assert!(text.contains("`cheap`"), "{text}");
    assert!(!text.contains("omit `model`"), "{text}");
    thread.close_and_wait().await;
}

/// Counted twice: a child of an earlier session resumed here was imported
/// into the hub's book with its envelope, old usage and all, and the
/// hub's totals (so `ThreadHandle::usage`) summed it again — though its
/// tokens were that session's. Only what ran here counts.
#[tokio::test]
async fn an_earlier_sessions_child_resumed_here_is_not_counted_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    // Its child used 100 tokens there.
    an_earlier_session_with_one_finished_child(&dir).await;

    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "the second part")),
        Reply::answer("Resumed."),
        Reply::answer("Noted again."),
    ])
    .with_script(
        "Worker",
        // Picked by the answers so far: the resumed run has one.
        vec![
            Reply::answer("(the first run's)"),
            Reply::answer("second part done").usage(5, 0),
        ],
    );
    let (thread, mut events) = thread_on(model.shared(), open(&dir), 3).await;
    thread.send_user("more").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until_wake(&mut events, &mut log, "agent_2").await;
    until_result(&mut events, &mut log).await;
    let children = thread.hub().snapshot().await.unwrap();
    assert_eq!(children.usage.prompt_tokens, 5, "{children:?}");
    thread.close_and_wait().await;
}

/// A host's stop of `agent_1`, resumed as `agent_2` (both ended), answers
/// `done` and cancels the newest run in the store.
async fn a_stop_of_agent_1_cancels_agent_2(thread: &ThreadHandle, store: &EnvelopeStore) {
    assert_eq!(
        thread.stop_child(&AgentId::new("agent_1")).await,
        Ok(subagents::messages::SubAgentStatus::Done)
    );
    assert!(
        store
            .get(&AgentId::new("agent_2"))
            .is_some_and(|e| e.cancelled),
        "the newest run was left resumable: {:?}",
        store.get(&AgentId::new("agent_2"))
    );
}
