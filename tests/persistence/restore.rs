//! A host restoring its tabs after a restart: each opened (shown), then
//! left for the next.

use super::*;

/// Stopped midway, by the host's restore order: a conversation owed two
/// wakes when its process died (two background children finished while
/// its user typed). The host restores its tabs the only way `Threads`
/// allows — `open(a)`, then `open(b)` — and `a`, shown, took both from
/// the store: the first went out, the second was dropped by the switch
/// and settled on disk. `a`'s parent never heard of its second child, in
/// that process or any later one. An earlier session's wake that cannot
/// go out now goes back to the store, for `a`'s next showing.
#[tokio::test]
async fn restoring_tabs_loses_no_owed_wake() {
    use subagents::messages::ThreadId;
    use subagents::supervisor::Threads;
    let tmp = tempfile::tempdir().unwrap();
    let killed = two_owed_wakes_of_a(tmp.path()).await;
    let a = ThreadId::new("a");
    let store = open(&killed);
    assert_eq!(store.owed_wakes().len(), 2);
    let mut threads = Threads::new();
    let open_tab = |id: &ThreadId| {
        let model = ScriptedModel::new(vec![Reply::answer("Noted."); 4]);
        (
            id.clone(),
            ThreadConfig::new(DelegationBuilder::new(model.shared())).store(store.clone()),
        )
    };
    let (id, config) = open_tab(&a);
    let mut events_a = threads.open(id, config).await.unwrap();
    let b = ThreadId::new("b");
    let (id, config) = open_tab(&b);
    let _events_b = threads.open(id, config).await.unwrap();
    threads.switch_to(&a).await.unwrap();
    let mut log = Vec::new();
    let both = both_woken(&mut events_a, &mut log).await;
    assert!(both, "{:?}", woken_children(&log));
    let mut woken = woken_children(&log);
    woken.sort();
    assert_eq!(woken, ["agent_1", "agent_2"]);
    for id in [&a, &b] {
        threads.delete(id).await.unwrap();
    }
}

/// Review (the registry and tabs): a `ThreadHandle` host restoring a tab
/// hidden — `spawn`, then `on_screen(false)` in that tick — had the first
/// of its earlier session's wakes go out at once, hidden (the thread
/// delivered as it started, before reading what the host sent): a model
/// turn on a hidden tab for every tab restored, and only the rest waited
/// for the showing, where `Threads` keeps them all. The start's delivery
/// comes after what the host sent with it.
#[tokio::test]
async fn a_tab_restored_hidden_sends_no_wake_until_it_is_shown() {
    let tmp = tempfile::tempdir().unwrap();
    let killed = two_owed_wakes_of_a(tmp.path()).await;
    let store = open(&killed);
    let (model, asked) = spy("m", ScriptedModel::new(vec![Reply::answer("Noted."); 4]));
    let config = ThreadConfig::new(DelegationBuilder::new(model))
        .store(store.clone())
        .id(subagents::messages::ThreadId::new("a"));
    let (a, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    a.on_screen(false).unwrap();
    a.sync().await.unwrap();
    a.flush_persistence().await.unwrap();
    let mut log = Vec::new();
    while let Some(event) = events.try_recv() {
        log.push(event);
    }
    assert!(woken_children(&log).is_empty(), "{log:#?}");
    assert_eq!(asked.lock().unwrap().len(), 0, "a model turn, hidden");
    assert_eq!(store.owed_wakes().len(), 2, "both kept for the showing");
    a.on_screen(true).unwrap();
    let both = both_woken(&mut events, &mut log).await;
    assert!(both, "{:?}", woken_children(&log));
    a.close_and_wait().await;
}

/// A session of thread `a` on a store under `dir` whose two background
/// children finished while its user typed, killed with both wakes owed:
/// the directory it left.
async fn two_owed_wakes_of_a(dir: &std::path::Path) -> std::path::PathBuf {
    let live = dir.join("live");
    let store = open(&live);
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&UseAgentCall::run("Alpha\nYou work.", "alpha's part").background())
            .use_agent(&UseAgentCall::run("Beta\nYou work.", "beta's part").background()),
        Reply::answer("Started."),
    ])
    .with_script("Alpha", vec![Reply::answer("alpha done")])
    .with_script("Beta", vec![Reply::answer("beta done")]);
    let config = ThreadConfig::new(DelegationBuilder::new(model.shared()))
        .store(store.clone())
        .id(subagents::messages::ThreadId::new("a"));
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    thread.typing(true).unwrap();
    thread.send_user("go").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    let owed = |id: &str| store.get(&AgentId::new(id)).is_some_and(|e| e.wake_owed);
    while !(owed("agent_1") && owed("agent_2")) {
        thread.sync().await.unwrap();
        thread.flush_persistence().await.unwrap();
        tokio::task::yield_now().await;
    }
    let killed = dir.join("killed");
    copy_dir(&live, &killed);
    thread.close_and_wait().await;
    killed
}

