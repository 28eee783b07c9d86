//! One store, two threads, and a store that prunes while a thread runs:
//! what a thread's close writes must never undo what the store holds.

use super::*;

/// Shared: two threads sent to one earlier session's child at once. The
/// winner resumed it (its link on disk with the resume); the loser, told
/// it was resumed elsewhere, kept the copy it had read — without the link
/// — and its close wrote that copy over the store's: the next session
/// resumed `agent_1`'s own run again, forking the chain.
#[tokio::test]
async fn the_losing_threads_close_keeps_the_winners_link() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    an_earlier_session_with_one_finished_child(&dir).await;

    let store = open(&dir);
    let lost = |answers: &[(String, bool)]| {
        answers
            .iter()
            .any(|(text, error)| *error && text.contains("another thread has resumed it"))
    };
    let mut threads = two_threads_send_to_agent_1(&store).await;
    let losers = threads.iter().filter(|(_, a)| lost(a)).count();
    assert_eq!(losers, 1, "{threads:?}");
    let link = store.get(&AgentId::new("agent_1")).unwrap().continued_as;
    assert!(link.is_some(), "the winner's link is on disk");
    // The winner closes first, the loser last.
    threads.sort_by_key(|(_, answers)| lost(answers));
    for (thread, _) in threads {
        thread.close_and_wait().await;
    }
    drop(store);
    let again = open(&dir);
    assert_eq!(
        again.get(&AgentId::new("agent_1")).unwrap().continued_as,
        link,
        "the link survives the loser's close"
    );
}

/// A child past the retention was pruned (its envelope and run removed)
/// while its thread ran; the thread's close, writing every envelope the
/// store did not hold as its book did, wrote it back — without its run, so
/// a later session with a longer retention listed a child it could not
/// resume.
#[tokio::test]
async fn a_pruned_envelope_is_not_written_back_at_close() {
    let tmp = tempfile::tempdir().unwrap();
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("First", 1, false)),
        Reply::answer("Started."),
        Reply::answer("Noted."),
        Reply::new().use_agent(&work_call("Second", 1, false)),
        Reply::answer("Started another."),
        Reply::answer("Noted again."),
    ])
    .with_script("First\n", worker(1))
    .with_script("Second\n", worker(1));
    let (clock, _store, thread, mut events) = an_hours_retention(tmp.path(), model).await;
    thread.send_user("start one").unwrap();
    let mut log = Vec::new();
    until_wake(&mut events, &mut log, "agent_1").await;
    until_result(&mut events, &mut log).await;
    clock.advance(2 * HOUR);
    thread.send_user("start another").unwrap();
    until_wake(&mut events, &mut log, "agent_2").await;
    until_result(&mut events, &mut log).await;
    thread.flush_persistence().await.unwrap();
    let first = tmp.path().join("agent_1.json");
    assert!(!first.exists(), "agent_1 is pruned while the thread runs");
    // A notice of it after (review of this session's change: the writes
    // prune once a minute): a stop of the ended child wrote it back, and
    // no prune came after to take it again.
    let stopped = thread.stop_child(&AgentId::new("agent_1")).await;
    assert_eq!(stopped, Ok(subagents::messages::SubAgentStatus::Done));
    thread.flush_persistence().await.unwrap();
    assert!(!first.exists(), "written back by a notice of it");
    thread.close_and_wait().await;
    assert!(!first.exists(), "and not written back at close");
    assert!(tmp.path().join("agent_2.json").exists());
}

/// An earlier session whose first child finished and whose second
/// (`agent_2`) was running when its process died.
pub(super) async fn an_earlier_session_whose_second_child_was_running(dir: &std::path::Path) {
    use subagents::messages::{Envelope, SubAgentStatus};
    an_earlier_session_with_one_finished_child(dir).await;
    let store = open(dir);
    let mut running: Envelope = store.get(&AgentId::new("agent_1")).unwrap();
    running.id = AgentId::new("agent_2");
    running.status = SubAgentStatus::Running;
    running.finished_at_ms = None;
    running.result = None;
    store.save(&running).unwrap();
}

