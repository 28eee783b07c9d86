//! What a thread holds and writes: requests, runs, the store's prunes.

use subagents_actors::scripted::{Reply, ScriptedModel};
use subagents_actors::{DelegationBuilder, ToolRegistry, UseAgentCall};
use subagents_messages::AgentId;

use crate::thread::ThreadHandle;
use crate::thread::msg::ThreadMsg;
use crate::thread::msg::sealed::ThreadInternal;

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
    super::until_result(&mut events).await;
    thread.sync().await.unwrap();
    let held = ractor::call!(thread.actor, |reply| ThreadMsg::Internal(
        ThreadInternal::HeldRequests(reply)
    ))
    .unwrap();
    assert_eq!(held, 0);
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
    super::until_result(&mut events).await;
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
    super::until_result(&mut events).await;
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
    use crate::thread::{persist::Writer, shared::PersistErrors};
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

/// Shared (review: a host in a server): each thread's writer took a
/// pool thread for every write, and every one of them waited there on the
/// store's one lock — threads with writes queued behind a slow disk (or a
/// prune) held the whole blocking pool, and every other `spawn_blocking`
/// (a host tool's, `tokio::fs`, a connection's DNS lookup) waited behind
/// them. One pool thread at a time writes for a store.
#[test]
#[allow(
    clippy::await_holding_lock,
    reason = "the test holds the store's lock on purpose"
)]
fn the_writes_of_many_threads_leave_the_blocking_pool_to_others() {
    use std::sync::Arc;
    use std::time::Duration;
    use subagents_actors::clock::ManualClock;

    use crate::store::EnvelopeStore;
    use crate::thread::ThreadConfig;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let store = Arc::new(EnvelopeStore::open(tmp.path(), clock).unwrap().0);
    runtime.block_on(async {
        let mut threads = Vec::new();
        for _ in 0..3 {
            let model = ScriptedModel::new(vec![
                Reply::new().use_agent(&UseAgentCall::run("Slow\nYou wait.", "wait").background()),
                Reply::answer("Started."),
            ])
            .with_script("Slow\n", vec![Reply::new().hang()]);
            let config =
                ThreadConfig::new(DelegationBuilder::new(model.shared())).store(store.clone());
            threads.push(ThreadHandle::spawn(config, None).await.unwrap());
        }
        // The store's lock held (a slow disk, a prune) while they write.
        let io = store.lock_io();
        for (thread, events) in &mut threads {
            thread.send_user("go").unwrap();
            super::until_result(events).await;
            thread.sync().await.unwrap();
        }
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        let other = tokio::task::spawn_blocking(|| 7);
        let ran = tokio::time::timeout(Duration::from_secs(20), other).await;
        drop(io);
        assert!(
            matches!(ran, Ok(Ok(7))),
            "a blocking task waited behind the store's writers"
        );
        for (thread, _) in threads {
            thread.close_and_wait().await;
        }
    });
}
