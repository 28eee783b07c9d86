//! An earlier session's child the hub took into its book (a message
//! brought it in) is a copy as it was read: the store's is the one that
//! says whether another thread stopped it, whose it is, and whether its
//! wake is still owed.

use subagents::messages::{Outcome, ThreadId};
use subagents::prelude::ToolRegistry;

use super::*;
use crate::common::held::Hold;

/// Shared, stale (review 27: persisted data): thread Y's message to an
/// earlier session's `agent_1` took it into Y's book but was refused (its
/// call cut before the hub read it); thread X then stopped `agent_1` —
/// cancelled for good, on disk. Y's next message resumed it from its own
/// copy, which still said it was not: a child the host had stopped went
/// on, its tools run again. The store's word is read before a resume.
#[tokio::test]
async fn a_child_another_thread_stopped_is_not_resumed_from_a_stale_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    an_earlier_session_with_one_finished_child(&dir).await;
    let store = open(&dir);
    let idle = ScriptedModel::new(vec![Reply::answer("x")]);
    let (x, _events_x) = thread_on(idle.shared(), store.clone(), 3).await;
    let hold = Arc::new(tokio::sync::Notify::new());
    let model = ScriptedModel::new(vec![
        Reply::new()
            .tool_call("hold", "{}")
            .use_agent(&UseAgentCall::send("agent_1", "the second part")),
        // The cut turn's note is the conversation's second assistant
        // message (a scripted model answers by their count).
        Reply::answer("(the cut turn's note)"),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "the second part")),
        Reply::answer("Tried."),
    ])
    .with_script("Worker", vec![Reply::answer("second part done")]);
    let config = ThreadConfig::new(
        DelegationBuilder::new(model.shared())
            .system_prompt("You are the parent.")
            .tools(ToolRegistry::new().with(Hold(hold.clone()))),
    )
    .store(store.clone());
    let (y, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    y.send_user("more").unwrap();
    let mut log = Vec::new();
    until(
        &mut events,
        &mut log,
        |e| matches!(e, AgentEvent::ToolStarted(c) if c.name == "hold"),
    )
    .await;
    // Stopped and let go in one tick: the turn opens the send first, the
    // stop (one hop more, through the thread) cuts it, and the hub reads
    // the send after.
    y.stop_parent().unwrap();
    hold.notify_one();
    let result = until_result(&mut events, &mut log).await;
    assert_eq!(result.outcome, Outcome::Stopped);
    y.hub().sync().await.unwrap();
    let stopped = x.stop_child(&AgentId::new("agent_1")).await.unwrap();
    assert_eq!(stopped, SubAgentStatus::Done);
    assert!(store.get(&AgentId::new("agent_1")).unwrap().cancelled);
    y.send_user("again").unwrap();
    until_result(&mut events, &mut log).await;
    let answers = results_of(&log, "use_agent");
    assert!(
        answers.last().unwrap().0.contains("was stopped"),
        "{answers:?}"
    );
    assert!(
        !log.iter().any(|e| matches!(e, AgentEvent::ChildStarted(_))),
        "resumed: {log:#?}"
    );
    y.flush_persistence().await.unwrap();
    assert_eq!(
        store.get(&AgentId::new("agent_1")).unwrap().continued_as,
        None
    );
    x.close_and_wait().await;
    y.close_and_wait().await;
}

/// The same stale copy, the other way (review: shared resources): thread
/// X resumed `agent_1` (its run `agent_2` goes on); Y's book held a copy
/// of `agent_1` that said nothing of it, and Y's stop of `agent_1` stopped
/// the copy — answered `Ok(Done)`, cancelled `agent_1` on disk beside its
/// link — while X's run went on. The store's link is read for a run the
/// book holds ended: another thread's chain, refused.
#[tokio::test]
async fn a_stop_of_a_child_another_thread_resumed_is_refused_not_answered_done() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    an_earlier_session_with_one_finished_child(&dir).await;
    let store = open(&dir);
    let resumes = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "the second part")),
        Reply::answer("Sent."),
    ])
    // Its first run's answer is the script's first: the resumed run's
    // call is the second.
    .with_script("Worker", vec![Reply::answer("-"), Reply::new().hang()]);
    let (x, mut events_x) = thread_on(resumes.shared(), store.clone(), 3).await;
    let hold = Arc::new(tokio::sync::Notify::new());
    let model = ScriptedModel::new(vec![
        Reply::new()
            .tool_call("hold", "{}")
            .use_agent(&UseAgentCall::send("agent_1", "the second part")),
        Reply::answer("(the cut turn's note)"),
    ]);
    let config = ThreadConfig::new(
        DelegationBuilder::new(model.shared())
            .system_prompt("You are the parent.")
            .tools(ToolRegistry::new().with(Hold(hold.clone()))),
    )
    .store(store.clone());
    let (y, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    y.send_user("more").unwrap();
    let mut log = Vec::new();
    until(
        &mut events,
        &mut log,
        |e| matches!(e, AgentEvent::ToolStarted(c) if c.name == "hold"),
    )
    .await;
    // Y's send is cut as the hub reads it: its book holds `agent_1`.
    y.stop_parent().unwrap();
    hold.notify_one();
    until_result(&mut events, &mut log).await;
    y.hub().sync().await.unwrap();
    x.send_user("resume it").unwrap();
    let mut log_x = Vec::new();
    until_result(&mut events_x, &mut log_x).await;
    x.flush_persistence().await.unwrap();
    let first = store.get(&AgentId::new("agent_1")).unwrap();
    let resumed = first.continued_as.clone().expect("X resumed it");
    let stopped = y.stop_child(&AgentId::new("agent_1")).await;
    assert!(
        matches!(
            stopped,
            Err(subagents::supervisor::ThreadError::UnknownChild(_))
        ),
        "{stopped:?}"
    );
    y.flush_persistence().await.unwrap();
    assert!(!store.get(&AgentId::new("agent_1")).unwrap().cancelled);
    let running = x.hub().status(&resumed).unwrap().status;
    assert!(!running.is_terminal(), "{running:?}");
    x.close_and_wait().await;
    y.close_and_wait().await;
}