/// Forged (a host): the restart list and the owed wakes were handed out
/// once by public `take_…` methods, so a host that read them that way —
/// to show them, before it opened a thread — took them from the thread:
/// the parent was never told its children were interrupted. A host reads
/// them with `interrupted()` / `owed_wakes()`, which take nothing (the
/// `take_…` methods are the thread's: their `compile_fail` doctests).
#[tokio::test]
async fn a_host_reading_the_restart_list_leaves_it_to_the_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    an_earlier_session_whose_second_child_was_running(&dir).await;
    let store = open(&dir);
    assert_eq!(store.interrupted(), [AgentId::new("agent_2")]);
    assert!(store.owed_wakes().is_empty());
    let model = ScriptedModel::new(vec![Reply::answer("Noted the restart.")]);
    let (thread, mut events) = thread_on(model.shared(), store.clone(), 3).await;
    let mut log = Vec::new();
    // Real time (the store writes off the runtime): no wake, no turn.
    let woken = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        until_result(&mut events, &mut log),
    )
    .await;
    assert!(woken.is_ok(), "the parent was never woken: {log:#?}");
    assert_eq!(woken_children(&log), ["agent_2"], "{log:#?}");
    thread.close_and_wait().await;
    drop(thread);
    drop(store);
    // Delivered: the next open owes it no more (an open that ended before
    // it went out would have left it owed: the store's own test).
    assert!(
        open(&dir).interrupted().is_empty(),
        "settled once delivered"
    );
}

/// An earlier session whose second child was running, reopened; a thread
/// `a` on screen whose child works (leaving it waits for its stop); then
/// an open of `b` on the store given up as it leaves `a`. The registry,
/// `a`, the store and `b`'s model.
async fn an_open_given_up_as_it_leaves_a_thread(
    dir: &std::path::Path,
) -> (
    subagents::supervisor::Threads,
    subagents::messages::ThreadId,
    Arc<EnvelopeStore>,
    Arc<dyn subagents::actors::Model>,
) {
    use futures_util::FutureExt;
    use subagents::messages::ThreadId;
    use subagents::supervisor::{ThreadConfig, Threads};
    an_earlier_session_whose_second_child_was_running(dir).await;
    let store = open(dir);
    let mut threads = Threads::new();
    let a = ThreadId::new("a");
    let mut events_a = threads
        .open(
            a.clone(),
            DelegationBuilder::new(background_workers(&[600]).shared())
                .tools(subagents::actors::ToolRegistry::new().with(subagents_demo::Sleep)),
        )
        .await
        .unwrap();
    threads.get(&a).unwrap().send_user("start").unwrap();
    until_result(&mut events_a, &mut Vec::new()).await;
    let unused = ScriptedModel::new(vec![Reply::answer("unused")]).shared();
    let config = ThreadConfig::new(DelegationBuilder::new(unused.clone())).store(store.clone());
    let given_up = threads.open(ThreadId::new("b"), config).now_or_never();
    assert!(given_up.is_none(), "the leave waits for a's child to stop");
    (threads, a, store, unused)
}

/// Stopped midway (an open given up): a `Threads::open` on a store took
/// its restart list as its thread started, then was dropped while the
/// thread on screen stopped its children; the thread it made was closed —
/// and a close drops its wakes, as meant. Nobody meant this one: the
/// parent of the next thread on the store was never told its children
/// were interrupted. An opening thread takes its store's wakes only once
/// it is shown: one nobody kept took none.
#[tokio::test]
async fn an_open_given_up_leaves_the_restart_wake_to_the_next_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let (mut threads, a, store, unused) = an_open_given_up_as_it_leaves_a_thread(&dir).await;
    // Its thread closed (it let go of its model), the list left in the store…
    let given_back = std::time::Instant::now();
    while Arc::strong_count(&unused) > 1 || store.interrupted().is_empty() {
        assert!(
            given_back.elapsed() < std::time::Duration::from_secs(30),
            "closed: {}, given back: {:?}",
            Arc::strong_count(&unused) == 1,
            store.interrupted()
        );
        tokio::task::yield_now().await;
    }
    assert_eq!(store.interrupted(), [AgentId::new("agent_2")]);
    // …and the next thread on the store wakes its parent with the list.
    let model = ScriptedModel::new(vec![Reply::answer("Noted the restart.")]);
    let (thread, mut events) = thread_on(model.shared(), store.clone(), 3).await;
    let mut log = Vec::new();
    let woken = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        until_result(&mut events, &mut log),
    )
    .await;
    assert!(woken.is_ok(), "the parent was never woken: {log:#?}");
    assert_eq!(woken_children(&log), ["agent_2"], "{log:#?}");
    thread.close_and_wait().await;
    threads.delete(&a).await.unwrap();
}

