//! Tests that need the supervisor's sealed messages.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use subagents_actors::scripted::{Reply, ScriptedModel};
use subagents_actors::{DelegationBuilder, ToolRegistry, UseAgentCall};
use subagents_demo::Sleep;
use subagents_messages::{AgentEvent, AgentId, SubAgentStatus};

use crate::thread::msg::ThreadMsg;
use crate::thread::msg::sealed::ThreadInternal;
use crate::thread::{ThreadError, ThreadHandle};

/// The hub reports a completion that raced the switch only after the
/// supervisor handled the switch (its observer message was still on the
/// way): that child must not wake the parent.
#[tokio::test(start_paused = true)]
async fn a_completion_reported_after_the_switch_does_not_wake() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run("Worker 1\nYou work.", "work 100 s")
                .tools(["sleep"])
                .background(),
        ),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Worker 1\n",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":100}"#),
            Reply::answer("worked 100 s"),
        ],
    );
    let builder = DelegationBuilder::new(model.shared()).tools(ToolRegistry::new().with(Sleep));
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    thread.send_user("start").unwrap();
    while let Some(event) = events.recv().await {
        if matches!(event, AgentEvent::Result(_)) {
            break;
        }
    }
    thread.switch_away().await.unwrap();
    let mut late = thread
        .envelope(&AgentId::new("agent_1"))
        .await
        .unwrap()
        .unwrap();
    late.status = SubAgentStatus::Done;
    late.result = Some("finished at the instant of the switch".into());
    thread
        .actor
        .cast(ThreadMsg::Internal(ThreadInternal::ChildFinished(
            Box::new(late),
        )))
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut woke = false;
    while let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.recv()).await {
        woke |= matches!(event, AgentEvent::Wake { .. });
    }
    assert!(!woke, "a child of before the switch woke the parent");
    thread.close_and_wait().await;
}

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

/// Held at rest: a thread with no store kept every child's request (its
/// system prompt, task, tools; a resumed run's whole conversation) for
/// its whole life — only a run file's last write took one out, and with
/// no store there is none.
#[tokio::test(start_paused = true)]
async fn a_thread_without_a_store_holds_no_finished_childs_request() {
    let mut first = Reply::new();
    for i in 1..=3 {
        first = first
            .use_agent(&UseAgentCall::run(format!("Worker {i}\nYou work."), "work").wait(true));
    }
    let model = ScriptedModel::new(vec![first, Reply::answer("Done.")])
        .with_script("Worker 1\n", vec![Reply::answer("one")])
        .with_script("Worker 2\n", vec![Reply::answer("two")])
        .with_script("Worker 3\n", vec![Reply::answer("three")]);
    let (thread, mut events) = ThreadHandle::spawn(DelegationBuilder::new(model.shared()), None)
        .await
        .unwrap();
    thread.send_user("start").unwrap();
    while let Some(event) = events.recv().await {
        if matches!(event, AgentEvent::Result(_)) {
            break;
        }
    }
    thread.sync().await.unwrap();
    let held = ractor::call!(thread.actor, |reply| ThreadMsg::Internal(
        ThreadInternal::HeldRequests(reply)
    ))
    .unwrap();
    assert_eq!(held, 0);
    thread.close_and_wait().await;
}