/// Shared, stale (review 27: persisted data): a named thread's write of
/// an earlier session's child written for no thread (here the link of
/// its resume; a cancel or a claim of its copy alike) stamped its own id
/// on it: every other thread on the store then read
/// "there is no sub-agent with id `agent_1`" — persistence.md: such a
/// child is the store's, and `result` still reads its answer.
#[tokio::test]
async fn a_named_threads_write_leaves_an_earlier_childs_owner_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    an_earlier_session_with_one_finished_child(&dir).await;
    let store = open(&dir);
    let named = |model: ScriptedModel, id: &str| {
        ThreadConfig::new(
            DelegationBuilder::new(model.shared()).system_prompt("You are the parent."),
        )
        .store(store.clone())
        .id(ThreadId::new(id))
    };
    let (y, mut events_y) = ThreadHandle::spawn(
        named(
            ScriptedModel::new(vec![
                Reply::new().use_agent(&UseAgentCall::send("agent_1", "the second part")),
                Reply::answer("Sent."),
                Reply::answer("Noted."),
            ])
            .with_script("Worker", vec![Reply::answer("second part done")]),
            "y",
        ),
        None,
    )
    .await
    .unwrap();
    y.send_user("send it more").unwrap();
    let mut log = Vec::new();
    until_wake(&mut events_y, &mut log, "agent_2").await;
    until_result(&mut events_y, &mut log).await;
    y.flush_persistence().await.unwrap();
    let agent_1 = store.get(&AgentId::new("agent_1")).unwrap();
    assert_eq!(agent_1.continued_as, Some(AgentId::new("agent_2")));
    assert_eq!(agent_1.thread, None, "{agent_1:?}");
    let (x, mut events_x) = ThreadHandle::spawn(
        named(
            ScriptedModel::new(vec![
                Reply::new().use_agent(&UseAgentCall::result("agent_1")),
                Reply::answer("Read."),
            ]),
            "x",
        ),
        None,
    )
    .await
    .unwrap();
    x.send_user("read it").unwrap();
    let mut log = Vec::new();
    until_result(&mut events_x, &mut log).await;
    let answers = results_of(&log, "use_agent");
    assert!(answers[0].0.contains("first part done"), "{answers:?}");
    x.close_and_wait().await;
    y.close_and_wait().await;
}

/// Stale (review 27: persisted data): after a restart, the parent's
/// message to its interrupted child (refused: its model is gone here)
/// took the child into the hub's book, its restart wake still owed in
/// that copy; the wake's turn ended and the store settled it; the host
/// then stopped the child, and the stop's notice wrote the book's copy —
/// owed again, on disk. The next process woke the parent about a child
/// the host had stopped ("it can go on from its saved conversation"). An
/// earlier session's wake is the store's to say. Without the stop, the
/// close's own write is the one that must leave the earlier session's
/// child alone (only this session's children are written at a close):
/// nothing else guarded that rule — a stop's `cancelled`, and a resume's
/// link, were kept by `save` and hid its removal.
#[tokio::test]
async fn a_stop_after_a_restart_wake_was_settled_owes_no_wake_again() {
    for stop in [true, false] {
        a_restart_wake_settled_then(stop).await;
    }
}

