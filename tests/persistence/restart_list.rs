//! The restart wake names what can still go on when it goes out.

use super::*;

/// A store whose background children `agent_1`… (`n` of them, "Long")
/// were running when its process died: interrupted (the store is its
/// copy in `killed/`).
pub(super) async fn a_killed_session_with_running_children(
    tmp: &std::path::Path,
    n: usize,
) -> Arc<EnvelopeStore> {
    let live = tmp.join("live");
    let dir = tmp.join("killed");
    let mut start = Reply::new();
    for _ in 0..n {
        start = start.use_agent(
            &UseAgentCall::run("Long\nYou work.", "the long part")
                .tools(["sleep"])
                .background(),
        );
    }
    let model = ScriptedModel::new(vec![start, Reply::answer("Started.")]).with_script(
        "Long\n",
        vec![Reply::new().tool_call("sleep", r#"{"secs":3600}"#)],
    );
    let (thread, mut events) = thread_on(model.shared(), open(&live), 5).await;
    thread.send_user("go").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    thread.flush_persistence().await.unwrap();
    copy_dir(&live, &dir);
    thread.close_and_wait().await;
    let store = open(&dir);
    assert_eq!(store.interrupted().len(), n);
    store
}

/// A store whose background child `agent_1` was running on the model
/// `cheap` when its process died — a model the next process does not
/// register (a message then cannot resume it): the store's directory.
pub(super) async fn a_killed_session_on_a_model_not_here(
    tmp: &std::path::Path,
) -> std::path::PathBuf {
    use subagents::actors::registry::ModelRegistry;
    let (live, killed) = (tmp.join("live"), tmp.join("killed"));
    let worker =
        ScriptedModel::new(vec![]).with_script("Worker", vec![Reply::new().text("…").hang()]);
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
    ]);
    let config =
        ThreadConfig::new(DelegationBuilder::new(model.shared()).models(models)).store(open(&live));
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    thread.send_user("go").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    thread.flush_persistence().await.unwrap();
    copy_dir(&live, &killed);
    thread.close_and_wait().await;
    killed
}

/// (Review: what is on disk against a resume.) The restart wake tells the
/// model each interrupted child "can go on from its saved conversation
/// (use_agent action send …)" — read as it goes out, after the turn the
/// host sent with the thread's start: a turn that resumed the child (the
/// wake offered it again: a second send steered the run twice) or stopped
/// it (a send then refused) left it listed. Listed only while it can go
/// on; none left, no wake.
#[tokio::test(start_paused = true)]
async fn the_restart_wake_lists_only_children_that_can_still_go_on() {
    for call in [
        UseAgentCall::send("agent_1", "go on"),
        UseAgentCall::stop("agent_1"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let store = a_killed_session_with_running_children(tmp.path(), 1).await;
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&call),
            Reply::answer("Done."),
            Reply::answer("Woken."),
        ])
        // Its second reply: the saved conversation holds its first.
        .with_script("Long\n", vec![Reply::new().hang(), Reply::new().hang()]);
        let (thread, mut events) = thread_on(model.shared(), store.clone(), 5).await;
        // In the start's tick: it goes before the restart wake.
        thread.send_user("go on with it").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        let called = results_of(&log, "use_agent");
        assert!(
            matches!(&called[..], [(_, false)]),
            "{}: {called:?}",
            call.to_json()
        );
        run_for(&mut events, &mut log, 60).await;
        // No restart wake (its line names the interrupted): a resumed
        // run's own end may wake the parent.
        let restart = |e: &&AgentEvent| matches!(e, AgentEvent::Wake { line, .. } if line.contains("interrupted"));
        let wakes: Vec<&AgentEvent> = log.iter().filter(restart).collect();
        assert!(wakes.is_empty(), "{}: {wakes:?}", call.to_json());
        thread.close_and_wait().await;
    }
}

/// The same, one of two stopped by the first turn: the wake lists the
/// other alone, and names it as the wake's child (this session's own
/// review: it named the first interrupted, which the line left out).
#[tokio::test(start_paused = true)]
async fn the_restart_wake_names_the_child_left_to_go_on() {
    let tmp = tempfile::tempdir().unwrap();
    let store = a_killed_session_with_running_children(tmp.path(), 2).await;
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::stop("agent_1")),
        Reply::answer("Stopped one."),
        Reply::answer("Woken."),
    ]);
    let (thread, mut events) = thread_on(model.shared(), store.clone(), 5).await;
    thread.send_user("stop the first").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until(&mut events, &mut log, is_wake).await;
    let wakes: Vec<(&AgentId, &String)> = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Wake { child, line } => Some((child, line)),
            _ => None,
        })
        .collect();
    let [(child, line)] = &wakes[..] else {
        panic!("{wakes:?}")
    };
    assert_eq!(child.as_str(), "agent_2");
    assert!(
        line.contains("1 sub-agent(s)") && line.contains("agent_2") && !line.contains("agent_1"),
        "{line}"
    );
    thread.close_and_wait().await;
}

