//! After a restart: each thread on a store reaches its own children of
//! the earlier session (and those written for no thread), not the
//! others'; and what an earlier session handed a host (an approval's
//! id) never names something of this one.

use super::*;

/// Shared (two threads on one store) across a restart: a child of an
/// earlier session was readable, claimable and resumable from any thread
/// on the store, though each envelope names the thread that wrote it —
/// `b`'s model guessing `agent_1` read `a`'s child's answer (another
/// conversation's work), and its claim took the wake owed to `a`'s
/// parent. Within a session the threads were kept apart already; now
/// across a restart too.
#[tokio::test]
async fn after_a_restart_a_thread_cannot_reach_another_threads_child() {
    use subagents::messages::ThreadId;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let store = open(&dir);
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run("Alpha\nYou work.", "a's part").background()),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script("Alpha", vec![Reply::answer("alpha's private answer")]);
    let config = ThreadConfig::new(DelegationBuilder::new(model.shared()))
        .store(store.clone())
        .id(ThreadId::new("a"));
    let (a, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    a.typing(true).unwrap();
    a.send_user("go").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    let agent_1 = AgentId::new("agent_1");
    // Its wake held by typing, owed on disk when the process dies.
    while !store.get(&agent_1).is_some_and(|e| e.wake_owed) {
        a.sync().await.unwrap();
        a.flush_persistence().await.unwrap();
        tokio::task::yield_now().await;
    }
    let killed = tmp.path().join("killed");
    copy_dir(&dir, &killed);
    a.close_and_wait().await;
    drop((a, store));

    let store = open(&killed);
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::result("agent_1")),
        Reply::answer("Read."),
    ]);
    let config = ThreadConfig::new(DelegationBuilder::new(model.shared()))
        .store(store.clone())
        .id(ThreadId::new("b"));
    let (b, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    b.send_user("read agent_1").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let outputs: Vec<&str> = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult(r) => Some(r.output.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(outputs.len(), 1, "{log:#?}");
    assert!(
        !outputs[0].contains("alpha's private answer"),
        "{}",
        outputs[0]
    );
    assert!(outputs[0].contains("agent_1"), "{}", outputs[0]);
    assert_eq!(b.envelope(&agent_1).await.unwrap(), None);
    b.close_and_wait().await;
    // Still `a`'s: unclaimed, its wake still owed, readable by `a`.
    let kept = store.get(&agent_1).unwrap();
    assert!(!kept.claimed && kept.wake_owed, "{kept:#?}");
    let config = ThreadConfig::new(DelegationBuilder::new(
        ScriptedModel::new(vec![Reply::answer("Noted."); 2]).shared(),
    ))
    .store(store.clone())
    .id(ThreadId::new("a"));
    let (a, _events) = ThreadHandle::spawn(config, None).await.unwrap();
    let own = a.envelope(&agent_1).await.unwrap();
    assert!(own.is_some_and(|e| e.result.as_deref() == Some("alpha's private answer")));
    a.close_and_wait().await;
}

/// The parent's approval id `parent-approval-1` after a restart: a
/// thread's parent numbered its approvals from 1 in every session, so a
/// host's row restored from before a kill (`parent-approval-1`, asked to
/// post one thing) answered the new parent's first request (to post
/// another) — approving a call the user never saw. Each session's parent
/// numbers past every earlier session's (the store counts its opens).
#[tokio::test]
async fn an_approval_id_of_an_earlier_session_never_answers_a_new_request() {
    use subagents::messages::{ApprovalDecision, ApprovalRefusal, ApprovalRequest};
    use subagents::supervisor::ThreadError;
    async fn parent_asking(
        store: &Arc<EnvelopeStore>,
        body: &str,
    ) -> (ThreadHandle, EventStream, ApprovalRequest) {
        let model = ScriptedModel::new(vec![
            Reply::new().tool_call(
                "http_post",
                format!(r#"{{"url":"https://example.com","body":"{body}"}}"#),
            ),
            Reply::answer("Posted."),
        ]);
        let config = ThreadConfig::new(
            DelegationBuilder::new(model.shared())
                .tools(ToolRegistry::new().with(subagents_demo::Post)),
        )
        .store(store.clone());
        let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
        thread.send_user("post").unwrap();
        let asked = until(&mut events, &mut Vec::new(), |e| {
            matches!(e, AgentEvent::ApprovalRequested(_))
        })
        .await;
        let AgentEvent::ApprovalRequested(request) = asked else {
            unreachable!()
        };
        (thread, events, *request)
    }
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    let store = open(&live);
    let (thread, _events, stale) = parent_asking(&store, "first").await;
    let killed = tmp.path().join("killed");
    copy_dir(&live, &killed);
    thread.close_and_wait().await;
    drop((thread, store));

    let store = open(&killed);
    let (thread, _events, asked) = parent_asking(&store, "second").await;
    assert_ne!(
        asked.id, stale.id,
        "a new request under the earlier session's id"
    );
    assert_eq!(
        thread
            .resolve_approval(stale.id.clone(), ApprovalDecision::Approve)
            .await,
        Err(ThreadError::Approval(ApprovalRefusal::Unknown(
            stale.id.clone()
        )))
    );
    assert_eq!(
        thread
            .resolve_approval(asked.id.clone(), ApprovalDecision::Deny)
            .await,
        Ok(()),
        "the new request was still waiting"
    );
    thread.close_and_wait().await;
    // A thread opened again in the same session (closed, reopened under
    // its id): its parent's numbers are its own too.
    let (thread, _events, again) = parent_asking(&store, "third").await;
    assert!(
        again.id != asked.id && again.id != stale.id,
        "{:?}",
        again.id
    );
    thread.close_and_wait().await;
}

/// A thread whose hub crashed (it stays open, its children failed) read
/// no earlier session's child any more: the hub let its archive go as it
/// died (this session's fix for a killed thread's lock), and the thread
/// asked only the hub. It reads the store for them itself — and a stop
/// of one answers the status it ended with and cancels it there.
#[tokio::test]
async fn a_thread_whose_hub_crashed_still_reads_its_earlier_children() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    an_earlier_session_with_one_finished_child(&dir).await;
    let store = open(&dir);
    let model = ScriptedModel::new(vec![Reply::answer("Noted."); 2]);
    let (thread, _events) = thread_on(model.shared(), store.clone(), 3).await;
    let agent_1 = AgentId::new("agent_1");
    assert!(thread.envelope(&agent_1).await.unwrap().is_some());
    thread.hub().actor().kill();
    thread.hub().actor().wait(None).await.ok();
    let read = thread.envelope(&agent_1).await.unwrap();
    assert_eq!(
        read.and_then(|e| e.result),
        Some("first part done".to_owned())
    );
    // A stop of it answers the status it ended with, and cancels it in
    // the store (review: the contract — it read "unknown", recorded no
    // cancel, and the next session's message resumed it).
    assert_eq!(
        thread.stop_child(&agent_1).await.unwrap(),
        SubAgentStatus::Done
    );
    assert!(store.get(&agent_1).is_some_and(|e| e.cancelled));
    thread.close_and_wait().await;
}

/// Held (a thread linked under a host actor): after a stop ractor hands
/// the stopped actor's state to its supervisor inside the termination
/// event, which the host reads only between its handlers — so the
/// thread's state, with the stream's last sender and the store, outlived
/// `close_and_wait`. A host closing its threads in a handler or in its
/// `post_stop` (as supervisor.md advises) and then draining the stream
/// waited for ever, and the store's directory stayed locked. The thread
/// lets go of both as it stops.
#[tokio::test(start_paused = true)]
async fn a_thread_linked_under_a_host_lets_go_of_its_stream_and_store_as_it_closes() {
    use std::time::Duration;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let host = common::host::Host::spawn().await;
    let model = ScriptedModel::new(vec![Reply::answer("Hello.")]);
    let config = ThreadConfig::new(DelegationBuilder::new(model.shared())).store(open(&dir));
    let (thread, mut events) = ThreadHandle::spawn(config, Some(host.cell()))
        .await
        .unwrap();
    thread.send_user("hi").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    let answer = host
        .run(async move {
            thread.close_and_wait().await;
            let drained = async { while events.recv().await.is_some() {} };
            let ended = tokio::time::timeout(Duration::from_secs(3600), drained)
                .await
                .is_ok();
            let reopened = EnvelopeStore::open(&dir, Arc::new(SystemClock)).is_ok();
            (ended, reopened)
        })
        .await;
    assert_eq!(
        answer,
        (true, true),
        "(the stream ended, the store reopened)"
    );
}

/// Repeated across a restart: a stop of an ended child (here, an earlier
/// session's, finished `done`) cancels it for good — recorded in the
/// store, so neither this session's message nor the next session's
/// resumes it.
#[tokio::test]
async fn a_stop_of_an_earlier_sessions_ended_child_cancels_it_across_restarts() {
    use subagents::messages::SubAgentStatus;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    an_earlier_session_with_one_finished_child(&dir).await;
    let agent_1 = AgentId::new("agent_1");
    for session in 0..2 {
        let store = open(&dir);
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&UseAgentCall::send("agent_1", "one more")),
            Reply::answer("Tried."),
        ]);
        let (thread, mut events) = thread_on(model.shared(), store.clone(), 3).await;
        if session == 0 {
            assert_eq!(thread.stop_child(&agent_1).await, Ok(SubAgentStatus::Done));
            assert!(store.get(&agent_1).is_some_and(|e| e.cancelled));
        }
        thread.send_user("send it more").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        let sent = log.iter().find_map(|e| match e {
            AgentEvent::ToolResult(r) if r.name == "use_agent" => Some(r.clone()),
            _ => None,
        });
        let sent = sent.expect("the send's answer");
        assert!(sent.is_error, "session {session}: {}", sent.output);
        assert!(
            sent.output.contains("was stopped and does not resume"),
            "{}",
            sent.output
        );
        thread.close_and_wait().await;
        drop((thread, store));
    }
}