/// Review of this session's own change (a restart wake with nobody left
/// to list): the children a restart interrupted were pruned while their
/// wake waited (the user typing); the wake was skipped — but taken as one
/// in flight, it held the queue, and no later wake of the thread went out
/// for the rest of the session.
#[tokio::test]
async fn a_restart_wake_with_nobody_left_to_list_holds_no_later_wake() {
    use std::sync::Arc;
    use subagents_actors::clock::ManualClock;

    use crate::store::EnvelopeStore;
    use crate::thread::ThreadConfig;

    let tmp = tempfile::tempdir().unwrap();
    let hour = 3_600_000;
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let retention = Duration::from_millis(hour);
    let open = || {
        Arc::new(
            EnvelopeStore::open_with_retention(tmp.path(), clock.clone(), retention)
                .unwrap()
                .0,
        )
    };
    // A session whose background child is running when it ends.
    {
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(
                &UseAgentCall::run("Long\nYou work.", "work")
                    .tools(["sleep"])
                    .background(),
            ),
            Reply::answer("Started."),
        ])
        .with_script(
            "Long\n",
            vec![Reply::new().tool_call("sleep", r#"{"secs":3600}"#)],
        );
        let config = ThreadConfig::new(
            DelegationBuilder::new(model.shared())
                .tools(ToolRegistry::new().with(Sleep))
                .clock(clock.clone()),
        )
        .store(open());
        let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
        thread.send_user("go").unwrap();
        while let Some(event) = events.recv().await {
            if matches!(event, AgentEvent::Result(_)) {
                break;
            }
        }
        thread.flush_persistence().await.unwrap();
        // What a kill leaves: the store let go without the close's writes.
        thread.actor().kill();
        let _ = thread.actor().wait(None).await;
    }
    let store = open();
    assert_eq!(store.interrupted(), [AgentId::new("agent_1")]);
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run("Quick\nYou work.", "work").background()),
        Reply::answer("Started."),
        Reply::answer("Woken."),
    ])
    .with_script("Quick\n", vec![Reply::answer("done quickly")]);
    let config = ThreadConfig::new(DelegationBuilder::new(model.shared()).clock(clock.clone()))
        .store(store.clone());
    let (thread, mut events) = ThreadHandle::spawn_with(config, None, Some(Default::default()))
        .await
        .unwrap();
    // Its restart wake taken, held by the user typing…
    thread.typing(true).unwrap();
    thread.on_screen(true).unwrap();
    thread.sync().await.unwrap();
    // …while the retention passes and a prune takes the child.
    clock.set(1_700_000_000_000 + 2 * hour);
    assert_eq!(store.prune().removed, [AgentId::new("agent_1")]);
    thread.typing(false).unwrap();
    thread.send_user("start one").unwrap();
    let woken = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(event) = events.recv().await {
            if let AgentEvent::Wake { child, .. } = event {
                return Some(child);
            }
        }
        None
    })
    .await;
    assert_eq!(
        woken,
        Ok(Some(AgentId::new("agent_2"))),
        "the later wake never went out"
    );
    thread.close_and_wait().await;
}

/// One answer of a child calling a quick tool many times (a calculator,
/// a lookup): the thread copied the child's whole conversation at every
/// answered call and wrote each copy in full, two fsyncs each — K calls
/// held K copies at once and wrote K² messages, and a stop, a close or a
/// flush queued behind them. One queued run write per child stands for
/// every step taken until the writer reads it.
#[tokio::test]
async fn a_burst_of_quick_tool_calls_writes_the_run_a_few_times_not_once_a_call() {
    use std::sync::Arc;
    use subagents_actors::clock::ManualClock;
    use subagents_demo::Calculator;

    use crate::store::EnvelopeStore;
    use crate::thread::ThreadConfig;

    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let store = Arc::new(EnvelopeStore::open(tmp.path(), clock.clone()).unwrap().0);
    let calls = 300;
    let burst = (0..calls).fold(Reply::new(), |reply, _| {
        reply.tool_call("calculator", r#"{"expression":"1+1"}"#)
    });
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run("Adder\nYou add.", "add")
                .tools(["calculator"])
                .wait(true),
        ),
        Reply::answer("Added."),
    ])
    .with_script("Adder\n", vec![burst, Reply::answer("all added")]);
    let config = ThreadConfig::new(
        DelegationBuilder::new(model.shared())
            .tools(ToolRegistry::new().with(Calculator))
            .clock(clock),
    )
    .store(store.clone());
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    thread.send_user("go").unwrap();
    while let Some(event) = events.recv().await {
        if matches!(event, AgentEvent::Result(_)) {
            break;
        }
    }
    thread.flush_persistence().await.unwrap();
    let written = store.run_writes.load(std::sync::atomic::Ordering::Relaxed);
    let (_, conversation) = store.run(&AgentId::new("agent_1")).unwrap();
    // The task, the answer with its calls, each result, the last answer.
    assert_eq!(conversation.len(), calls + 3, "the whole run is on disk");
    assert!(written <= 30, "{written} run writes for {calls} calls");
    thread.close_and_wait().await;
}

