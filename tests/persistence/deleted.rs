//! A deleted conversation's children are forgotten in the store: a thread
//! opened again under its id reaches none of them, in this process or the
//! next.

use subagents::messages::ThreadId;
use subagents::supervisor::{ThreadError, Threads};

use super::*;

/// A tab `a` on `store` whose background child `agent_1` answered
/// "alpha's private answer" and woke its parent.
async fn a_tab_with_a_finished_child(threads: &mut Threads, store: &Arc<EnvelopeStore>) {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run("Alpha\nYou work.", "a's part").background()),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script("Alpha", vec![Reply::answer("alpha's private answer")]);
    let config = ThreadConfig::new(DelegationBuilder::new(model.shared())).store(store.clone());
    let mut events = threads.open(ThreadId::new("a"), config).await.unwrap();
    threads
        .get(&ThreadId::new("a"))
        .unwrap()
        .send_user("go")
        .unwrap();
    let mut log = Vec::new();
    until_wake(&mut events, &mut log, "agent_1").await;
    until_result(&mut events, &mut log).await;
}

/// A new tab under `id` on `store`, its model answering "new".
async fn open_again(
    threads: &mut Threads,
    store: &Arc<EnvelopeStore>,
    id: &ThreadId,
) -> EventStream {
    let model = ScriptedModel::new(vec![Reply::answer("new")]);
    let config = ThreadConfig::new(DelegationBuilder::new(model.shared())).store(store.clone());
    threads.open(id.clone(), config).await.unwrap()
}

/// A new tab `a` on `store` whose model asks for `agent_1`'s result: what
/// it read, and what its handle reads of `agent_1`.
async fn a_new_tab_reads_agent_1(
    threads: &mut Threads,
    store: &Arc<EnvelopeStore>,
) -> (String, Option<subagents::messages::Envelope>) {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::result("agent_1")),
        Reply::answer("Read."),
    ]);
    let config = ThreadConfig::new(DelegationBuilder::new(model.shared())).store(store.clone());
    let a = ThreadId::new("a");
    let mut events = threads.open(a.clone(), config).await.unwrap();
    threads.get(&a).unwrap().send_user("read").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let read = results_of(&log, "use_agent")[0].0.clone();
    let envelope = threads
        .get(&a)
        .unwrap()
        .envelope(&AgentId::new("agent_1"))
        .await
        .unwrap();
    threads.delete(&a).await.unwrap();
    (read, envelope)
}

/// Shared across incarnations of one id (review 27: the registry): the
/// user deleted tab `a`; the host opened a new tab under the same id
/// (tab ids are reused). Its model, guessing `agent_1`, read the deleted
/// conversation's child — its answer, its envelope, and a message would
/// have resumed it: after a restart for a child of this process, at once
/// for one of an earlier session. A delete marks the thread's children
/// forgotten (`Envelope::forgotten`), their final envelopes written
/// first: on disk still, no thread's.
#[tokio::test]
async fn a_tab_opened_again_after_a_delete_reaches_none_of_the_deleted_ones_children() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    // This process's child: deleted, then a restart.
    {
        let store = open(&dir);
        let mut threads = Threads::new();
        a_tab_with_a_finished_child(&mut threads, &store).await;
        threads.delete(&ThreadId::new("a")).await.unwrap();
        let agent_1 = store.get(&AgentId::new("agent_1")).unwrap();
        assert!(
            agent_1.forgotten && agent_1.status.is_terminal(),
            "{agent_1:?}"
        );
    }
    let store = open(&dir);
    let mut threads = Threads::new();
    let (read, envelope) = a_new_tab_reads_agent_1(&mut threads, &store).await;
    assert!(!read.contains("alpha's private answer"), "{read}");
    assert_eq!(envelope, None);
    drop((threads, store));

    // An earlier session's child: closed, restarted, deleted, opened again.
    let dir = tmp.path().join("second");
    {
        let store = open(&dir);
        let mut threads = Threads::new();
        a_tab_with_a_finished_child(&mut threads, &store).await;
        threads
            .get(&ThreadId::new("a"))
            .unwrap()
            .close_and_wait()
            .await;
    }
    let store = open(&dir);
    let mut threads = Threads::new();
    let idle = ScriptedModel::new(vec![Reply::answer("idle")]);
    let config = ThreadConfig::new(DelegationBuilder::new(idle.shared())).store(store.clone());
    let _events = threads.open(ThreadId::new("a"), config).await.unwrap();
    threads.delete(&ThreadId::new("a")).await.unwrap();
    let (read, envelope) = a_new_tab_reads_agent_1(&mut threads, &store).await;
    assert!(!read.contains("alpha's private answer"), "{read}");
    assert_eq!(envelope, None);
    assert!(store.get(&AgentId::new("agent_1")).unwrap().forgotten);
}