/// Review (a host that gives up its futures): a switch given up while
/// the thread on screen stops its children leaves that thread on screen
/// (the registry keeps it) — but its switch had given an earlier
/// session's wakes back to the store for its next showing, and none came
/// (a switch to the thread on screen does nothing): they stayed in the
/// store while the user went on in it, and its close settled them
/// undelivered. A leave given up shows the thread again.
#[tokio::test]
async fn a_switch_given_up_leaves_no_earlier_wake_in_the_store() {
    use futures_util::FutureExt;
    use subagents::messages::ThreadId;
    use subagents::supervisor::Threads;
    let tmp = tempfile::tempdir().unwrap();
    let killed = two_owed_wakes_of_a(tmp.path()).await;
    let store = open(&killed);
    let mut threads = Threads::new();
    let a = ThreadId::new("a");
    // The first wake's turn runs on (the second waits behind it) until
    // the user stops it; the second is answered.
    let model = ScriptedModel::new(vec![Reply::new().hang(), Reply::answer("Noted.")]);
    let config = ThreadConfig::new(DelegationBuilder::new(model.shared())).store(store.clone());
    let mut events = threads.open(a.clone(), config).await.unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, is_wake).await;
    let unused = ScriptedModel::new(vec![Reply::answer("unused")]).shared();
    let config = ThreadConfig::new(DelegationBuilder::new(unused)).store(store.clone());
    let given_up = threads.open(ThreadId::new("b"), config).now_or_never();
    assert!(given_up.is_none(), "the leave waits for a's turn to stop");
    assert_eq!(threads.on_screen(), Some(&a));
    // The user stops the first wake's turn: the second's turn is next.
    threads.get(&a).unwrap().stop_parent().unwrap();
    let second = both_woken(&mut events, &mut log).await;
    assert!(
        second,
        "woken {:?}, in the store {:?}",
        woken_children(&log),
        store.owed_wakes()
    );
    threads.delete(&a).await.unwrap();
}

/// The same for a thread that stays on screen (review: a host driving
/// the API): `ThreadHandle::switch_away` on a standalone thread (a "stop
/// all") gave an earlier session's pending wake back to the store for the
/// thread's next showing — none comes: listed by `owed_wakes()` while the
/// conversation went on, then settled undelivered by its close. Taken
/// again once the switch is read and the thread is still on screen.
#[tokio::test]
async fn a_stop_all_on_a_thread_that_stays_on_screen_leaves_no_earlier_wake_in_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let killed = two_owed_wakes_of_a(tmp.path()).await;
    let store = open(&killed);
    let model = ScriptedModel::new(vec![Reply::new().hang(), Reply::answer("Noted.")]);
    let config = ThreadConfig::new(DelegationBuilder::new(model.shared()))
        .store(store.clone())
        .id(subagents::messages::ThreadId::new("a"));
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, is_wake).await;
    // The first wake's turn hangs; the second waits behind it: the
    // "stop all" drops it from the queue.
    thread.switch_away().await.unwrap();
    thread.stop_parent().unwrap();
    let second = both_woken(&mut events, &mut log).await;
    assert!(
        second,
        "woken {:?}, in the store {:?}",
        woken_children(&log),
        store.owed_wakes()
    );
    thread.close_and_wait().await;
}

