//! A thread being left, or its children all stopped, as its turn and its
//! children go on: off screen from the moment the switch is sent, not once
//! its children have stopped; no child made under one being stopped.

use super::*;
use subagents::messages::ThreadId;
use subagents::supervisor::Threads;

/// Same instant (reviews 27, the registry and the wakes): `switch_to`
/// waited for the left thread's children to stop and only then said it
/// was off screen. A child its still-running turn started in that wait
/// (a switch stops the children, not the parent's turn; a remote child's
/// stop can take its 30 s grace) finished and woke the tab the user had
/// left — a wake turn, its model calls, after `SwitchedAway`. The leave
/// here is polled once and then left waiting while the thread runs on, as
/// a host's `select!` or a slow stop leaves it.
#[tokio::test(start_paused = true)]
async fn a_child_started_while_the_switch_waits_wakes_nobody() {
    let mut threads = Threads::new();
    let (a, b) = (ThreadId::new("a"), ThreadId::new("b"));
    let (mut events_a, mut log_a) =
        a_leave_while_a_turn_starts_a_child(&mut threads, "(a wake would land here)", true).await;
    let switched = log_a
        .iter()
        .position(|e| matches!(e, AgentEvent::SwitchedAway))
        .expect("switched away");
    let started = log_a
        .iter()
        .position(|e| matches!(e, AgentEvent::ChildStarted(_)))
        .expect("a child started");
    assert!(switched < started, "started after the switch: {log_a:#?}");
    assert!(
        log_a
            .iter()
            .any(|e| matches!(e, AgentEvent::ChildStatus(_, SubAgentStatus::Done))),
        "{log_a:#?}"
    );
    assert!(wakes(&log_a).is_empty(), "{log_a:#?}");
    // Dropped with the leave once it is done, not kept for the next
    // showing (held, the tab the user left woke as they came back).
    threads.switch_to(&a).await.unwrap();
    run_for(&mut events_a, &mut log_a, 120).await;
    assert!(wakes(&log_a).is_empty(), "{log_a:#?}");
    threads.delete(&a).await.unwrap();
    threads.delete(&b).await.unwrap();
}

/// The same leave done by an open of another thread (review of this
/// session's tests: only the switch's end of a leave was pinned): the
/// wake held while `a` was left goes with the leave, not at `a`'s next
/// showing.
#[tokio::test(start_paused = true)]
async fn a_child_started_while_an_open_waits_wakes_nobody() {
    let mut threads = Threads::new();
    let a = ThreadId::new("a");
    let (mut events_a, mut log_a, outcome) =
        a_leave_of(&mut threads, "(a wake would land here)", true, false, true).await;
    outcome.unwrap().unwrap();
    assert_eq!(threads.on_screen(), Some(&ThreadId::new("c")));
    assert!(
        log_a
            .iter()
            .any(|e| matches!(e, AgentEvent::ChildStatus(_, SubAgentStatus::Done))),
        "{log_a:#?}"
    );
    threads.switch_to(&a).await.unwrap();
    run_for(&mut events_a, &mut log_a, 120).await;
    assert!(wakes(&log_a).is_empty(), "{log_a:#?}");
}

/// The event at the bottom of a nesting (`Child(_, Child(_, e))` → `e`).
fn innermost(mut event: &AgentEvent) -> &AgentEvent {
    while let AgentEvent::Child(_, inner) = event {
        event = inner;
    }
    event
}

