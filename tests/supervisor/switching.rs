//! `Threads::switch_to` at the edges: a switch given up half-way, and a
//! target closed while the thread on screen is being left.

use super::*;
use futures_util::FutureExt as _;
use std::sync::Arc;
use subagents::messages::ThreadId;
use subagents::supervisor::ThreadConfig;
use subagents::supervisor::Threads;
use subagents::supervisor::store::EnvelopeStore;

/// Two threads, `a` then `b`: `b` on screen, with a background child
/// running (so leaving it waits for that child to stop); `b`'s stream and
/// its log so far.
pub(super) async fn two_threads() -> (Threads, ThreadId, ThreadId, EventStream, Vec<AgentEvent>) {
    two_threads_with(background_workers(&[100])).await
}

/// The same, `b`'s model `model_b` (its first turn starts the child).
async fn two_threads_with(
    model_b: ScriptedModel,
) -> (Threads, ThreadId, ThreadId, EventStream, Vec<AgentEvent>) {
    let mut threads = Threads::new();
    let a = ThreadId::new("a");
    let b = ThreadId::new("b");
    let _ = threads
        .open(
            a.clone(),
            DelegationBuilder::new(background_workers(&[]).shared()),
        )
        .await
        .unwrap();
    let mut events_b = threads
        .open(
            b.clone(),
            DelegationBuilder::new(model_b.shared()).tools(ToolRegistry::new().with(Sleep)),
        )
        .await
        .unwrap();
    threads.get(&b).unwrap().send_user("start").unwrap();
    let mut log = Vec::new();
    until_result(&mut events_b, &mut log).await;
    (threads, a, b, events_b, log)
}

/// Stopped midway: a switch given up after its first step (a UI cancelling
/// it on the user's next click) had taken the thread on screen out of the
/// registry before leaving it: the registry said nothing was on screen,
/// the thread still thought it was, and the next switch never left it —
/// children it started later were not stopped, their wakes reached a
/// thread off screen. Until the leave is done, the one left is on screen.
#[tokio::test(start_paused = true)]
async fn a_switch_given_up_half_way_leaves_the_thread_on_screen() {
    let (mut threads, a, b, _events_b, _) = two_threads().await;
    assert!(
        threads.switch_to(&a).now_or_never().is_none(),
        "the leave waits for b's child to stop"
    );
    assert_eq!(
        threads.on_screen(),
        Some(&b),
        "given up: b is still on screen"
    );
    threads.switch_to(&a).await.unwrap();
    assert_eq!(threads.on_screen(), Some(&a));
    threads.delete(&a).await.unwrap();
    threads.delete(&b).await.unwrap();
}

/// Same instant, shared handle: the target closed (through a clone of its
/// handle) while the thread on screen was being left. The switch failed
/// `Closed` after leaving: nothing was on screen, the thread left was off
/// screen (its later wakes dropped) while the host's view still showed
/// it. The one left comes back on screen — in the registry and to the
/// thread itself: a child b starts afterwards wakes it (the test read the
/// registry alone, and b's model started nothing after the switch, so
/// b's own `on_screen(true)` could go unnoticed).
#[tokio::test(start_paused = true)]
async fn a_target_closed_while_the_current_is_left_puts_it_back_on_screen() {
    let model_b = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker 1", 100, false)),
        Reply::answer("Started."),
        Reply::answer("Noted."),
        Reply::new().use_agent(&work_call("Worker 2", 5, false)),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker 1\n", worker(100))
    .with_script("Worker 2\n", worker(5));
    let (mut threads, a, b, mut events_b, _) = two_threads_with(model_b).await;
    let target = threads.get(&a).unwrap().clone();
    // Runs at the switch's first wait, after its check of the target.
    let closer = tokio::spawn(async move { target.close() });
    assert_eq!(threads.switch_to(&a).await, Err(ThreadError::Closed));
    closer.await.unwrap();
    assert_eq!(threads.on_screen(), Some(&b));
    // Back on screen: b's wakes are delivered, not dropped.
    let mut log = Vec::new();
    let b_handle = threads.get(&b).unwrap().clone();
    b_handle.send_user("again").unwrap();
    until_result(&mut events_b, &mut log).await;
    b_handle.send_user("one more worker").unwrap();
    run_for(&mut events_b, &mut log, 60).await;
    assert_eq!(wakes(&log), ["agent_2"], "b's later child woke it");
    threads.delete(&b).await.unwrap();
}