/// Stopped midway (a hub gone with wakes owed): after a restart with two
/// owed wakes, the hub stopped while the first wake's turn ran; the
/// second was then looked up through the hub's archive — gone with the
/// hub — found nowhere, taken for one claimed meanwhile and settled on
/// disk: the parent never told, in this process or the next. The thread
/// reads an earlier session's child from its store once the hub is gone.
#[tokio::test]
async fn an_owed_wake_behind_another_survives_the_hubs_stop() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    let (thread, store, _) = two_owed_wakes(&live).await;
    let killed = tmp.path().join("killed");
    copy_dir(&live, &killed);
    thread.close_and_wait().await;
    drop((thread, store));
    assert_eq!(
        open(&killed).owed_wakes(),
        [AgentId::new("agent_1"), AgentId::new("agent_2")]
    );

    let model = ScriptedModel::new(vec![Reply::new().hang(), Reply::answer("Beta noted.")]);
    let store = open(&killed);
    let (thread, mut events) = thread_on(model.shared(), store.clone(), 3).await;
    thread.sync().await.unwrap(); // agent_1's wake is out, its turn hangs
    thread.hub().actor().stop(None);
    thread.hub().actor().wait(None).await.ok();
    thread.stop_parent().unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await; // agent_1's wake turn, stopped
    thread.sync().await.unwrap(); // its end read: the next wake goes out
    thread.sync().await.unwrap();
    drain(&mut events, &mut log);
    assert_eq!(woken_children(&log), ["agent_1", "agent_2"], "{log:#?}");
    thread.close_and_wait().await;
}