/// Same instant (review 27: the wakes): a stop of every child (a
/// switch's, or a host's own `stop_all`) as a child asks for a child of
/// its own. The hub marked the child as being stopped and sent its agent
/// the stop; the child's request, read before that agent had read the
/// stop, still made the grandchild — started for a requester already
/// being stopped, its model called, and not counted in what the stop-all
/// said it stopped (it ended when its requester did). A requester being
/// stopped is refused a child, as one whose turn ended is. Swept over the
/// host's yields in the tick the child's answer comes, so each order of
/// the stop and the request is reached.
#[tokio::test(start_paused = true)]
async fn a_stop_all_as_a_child_asks_for_its_own_child_stops_what_it_counts() {
    let mut reached = std::collections::BTreeSet::new();
    for yields in 0..60 {
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&UseAgentCall::run("Planner\nYou plan.", "plan").background()),
            Reply::answer("Started."),
            Reply::answer("Noted."),
        ])
        .with_script(
            "Planner\n",
            vec![
                Reply::new()
                    .delay(Duration::from_secs(5))
                    .text("planning")
                    .use_agent(&work_call("Worker", 60, true)),
                Reply::answer("planned"),
            ],
        )
        .with_script("Worker\n", worker(60));
        let (thread, mut events) = ThreadHandle::spawn(
            DelegationBuilder::new(model.shared())
                .system_prompt("You are the parent.")
                .tools(ToolRegistry::new().with(Sleep))
                .max_depth(2),
            None,
        )
        .await
        .unwrap();
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        until(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::ChildStarted(_))
        })
        .await;
        // The planner's answer comes 5 s on: the stop-all is sent in that
        // tick, `yields` scheduler turns into it.
        tokio::time::sleep(Duration::from_secs(5)).await;
        for _ in 0..yields {
            tokio::task::yield_now().await;
        }
        let said = thread.hub().stop_all().await.unwrap();
        run_for(&mut events, &mut log, 120).await;
        let stopped = log
            .iter()
            .filter(|e| {
                matches!(
                    innermost(e),
                    AgentEvent::ChildStatus(_, SubAgentStatus::Stopped)
                )
            })
            .count();
        let grandchild = log.iter().any(
            |e| matches!(innermost(e), AgentEvent::ChildStarted(c) if c.id.as_str() == "agent_2"),
        );
        assert_eq!(said, stopped, "after {yields} yields: {log:#?}");
        check_log(&log, true);
        reached.insert((grandchild, said));
        thread.close_and_wait().await;
    }
    assert!(reached.len() >= 2, "{reached:?}");
}

/// Same instant, given up (review: cancellation of host futures,
/// thirty-eighth session): the same leave, its future dropped before the
/// children had stopped (a host's `select!` or timeout around a slow
/// remote stop). The tab stays the one on screen — but the child its turn
/// started in the wait finished while the tab was told it was off screen:
/// its wake was dropped (and settled), and the tab the user never left
/// was never woken for it. Wakes in a leave are held, not dropped: gone
/// with the leave once it is done, delivered if it is given up.
#[tokio::test(start_paused = true)]
async fn a_child_that_ends_in_a_given_up_switch_wakes_the_tab_still_shown() {
    let mut threads = Threads::new();
    let (a, b) = (ThreadId::new("a"), ThreadId::new("b"));
    let (mut events_a, mut log_a) =
        a_leave_while_a_turn_starts_a_child(&mut threads, "Woken.", false).await;
    assert_eq!(threads.on_screen(), Some(&a));
    assert!(
        log_a
            .iter()
            .any(|e| matches!(e, AgentEvent::ChildStatus(_, SubAgentStatus::Done))),
        "{log_a:#?}"
    );
    run_for(&mut events_a, &mut log_a, 120).await;
    assert_eq!(wakes(&log_a), ["agent_1"], "{log_a:#?}");
    threads.delete(&a).await.unwrap();
    threads.delete(&b).await.unwrap();
}

/// Review of this change: a switch whose target closed while the tab was
/// left (through a clone of its handle) fails `Closed` and shows the tab
/// again — but the leave had ended before the target was looked at, and
/// the wake of a child that finished in it went with it. The leave ends
/// once the target is shown.
#[tokio::test(start_paused = true)]
async fn a_child_that_ends_in_a_switch_to_a_closed_target_wakes_the_tab() {
    let mut threads = Threads::new();
    let a = ThreadId::new("a");
    let (mut events_a, mut log_a, outcome) =
        a_leave_of(&mut threads, "Woken.", true, true, false).await;
    assert!(
        matches!(outcome, Some(Err(ThreadError::Closed))),
        "{outcome:?}"
    );
    assert_eq!(threads.on_screen(), Some(&a));
    run_for(&mut events_a, &mut log_a, 120).await;
    assert_eq!(wakes(&log_a), ["agent_1"], "{log_a:#?}");
    threads.delete(&a).await.unwrap();
}