/// Stopped midway: an open given up while the thread on screen was being
/// left (a UI cancelling it): the new thread was spawned, then dropped
/// with the future — nobody held it, and it ran for ever (its parent,
/// hub and gate, its model kept alive). It is closed.
#[tokio::test(start_paused = true)]
async fn an_open_given_up_half_way_closes_the_thread_it_made() {
    let (mut threads, a, b, _events_b, _) = two_threads().await;
    let model = background_workers(&[]).shared();
    let c = ThreadId::new("c");
    let opened = threads
        .open(c.clone(), DelegationBuilder::new(model.clone()))
        .now_or_never();
    assert!(opened.is_none(), "the leave waits for b's child to stop");
    assert!(threads.get(&c).is_err());
    // Everything the new thread made lets go of its model once it closed
    // (bounded: a thread left running holds it for ever).
    for _ in 0..10_000 {
        if std::sync::Arc::strong_count(&model) == 1 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(
        std::sync::Arc::strong_count(&model),
        1,
        "the thread still runs"
    );
    threads.delete(&a).await.unwrap();
    threads.delete(&b).await.unwrap();
}

/// A thread closed through its handle (`close()`, as docs/supervisor.md
/// tells hosts to close one) stayed in the registry: opening its id again
/// said "a thread `a` is already open", naming the wrong cause, and
/// `get` gave a handle whose every call was `Closed`. It opens again.
#[tokio::test(start_paused = true)]
async fn a_closed_threads_id_opens_again() {
    let mut threads = Threads::new();
    let a = ThreadId::new("a");
    let _ = threads
        .open(
            a.clone(),
            DelegationBuilder::new(background_workers(&[]).shared()),
        )
        .await
        .unwrap();
    threads.get(&a).unwrap().close_and_wait().await;
    let mut events = threads
        .open(
            a.clone(),
            DelegationBuilder::new(background_workers(&[]).shared()),
        )
        .await
        .expect("a closed thread's id opens again");
    threads.get(&a).unwrap().send_user("hello").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    assert_eq!(threads.on_screen(), Some(&a));
}

/// Stopped midway: a delete given up while it waited for the thread's
/// children to stop (a UI cancelling it) left the thread open, registered
/// and on screen — its docs promise "given up half-way, the thread still
/// closes".
#[tokio::test(start_paused = true)]
async fn a_delete_given_up_half_way_still_closes_the_thread() {
    let (mut threads, _a, b, mut events_b, _) = two_threads().await;
    let handle = threads.get(&b).unwrap().clone();
    assert!(
        threads.delete(&b).now_or_never().is_none(),
        "the delete waits for b's child to stop"
    );
    let ended = tokio::time::timeout(Duration::from_secs(3600), async {
        while events_b.recv().await.is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "the thread given up on stayed open");
    assert!(handle.send_user("still there?").is_err());
    assert!(
        threads.get(&b).is_err(),
        "a deleted thread stays registered"
    );
    assert_eq!(threads.on_screen(), None);
}

/// Forged or repeated (a handle the UI kept): `delete` sent the switch
/// when called but closed the thread only once its children had stopped
/// — until then a kept clone took a user turn (a parent model call in a
/// conversation the user had deleted), typing and stops, all `Ok`. The
/// thread is closed as the delete is called.
#[tokio::test(start_paused = true)]
async fn a_deleted_threads_kept_handle_is_refused_at_once() {
    let (mut threads, _a, b, mut events_b, _) = two_threads().await;
    let kept = threads.get(&b).unwrap().clone();
    let deleting = threads.delete(&b);
    assert_eq!(
        kept.send_user("after"),
        Err(subagents::supervisor::ThreadError::Undelivered(
            "after".into()
        ))
    );
    assert_eq!(
        kept.typing(true),
        Err(subagents::supervisor::ThreadError::Closed)
    );
    assert_eq!(
        kept.stop_parent(),
        Err(subagents::supervisor::ThreadError::Closed)
    );
    deleting.await.unwrap();
    let mut rest = Vec::new();
    while let Some(event) = events_b.recv().await {
        rest.push(event);
    }
    assert!(
        !rest
            .iter()
            .any(|e| matches!(e, AgentEvent::UserMessage(text) if text == "after")),
        "{rest:?}"
    );
}

/// Same instant, the host's polling order: `close_and_wait`,
/// `Threads::clear` and `Threads::delete` sent nothing until first polled
/// — dropped unpolled (a `select!`'s other branch ready first) they did
/// nothing: the thread stayed open, its children ran, a deleted thread
/// stayed registered. They send when called, as `switch_away` and
/// `stop_child` do. And the promises no test held: `clear` answers how
/// many children it stopped; opening an id that is open is `AlreadyOpen`,
/// the open thread left as it was.
#[tokio::test(start_paused = true)]
async fn clear_delete_and_close_send_when_called() {
    let (mut threads, a, b, mut events_b, mut log) = two_threads().await;
    assert_eq!(
        threads
            .open(
                b.clone(),
                DelegationBuilder::new(background_workers(&[]).shared())
            )
            .await
            .err(),
        Some(ThreadError::AlreadyOpen(b.clone()))
    );
    assert_eq!(threads.on_screen(), Some(&b));
    drop(threads.clear(&b));
    run_for(&mut events_b, &mut log, 5).await;
    assert!(
        log.iter()
            .any(|e| matches!(e, AgentEvent::ChildStatus(_, SubAgentStatus::Stopped))),
        "not cleared: {log:#?}"
    );
    assert_eq!(threads.clear(&b).await, Ok(0), "nothing left to stop");
    let closed = |handle: ThreadHandle| async move {
        let waited = handle.actor().wait(None);
        tokio::time::timeout(Duration::from_secs(3600), waited)
            .await
            .is_ok()
    };
    let handle_a = threads.get(&a).unwrap().clone();
    drop(threads.delete(&a));
    assert!(threads.get(&a).is_err(), "still registered");
    assert!(closed(handle_a).await, "deleted, still open");
    let handle_b = threads.get(&b).unwrap().clone();
    drop(handle_b.close_and_wait());
    assert!(closed(handle_b).await, "closed, still open");
    threads.delete(&b).await.unwrap();
}

/// Thread `a` opened (on `store`, or none), its parent asked to post
/// `body` (its child asks too, `agent_N-approval-1`): the parent's request.
async fn asking(
    threads: &mut Threads,
    a: &ThreadId,
    body: &str,
    store: Option<Arc<EnvelopeStore>>,
) -> subagents::messages::ApprovalRequest {
    let arguments = format!(r#"{{"url":"https://example.com","body":"{body}"}}"#);
    // A child that asks too (`agent_N-approval-1`), then the parent.
    let poster = UseAgentCall::run("Poster\nYou post.", "post")
        .tools(["http_post"])
        .wait(false);
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&poster)
            .tool_call("http_post", arguments.clone()),
        Reply::answer("Posted."),
    ])
    .with_script(
        "Poster",
        vec![
            Reply::new().tool_call("http_post", arguments),
            Reply::answer("posted"),
        ],
    );
    let builder = DelegationBuilder::new(model.shared())
        .tools(ToolRegistry::new().with(subagents_demo::Post));
    let config = match store {
        Some(store) => ThreadConfig::new(builder).store(store),
        None => ThreadConfig::new(builder),
    };
    let mut events = threads.open(a.clone(), config).await.unwrap();
    threads.get(a).unwrap().send_user("post").unwrap();
    let asked = until(&mut events, &mut Vec::new(), |e| {
        matches!(e, AgentEvent::ApprovalRequested(_))
    })
    .await;
    let AgentEvent::ApprovalRequested(request) = asked else {
        unreachable!()
    };
    *request
}