/// A conversation deleted while it is not open (review: a chat server
/// end to end): after a restart most are not, and `Threads::delete` of
/// one not open is `UnknownThread` — its children stayed reachable (a tab
/// opened later under its id read them) and opening it to delete it ran
/// a turn for its wakes. The store forgets a thread's children itself.
#[tokio::test]
async fn a_conversation_not_open_is_forgotten_through_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    {
        let store = open(&dir);
        let mut threads = Threads::new();
        a_tab_with_a_finished_child(&mut threads, &store).await;
        threads
            .get(&ThreadId::new("a"))
            .unwrap()
            .close_and_wait()
            .await;
    }
    let store = open(&dir);
    assert!(store.forget_thread(&ThreadId::new("a")).unwrap().is_empty());
    let mut threads = Threads::new();
    let (read, envelope) = a_new_tab_reads_agent_1(&mut threads, &store).await;
    assert!(!read.contains("alpha's private answer"), "{read}");
    assert_eq!(envelope, None);
    drop((threads, store));
    let store = open(&dir);
    assert!(
        store.get(&AgentId::new("agent_1")).unwrap().forgotten,
        "on disk"
    );
}

/// Two registries on one store (a user's two windows, a registry per
/// user with ids per user): each opened tab `a`, so two live threads of
/// one id wrote to the store — one's delete forgot the other's running
/// children, and after a restart the first shown took both threads' wakes
/// and reached both threads' children. The store holds an id live: the
/// second open is refused until the first thread has closed.
#[tokio::test]
async fn a_second_registry_cannot_open_an_id_live_on_the_store() {
    use subagents::supervisor::ThreadError;
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    let quiet = || {
        ThreadConfig::new(DelegationBuilder::new(
            ScriptedModel::new(vec![Reply::answer("ok")]).shared(),
        ))
        .store(store.clone())
    };
    let mut alice = Threads::new();
    let mut bob = Threads::new();
    let a = ThreadId::new("a");
    let _alice_events = alice.open(a.clone(), quiet()).await.unwrap();
    match bob.open(a.clone(), quiet()).await {
        Err(ThreadError::AlreadyOpen(id)) => assert_eq!(id, a),
        other => panic!("a second live thread of one id: {:?}", other.map(|_| ())),
    }
    // Through a handle with that id too.
    let spawned = ThreadHandle::spawn(quiet().id(a.clone()), None).await;
    assert!(
        matches!(spawned, Err(ThreadError::AlreadyOpen(_))),
        "{:?}",
        spawned.map(|_| ())
    );
    // Once alice's is closing (its handle's `close`, not awaited), an
    // open waits for it to have closed, then opens.
    let alices = alice.get(&a).unwrap().clone();
    alices.close();
    let _bob_events = bob.open(a.clone(), quiet()).await.unwrap();
    assert_eq!(
        alices.actor().get_status(),
        ractor::ActorStatus::Stopped,
        "opened beside a thread still closing"
    );
    bob.delete(&a).await.unwrap();
}

/// `EnvelopeStore::forget_thread` of a conversation open in another
/// registry (a user's second window) forgot its children for good while
/// it ran — after a restart its parent was never woken for them and could
/// not read them — and left the children it started later reachable: the
/// id held live on the store, which its own registry's rule could not
/// see, was never read. Refused, naming the conversation; forgotten once
/// the thread has closed.
#[tokio::test]
async fn a_conversation_open_in_another_registry_is_not_forgotten_through_the_store() {
    use subagents::supervisor::store::StoreError;
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    let mut window = Threads::new();
    a_tab_with_a_finished_child(&mut window, &store).await;
    let a = ThreadId::new("a");
    window.get(&a).unwrap().flush_persistence().await.unwrap();
    match store.forget_thread(&a) {
        Err(StoreError::ThreadOpen { thread, .. }) => assert_eq!(thread, a),
        other => panic!("forgotten while open: {other:?}"),
    }
    let agent_1 = AgentId::new("agent_1");
    assert!(!store.get(&agent_1).unwrap().forgotten);
    window.get(&a).unwrap().close_and_wait().await;
    assert!(store.forget_thread(&a).unwrap().is_empty());
    assert!(store.get(&agent_1).unwrap().forgotten);
}