async fn a_restart_wake_settled_then(stop: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let killed = super::restart_list::a_killed_session_on_a_model_not_here(tmp.path()).await;

    // The restart: the wake goes out; its turn's message is refused.
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "go on")),
        Reply::answer("It cannot go on here."),
    ]);
    let store = open(&killed);
    assert_eq!(store.interrupted(), [AgentId::new("agent_1")]);
    let (thread, mut events) = thread_on(model.shared(), store.clone(), 3).await;
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    assert!(
        results_of(&log, "use_agent")[0]
            .0
            .contains("cannot go on here"),
        "{log:#?}"
    );
    thread.sync().await.unwrap();
    thread.flush_persistence().await.unwrap();
    assert!(!store.get(&AgentId::new("agent_1")).unwrap().wake_owed);
    if stop {
        let stopped = thread.stop_child(&AgentId::new("agent_1")).await.unwrap();
        assert_eq!(stopped, SubAgentStatus::Interrupted);
        thread.flush_persistence().await.unwrap();
        let agent_1 = store.get(&AgentId::new("agent_1")).unwrap();
        assert!(agent_1.cancelled && !agent_1.wake_owed, "{agent_1:?}");
    }
    thread.close_and_wait().await;
    drop((thread, store));

    // A third process owes the parent nothing.
    let store = open(&killed);
    assert!(
        store.interrupted().is_empty(),
        "stop: {stop}: {:?}",
        store.interrupted()
    );
    assert!(store.owed_wakes().is_empty());
}

/// The same at the store (a guard): a child cancelled during its restart
/// wake's turn, the process killed before that turn ended (a restart
/// wake is delivered at least once), was listed again — "it can go on
/// from its saved conversation" — though a message is refused. A
/// cancelled child owes no wake.
#[tokio::test]
async fn a_cancelled_child_is_owed_no_restart_wake() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let now = subagents::actors::clock::Clock::now_ms(&SystemClock);
    let store = open(&dir);
    let mut envelope = common::store::finished_envelope("agent_1", now);
    envelope.status = SubAgentStatus::Interrupted;
    envelope.wake_owed = true;
    envelope.cancelled = true;
    store.save(&envelope).unwrap();
    drop(store);
    let store = open(&dir);
    assert!(store.interrupted().is_empty(), "{:?}", store.interrupted());
    assert!(store.owed_wakes().is_empty());
}

/// The same stop, in the instant before the link is written (review:
/// shared resources): X's resume of `agent_1` is marked in the store at
/// once, its link written later on the blocking pool; Y's stop in between
/// read the chain as ending at `agent_1` — answered `Ok(Done)` and
/// cancelled it, and the chain the model was told it stopped went on. The
/// mark is read as the link is: another thread's chain, refused.
#[test]
fn a_stop_of_a_child_another_thread_is_resuming_is_refused_before_its_link_is_written() {
    a_stop_while_another_thread_resumes(false);
}

/// The same stop after Y's hub died (review of the thirty-second
/// session's change): a stop then goes through the store, not the hub —
/// the store kept the resume (its mark), but the stop was answered
/// `Ok(Done)` while X's run went on. Refused as the live hub refuses it.
#[test]
fn a_stop_after_the_hubs_death_of_a_child_another_thread_is_resuming_is_refused() {
    a_stop_while_another_thread_resumes(true);
}

fn a_stop_while_another_thread_resumes(y_hub_dead: bool) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(1)
        .build()
        .unwrap();
    runtime.block_on(async {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("envelopes");
        an_earlier_session_with_one_finished_child(&dir).await;
        let store = open(&dir);
        let resumes = ScriptedModel::new(vec![
            Reply::new().use_agent(&UseAgentCall::send("agent_1", "the second part")),
            Reply::answer("Sent."),
        ])
        .with_script("Worker", vec![Reply::answer("-"), Reply::new().hang()]);
        let (x, mut events_x) = thread_on(resumes.shared(), store.clone(), 3).await;
        let (y, _events_y) = thread_on(ScriptedModel::new(vec![]).shared(), store.clone(), 3).await;
        // The one blocking thread held: X's writes wait.
        let (release, plug) = std::sync::mpsc::channel::<()>();
        tokio::task::spawn_blocking(move || plug.recv());
        x.send_user("resume it").unwrap();
        let mut log_x = Vec::new();
        until(
            &mut events_x,
            &mut log_x,
            |e| matches!(e, AgentEvent::ChildStarted(info) if info.resumed_from.is_some()),
        )
        .await;
        x.sync().await.unwrap();
        let agent_1 = AgentId::new("agent_1");
        assert_eq!(
            store.get(&agent_1).unwrap().continued_as,
            None,
            "not written yet"
        );
        if y_hub_dead {
            y.hub().actor().kill();
            y.hub().actor().wait(None).await.ok();
        }
        let stopped = y.stop_child(&agent_1).await;
        assert!(
            matches!(
                stopped,
                Err(subagents::supervisor::ThreadError::UnknownChild(_))
            ),
            "{stopped:?}"
        );
        release.send(()).unwrap();
        x.flush_persistence().await.unwrap();
        y.flush_persistence().await.unwrap();
        let first = store.get(&agent_1).unwrap();
        assert!(
            first.continued_as.is_some() && !first.cancelled,
            "{first:?}"
        );
        x.close_and_wait().await;
        y.close_and_wait().await;
    });
}