/// Held (a closed thread's handle): the hub's handle held the store as
/// its archive, so while a host kept a closed thread's handle (a list of
/// closed tabs) the store's directory stayed locked — opening it again
/// failed `Locked`, after blocking for the lock's retries. The hub lets go
/// of its archive when it stops.
#[tokio::test]
async fn a_closed_threads_handle_keeps_no_store_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    an_earlier_session_with_one_finished_child(&dir).await;
    let model = ScriptedModel::new(vec![Reply::answer("Hello.")]);
    let (thread, mut events) = thread_on(model.shared(), open(&dir), 3).await;
    thread.send_user("hi").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    thread.close_and_wait().await;
    let reopened = EnvelopeStore::open(&dir, Arc::new(SystemClock));
    assert!(reopened.is_ok(), "{:?}", reopened.err());
    drop(thread);
}

/// Stopped midway (a host that deletes and exits): `Threads::delete`
/// returned once it had sent the close, before the thread wrote its
/// children's final envelopes — a host that deleted its threads and
/// returned from `main` left them `background`, and the next process
/// woke a parent for children of a deleted conversation. It returns once
/// the thread has closed.
#[tokio::test(start_paused = true)]
async fn a_deleted_threads_children_are_final_on_disk_when_delete_returns() {
    use subagents::messages::ThreadId;
    use subagents::supervisor::{ThreadConfig, Threads};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let store = open(&dir);
    let mut threads = Threads::new();
    let id = ThreadId::new("a");
    let config = ThreadConfig::new(
        DelegationBuilder::new(background_workers(&[600, 600]).shared())
            .tools(subagents::actors::ToolRegistry::new().with(subagents_demo::Sleep)),
    )
    .store(store.clone());
    let mut events = threads.open(id.clone(), config).await.unwrap();
    threads.get(&id).unwrap().send_user("start").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    threads.delete(&id).await.unwrap();
    for child in ["agent_1", "agent_2"] {
        let status = store.get(&AgentId::new(child)).map(|e| e.status);
        assert!(
            status.is_some_and(|s| s.is_terminal()),
            "{child} is {status:?} when delete returns"
        );
    }
}

/// Same instant (an open given up, then tried again at once): the given-up
/// thread had taken the store's restart wake as it started and gave it
/// back only as it shut down — after the retry had found the store's list
/// empty, so the retried thread's parent was never told. An opening
/// thread takes its store's wakes once it is shown.
#[tokio::test(start_paused = true)]
async fn an_open_tried_again_at_once_gets_the_restart_wake() {
    use subagents::messages::ThreadId;
    use subagents::supervisor::ThreadConfig;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let (mut threads, a, store, _unused) = an_open_given_up_as_it_leaves_a_thread(&dir).await;
    let model = ScriptedModel::new(vec![Reply::answer("Noted the restart.")]);
    let retried = ThreadConfig::new(DelegationBuilder::new(model.shared())).store(store.clone());
    let mut events = threads.open(ThreadId::new("b"), retried).await.unwrap();
    let mut log = Vec::new();
    let woken = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        until_result(&mut events, &mut log),
    )
    .await;
    assert!(woken.is_ok(), "the parent was never woken: {log:#?}");
    assert_eq!(woken_children(&log), ["agent_2"], "{log:#?}");
    threads.delete(&ThreadId::new("b")).await.unwrap();
    threads.delete(&a).await.unwrap();
}