/// Review of the give-back (this session's own change): a delete or a
/// clear sends the same switch, and an earlier session's wakes went back
/// to the store — outliving a delete (listed by every later process), or
/// coming back after a clear. A delete or a clear drops them, as it does
/// any wake: settled.
#[tokio::test]
async fn a_deleted_tabs_owed_wakes_are_settled_not_given_back() {
    use subagents::messages::ThreadId;
    use subagents::supervisor::Threads;
    let tmp = tempfile::tempdir().unwrap();
    let killed = two_owed_wakes_of_a(tmp.path()).await;
    let store = open(&killed);
    let mut threads = Threads::new();
    let a = ThreadId::new("a");
    // The first wake's turn runs on: the second waits in the queue.
    let model = ScriptedModel::new(vec![Reply::new().hang()]);
    let config = ThreadConfig::new(DelegationBuilder::new(model.shared())).store(store.clone());
    let mut events = threads.open(a.clone(), config).await.unwrap();
    until(&mut events, &mut Vec::new(), is_wake).await;
    threads.delete(&a).await.unwrap();
    assert!(store.owed_wakes().is_empty(), "{:?}", store.owed_wakes());
    for id in ["agent_1", "agent_2"] {
        let envelope = store.get(&AgentId::new(id)).unwrap();
        assert!(!envelope.wake_owed, "{id} still owed after a delete");
    }
}

/// Tab `a`, restored with two owed wakes, shown — its first wake's turn
/// running on (its model hangs) — then left for `b`: the second wake
/// given back to the store. The store, the registry and a tab's config
/// on the store (an answering model, or one that hangs).
async fn a_shown_then_left_for_b(
    dir: &std::path::Path,
) -> (
    Arc<EnvelopeStore>,
    subagents::supervisor::Threads,
    impl Fn(bool) -> ThreadConfig,
) {
    use subagents::messages::ThreadId;
    let killed = two_owed_wakes_of_a(dir).await;
    let store = open(&killed);
    let mut threads = subagents::supervisor::Threads::new();
    let on_store = store.clone();
    let open_tab = move |hang: bool| {
        let reply = if hang {
            Reply::new().hang()
        } else {
            Reply::answer("Noted.")
        };
        let model = ScriptedModel::new(vec![reply; 4]);
        ThreadConfig::new(DelegationBuilder::new(model.shared())).store(on_store.clone())
    };
    let mut events = threads
        .open(ThreadId::new("a"), open_tab(true))
        .await
        .unwrap();
    until(&mut events, &mut Vec::new(), is_wake).await;
    let _events_b = threads
        .open(ThreadId::new("b"), open_tab(false))
        .await
        .unwrap();
    assert_eq!(store.owed_wakes().len(), 1, "the second, given back");
    (store, threads, open_tab)
}

/// Review (what the property test reaches): the wakes a switch gave back
/// to the store — a host restoring tabs, `open(a)` then `open(b)` — were
/// not a delete's to drop: it dropped only what its queue held, so they
/// outlived the delete, and the next thread opened under the id was
/// woken with the deleted conversation's children. A clear, a delete or
/// a close settles what the thread gave back too.
#[tokio::test]
async fn a_tab_deleted_after_giving_its_wakes_back_leaves_none_owed() {
    use subagents::messages::ThreadId;
    let tmp = tempfile::tempdir().unwrap();
    let (store, mut threads, _) = a_shown_then_left_for_b(tmp.path()).await;
    let (a, b) = (ThreadId::new("a"), ThreadId::new("b"));
    threads.delete(&a).await.unwrap();
    assert!(store.owed_wakes().is_empty(), "{:?}", store.owed_wakes());
    for id in ["agent_1", "agent_2"] {
        let envelope = store.get(&AgentId::new(id)).unwrap();
        assert!(!envelope.wake_owed, "{id} still owed after a delete");
    }
    threads.delete(&b).await.unwrap();
}