/// A conversation deleted and opened again under its id (tab ids are
/// reused) writes its new children as its own: the store's mark of a
/// forgotten thread — so a killed thread's queued writes land forgotten —
/// is taken off as the id is opened again (review of this session's tests:
/// kept, every new child of the reopened tab was written forgotten,
/// unreachable after its close).
#[tokio::test]
async fn a_tab_opened_again_after_a_delete_writes_its_new_children_as_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    let mut threads = Threads::new();
    a_tab_with_a_finished_child(&mut threads, &store).await;
    threads.delete(&ThreadId::new("a")).await.unwrap();
    assert!(store.get(&AgentId::new("agent_1")).unwrap().forgotten);
    // Opened again, it starts `agent_2`.
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run("Beta\nYou work.", "b's part").background()),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script("Beta", vec![Reply::answer("beta's answer")]);
    let config = ThreadConfig::new(DelegationBuilder::new(model.shared())).store(store.clone());
    let mut events = threads.open(ThreadId::new("a"), config).await.unwrap();
    let a = threads.get(&ThreadId::new("a")).unwrap();
    a.send_user("go").unwrap();
    until_wake(&mut events, &mut Vec::new(), "agent_2").await;
    a.flush_persistence().await.unwrap();
    let agent_2 = store.get(&AgentId::new("agent_2")).unwrap();
    assert!(!agent_2.forgotten, "{agent_2:?}");
    assert!(store.get(&AgentId::new("agent_1")).unwrap().forgotten);
}

/// Repeated (review: a host's calls made twice or late): a delete while
/// the thread's close was in flight — a UI's handle closed it in the same
/// tick — answered `Ok` but forgot nothing: it told the thread by a
/// message, which a stopping actor drops, so the children kept the
/// deleted id and a tab opened again under it read them. The handle marks
/// the thread deleted where its close reads it.
#[tokio::test]
async fn a_delete_while_the_close_is_in_flight_forgets_the_children() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(&tmp.path().join("envelopes"));
    let mut threads = Threads::new();
    a_tab_with_a_finished_child(&mut threads, &store).await;
    let a = ThreadId::new("a");
    threads.get(&a).unwrap().close();
    threads.delete(&a).await.unwrap();
    let agent_1 = store.get(&AgentId::new("agent_1")).unwrap();
    assert!(agent_1.forgotten, "{agent_1:?}");
    let (read, envelope) = a_new_tab_reads_agent_1(&mut threads, &store).await;
    assert!(!read.contains("alpha's private answer"), "{read}");
    assert_eq!(envelope, None);
}

/// Late (review: a host's calls made late, thirty-seventh session): a tab
/// closed (`close_and_wait`), then its conversation deleted —
/// `ThreadHandle::close`'s own advice — answered `Ok` and forgot
/// nothing: the mark was read by a close that had already run. A delete
/// the close did not read forgets the children in the store itself (so
/// does one landing after the close's one look, on another worker: the
/// mark and the look are one step, `thread::shared`'s test).
#[tokio::test]
async fn a_delete_after_the_close_has_finished_forgets_the_children() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(&tmp.path().join("envelopes"));
    let mut threads = Threads::new();
    a_tab_with_a_finished_child(&mut threads, &store).await;
    let a = ThreadId::new("a");
    threads.get(&a).unwrap().close_and_wait().await;
    threads.delete(&a).await.unwrap();
    let agent_1 = store.get(&AgentId::new("agent_1")).unwrap();
    assert!(agent_1.forgotten, "{agent_1:?}");
}

/// Tab `a` with a finished child, ended (closed through its handle, or
/// killed), then deleted — the delete awaited, or dropped before a tab is
/// opened under the id — and `agent_1` read from the store.
async fn deleted_after_it_ended(killed: bool, awaited: bool) -> subagents::messages::Envelope {
    let a = ThreadId::new("a");
    let tmp = tempfile::tempdir().unwrap();
    let store = open(&tmp.path().join("envelopes"));
    let mut threads = Threads::new();
    a_tab_with_a_finished_child(&mut threads, &store).await;
    if killed {
        // Its child's envelope written first: the kill is the close's only.
        threads.get(&a).unwrap().flush_persistence().await.unwrap();
        assert!(store.get(&AgentId::new("agent_1")).is_some());
        let actor = threads.get(&a).unwrap().actor().clone();
        actor.kill();
        actor.wait(None).await.ok();
    } else {
        threads.get(&a).unwrap().close_and_wait().await;
    }
    let deleted = threads.delete(&a);
    if awaited {
        deleted.await.unwrap();
    } else {
        drop(deleted);
        let _events = open_again(&mut threads, &store, &a).await;
    }
    store.get(&AgentId::new("agent_1")).unwrap()
}

/// The same, its future not polled (review of that fix): the forget was
/// the future's, so a tab opened under the id before it was awaited took
/// the id with the children still its own (a restart then gave them to
/// it), and a future dropped forgot nothing. Started as the delete is
/// called; an open of the id waits for it.
#[tokio::test]
async fn a_delete_after_the_close_forgets_whether_or_not_it_is_polled() {
    for awaited in [true, false] {
        let agent_1 = deleted_after_it_ended(false, awaited).await;
        assert!(agent_1.forgotten, "awaited {awaited}: {agent_1:?}");
    }
}