/// A wake was settled on disk as its turn started, not as it ended: a
/// process killed while the parent read it (its model call in flight)
/// left nothing owed — the next process neither woke the parent for it
/// nor listed the child interrupted, and the parent never finished reading
/// it. Owed until the wake's turn has ended (at least once).
#[tokio::test(start_paused = true)]
async fn a_wake_whose_turn_a_kill_cut_is_still_owed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("live");
    an_earlier_session_whose_second_child_was_running(&dir).await;
    let store = open(&dir);
    let (thread, mut events) = thread_on(
        ScriptedModel::new(vec![Reply::new().hang()]).shared(),
        store.clone(),
        3,
    )
    .await;
    let mut log = Vec::new();
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::Wake { .. })
    })
    .await;
    thread.flush_persistence().await.unwrap();
    let killed = tmp.path().join("killed");
    copy_dir(&dir, &killed);
    assert_eq!(open(&killed).interrupted(), [AgentId::new("agent_2")]);
    // A close is meant: the wake is settled then.
    thread.close_and_wait().await;
    drop((thread, store));
    assert!(open(&dir).interrupted().is_empty());
}

/// A thread on `store` named `id` whose parent starts one background
/// child (`Name`) that answers `child`, then notes every wake.
async fn a_named_thread_with_one_child(
    store: &Arc<EnvelopeStore>,
    id: &str,
    name: &str,
    child: Reply,
) -> (ThreadHandle, EventStream) {
    use subagents::messages::ThreadId;
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run(format!("{name}\nYou work."), format!("{name}'s part")).background(),
        ),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script(name, vec![child]);
    let config = ThreadConfig::new(DelegationBuilder::new(model.shared()))
        .store(store.clone())
        .id(ThreadId::new(id));
    ThreadHandle::spawn(config, None).await.unwrap()
}

/// The `Wake` lines of `log`.
fn wake_lines(log: &[AgentEvent]) -> Vec<String> {
    log.iter()
        .filter_map(|e| match e {
            AgentEvent::Wake { line, .. } => Some(line.clone()),
            _ => None,
        })
        .collect()
}

/// Opens thread `id` on `threads` after a restart; the wake lines its
/// parent was woken with, once its wake turn has ended.
async fn reopened_wakes(
    threads: &mut subagents::supervisor::Threads,
    store: &Arc<EnvelopeStore>,
    id: &str,
) -> Vec<String> {
    let model = ScriptedModel::new(vec![Reply::answer("Noted."); 4]);
    let config = ThreadConfig::new(DelegationBuilder::new(model.shared())).store(store.clone());
    let mut events = threads
        .open(subagents::messages::ThreadId::new(id), config)
        .await
        .unwrap();
    let mut log = Vec::new();
    let woken = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        until_result(&mut events, &mut log),
    )
    .await;
    assert!(woken.is_ok(), "thread {id} was never woken: {log:#?}");
    wake_lines(&log)
}

