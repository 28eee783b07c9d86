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
    let both = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while woken_children(&log).len() < 2 {
            until(&mut events_a, &mut log, is_wake).await;
        }
    })
    .await;
    assert!(both.is_ok(), "{:?}", woken_children(&log));
    let mut woken = woken_children(&log);
    woken.sort();
    assert_eq!(woken, ["agent_1", "agent_2"]);
    for id in [&a, &b] {
        threads.delete(id).await.unwrap();
    }
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