/// The same for a thread killed (review of that fix): ractor skips a
/// killed actor's `post_stop`, where the close reads the mark — the delete
/// answered `Ok` and nobody forgot the children. A mark the close never
/// carried out is the delete's too; and its forget starts as the delete
/// is called — first written in its future, a delete dropped before a tab
/// opened under the id forgot nothing, and the open did not wait.
#[tokio::test]
async fn a_delete_of_a_killed_thread_forgets_the_children() {
    for awaited in [true, false] {
        let agent_1 = deleted_after_it_ended(true, awaited).await;
        assert!(agent_1.forgotten, "awaited {awaited}: {agent_1:?}");
    }
}

/// The same called outside a runtime (a host's own thread), its future
/// kept: the forget's lock, taken as `delete` was called and held by that
/// unpolled future, kept an open of the id waiting for ever. Outside a
/// runtime the forget is the future's, and an open does not wait for it.
#[test]
fn a_delete_called_outside_a_runtime_holds_no_open_back() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let store = open(&tmp.path().join("envelopes"));
    let mut threads = Threads::new();
    let a = ThreadId::new("a");
    rt.block_on(async {
        a_tab_with_a_finished_child(&mut threads, &store).await;
        threads.get(&a).unwrap().close_and_wait().await;
    });
    let deleted = threads.delete(&a);
    let model = ScriptedModel::new(vec![Reply::answer("new")]);
    let config = ThreadConfig::new(DelegationBuilder::new(model.shared())).store(store.clone());
    let opened = rt.block_on(async {
        tokio::time::timeout(
            std::time::Duration::from_secs(5),
            threads.open(a.clone(), config),
        )
        .await
    });
    assert!(matches!(opened, Ok(Ok(_))), "the open waited on the delete");
    rt.block_on(async {
        // Its forget now finds the id open again: said, not `Ok`.
        assert_eq!(deleted.await, Err(ThreadError::AlreadyOpen(a.clone())));
        threads.delete(&a).await.unwrap();
    });
}

/// The same with the store let go by everyone (a closed thread's handle
/// keeps none open): nothing can be forgotten from here, and the delete
/// says so instead of `Ok`; the store opened again forgets them.
#[tokio::test]
async fn a_delete_after_the_close_with_its_store_let_go_says_nothing_was_forgotten() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let store = open(&dir);
    let mut threads = Threads::new();
    a_tab_with_a_finished_child(&mut threads, &store).await;
    let a = ThreadId::new("a");
    threads.get(&a).unwrap().close_and_wait().await;
    drop(store);
    assert_eq!(
        threads.delete(&a).await,
        Err(ThreadError::NotForgotten(a.clone()))
    );
    let store = open(&dir);
    let agent_1 = store.get(&AgentId::new("agent_1")).unwrap();
    assert!(!agent_1.forgotten, "said not forgotten, and it is not");
    assert!(store.forget_thread(&a).unwrap().is_empty());
    assert!(store.get(&AgentId::new("agent_1")).unwrap().forgotten);
}

/// The same, later (review of that fix): a delete that lands while the
/// thread's close is already stopping its children — its stop under way,
/// the hub held telling an observer a child ended — is kept too: the
/// close reads the mark after its children have stopped.
#[test]
fn a_delete_while_the_close_stops_the_children_forgets_them() {
    use crate::common::held::{Held, Hold, HoldFinish, until_held};
    workers(2).block_on(async {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(&tmp.path().join("envelopes"));
        let (held, inside, go) = Held::new();
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&UseAgentCall::run("Alpha\nYou work.", "a's part").background()),
            Reply::answer("Started."),
        ])
        // In a tool, not a model call: a hanging call on the capacity-1
        // gate could come first and hold the parent's next one.
        .with_script("Alpha", vec![Reply::new().tool_call("hold", "{}")]);
        let hold = Arc::new(tokio::sync::Notify::new());
        let builder = DelegationBuilder::new(model.shared())
            .tools(ToolRegistry::new().with(Hold(hold)))
            .observer(Arc::new(HoldFinish(held.clone())));
        let config = ThreadConfig::new(builder).store(store.clone());
        let mut threads = Threads::new();
        let a = ThreadId::new("a");
        let mut events = threads.open(a.clone(), config).await.unwrap();
        threads.get(&a).unwrap().send_user("go").unwrap();
        until_result(&mut events, &mut Vec::new()).await;
        held.arm();
        threads.get(&a).unwrap().close();
        until_held(inside, "the close stops the child").await;
        let deleting = threads.delete(&a);
        go.send(()).unwrap();
        deleting.await.unwrap();
        let agent_1 = store.get(&AgentId::new("agent_1")).unwrap();
        assert!(
            agent_1.forgotten && agent_1.status.is_terminal(),
            "{agent_1:?}"
        );
    });
}