/// Shared, one id closed and opened again (review: shared handles): a
/// tab closed through its handle (`close()`, the close supervisor.md
/// names) and opened again at once under its id. The registry spawned
/// the new thread while the old one was still stopping its children:
/// the new one, shown, took the wake the old one had given back to the
/// store — a child of the closed conversation woke the new one (or, the
/// old one stopping later, settled a wake the new one had given back).
/// An open of a closing id waits for it to close.
#[tokio::test]
async fn a_tab_closed_and_opened_again_is_not_woken_for_the_closed_ones_children() {
    tab_a_opened_again(false).await;
}

/// Tab `a` (two owed wakes, the second given back), closed through its
/// handle — and deleted too, never polled, if `deleted` — then opened
/// again under its id: its first turn wakes it for none of the old
/// thread's children, and none is owed after.
async fn tab_a_opened_again(deleted: bool) {
    use subagents::messages::ThreadId;
    let tmp = tempfile::tempdir().unwrap();
    let (store, mut threads, open_tab) = a_shown_then_left_for_b(tmp.path()).await;
    let (a, b) = (ThreadId::new("a"), ThreadId::new("b"));
    // Nothing on screen: the open has no thread to leave first.
    threads.delete(&b).await.unwrap();
    threads.get(&a).unwrap().close();
    if deleted {
        drop(threads.delete(&a));
    }
    let mut events = threads.open(a.clone(), open_tab(false)).await.unwrap();
    threads.get(&a).unwrap().send_user("hello").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    assert_eq!(woken_children(&log), Vec::<String>::new(), "{log:?}");
    assert!(store.owed_wakes().is_empty(), "{:?}", store.owed_wakes());
    threads.delete(&a).await.unwrap();
}

/// Cancellation (review: a host that does not cooperate): the same, the
/// tab deleted too — fire and forget, as a UI does on a close — before
/// it is opened again. A delete takes the thread out of the registry at
/// once, so the open had nothing to wait for: it spawned and showed the
/// new thread while the old one still stopped its children, and the new
/// one took the wake the old one had given back. An open waits for a
/// deleted thread of its id to stop, as for a closed one.
#[tokio::test]
async fn a_tab_deleted_and_opened_again_is_not_woken_for_the_deleted_ones_children() {
    tab_a_opened_again(true).await;
}

/// Review of this session's own change: an open waiting for the closing
/// thread of its id took that thread out of the registry first — given
/// up during the wait (a UI's timeout), the next open found nothing to
/// wait for and spawned at once, as before the fix.
#[tokio::test]
async fn an_open_given_up_while_the_closed_tab_stops_leaves_it_to_wait_for() {
    use futures_util::FutureExt;
    use subagents::messages::ThreadId;
    let tmp = tempfile::tempdir().unwrap();
    let (_store, mut threads, open_tab) = a_shown_then_left_for_b(tmp.path()).await;
    let (a, b) = (ThreadId::new("a"), ThreadId::new("b"));
    threads.delete(&b).await.unwrap();
    threads.get(&a).unwrap().close();
    {
        let mut given_up = Box::pin(threads.open(a.clone(), open_tab(false)));
        assert!(
            (&mut given_up).now_or_never().is_none(),
            "waiting on the close"
        );
    }
    let mut events = threads.open(a.clone(), open_tab(false)).await.unwrap();
    threads.get(&a).unwrap().send_user("hello").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    assert_eq!(woken_children(&log), Vec::<String>::new(), "{log:?}");
    threads.delete(&a).await.unwrap();
}

/// Replay, across a restart (found by the property test's restart step):
/// the restart wake's turn ended and settled the wake — on disk, by a
/// blocking write queued behind the others — and a message in the same
/// instant resumed the interrupted child: the hub read its envelope as
/// owed still, or not, as that blocking thread happened to run, kept the
/// copy in its book and wrote it back with the link. Same steps, two
/// logs. A settle is in memory at once (the disk follows in order).
/// (A race on the old code, lost about one time in two: six rounds.)
#[tokio::test(start_paused = true)]
async fn a_resume_as_the_restart_wake_ends_reads_it_settled() {
    for _ in 0..6 {
        resume_as_the_restart_wake_ends().await;
    }
}