/// Review of this change: a leave given up re-queued the wakes it held
/// before the thread took its store's again — an earlier session's owed
/// wake, pending before the leave (given back to the store by the
/// switch), went after a child that finished in the leave, though it was
/// queued first. The store's first, as before the leave.
#[tokio::test(start_paused = true)]
async fn a_given_up_leave_keeps_an_earlier_sessions_wake_first() {
    use std::sync::Arc;
    use subagents::actors::clock::{Clock, SystemClock};
    use subagents::supervisor::store::EnvelopeStore;
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (ThreadId::new("a"), ThreadId::new("b"));
    let now = SystemClock.now_ms();
    {
        let store = EnvelopeStore::open(tmp.path(), Arc::new(SystemClock))
            .unwrap()
            .0;
        let mut owed = common::store::finished_envelope("agent_1", now);
        owed.thread = Some(a.clone());
        owed.wake_owed = true;
        store.save(&owed).unwrap();
    }
    let store = Arc::new(
        EnvelopeStore::open(tmp.path(), Arc::new(SystemClock))
            .unwrap()
            .0,
    );
    assert_eq!(store.owed_wakes(), [AgentId::new("agent_1")]);
    let mut threads = Threads::new();
    let idle = ScriptedModel::new(vec![Reply::answer("b")]).shared();
    let _events_b = threads
        .open(b.clone(), DelegationBuilder::new(idle))
        .await
        .unwrap();
    let model = ScriptedModel::new(vec![
        Reply::new()
            .delay(Duration::from_secs(5))
            .use_agent(&work_call("Worker", 10, false)),
        Reply::answer("Started."),
        Reply::answer("Woken once."),
        Reply::answer("Woken twice."),
    ])
    .with_script("Worker", worker(10));
    let config = subagents::supervisor::ThreadConfig::new(
        DelegationBuilder::new(model.shared()).tools(ToolRegistry::new().with(Sleep)),
    )
    .store(store.clone());
    let mut events_a = threads.open(a.clone(), config).await.unwrap();
    // Sent in the tick it is shown: the owed wake waits behind the turn.
    threads.get(&a).unwrap().send_user("start").unwrap();
    let mut log_a = Vec::new();
    run_for(&mut events_a, &mut log_a, 1).await;
    assert!(
        wakes(&log_a).is_empty(),
        "waits behind the turn: {log_a:#?}"
    );
    {
        let mut leaving = Box::pin(threads.switch_to(&b));
        assert!(futures_util::poll!(&mut leaving).is_pending());
        run_for(&mut events_a, &mut log_a, 120).await;
    }
    run_for(&mut events_a, &mut log_a, 120).await;
    assert_eq!(wakes(&log_a), ["agent_1", "agent_2"], "{log_a:#?}");
    threads.delete(&a).await.unwrap();
    threads.delete(&b).await.unwrap();
}

/// Threads `a` (on screen, its turn starting `Worker` 5 s in, the third
/// answer whatever a wake gets) and `b`; `a`'s turn started and run 1 s;
/// then a switch to `b` polled once, left waiting 120 s of the thread's
/// run, and awaited (`finish`) or given up. `a`'s log.
async fn a_leave_while_a_turn_starts_a_child(
    threads: &mut Threads,
    third: &str,
    finish: bool,
) -> (EventStream, Vec<AgentEvent>) {
    let (events_a, log_a, outcome) = a_leave_of(threads, third, finish, false, false).await;
    if let Some(outcome) = outcome {
        outcome.unwrap();
    }
    (events_a, log_a)
}