/// Repeated, across a restart: a message to an earlier session's child
/// that cannot go on here (its model is gone) brought its envelope into
/// the hub's book; a stop of it then cancelled it and told the thread,
/// which took the notice for a fresh finish — the parent was woken a
/// second time with a day-old answer, just after it had stopped that
/// child ("at most one wake per child"). A notice of an earlier session's
/// child wakes nobody: its wake was that session's.
#[tokio::test]
async fn an_earlier_sessions_child_stopped_here_wakes_nobody_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    an_earlier_session_on_a_model_since_gone(&dir).await;
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "the second part")),
        Reply::new().use_agent(&UseAgentCall::stop("agent_1")),
        Reply::answer("Stopped it."),
        Reply::answer("(a second wake)"),
    ]);
    let store = open(&dir);
    let (thread, mut events) = thread_on(model.shared(), store.clone(), 3).await;
    thread.send_user("more").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    // Real time (a store's writes): a wake would come at once.
    thread.sync().await.unwrap();
    run_for(&mut events, &mut log, 1).await;
    let answers = results_of(&log, "use_agent");
    assert!(answers[0].0.contains("cannot go on here"), "{answers:?}");
    assert!(answers[1].0.contains("\"cancelled\":true"), "{answers:?}");
    assert_eq!(woken_children(&log), Vec::<String>::new());
    thread.flush_persistence().await.unwrap();
    let agent_1 = store.get(&AgentId::new("agent_1")).unwrap();
    assert!(agent_1.cancelled && !agent_1.wake_owed, "{agent_1:?}");
    thread.close_and_wait().await;
}