/// Cost that grows with the store (review: cost faster than its input):
/// every envelope write pruned — a read of every envelope and a listing
/// of every run file under the store's lock, N steps a write, N² over a
/// retention window on every thread's writes. A parent starting 40
/// children at one instant pruned 80 times and more. A thread's writes
/// prune at most once a minute of the store's clock.
#[tokio::test]
async fn a_burst_of_children_prunes_the_store_once_not_once_a_write() {
    use std::sync::Arc;
    use subagents_actors::clock::ManualClock;

    use crate::store::EnvelopeStore;
    use crate::thread::ThreadConfig;

    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let store = Arc::new(EnvelopeStore::open(tmp.path(), clock.clone()).unwrap().0);
    let children = 40;
    let burst = (0..children).fold(Reply::new(), |reply, n| {
        reply.use_agent(&UseAgentCall::run("Worker\nYou work.", format!("part {n}")).background())
    });
    let model = ScriptedModel::new(vec![burst, Reply::answer("Started.")])
        .with_script("Worker\n", vec![Reply::answer("done"); children]);
    let config =
        ThreadConfig::new(DelegationBuilder::new(model.shared()).clock(clock)).store(store.clone());
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    thread.send_user("go").unwrap();
    while let Some(event) = events.recv().await {
        if matches!(event, AgentEvent::Result(_)) {
            break;
        }
    }
    thread.flush_persistence().await.unwrap();
    assert_eq!(store.all().len(), children, "every child on disk");
    let prunes = store
        .schedule
        .count
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(prunes <= 2, "{prunes} prunes for {children} children");
    thread.close_and_wait().await;
}

/// Review of this session's own change: the messages a running child
/// took and has not read were read as the end of its conversation — but
/// they move (read at its next call, they go after what it adds before):
/// a queued write extended from such a copy went on from the wrong place
/// (a tool's result lost, two identical messages matched as one and the
/// tail written three times), and every step while one waited copied the
/// whole conversation again. Kept apart: the conversation only grows, the
/// unread tail is replaced at each step, and written after it.
#[tokio::test]
async fn a_queued_run_write_goes_on_from_its_conversation_and_writes_what_waits_last() {
    use crate::thread::persist::{PersistErrors, Writer};
    use subagents_messages::{ChatMessage, ChildRequest, ToolCall, ToolUseId};
    let tmp = tempfile::tempdir().unwrap();
    let clock = std::sync::Arc::new(subagents_actors::clock::ManualClock::new(0));
    let (store, _) = crate::store::EnvelopeStore::open(tmp.path(), clock).unwrap();
    let store = std::sync::Arc::new(store);
    let writer = Writer::start(store.clone(), PersistErrors::default());
    let id = AgentId::new("agent_1");
    let request = std::sync::Arc::new(ChildRequest::new(
        id.clone(),
        0,
        ToolUseId::new("call_1"),
        "Worker",
        "work",
    ));
    let call = ToolCall {
        id: ToolUseId::new("c1"),
        name: "sleep".into(),
        arguments: "{}".into(),
        extra_content: None,
    };
    let (task, answer) = (
        ChatMessage::user("work"),
        ChatMessage::assistant("", vec![call]),
    );
    let slept = ChatMessage::tool(ToolUseId::new("c1"), "slept");
    let waiting = ChatMessage::user("[message from the agent that started you]\ngo on");
    // Queued (the writer not run yet): the answer, two identical messages
    // waiting; then its call's result, the messages still waiting.
    let history = [task.clone(), answer.clone()];
    writer.send_run(&id, &request, history.to_vec(), vec![waiting.clone(); 2]);
    let now = [task.clone(), answer.clone(), slept.clone()];
    let since = |from: usize| {
        let read = now.get(from..).map(<[ChatMessage]>::to_vec)?;
        Some((read, vec![waiting.clone(); 2]))
    };
    assert!(writer.extend_queued_run(&id, since));
    writer.flushed().await.unwrap();
    let (_, saved) = store.run(&id).unwrap();
    assert_eq!(saved, [task, answer, slept, waiting.clone(), waiting]);
    writer.finish().await;
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