/// Same instant (review: shared resources, a chat server's tabs): a tab
/// shown (`Threads::open`, `switch_to`) took its store's wakes and let
/// them out in the showing's own handler — opened and written to in one
/// tick (`open`, then `send_user`), the restart wake's turn ran before
/// the user's message, listing the child that message then stopped. The
/// showing's wakes go out after what the host sent in its tick.
#[tokio::test(start_paused = true)]
async fn a_tab_opened_and_written_to_in_one_tick_reads_the_user_first() {
    let tmp = tempfile::tempdir().unwrap();
    let store = a_killed_session_with_running_children(tmp.path(), 1).await;
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::stop("agent_1")),
        Reply::answer("Stopped."),
        Reply::answer("Woken."),
    ]);
    let a = subagents::messages::ThreadId::new("a");
    let mut threads = subagents::supervisor::Threads::new();
    let config = ThreadConfig::new(DelegationBuilder::new(model.shared())).store(store.clone());
    let mut events = threads.open(a.clone(), config).await.unwrap();
    threads.get(&a).unwrap().send_user("stop it").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    assert!(
        matches!(log.first(), Some(AgentEvent::UserMessage(_))),
        "{log:?}"
    );
    run_for(&mut events, &mut log, 60).await;
    let restart = |e: &&AgentEvent| matches!(e, AgentEvent::Wake { line, .. } if line.contains("interrupted"));
    let wakes: Vec<&AgentEvent> = log.iter().filter(restart).collect();
    assert!(wakes.is_empty(), "{wakes:?}");
    threads.delete(&a).await.unwrap();
}

/// Stopped midway (review: what is on disk against a resume): the model
/// reading an interrupted child in the restart wake's own turn (`status`,
/// `result`) claimed it — on disk at once, no longer owed — though it has
/// no result to claim: a kill before that turn ended, and the next open
/// never told the parent it could go on. Owed until the wake's turn ends.
#[tokio::test(start_paused = true)]
async fn reading_an_interrupted_child_in_the_restart_wakes_turn_leaves_it_owed() {
    let tmp = tempfile::tempdir().unwrap();
    let store = a_killed_session_with_running_children(tmp.path(), 1).await;
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::status("agent_1")),
        Reply::new().hang(),
    ]);
    let (thread, events) = thread_on(model.shared(), store.clone(), 5).await;
    let killed = tmp.path().join("killed");
    let listed = listed_at_a_kill_after(&thread, events, 1, &killed, tmp.path()).await;
    assert_eq!(listed, [AgentId::new("agent_1")]);
    thread.close_and_wait().await;
}

/// The same through the hub's book (the last read of this session's
/// change): a message to the interrupted child that cannot resume it
/// here (its model is not registered) brings it into the book, and the
/// book's claim, at a `status` read in the same turn, wrote it claimed —
/// a kill before the turn ended, and the next open never listed it.
#[tokio::test(start_paused = true)]
async fn reading_an_interrupted_child_after_a_refused_message_leaves_it_owed() {
    let tmp = tempfile::tempdir().unwrap();
    let killed = a_killed_session_on_a_model_not_here(tmp.path()).await;
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "go on")),
        Reply::new().use_agent(&UseAgentCall::status("agent_1")),
        Reply::new().hang(),
    ]);
    let (thread, events) = thread_on(model.shared(), open(&killed), 3).await;
    let listed = listed_at_a_kill_after(&thread, events, 2, &killed, tmp.path()).await;
    assert_eq!(listed, [AgentId::new("agent_1")]);
    thread.close_and_wait().await;
}

/// What the next process lists as interrupted if this one (`thread`, on
/// the store in `dir`) is killed once its parent has read `calls`
/// `use_agent` results: what is on disk then, copied beside `dir` (in
/// `tmp`) and opened.
async fn listed_at_a_kill_after(
    thread: &ThreadHandle,
    mut events: subagents::actors::EventStream,
    calls: usize,
    dir: &std::path::Path,
    tmp: &std::path::Path,
) -> Vec<AgentId> {
    let mut log = Vec::new();
    let used = |log: &[AgentEvent]| {
        log.iter()
            .filter(|e| matches!(e, AgentEvent::ToolResult(r) if r.name == "use_agent"))
            .count()
    };
    while used(&log) < calls {
        until(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::ToolResult(_))
        })
        .await;
    }
    thread.flush_persistence().await.unwrap();
    let copy = tmp.join("after");
    copy_dir(dir, &copy);
    open(&copy).interrupted()
}