/// Stopped midway across a restart (a review of what a model's ids
/// reach): `agent_1`, resumed as `agent_2` in an earlier session, was
/// stopped here by the id the model knew first — the answer said
/// "cancelled for good", yet only `agent_1` was cancelled (the stop
/// followed the chain through the hub's book, which after a restart
/// holds neither run), and a later message resumed `agent_2` as a new
/// run, its tools run again. A stop follows the chain through the
/// store too, as a message does.
#[tokio::test]
async fn a_stop_by_a_resumed_childs_first_id_reaches_its_newest_run_after_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    resumed_in_a_second_session(&dir).await;
    let store = open(&dir);
    assert_eq!(
        store.get(&AgentId::new("agent_1")).unwrap().continued_as,
        Some(AgentId::new("agent_2"))
    );
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "and again")),
        Reply::answer("Tried."),
    ]);
    let (thread, mut events) = thread_on(model.shared(), store.clone(), 3).await;
    a_stop_of_agent_1_cancels_agent_2(&thread, &store).await;
    thread.send_user("send it more").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let sent = log
        .iter()
        .find_map(|e| match e {
            AgentEvent::ToolResult(r) if r.name == "use_agent" => Some(r.clone()),
            _ => None,
        })
        .expect("the send's answer");
    assert!(
        sent.is_error && sent.output.contains("was stopped and does not resume"),
        "{}",
        sent.output
    );
    thread.close_and_wait().await;
}

/// Across a restart (review: what a model's ids reach): a child resumed
/// in an earlier session (`agent_1` went on as `agent_3`), resumed again
/// here as `agent_4`, asked for the result of the grandchild its chain's
/// first run started (`agent_2`): "there is no sub-agent with id
/// `agent_2`" — the check followed the chain through the hub's book,
/// which after a restart holds neither `agent_1` nor its link. Through
/// the store too, as in the session that ran them.
#[tokio::test(start_paused = true)]
async fn a_resumed_run_reaches_its_chains_children_after_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let config = |model: ScriptedModel, store| {
        ThreadConfig::new(
            DelegationBuilder::new(model.shared())
                .system_prompt("You are the parent.")
                .max_depth(2),
        )
        .store(store)
    };
    let alpha = vec![
        Reply::new().use_agent(&UseAgentCall::run("Grand\nYou help.", "help").wait(true)),
        Reply::answer("alpha done"),
        Reply::answer("more done"),
        Reply::new().use_agent(&UseAgentCall::result("agent_2")),
        Reply::answer("read it"),
    ];
    {
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&UseAgentCall::run("Alpha\nYou work.", "work").background()),
            Reply::answer("Started."),
            Reply::answer("Noted."),
            Reply::new().use_agent(&UseAgentCall::send("agent_1", "more")),
            Reply::answer("Sent."),
            Reply::answer("Noted."),
        ])
        .with_script("Alpha", alpha.clone())
        .with_script("Grand", vec![Reply::answer("grand-answer")]);
        let (thread, mut events) = ThreadHandle::spawn(config(model, open(&dir)), None)
            .await
            .unwrap();
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        until_wake(&mut events, &mut log, "agent_1").await;
        until_result(&mut events, &mut log).await;
        thread.send_user("more").unwrap();
        until_wake(&mut events, &mut log, "agent_3").await;
        until_result(&mut events, &mut log).await;
        thread.close_and_wait().await;
    }
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::send("agent_3", "and the helper's answer?")),
        Reply::answer("Sent."),
        Reply::answer("Noted."),
    ])
    .with_script("Alpha", alpha)
    .with_script("Grand", vec![Reply::answer("grand-answer")]);
    let (thread, mut events) = ThreadHandle::spawn(config(model, open(&dir)), None)
        .await
        .unwrap();
    thread.send_user("again").unwrap();
    let mut log = Vec::new();
    until_wake(&mut events, &mut log, "agent_4").await;
    until_result(&mut events, &mut log).await;
    let read = log
        .iter()
        .find_map(|e| match e {
            AgentEvent::Child(id, inner) if id.as_str() == "agent_4" => match &**inner {
                AgentEvent::ToolResult(r) if r.name == "use_agent" => Some(r.clone()),
                _ => None,
            },
            _ => None,
        })
        .expect("agent_4's result call");
    assert!(
        !read.is_error && read.output.contains("grand-answer"),
        "{}",
        read.output
    );
    thread.close_and_wait().await;
}