async fn resume_as_the_restart_wake_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("killed");
    // A session whose background child runs when its process dies.
    let store = super::restart_list::a_killed_session_with_running_children(tmp.path(), 1).await;
    assert_eq!(store.interrupted(), [AgentId::new("agent_1")]);
    // The restart wake's turn starts four children (their writes queued
    // ahead of the settle), then the user's message resumes agent_1.
    let mut fan_out = Reply::new();
    for k in 0..4 {
        fan_out = fan_out
            .use_agent(&UseAgentCall::run(format!("Aide {k}\nYou help."), "help").background());
    }
    let mut replies = vec![
        fan_out,
        Reply::answer("Noted."),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "go on")),
        Reply::answer("Resumed."),
    ];
    replies.extend(vec![Reply::answer("Woken."); 8]);
    let model = ScriptedModel::new(replies)
        .with_script("Aide ", vec![Reply::new().hang()])
        .with_script("Long\n", vec![Reply::new().hang()]);
    let (thread, mut events) = thread_on(model.shared(), store.clone(), 5).await;
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    thread.send_user("go on with it").unwrap();
    until_result(&mut events, &mut log).await;
    let resumed = log.iter().any(|e| {
        matches!(e, AgentEvent::ChildStarted(info) if info.resumed_from == Some(AgentId::new("agent_1")))
    });
    assert!(resumed, "{log:#?}");
    let held = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert!(!held.wake_owed, "the hub's copy: {held:?}");
    thread.flush_persistence().await.unwrap();
    let on_disk = open_copy(&dir).get(&AgentId::new("agent_1")).unwrap();
    assert!(!on_disk.wake_owed, "on disk: {on_disk:?}");
    thread.close_and_wait().await;
}

/// The store in `dir` as a copy reads it (the live one holds the lock).
fn open_copy(dir: &std::path::Path) -> Arc<EnvelopeStore> {
    let copy = dir.with_extension("copy");
    copy_dir(dir, &copy);
    open(&copy)
}

/// After a restart the parent first reads the restart's wake (the
/// children the kill interrupted), then each wake the last process owed,
/// in the order they finished.
#[tokio::test]
async fn the_restart_wake_comes_before_the_owed_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    let store = open(&live);
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&work_call("Alpha", 0, false))
            .use_agent(&work_call("Beta", 1000, false)),
        Reply::answer("Started."),
    ])
    .with_script("Alpha", worker(0))
    .with_script("Beta", worker(1000));
    let (thread, mut events) = thread_on(model.shared(), store.clone(), 3).await;
    thread.typing(true).unwrap();
    thread.send_user("go").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    while !store
        .get(&AgentId::new("agent_1"))
        .is_some_and(|e| e.wake_owed)
    {
        thread.sync().await.unwrap();
        thread.flush_persistence().await.unwrap();
        tokio::task::yield_now().await;
    }
    let killed = tmp.path().join("killed");
    copy_dir(&live, &killed);
    thread.close_and_wait().await;
    drop(store);
    let store = open(&killed);
    assert_eq!(store.interrupted(), [AgentId::new("agent_2")]);
    assert_eq!(store.owed_wakes(), [AgentId::new("agent_1")]);
    let model = ScriptedModel::new(vec![Reply::answer("Noted."); 2]);
    let (thread, mut events) = thread_on(model.shared(), store.clone(), 3).await;
    let mut log = Vec::new();
    let both = both_woken(&mut events, &mut log).await;
    assert!(both, "{:?}", woken_children(&log));
    assert_eq!(woken_children(&log), ["agent_2", "agent_1"]);
    thread.close_and_wait().await;
}

/// Reads `events` until two children were woken — in real time (the store
/// writes off the runtime), bounded by a minute: whether they were.
async fn both_woken(events: &mut EventStream, log: &mut Vec<AgentEvent>) -> bool {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while woken_children(log).len() < 2 {
            until(events, log, is_wake).await;
        }
    })
    .await
    .is_ok()
}