/// Shared (two threads on one store) across a restart: envelopes named
/// no thread, so the first thread opened on the restarted store took
/// *every* owed and restart wake — `b`'s parent was told of `a`'s
/// children (another conversation's work, in its context) and `a`'s
/// parent of none; restoring tabs in another order gave each the other's.
/// Each envelope names its thread; each thread is woken for its own.
#[tokio::test]
async fn after_a_restart_each_thread_is_woken_for_its_own_children() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    let store = open(&live);
    // `a`'s child finishes while its user types (its wake owed); `b`'s
    // runs when the process dies.
    let (a, mut events_a) =
        a_named_thread_with_one_child(&store, "a", "Alpha", Reply::answer("alpha done")).await;
    a.typing(true).unwrap();
    a.send_user("go").unwrap();
    until_result(&mut events_a, &mut Vec::new()).await;
    let (b, mut events_b) =
        a_named_thread_with_one_child(&store, "b", "Beta", Reply::new().hang()).await;
    b.send_user("go").unwrap();
    until_result(&mut events_b, &mut Vec::new()).await;
    while !store
        .get(&AgentId::new("agent_1"))
        .is_some_and(|e| e.wake_owed)
    {
        a.sync().await.unwrap();
        a.flush_persistence().await.unwrap();
        tokio::task::yield_now().await;
    }
    b.flush_persistence().await.unwrap();
    let killed = tmp.path().join("killed");
    copy_dir(&live, &killed);
    a.close_and_wait().await;
    b.close_and_wait().await;
    drop(store);

    let store = open(&killed);
    assert_eq!(store.owed_wakes(), [AgentId::new("agent_1")]);
    assert_eq!(store.interrupted(), [AgentId::new("agent_2")]);
    let mut threads = subagents::supervisor::Threads::new();
    // `b` first: it is woken for its own child only.
    let b_woken = reopened_wakes(&mut threads, &store, "b").await;
    assert_eq!(b_woken.len(), 1, "{b_woken:#?}");
    assert!(
        b_woken[0].contains("1 sub-agent(s) interrupted")
            && b_woken[0].contains(r#"agent_2 "Beta""#),
        "{b_woken:#?}"
    );
    assert_eq!(store.owed_wakes(), [AgentId::new("agent_1")], "a's, left");
    // Then `a`, for its own, though `b` was shown first.
    let a_woken = reopened_wakes(&mut threads, &store, "a").await;
    assert_eq!(a_woken.len(), 1, "{a_woken:#?}");
    assert!(a_woken[0].contains("agent_1 finished"), "{a_woken:#?}");
    for id in ["a", "b"] {
        threads
            .delete(&subagents::messages::ThreadId::new(id))
            .await
            .unwrap();
    }
}

/// Stopped midway (a kill during a wake's turn), the common case: a
/// background child that finished while its parent was idle woke it at
/// once, and its envelope was saved not owed (only a wake still waiting
/// was) — a process killed while the parent read it left the child
/// `done` and owed nothing: the next process never told the parent. A
/// wake is owed on disk until the turn reading it has ended, however soon
/// it went out.
#[tokio::test(start_paused = true)]
async fn a_wake_that_went_out_at_once_is_owed_until_its_turn_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    let store = open(&live);
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run("Worker\nYou work.", "work").background()),
        Reply::answer("Started."),
        Reply::new().hang(),
    ])
    .with_script(
        "Worker",
        vec![Reply::answer("done").delay(std::time::Duration::from_secs(5))],
    );
    let (thread, mut events) = thread_on(model.shared(), store.clone(), 3).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::Wake { .. })
    })
    .await;
    // A stop of the finished child while its wake is read (the model
    // cleaning up, the host's button) cancels it; its wake stays owed —
    // the cancel's notice carried the hub's copy, which says nothing of
    // the wake, and cleared it on disk.
    assert_eq!(
        thread.stop_child(&AgentId::new("agent_1")).await,
        Ok(subagents::messages::SubAgentStatus::Done)
    );
    thread.flush_persistence().await.unwrap();
    assert!(
        store
            .get(&AgentId::new("agent_1"))
            .is_some_and(|e| e.cancelled)
    );
    let killed = tmp.path().join("killed");
    copy_dir(&live, &killed);
    assert_eq!(open(&killed).owed_wakes(), [AgentId::new("agent_1")]);
    // A close is meant: the wake is settled then.
    thread.close_and_wait().await;
    drop((thread, store));
    assert!(open(&live).owed_wakes().is_empty());
}

/// Misleading (a host, a model): a stop of an earlier session's child —
/// whose envelope `envelope` / `status` answered — read "there is no
/// sub-agent with id `agent_2`" (`UnknownChild`): the hub looked for it
/// in this session's book alone. It answers the status it ended with, as
/// a stop of any ended child does.
#[tokio::test]
async fn a_stop_of_an_earlier_sessions_child_answers_how_it_ended() {
    use subagents::messages::SubAgentStatus;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    an_earlier_session_whose_second_child_was_running(&dir).await;
    let model = ScriptedModel::new(vec![
        Reply::answer("Noted the restart."),
        Reply::new().use_agent(&UseAgentCall::stop("agent_1")),
        Reply::answer("Stopped."),
    ]);
    let (thread, mut events) = thread_on(model.shared(), open(&dir), 3).await;
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let agent_2 = AgentId::new("agent_2");
    assert!(thread.envelope(&agent_2).await.unwrap().is_some());
    assert_eq!(
        thread.stop_child(&agent_2).await,
        Ok(SubAgentStatus::Interrupted)
    );
    thread.send_user("stop the first").unwrap();
    until_result(&mut events, &mut log).await;
    let (answer, is_error) = &results_of(&log, "use_agent")[0];
    assert!(!is_error && answer.contains("done"), "{answer}");
    thread.close_and_wait().await;
}

