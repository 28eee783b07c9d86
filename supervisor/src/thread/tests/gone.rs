//! A thread whose parent agent is gone: its turns and its wakes.

use std::time::Duration;

use subagents_actors::scripted::{Reply, ScriptedModel};
use subagents_actors::{DelegationBuilder, ToolRegistry, UseAgentCall};
use subagents_demo::Sleep;
use subagents_messages::{AgentEvent, AgentId, SubAgentStatus};

use crate::thread::{ThreadError, ThreadHandle};

/// Stopped midway: the thread's parent agent is gone (its actor died; only
/// a ractor host holding its ref could do it). A user turn then went on
/// the stream as a `UserMessage` and was never answered — a stream that
/// never yields its `Result`. It now ends in one failed `Result`.
#[tokio::test(start_paused = true)]
async fn a_turn_for_a_parent_that_is_gone_still_ends_in_a_result() {
    let model = ScriptedModel::new(vec![Reply::answer("never")]);
    let (thread, mut events) = ThreadHandle::spawn(DelegationBuilder::new(model.shared()), None)
        .await
        .unwrap();
    let parent = thread.parts.agent.actor().clone();
    parent.kill();
    parent.wait(None).await.ok();
    thread.send_user("hello?").unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    while let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.recv()).await {
        let done = matches!(event, AgentEvent::Result(_));
        seen.push(event);
        if done {
            break;
        }
    }
    assert!(
        matches!(&seen[0], AgentEvent::UserMessage(t) if t == "hello?"),
        "{seen:?}"
    );
    assert!(
        matches!(seen.last(), Some(AgentEvent::Result(r))
            if matches!(&r.outcome, subagents_messages::Outcome::Failed(why) if why.contains("parent agent is gone"))),
        "{seen:?}"
    );
    // Open, its parent gone (review: the typed host boundary): it read
    // `Closed`, "the thread is closed".
    assert_eq!(thread.usage().await, Err(ThreadError::ParentGone));
    assert_eq!(
        thread.parent_snapshot().await.err(),
        Some(ThreadError::ParentGone)
    );
    thread.close_and_wait().await;
    assert_eq!(thread.usage().await, Err(ThreadError::Closed));
}

/// A fresh store directory and the manual clock its store and threads
/// share.
fn on_a_store() -> (
    tempfile::TempDir,
    std::sync::Arc<subagents_actors::clock::ManualClock>,
) {
    let clock = subagents_actors::clock::ManualClock::new(1_700_000_000_000);
    (tempfile::tempdir().unwrap(), std::sync::Arc::new(clock))
}

/// The store in `dir` (opened again after a kill: what the next process
/// reads).
fn store_at(
    dir: &tempfile::TempDir,
    clock: &std::sync::Arc<subagents_actors::clock::ManualClock>,
) -> std::sync::Arc<crate::store::EnvelopeStore> {
    let opened = crate::store::EnvelopeStore::open(dir.path(), clock.clone());
    std::sync::Arc::new(opened.unwrap().0)
}

/// A thread of `model`'s parent with the `sleep` tool, on `store`.
fn with_sleep_on(
    model: ScriptedModel,
    clock: &std::sync::Arc<subagents_actors::clock::ManualClock>,
    store: std::sync::Arc<crate::store::EnvelopeStore>,
) -> crate::thread::ThreadConfig {
    crate::thread::ThreadConfig::new(
        DelegationBuilder::new(model.shared())
            .tools(ToolRegistry::new().with(Sleep))
            .clock(clock.clone()),
    )
    .store(store)
}