/// Repeated (a thread without a store, deleted and opened again under its
/// id): its parent numbered its approvals from 1 again, and its children
/// drew ids from `agent_1` again — an answer from the old thread's
/// dialog, late or restored by the app (`parent-approval-1`, asked to
/// post one thing), approved the new thread's first request (to post
/// another), a call the user never saw. Fixed for threads on a store in
/// the sixteenth session; each thread opened under an id is numbered
/// apart now without one too.
#[tokio::test(start_paused = true)]
async fn a_reopened_thread_without_a_store_never_takes_the_old_approval_ids() {
    use subagents::messages::{ApprovalDecision, ApprovalRefusal};
    let mut threads = Threads::new();
    let a = ThreadId::new("a");
    let stale = asking(&mut threads, &a, "first", None).await;
    assert_eq!(
        stale.id.as_str(),
        "parent-approval-1",
        "the first is as before"
    );
    threads.delete(&a).await.unwrap();
    let asked = asking(&mut threads, &a, "second", None).await;
    assert_ne!(
        asked.id, stale.id,
        "a new request under the old thread's id"
    );
    let thread = threads.get(&a).unwrap().clone();
    assert_eq!(
        thread
            .resolve_approval(stale.id.clone(), ApprovalDecision::Approve)
            .await,
        Err(subagents::supervisor::ThreadError::Approval(
            ApprovalRefusal::Unknown(stale.id.clone())
        ))
    );
    // Its children too: ids of their own.
    let child = thread.hub().envelopes();
    assert!(
        child.iter().all(|e| e.id.as_str() != "agent_1"),
        "{:?}",
        child.iter().map(|e| e.id.as_str()).collect::<Vec<_>>()
    );
    threads.delete(&a).await.unwrap();
}

