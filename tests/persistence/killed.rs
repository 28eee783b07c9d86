//! A conversation's id on a store after its thread was killed or stopped
//! through its cell: a thread of the id opens once the actor has stopped,
//! whatever still holds its state.

use std::time::Duration;

use subagents::messages::ThreadId;
use subagents::supervisor::{ThreadError, Threads};

use super::*;

fn quiet(store: &Arc<EnvelopeStore>) -> ThreadConfig {
    ThreadConfig::new(DelegationBuilder::new(
        ScriptedModel::new(vec![Reply::answer("ok")]).shared(),
    ))
    .store(store.clone())
}

/// A thread killed under a ractor host hands its state (and the id it
/// held live on the store) to the host with its termination event, read
/// once the host's handler returns: a host reopening the conversation in
/// that handler — the usual restart — was refused `AlreadyOpen` for a
/// dead thread, and after a `close` then a kill (signals are read first)
/// waited on its own mailbox for ever. The id is free once the actor has
/// stopped.
#[tokio::test(start_paused = true)]
async fn a_thread_killed_under_a_host_can_be_opened_again_in_the_same_handler() {
    for close_first in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let host = common::host::Host::spawn().await;
        let a = ThreadId::new("a");
        let (thread, _events) = ThreadHandle::spawn(quiet(&store).id(a.clone()), Some(host.cell()))
            .await
            .unwrap();
        let cell = host.cell();
        let again = host
            .run(async move {
                if close_first {
                    thread.close();
                }
                thread.actor().kill();
                thread.actor().wait(None).await.unwrap();
                let spawn = ThreadHandle::spawn(quiet(&store).id(a), Some(cell));
                match tokio::time::timeout(Duration::from_secs(3600), spawn).await {
                    Ok(Ok(_)) => "opened".to_owned(),
                    Ok(Err(e)) => format!("refused: {e}"),
                    Err(_) => "waited for ever".to_owned(),
                }
            })
            .await;
        assert_eq!(again, "opened", "close first: {close_first}");
    }
}

/// A thread stopped through its cell (`actor().stop`, which its docs
/// allow) was closing to its registry — whose own open waits — and open
/// to the store: another registry's open was refused `AlreadyOpen` while
/// it stopped. Both wait now. Also one drained (`actor().drain()`:
/// ractor's `Draining`, below `Stopping`, read as open).
#[tokio::test(start_paused = true)]
async fn a_thread_stopped_through_its_cell_is_waited_for_by_another_registry() {
    for drained in [false, true] {
        stopped_through_its_cell(drained).await;
    }
}

async fn stopped_through_its_cell(drained: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run("Slow\nYou work.", "work").background()),
        Reply::answer("Started."),
    ])
    .with_script("Slow", vec![Reply::new().hang()]);
    let mut alice = Threads::new();
    let mut bob = Threads::new();
    let a = ThreadId::new("a");
    let config = ThreadConfig::new(DelegationBuilder::new(model.shared())).store(store.clone());
    let mut events = alice.open(a.clone(), config).await.unwrap();
    let alices = alice.get(&a).unwrap().clone();
    alices.send_user("go").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    let window = match drained {
        true => {
            alices.actor().drain().unwrap();
            ractor::ActorStatus::Draining
        }
        false => {
            alices.actor().stop(None);
            ractor::ActorStatus::Stopping
        }
    };
    while alices.actor().get_status() < window {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        alices.actor().get_status(),
        window,
        "the window: closing, not yet stopped"
    );
    match bob.open(a.clone(), quiet(&store)).await {
        Ok(_) => {}
        Err(ThreadError::AlreadyOpen(_)) => panic!("refused while the thread stopped"),
        Err(e) => panic!("{e}"),
    }
    assert_eq!(alices.actor().get_status(), ractor::ActorStatus::Stopped);
    bob.delete(&a).await.unwrap();
}

/// A thread killed under a ractor host gives the store's wakes it took
/// back as its state drops — once the host's handler returns. A host
/// reopening the conversation in that handler (the restart above) had
/// its new thread take the store's wakes first, find none, and never
/// look again: the interrupted child was listed, and its parent never
/// told. Told when they come back — and, off screen then (restored as a
/// background tab), at its showing: told off screen, it took them and
/// dropped them (review of this change).
#[tokio::test]
async fn a_conversation_reopened_in_the_handler_that_killed_it_is_told_of_its_interrupted_child() {
    for off_screen in [false, true] {
        reopened_in_the_handler(off_screen).await;
    }
}

/// Review of the last session's change: told off screen, the wakes were
/// left for the showing, but a close (or a clear) before it settled only
/// what a switch had given back — they stayed listed, and the next open
/// of the conversation was woken for them. A close settles them too.
#[tokio::test]
async fn a_conversation_reopened_off_screen_in_its_killers_handler_settles_them_at_its_close() {
    reopened_in_the_handler_then(true, true).await;
}

async fn reopened_in_the_handler(off_screen: bool) {
    reopened_in_the_handler_then(off_screen, false).await;
}