/// Stopped midway (review: wakes at the same instant, thirty-fourth
/// session, and the last reads of its change): with the parent agent gone,
/// a wake sent to it ended in a failed `Result` no model read, and the
/// next waited for some unrelated message; sent one after another, each
/// was settled on disk — and one that finished after the parent died was
/// settled as it went out. No wake goes to a gone parent: each stays owed,
/// on disk too, for a restart (held by the user typing, or finished after
/// the parent died); a close settles them.
#[tokio::test(start_paused = true)]
async fn wakes_for_a_parent_that_is_gone_stay_owed_until_a_close() {
    for (held, close) in [(true, false), (false, false), (true, true)] {
        let (tmp, clock) = on_a_store();
        let open = || store_at(&tmp, &clock);
        // Their work in a tool: a model call's delay holds the gate, and
        // the parent's answer waited for it.
        let secs = if held { 1 } else { 30 };
        let delay = Duration::from_secs(secs);
        let work = |answer: &str| {
            vec![
                Reply::new().tool_call("sleep", format!(r#"{{"secs":{secs}}}"#)),
                Reply::answer(answer),
            ]
        };
        let run = |who: &str| {
            UseAgentCall::run(format!("{who}\nYou work."), "work")
                .tools(["sleep"])
                .background()
        };
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&run("One")).use_agent(&run("Two")),
            Reply::answer("Started."),
        ])
        .with_script("One\n", work("one"))
        .with_script("Two\n", work("two"));
        let config = with_sleep_on(model, &clock, open());
        let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
        let start = tokio::time::Instant::now();
        if held {
            thread.typing(true).unwrap();
        }
        thread.send_user("go").unwrap();
        let mut done = 0;
        while done < if held { 2 } else { 1 } {
            match events.recv().await {
                Some(AgentEvent::ChildStatus(_, SubAgentStatus::Done)) if held => done += 1,
                Some(AgentEvent::Result(_)) if !held => done += 1,
                Some(_) => {}
                None => panic!("the stream ended"),
            }
        }
        if held {
            thread.sync().await.unwrap();
        }
        let parent = thread.parts.agent.actor().clone();
        parent.kill();
        parent.wait(None).await.ok();
        assert!(
            held || tokio::time::Instant::now() - start < delay,
            "the children finished before the parent died"
        );
        thread.typing(false).unwrap();
        let mut woken = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.recv()).await {
            if let AgentEvent::Wake { child, .. } = event {
                woken.push(child);
            }
        }
        assert!(woken.is_empty(), "held {held}: {woken:?}");
        thread.flush_persistence().await.unwrap();
        if close {
            thread.close_and_wait().await;
        } else {
            thread.actor().kill();
            thread.actor().wait(None).await.ok();
        }
        drop(thread);
        let owed = open().owed_wakes();
        if close {
            assert!(owed.is_empty(), "owed after a close: {owed:?}");
        } else {
            assert_eq!(
                owed,
                [AgentId::new("agent_1"), AgentId::new("agent_2")],
                "held {held}: owed after a restart"
            );
        }
    }
}

/// Stopped midway (the last read of this session's change): a parent
/// killed while it read a wake (in a tool of its wake turn) ended that
/// turn, and its end settled the wake on disk — though no model read it
/// to its end: the next process never told the new parent. Owed still.
#[tokio::test(start_paused = true)]
async fn a_wake_being_read_when_the_parent_dies_stays_owed() {
    let (tmp, clock) = on_a_store();
    let open = || store_at(&tmp, &clock);
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run("One\nYou work.", "work")
                .tools(["sleep"])
                .background(),
        ),
        Reply::answer("Started."),
        Reply::new().tool_call("sleep", r#"{"secs":30}"#),
        Reply::answer("Read."),
    ])
    .with_script(
        "One\n",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":1}"#),
            Reply::answer("one"),
        ],
    );
    let config = with_sleep_on(model, &clock, open());
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut woken = false;
    loop {
        match events.recv().await {
            Some(AgentEvent::Wake { .. }) => woken = true,
            Some(AgentEvent::ToolStarted(call)) if woken && call.name == "sleep" => break,
            Some(_) => {}
            None => panic!("the stream ended"),
        }
    }
    let parent = thread.parts.agent.actor().clone();
    parent.kill();
    parent.wait(None).await.ok();
    tokio::time::sleep(Duration::from_secs(1)).await;
    thread.sync().await.unwrap();
    thread.flush_persistence().await.unwrap();
    thread.actor().kill();
    thread.actor().wait(None).await.ok();
    drop(thread);
    assert_eq!(open().owed_wakes(), [AgentId::new("agent_1")]);
}