/// [`a_leave_while_a_turn_starts_a_child`]; `close_target`: `b` closed
/// (through a clone of its handle) as the switch waits; the leave's
/// outcome, if awaited.
async fn a_leave_of(
    threads: &mut Threads,
    third: &str,
    finish: bool,
    close_target: bool,
    via_open: bool,
) -> (
    EventStream,
    Vec<AgentEvent>,
    Option<Result<(), ThreadError>>,
) {
    let (a, b) = (ThreadId::new("a"), ThreadId::new("b"));
    let idle = ScriptedModel::new(vec![Reply::answer("b")]).shared();
    let _events_b = threads
        .open(b.clone(), DelegationBuilder::new(idle))
        .await
        .unwrap();
    let model = ScriptedModel::new(vec![
        Reply::new()
            .delay(Duration::from_secs(5))
            .use_agent(&work_call("Worker", 10, false)),
        Reply::answer("Started."),
        Reply::answer(third),
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
    let target = threads.get(&b).unwrap().clone();
    type Leave<'a> =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ThreadError>> + 'a>>;
    let mut leaving: Leave<'_> = match via_open {
        // A leave done by opening another thread (`c`).
        true => Box::pin(async move {
            let idle = ScriptedModel::new(vec![]).shared();
            let opened = threads.open(ThreadId::new("c"), DelegationBuilder::new(idle));
            opened.await.map(drop)
        }),
        false => Box::pin(threads.switch_to(&b)),
    };
    assert!(futures_util::poll!(&mut leaving).is_pending());
    if close_target {
        target.close();
    }
    run_for(&mut events_a, &mut log_a, 120).await;
    let outcome = match finish {
        true => Some(leaving.await),
        false => None,
    };
    (events_a, log_a, outcome)
}

/// Same instant, the host's calling order (review: approvals, thirty-ninth
/// session): `switch_to` sent nothing until first polled. A host that
/// switched tabs, then answered the stale dialog of the tab it left, and
/// polled the answer first, had the answer reach the thread before the
/// switch: `Ok`, `Approved`, the post made — and only then the child
/// stopped. The switch is sent when called, as `clear` and `delete` are:
/// the answer after it is `Ended`, the request `Cancelled`.
#[tokio::test(start_paused = true)]
async fn an_answer_sent_after_a_switch_comes_after_it_whoever_polls_first() {
    use subagents::messages::{ApprovalDecision, ApprovalOutcome};
    let mut threads = Threads::new();
    let (a, b) = (ThreadId::new("a"), ThreadId::new("b"));
    let idle = ScriptedModel::new(Vec::new());
    let _events_b = threads
        .open(b.clone(), DelegationBuilder::new(idle.shared()))
        .await
        .unwrap();
    let poster = UseAgentCall::run("Poster\nYou post.", "post").tools(["http_post"]);
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&poster),
        Reply::answer("Done."),
    ])
    .with_script(
        "Poster",
        vec![
            Reply::new().tool_call("http_post", r#"{"message":"hi"}"#),
            Reply::answer("posted"),
        ],
    );
    let builder = DelegationBuilder::new(model.shared()).tools(ToolRegistry::new().with(Post));
    let mut events_a = threads.open(a.clone(), builder).await.unwrap();
    let handle_a = threads.get(&a).unwrap().clone();
    handle_a.send_user("post hi").unwrap();
    let mut log = Vec::new();
    let asked = until(&mut events_a, &mut log, |e| {
        matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ApprovalRequested(_)))
    })
    .await;
    let AgentEvent::Child(_, inner) = asked else {
        unreachable!()
    };
    let AgentEvent::ApprovalRequested(request) = *inner else {
        unreachable!()
    };
    // The switch first, the answer second; the answer polled first.
    let switched = threads.switch_to(&b);
    let answer = handle_a.resolve_approval(request.id.clone(), ApprovalDecision::Approve);
    let (answered, switched) = tokio::join!(answer, switched);
    switched.unwrap();
    assert_eq!(
        answered,
        Err(ThreadError::Approval(ApprovalRefusal::Ended(
            request.id.clone()
        )))
    );
    let resolved = until(&mut events_a, &mut log, |e| {
        matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ApprovalResolved { .. }))
    })
    .await;
    let AgentEvent::Child(_, inner) = resolved else {
        unreachable!()
    };
    assert!(
        matches!(
            &*inner,
            AgentEvent::ApprovalResolved {
                outcome: ApprovalOutcome::Cancelled(_),
                ..
            }
        ),
        "{inner:?}"
    );
    threads.delete(&a).await.unwrap();
    threads.delete(&b).await.unwrap();
}