/// Stopped midway (a kill while a child queues): a message sent to a
/// queued child was kept in memory alone until the child started — a
/// process killed before then left its run with the task only, and the
/// resumed run never read what the parent had sent. Its run is written
/// with the message when it is queued.
#[tokio::test(start_paused = true)]
async fn a_message_to_a_queued_child_survives_a_kill() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    let store = open(&live);
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(
                &UseAgentCall::run("Busy\nYou work.", "first")
                    .tools(["sleep"])
                    .background(),
            )
            .use_agent(&UseAgentCall::run("Waiting\nYou work.", "second").background()),
        Reply::new().use_agent(&UseAgentCall::send("agent_2", "also check the tests")),
        Reply::answer("Sent."),
    ])
    .with_script("Busy", worker(600));
    let (thread, mut events) = thread_on(model.shared(), store.clone(), 1).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let results = results_of(&log, "use_agent");
    let (sent, is_error) = results.get(2).unwrap_or_else(|| panic!("{log:#?}"));
    assert!(!is_error && sent.contains("queued"), "{sent}");
    thread.sync().await.unwrap();
    thread.flush_persistence().await.unwrap();
    let killed = tmp.path().join("killed");
    copy_dir(&live, &killed);
    thread.close_and_wait().await;
    drop((thread, store));
    let (_, said) = open(&killed).run(&AgentId::new("agent_2")).unwrap();
    assert!(
        said.iter()
            .any(|m| m.content.contains("also check the tests")),
        "{said:#?}"
    );
}

/// Misleading a host (a restart with an approval pending): a child asked
/// for approval and the process was killed; after the restart, the host's
/// restored row answered it and read `Unknown` ("no agent of the thread
/// asked for it") — it was asked, and closed with its process. `Ended`.
#[tokio::test]
async fn an_approval_pending_at_a_kill_reads_ended_after_the_restart() {
    use subagents::messages::{ApprovalDecision, ApprovalId, ApprovalRefusal};
    use subagents::supervisor::ThreadError;
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    let store = open(&live);
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run("Poster\nYou post.", "post it")
                .tools(["http_post"])
                .background(),
        ),
        Reply::answer("Started."),
    ])
    .with_script(
        "Poster",
        vec![Reply::new().tool_call("http_post", r#"{"url":"https://example.com","body":"x"}"#)],
    );
    let config = ThreadConfig::new(
        DelegationBuilder::new(model.shared())
            .tools(ToolRegistry::new().with(subagents_demo::Post)),
    )
    .store(store.clone());
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    let asked = until_child_approval(&mut events, &mut log).await;
    thread.flush_persistence().await.unwrap();
    let killed = tmp.path().join("killed");
    copy_dir(&live, &killed);
    thread.close_and_wait().await;
    drop((thread, store));

    let store = open(&killed);
    let model = ScriptedModel::new(vec![
        Reply::answer("Noted the restart."),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "go on")),
        Reply::answer("Sent."),
    ])
    .with_script("Poster", vec![Reply::answer("posted")]);
    let (thread, mut events) = thread_on(model.shared(), store.clone(), 3).await;
    until_result(&mut events, &mut Vec::new()).await;
    assert_eq!(asked.id, ApprovalId::for_agent(&AgentId::new("agent_1"), 1));
    let ended = Err(ThreadError::Approval(ApprovalRefusal::Ended(
        asked.id.clone(),
    )));
    let answered = thread
        .resolve_approval(asked.id.clone(), ApprovalDecision::Approve)
        .await;
    assert_eq!(answered, ended);
    // A message resumes it, which brings it into the hub's book (with no
    // count of what it asked then): it read `Unknown` from there on.
    thread.send_user("tell it to go on").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    let answered = thread
        .resolve_approval(asked.id.clone(), ApprovalDecision::Approve)
        .await;
    assert_eq!(answered, ended, "after a resume");
    // The hub gone (its archive with it): the thread still answers, from
    // the store, as the hub did (review: approvals at every edge — it read
    // `Unknown`, "no agent of the thread asked for it").
    kill_the_hub(&thread).await;
    let answered = thread
        .resolve_approval(asked.id.clone(), ApprovalDecision::Approve)
        .await;
    assert_eq!(answered, ended, "after the hub's death");
    thread.close_and_wait().await;
}