async fn reopened_in_the_handler_then(off_screen: bool, closed_unshown: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    super::shared::an_earlier_session_whose_second_child_was_running(&dir).await;
    let store = open(&dir);
    let host = common::host::Host::spawn().await;
    let a = ThreadId::new("a");
    let thread = woken_under(&host, &store, &a).await;
    assert!(store.interrupted().is_empty(), "taken by the thread");
    let cell = host.cell();
    let model = ScriptedModel::new(vec![Reply::answer("Noted."); 2]);
    let config = ThreadConfig::new(DelegationBuilder::new(model.shared()))
        .store(store.clone())
        .id(a);
    let (again, mut events) = host
        .run(async move {
            thread.actor().kill();
            thread.actor().wait(None).await.unwrap();
            let (again, events) = ThreadHandle::spawn(config, Some(cell)).await.unwrap();
            if off_screen {
                again.on_screen(false).unwrap();
            }
            // It has run: it took the store's wakes (none yet).
            again.flush_persistence().await.unwrap();
            (again, events)
        })
        .await;
    if off_screen {
        // The termination read (the wakes given back, the thread told),
        // then the tab shown.
        host.run(async {}).await;
        again.flush_persistence().await.unwrap();
        if closed_unshown {
            assert_eq!(
                store.interrupted(),
                [AgentId::new("agent_2")],
                "given back, left for the showing"
            );
            again.close_and_wait().await;
            assert!(store.interrupted().is_empty(), "listed after the close");
            assert!(store.owed_wakes().is_empty(), "owed after the close");
            return;
        }
        again.on_screen(true).unwrap();
    }
    let mut log = Vec::new();
    // Real time (the store writes off the runtime), bounded.
    let woken =
        tokio::time::timeout(Duration::from_secs(60), until_result(&mut events, &mut log)).await;
    assert!(
        woken.is_ok(),
        "off screen: {off_screen}: never told; still listed: {:?}",
        store.interrupted()
    );
    assert_eq!(woken_children(&log), ["agent_2"], "{log:#?}");
    again.close_and_wait().await;
}

/// The same window, a forget: `forget_thread` of the killed conversation
/// in that handler (where a host deletes what it will not reopen) took
/// its children off the lists — and the state's drop listed them again,
/// for no thread to take: a badge that never clears.
#[tokio::test]
async fn a_conversation_forgotten_in_the_handler_that_killed_it_stays_unlisted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    super::shared::an_earlier_session_whose_second_child_was_running(&dir).await;
    let a = ThreadId::new("a");
    {
        // Written by thread `a` (a save keeps an earlier session's owner).
        let store = open(&dir);
        let path = store.path_of(&AgentId::new("agent_2"));
        let mut running = store.get(&AgentId::new("agent_2")).unwrap();
        running.thread = Some(a.clone());
        drop(store);
        std::fs::write(path, serde_json::to_vec(&running).unwrap()).unwrap();
    }
    let store = open(&dir);
    assert_eq!(store.interrupted(), [AgentId::new("agent_2")]);
    let host = common::host::Host::spawn().await;
    let thread = woken_under(&host, &store, &a).await;
    let kept = store.clone();
    host.run(async move {
        thread.actor().kill();
        thread.actor().wait(None).await.unwrap();
        assert!(kept.forget_thread(&a).unwrap().is_empty());
        assert!(kept.interrupted().is_empty());
    })
    .await;
    // The termination read: the killed state is gone.
    host.run(async {}).await;
    assert!(store.interrupted().is_empty(), "listed again");
    assert!(store.owed_wakes().is_empty(), "owed again");
}

/// Thread `a` on `store` under `host`, its parent woken for what the store
/// owes it (the wake's turn hangs in its model).
async fn woken_under(
    host: &common::host::Host,
    store: &Arc<EnvelopeStore>,
    a: &ThreadId,
) -> ThreadHandle {
    let (thread, mut events) = ThreadHandle::spawn(hanging(store).id(a.clone()), Some(host.cell()))
        .await
        .unwrap();
    until(&mut events, &mut Vec::new(), is_wake).await;
    thread
}

fn hanging(store: &Arc<EnvelopeStore>) -> ThreadConfig {
    ThreadConfig::new(DelegationBuilder::new(
        ScriptedModel::new(vec![Reply::new().hang()]).shared(),
    ))
    .store(store.clone())
}

/// (Review: shared resources.) A killed thread's writer drains its queue
/// after the actor stopped (the store with it): a `forget_thread` of the
/// conversation in between marked only what the store held — a child
/// whose first write was still queued landed unforgotten, and after a
/// restart it was listed interrupted, the next thread opened under the id
/// woken for a child of a deleted conversation. A write for a thread
/// forgotten and not opened again since lands forgotten.
#[test]
fn a_childs_write_landing_after_its_killed_threads_forget_is_forgotten() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(1)
        .build()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let a = ThreadId::new("a");
    let agent_1 = AgentId::new("agent_1");
    runtime.block_on(async {
        let store = open(tmp.path());
        let model = ScriptedModel::new(vec![starting_the_worker(), Reply::new().hang()])
            .with_script("Worker", vec![Reply::new().hang()]);
        let config = ThreadConfig::new(
            DelegationBuilder::new(model.shared())
                .tools(ToolRegistry::new().with(subagents_demo::Sleep)),
        )
        .store(store.clone())
        .id(a.clone());
        let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
        // The one blocking thread held: the child's first write queues.
        let (release, plug) = std::sync::mpsc::channel::<()>();
        tokio::task::spawn_blocking(move || plug.recv());
        thread.send_user("go").unwrap();
        until(&mut events, &mut Vec::new(), |e| {
            matches!(e, AgentEvent::ChildStarted(_))
        })
        .await;
        thread.hub().sync().await.unwrap();
        thread.sync().await.unwrap();
        assert!(store.get(&agent_1).is_none(), "queued, not written");
        thread.actor().kill();
        thread.actor().wait(None).await.unwrap();
        assert!(store.forget_thread(&a).unwrap().is_empty());
        release.send(()).unwrap();
        let landed = async {
            while store.get(&agent_1).is_none() {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(60), landed)
            .await
            .expect("the queued write never landed");
        assert!(store.get(&agent_1).unwrap().forgotten, "landed unforgotten");
    });
    drop(runtime);
    // After a restart: no thread is woken for it.
    let store = open(tmp.path());
    assert!(store.interrupted().is_empty(), "{:?}", store.interrupted());
}
