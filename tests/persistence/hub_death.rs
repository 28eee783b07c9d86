//! A host's stop of a child after its thread's hub died: the stop a live
//! hub makes — the newest run of a resumed chain, this session's children
//! and earlier ones alike — cancelled for good, in the store.

use super::*;
use subagents::messages::SubAgentStatus;

/// Kills the thread's hub and waits for it to be gone.
async fn kill_hub(thread: &ThreadHandle) {
    thread.hub().actor().kill();
    thread.hub().actor().wait(None).await.ok();
}

/// A thread on `store` whose background worker `agent_1` finished and
/// woke it, its answer to the wake given.
async fn a_thread_woken_by_its_worker(store: &Arc<EnvelopeStore>) -> (ThreadHandle, EventStream) {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 1, false)),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker", worker(1));
    let (thread, mut events) = thread_on(model.shared(), store.clone(), 3).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_wake(&mut events, &mut log, "agent_1").await;
    until_result(&mut events, &mut log).await;
    (thread, events)
}

/// Killed midway (review of this session's own diff): after the hub's
/// death a stop of a resumed child's first id cancelled that first run
/// only — a later session's message followed the chain to `agent_2`,
/// left resumable, and resumed it. It cancels the newest run, as a live
/// hub's stop does, through the store.
#[tokio::test]
async fn a_stop_after_the_hubs_death_cancels_a_resumed_chains_newest_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    resumed_in_a_second_session(&dir).await;
    let store = open(&dir);
    let model = ScriptedModel::new(vec![Reply::answer("Noted.")]);
    let (thread, _events) = thread_on(model.shared(), store.clone(), 3).await;
    kill_hub(&thread).await;
    a_stop_of_agent_1_cancels_agent_2(&thread, &store).await;
    thread.close_and_wait().await;
}

/// Killed midway (review of this session's own diff): a child of this
/// session that ended before the hub's death, stopped after it, was
/// answered its status and cancelled nowhere — the store kept it
/// resumable (and the close wrote the book's uncancelled copy). It is
/// cancelled in the book, and in the store by the thread's next write.
#[tokio::test(start_paused = true)]
async fn a_stop_after_the_hubs_death_cancels_this_sessions_ended_child() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let store = open(&dir);
    let (thread, _events) = a_thread_woken_by_its_worker(&store).await;
    thread.flush_persistence().await.unwrap();
    kill_hub(&thread).await;
    let agent_1 = AgentId::new("agent_1");
    assert_eq!(thread.stop_child(&agent_1).await, Ok(SubAgentStatus::Done));
    thread.flush_persistence().await.unwrap();
    assert!(
        store.get(&agent_1).is_some_and(|e| e.cancelled),
        "{:?}",
        store.get(&agent_1)
    );
    thread.close_and_wait().await;
    drop(store);
    assert!(open(&dir).get(&agent_1).is_some_and(|e| e.cancelled));
}

/// Killed midway, in order (review of this session's own diff): a child
/// running as the hub died, stopped at once after. The cancel was written
/// to the store beside the thread's writer: the store's copy still said
/// `running` (not cancellable: nothing written), and the dead hub's
/// `failed` copy, written after, was not cancelled — a later session's
/// message resumed the child the host had stopped. The change goes
/// through the thread, in order after the failed copy.
#[tokio::test]
async fn a_stop_right_after_the_hubs_death_is_written_after_its_failed_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let store = open(&dir);
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run("Worker\nYou work.", "work").background()),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker", vec![Reply::new().hang()]);
    let (thread, mut events) = thread_on(model.shared(), store.clone(), 3).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    thread.flush_persistence().await.unwrap();
    let agent_1 = AgentId::new("agent_1");
    let before = store.get(&agent_1);
    assert!(
        before.as_ref().is_some_and(|e| !e.status.is_terminal()),
        "{before:?}"
    );
    kill_hub(&thread).await;
    assert_eq!(
        thread.stop_child(&agent_1).await,
        Ok(SubAgentStatus::Failed)
    );
    thread.flush_persistence().await.unwrap();
    let stored = store.get(&agent_1);
    assert!(
        stored
            .as_ref()
            .is_some_and(|e| e.status == SubAgentStatus::Failed && e.cancelled),
        "{stored:?}"
    );
    thread.close_and_wait().await;
}

/// Forged (review: a host's calls): `HubHandle::cancel_after_death`, the
/// thread's plumbing for a stop after its hub died, is callable by a host
/// holding `ThreadHandle::hub()`. On a live hub it cancelled an ended
/// child in the book alone — its observers (the thread, the store) never
/// told: a message to it was refused "stopped" in this process and the
/// store's copy resumed it in the next. A live hub's is not the dead
/// hub's to cancel: nothing changes.
#[tokio::test(start_paused = true)]
async fn the_dead_hubs_cancel_does_nothing_on_a_live_hub() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(&tmp.path().join("envelopes"));
    let (thread, _events) = a_thread_woken_by_its_worker(&store).await;
    let agent_1 = AgentId::new("agent_1");
    assert_eq!(thread.hub().cancel_after_death(&agent_1, None, &[]), None);
    thread.flush_persistence().await.unwrap();
    let book = thread.hub().status(&agent_1).unwrap();
    assert!(!book.cancelled, "{book:?}");
    assert!(!store.get(&agent_1).unwrap().cancelled);
    thread.close_and_wait().await;
}

/// Records every envelope its hub tells it of.
#[derive(Default)]
struct Told(std::sync::Mutex<Vec<subagents::messages::Envelope>>);

impl subagents::actors::hub::HubObserver for Told {
    fn finished(&self, envelope: &subagents::messages::Envelope) {
        self.0.lock().unwrap().push(envelope.clone());
    }
}

/// The written contract (review: docs against the code): after the hub's
/// death a host's stop cancels an ended child "as a live hub's stop
/// does", and observers are told "again when a finished envelope changes
/// (… cancelled by a stop)" — but the dead hub's observers lived in its
/// state, and were never told: a host persisting through its observer
/// kept the child resumable. The handle tells them.
#[tokio::test(start_paused = true)]
async fn a_stop_after_the_hubs_death_tells_its_observers() {
    let told = Arc::new(Told::default());
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 1, false)),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker", worker(1));
    let (thread, mut events) = ThreadHandle::spawn(
        DelegationBuilder::new(model.shared())
            .tools(ToolRegistry::new().with(subagents_demo::Sleep))
            .observer(told.clone()),
        None,
    )
    .await
    .unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_wake(&mut events, &mut log, "agent_1").await;
    until_result(&mut events, &mut log).await;
    kill_hub(&thread).await;
    let agent_1 = AgentId::new("agent_1");
    assert_eq!(thread.stop_child(&agent_1).await, Ok(SubAgentStatus::Done));
    let told = told.0.lock().unwrap().clone();
    assert!(
        told.iter().any(|e| e.id == agent_1 && e.cancelled),
        "{told:#?}"
    );
    thread.close_and_wait().await;
}