/// Repeated, across what numbers a thread (review: approvals): a
/// registry numbered its threads without a store apart, and a store its
/// own threads — but each from block 0 and `agent_1`: a thread opened
/// again under its id on a store, after one without (or the reverse, or
/// on another store), asked `parent-approval-1` again, and its child was
/// `agent_1` again, so the old dialog's late answer approved the new
/// thread's first request. Every thread of a registry numbers past every
/// thread it opened before, whatever numbers it.
#[tokio::test(start_paused = true)]
async fn a_thread_reopened_on_another_store_or_none_never_takes_the_old_approval_ids() {
    use subagents::actors::clock::SystemClock;
    use subagents::messages::{ApprovalDecision, ApprovalRefusal};
    let tmp = tempfile::tempdir().unwrap();
    let store = |name: &str| {
        let (store, _) = EnvelopeStore::open(tmp.path().join(name), Arc::new(SystemClock)).unwrap();
        Some(Arc::new(store))
    };
    let mut threads = Threads::new();
    let a = ThreadId::new("a");
    let mut asked_before = Vec::new();
    let mut children_before = Vec::new();
    for (n, on) in [None, store("one"), store("two"), None]
        .into_iter()
        .enumerate()
    {
        let asked = asking(&mut threads, &a, &format!("post {n}"), on).await;
        let thread = threads.get(&a).unwrap().clone();
        for stale in &asked_before {
            assert_ne!(&asked.id, stale, "thread {n}: an earlier thread's number");
            let answer = thread.resolve_approval(stale.clone(), ApprovalDecision::Approve);
            let refused = ApprovalRefusal::Unknown(stale.clone());
            assert_eq!(
                answer.await,
                Err(ThreadError::Approval(refused)),
                "thread {n}"
            );
        }
        let children: Vec<AgentId> = thread.hub().envelopes().into_iter().map(|e| e.id).collect();
        assert!(!children.is_empty(), "thread {n} started its child");
        for child in &children {
            assert!(
                !children_before.contains(child),
                "thread {n}: {child} again"
            );
        }
        asked_before.push(asked.id);
        children_before.extend(children);
        threads.delete(&a).await.unwrap();
    }
}

/// A thread left through `Threads` is off screen: a child its turn starts
/// after the switch (a switch stops the children, not the parent's turn)
/// finishes and wakes nobody — not in the tab the user left, and not when
/// it comes back (dropped, not deferred).
#[tokio::test(start_paused = true)]
async fn a_child_of_a_thread_left_through_threads_never_wakes_it() {
    let mut threads = Threads::new();
    let (a, b) = (ThreadId::new("a"), ThreadId::new("b"));
    let model = ScriptedModel::new(vec![
        Reply::new()
            .delay(Duration::from_secs(5))
            .use_agent(&work_call("Worker", 10, false)),
        Reply::answer("Started."),
        Reply::answer("(a wake would land here)"),
    ])
    .with_script("Worker", worker(10));
    let mut events_a = threads
        .open(
            a.clone(),
            DelegationBuilder::new(model.shared()).tools(ToolRegistry::new().with(Sleep)),
        )
        .await
        .unwrap();
    threads.get(&a).unwrap().send_user("start").unwrap();
    let mut log_a = Vec::new();
    run_for(&mut events_a, &mut log_a, 1).await;
    let idle = ScriptedModel::new(vec![Reply::answer("b")]).shared();
    let _events_b = threads
        .open(b.clone(), DelegationBuilder::new(idle))
        .await
        .unwrap();
    run_for(&mut events_a, &mut log_a, 120).await;
    let worker = threads
        .get(&a)
        .unwrap()
        .envelope(&AgentId::new("agent_1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        worker.status,
        SubAgentStatus::Done,
        "started after the switch"
    );
    assert!(wakes(&log_a).is_empty(), "{log_a:#?}");
    threads.switch_to(&a).await.unwrap();
    run_for(&mut events_a, &mut log_a, 120).await;
    assert!(wakes(&log_a).is_empty(), "dropped, not deferred");
    threads.delete(&a).await.unwrap();
    threads.delete(&b).await.unwrap();
}

/// Growth over a long life (review: shared handles): a registry kept an
/// entry for every id opened without a store — its name and a counter —
/// deleted or not, for the registry's life: a server opening a thread per
/// conversation grew by one for each, and nothing could let them go. The
/// registry numbers its threads without a store together: what it keeps
/// after a thread's delete does not grow with the ids it has seen.
#[test]
fn a_registry_keeps_nothing_per_deleted_thread() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let mut threads = Threads::new();
    let mut open_and_delete = |from: usize, to: usize| {
        runtime.block_on(async {
            for n in from..to {
                let id = ThreadId::new(format!("conversation-{n:08}"));
                let model = ScriptedModel::new(vec![Reply::answer("ok")]);
                let _events = threads
                    .open(id.clone(), DelegationBuilder::new(model.shared()))
                    .await
                    .unwrap();
                threads.delete(&id).await.unwrap();
            }
        })
    };
    // The runtime's and the actors' own tables grown first.
    open_and_delete(0, 50);
    let held = allocation_counter::measure(|| open_and_delete(50, 550));
    assert!(
        held.bytes_current < 2_000,
        "{} bytes held after 500 threads opened and deleted",
        held.bytes_current
    );
}