/// Stopped midway (review: a ractor host embedding threads): a thread
/// spawned under a host that is stopping took the store's restart and
/// owed wakes in its `pre_start`, then ractor refused the link and the
/// spawn failed — the wakes taken for nobody: a thread spawned again in
/// that process was never told of its interrupted child. A thread takes
/// them once it runs, linked.
#[tokio::test]
async fn a_spawn_under_a_stopping_host_leaves_the_restart_wake_to_the_next_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    an_earlier_session_whose_second_child_was_running(&dir).await;
    let store = open(&dir);
    assert_eq!(store.interrupted(), [AgentId::new("agent_2")]);
    let host = common::host::Host::spawn().await;
    host.cell().stop_and_wait(None, None).await.unwrap();
    let config = || {
        let model = ScriptedModel::new(vec![Reply::answer("Noted."); 2]);
        ThreadConfig::new(DelegationBuilder::new(model.shared())).store(store.clone())
    };
    let refused = ThreadHandle::spawn(config(), Some(host.cell())).await;
    // Said as what it is (review: the typed host boundary): it read
    // `Spawn("Actor panicked during startup 'Supervisor is shutting
    // down'")`, nothing having panicked.
    assert_eq!(
        refused.err(),
        Some(subagents::supervisor::ThreadError::SupervisorStopping),
        "spawned under a stopped host"
    );
    assert_eq!(
        store.interrupted(),
        [AgentId::new("agent_2")],
        "the refused spawn took the restart wake"
    );
    let (thread, mut events) = ThreadHandle::spawn(config(), None).await.unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    assert_eq!(woken_children(&log), ["agent_2"], "{log:#?}");
    thread.close_and_wait().await;
}

/// Stopped midway, a ractor host (review: embedding): a thread killed
/// with its host — the host's handler panicked, it was killed, or an
/// ancestor stopped (ractor kills the subtree: no `post_stop`) — had
/// taken the store's restart wake, its turn not over: the wake was lost
/// for the rest of the process (the store open under its lock, no open
/// could find it again), and a thread spawned again on the store was
/// never told. A killed thread gives back what it took.
#[tokio::test]
async fn a_thread_killed_with_its_host_leaves_the_restart_wake_to_the_next_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    an_earlier_session_whose_second_child_was_running(&dir).await;
    let store = open(&dir);
    let host = common::host::Host::spawn().await;
    let hang = ScriptedModel::new(vec![Reply::new().hang()]);
    let config = ThreadConfig::new(DelegationBuilder::new(hang.shared())).store(store.clone());
    let (thread, mut events) = ThreadHandle::spawn(config, Some(host.cell()))
        .await
        .unwrap();
    // The restart wake's turn is on the parent (it hangs in its model).
    let mut log = Vec::new();
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::Wake { .. })
    })
    .await;
    assert!(store.interrupted().is_empty(), "taken by the thread");
    host.cell().kill_and_wait(None).await.unwrap();
    // The killed thread's stream ends once its state is gone (whatever
    // the runtime: ractor reports it stopped before dropping it).
    let ended = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while events.recv().await.is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "the killed thread's stream never ended");
    drop(thread);
    assert_eq!(
        store.interrupted(),
        [AgentId::new("agent_2")],
        "the restart wake was lost with the thread"
    );
    let model = ScriptedModel::new(vec![Reply::answer("Noted."); 2]);
    let config = ThreadConfig::new(DelegationBuilder::new(model.shared())).store(store.clone());
    let (again, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    assert_eq!(woken_children(&log), ["agent_2"], "{log:#?}");
    again.close_and_wait().await;
}
