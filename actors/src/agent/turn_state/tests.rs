//! The turn's state: its one close, what it answers, and races on it.

use super::*;

fn open_turn() -> (
    Shared,
    CallSlot,
    EventSink,
    EventSink,
    crate::sink::EventStream,
) {
    let (out, stream) = EventSink::channel();
    let turn_sink = out.gated();
    let shared: Shared = Arc::new(Mutex::new(TurnState::new(vec![ChatMessage::user("go")])));
    let id = ToolUseId::new("call_1");
    {
        let mut state = lock(&shared);
        state.calls_opened = 1;
        state.open = Some(Box::new(OpenCall {
            seq: 1,
            id: id.clone(),
            name: "use_agent".into(),
            on_cut: None,
            on_child: None,
            on_taken: None,
            hand_on: None,
            settled: None,
            span: tracing::Span::none(),
            content: false,
        }));
    }
    let slot = CallSlot {
        turn: Some((Arc::downgrade(&shared), 1)),
    };
    (shared, slot, turn_sink, out, stream)
}

fn stopped() -> AgentResult {
    result(
        "stopped".into(),
        Outcome::Stopped,
        &Progress::default(),
        Instant::now(),
    )
}

/// A message racing the turn's completion is read or refused, never
/// taken and lost: two OS threads, 500 rounds. The sender sends until it
/// is refused, and the turn loop starts only once the first message is
/// in, so every round's completion races a sender still sending (spawned
/// and left alone, the thread had not started yet: the turn completed
/// first every round and no message raced it).
#[test]
fn a_message_racing_completion_is_read_or_refused() {
    use std::sync::atomic::{AtomicBool, Ordering};
    for _ in 0..500 {
        let shared: Shared = Arc::new(Mutex::new(TurnState::new(Vec::new())));
        let sending = Arc::new(AtomicBool::new(false));
        let sender = {
            let shared = shared.clone();
            let sending = sending.clone();
            std::thread::spawn(move || {
                let mut taken = 0;
                while steer(&shared, format!("m{taken}")) {
                    taken += 1;
                    sending.store(true, Ordering::SeqCst);
                }
                taken
            })
        };
        while !sending.load(Ordering::SeqCst) {
            std::hint::spin_loop();
        }
        // The turn loop: complete, or read what arrived and ask again.
        while !complete_unless_steered(&shared, &Limits::default(), || false) {
            lock(&shared).read_steering();
        }
        let taken = sender.join().expect("the sender does not panic");
        let state = lock(&shared);
        assert_eq!(state.history.len(), taken, "a message taken and not read");
        assert!(state.steering.is_empty(), "a message left unread");
        drop(state);
        assert!(
            !steer(&shared, "late".into()),
            "completed: no more messages"
        );
    }
}

/// A call that settles before the cut is answered with its output; one
/// that tries after the cut is refused (its output never reaches the
/// model, so it must not count as delivered).
#[test]
fn settle_wins_only_before_the_turn_is_cut() {
    let (shared, slot, turn_sink, out, mut stream) = open_turn();
    slot.on_cut("note".into());
    assert!(slot.settle(&Ok("the answer".into())));
    close(&shared, &turn_sink, &out, |_| stopped(), &|_| {
        "cut".to_owned()
    });
    let Some(AgentEvent::ToolResult(answered)) = stream.try_recv() else {
        panic!("the call is answered first");
    };
    assert_eq!(answered.output, "the answer");
    assert!(!answered.is_error);

    let (shared, slot, turn_sink, out, mut stream) = open_turn();
    slot.on_cut("note".into());
    close(&shared, &turn_sink, &out, |_| stopped(), &|_| {
        "cut".to_owned()
    });
    assert!(!slot.settle(&Ok("too late".into())), "the turn was cut");
    let Some(AgentEvent::ToolResult(answered)) = stream.try_recv() else {
        panic!("the call is answered first");
    };
    assert_eq!(answered.output, "note");
}

/// Shared, same instant (two workers): a stop read the turn's progress,
/// then the call in flight delivered its child's result (settled, claimed,
/// the child's tokens added) before the stop closed the turn. The call is
/// answered with that result, but the turn's `Result` carried the usage
/// read before: the child's tokens were in no turn's count. The stop's
/// result is read as the close holds the lock that answers the call.
#[test]
fn a_childs_usage_delivered_before_a_stops_close_is_the_turns() {
    let (shared, slot, turn_sink, out, mut stream) = open_turn();
    let child = Usage {
        prompt_tokens: 7,
        completion_tokens: 3,
    };
    assert!(slot.deliver(&Ok("the child's answer".into()), || Some(child)));
    let (_, emitted) = close(&shared, &turn_sink, &out, stop_at_close, &|_| {
        "cut".to_owned()
    })
    .expect("closed here");
    assert_eq!(emitted.children_usage, child);
    let Some(AgentEvent::ToolResult(answered)) = stream.try_recv() else {
        panic!("the call is answered first");
    };
    assert_eq!(answered.output, "the child's answer");
    let Some(AgentEvent::Result(on_stream)) = stream.try_recv() else {
        panic!("then the turn's result");
    };
    assert_eq!(
        on_stream.children_usage, child,
        "the tokens of the answer it gave"
    );
}

/// A stop as the agent writes it: its result built from what the turn did
/// as the close reads it.
fn stop_at_close(state: &TurnState) -> AgentResult {
    cut_result(
        state,
        |p| format!("stopped after {} model call(s)", p.model_calls),
        |_| Outcome::Stopped,
        Instant::now(),
    )
}

/// Same instant, two workers: a stop aborts the turn's task, which may
/// still be running on another worker, and ends the turn. The stop read
/// the turn's progress first and closed it after, so a model call the task
/// finished between the two (its tokens on the stream's usage, the call
/// counted) was in no count: the `Result` said 0 model calls. What the
/// turn did is read under the close's lock now, so whatever the task
/// finished before the close is the `Result`'s.
#[test]
fn a_stop_counts_what_the_turn_did_up_to_its_close() {
    let (shared, _slot, turn_sink, out, _stream) = open_turn();
    // The stop has begun (the task aborted, nothing read): the task,
    // still on another worker, finishes a model call.
    {
        let mut state = lock(&shared);
        state.progress.model_calls = 1;
        state.progress.usage.add(Usage {
            prompt_tokens: 11,
            completion_tokens: 2,
        });
    }
    let (_, result) = close(&shared, &turn_sink, &out, stop_at_close, &|_| {
        "cut".to_owned()
    })
    .expect("closed here");
    assert_eq!(result.model_calls, 1);
    assert_eq!(result.usage.total(), 13);
    assert_eq!(result.text, "stopped after 1 model call(s)");
}

/// A delivery is one step under the turn's lock: no close can come
/// between the call's settling and the child's tokens being counted
/// (settled, closed by a stop, then counted: the tokens were in no
/// count). A turn cut first is not delivered to: nothing is claimed.
#[test]
fn a_delivery_settles_and_counts_in_one_step() {
    let (shared, slot, turn_sink, out, _stream) = open_turn();
    let child = Usage {
        prompt_tokens: 5,
        completion_tokens: 5,
    };
    let delivered = slot.deliver(&Ok("the answer".into()), || {
        assert!(
            shared.try_lock().is_err(),
            "claimed under the turn's lock, so no close comes between"
        );
        Some(child)
    });
    assert!(delivered);
    let (_, result) = close(&shared, &turn_sink, &out, stop_at_close, &|_| {
        "cut".to_owned()
    })
    .unwrap();
    assert_eq!(result.children_usage, child);

    let (shared, slot, turn_sink, out, _stream) = open_turn();
    close(&shared, &turn_sink, &out, stop_at_close, &|_| {
        "cut".to_owned()
    })
    .unwrap();
    let delivered = slot.deliver(&Ok("too late".into()), || {
        panic!("a cut turn claims nothing")
    });
    assert!(!delivered);
}

/// Same instant, two workers: the wall clock dropped the turn's future —
/// and with it the call waiting on an approval — while the host's answer
/// reached the agent before the turn's close. The answer was written on
/// the stream (`Approved`) and only then handed to the call, which was
/// gone: the host was told `Ended` while the stream said `Approved`, and
/// the call's `ToolResult` then said the wall clock cut it. The decision
/// is handed over first, under the turn's lock; the event follows only a
/// decision the call took, and the close cancels one it never took.
#[test]
fn an_approval_the_call_never_took_is_not_written_as_answered() {
    let (shared, _slot, turn_sink, out, mut stream) = open_turn();
    let id = ApprovalId::new("agent_1-approval-1");
    lock(&shared).approval = Some((id.clone(), ToolUseId::new("call_1")));
    let (responder, gone) = tokio::sync::oneshot::channel();
    drop(gone);
    let taken = resolve_approval(
        &shared,
        &turn_sink,
        &id,
        ApprovalDecision::Approve,
        responder.into(),
    );
    assert!(!taken, "the call was gone");
    assert!(stream.try_recv().is_none(), "nothing written");
    close(&shared, &turn_sink, &out, stop_at_close, &|_| {
        "cut".to_owned()
    })
    .unwrap();
    let Some(AgentEvent::ApprovalResolved { outcome, .. }) = stream.try_recv() else {
        panic!("the close answers the request");
    };
    assert_eq!(outcome, ApprovalOutcome::Cancelled("cut".into()));

    // Approved: the child is in its tool from the answer on (review:
    // approvals at every edge — a `status` read before the call's task
    // was polled again said `awaiting_approval`).
    let (shared, _slot, turn_sink, _out, _stream) = open_turn();
    lock(&shared).approval = Some((id.clone(), ToolUseId::new("call_1")));
    lock(&shared).doing(Activity::AwaitingApproval("post".into()));
    let (responder, _call) = tokio::sync::oneshot::channel();
    let approve = ApprovalDecision::Approve;
    assert!(resolve_approval(
        &shared,
        &turn_sink,
        &id,
        approve,
        responder.into()
    ));
    assert_eq!(lock(&shared).activity, Activity::InTool("post".into()));

    // Taken: the decision reaches the call, then its event.
    let (shared, _slot, turn_sink, _out, mut stream) = open_turn();
    lock(&shared).approval = Some((id.clone(), ToolUseId::new("call_1")));
    lock(&shared).doing(Activity::AwaitingApproval("post".into()));
    let (responder, mut call) = tokio::sync::oneshot::channel();
    assert!(resolve_approval(
        &shared,
        &turn_sink,
        &id,
        ApprovalDecision::Deny,
        responder.into()
    ));
    assert_eq!(call.try_recv(), Ok(ApprovalDecision::Deny));
    let Some(AgentEvent::ApprovalResolved { outcome, .. }) = stream.try_recv() else {
        panic!("then its event");
    };
    assert_eq!(outcome, ApprovalOutcome::Denied);
    assert!(lock(&shared).approval.is_none());
    // Denied, no longer awaiting it (review: approvals at the same
    // instant, thirty-ninth session): it read `awaiting_approval` until
    // the call's task was polled again, where a remote child's reads its
    // tool at once.
    assert_eq!(lock(&shared).activity, Activity::InTool("post".into()));
}

/// A second `settle` replaced the first, though both said `true`: the
/// model read the second, and the first's promise was broken. The first
/// stands; the second says it did not take.
#[test]
fn the_first_settle_stands() {
    let (shared, slot, _turn_sink, _out, _stream) = open_turn();
    assert!(slot.settle(&Ok("A".into())));
    assert!(!slot.settle(&Ok("B".into())), "a second settle took");
    let settled = lock(&shared).open.as_ref().and_then(|o| o.settled.clone());
    assert_eq!(settled.map(|o| o.output), Some("A".to_owned()));
}

/// A call settled before a cut is answered with its output (not
/// "stopped"), but the cut's result said "0 tool call(s)" beside it. It
/// counts as the calls answered before it do.
#[test]
fn a_call_settled_before_a_cut_counts() {
    let (shared, slot, _turn_sink, _out, _stream) = open_turn();
    assert!(slot.settle(&Ok("kept".into())));
    let progress = lock(&shared).progress_at_cut();
    assert_eq!(progress.tool_calls, 1);
    assert_eq!(progress.tools_used, ["use_agent"]);
}

/// An answer with a message waiting completes when no next call could
/// read the message: its tokens at the budget, its model calls at the
/// cap, or its time up (review: the wall-clock half had no test) — the
/// message kept, unread, and no other taken after. With all three left,
/// the turn goes on to read it.
#[test]
fn an_answer_completes_with_a_message_waiting_when_no_call_could_read_it() {
    let spent_tokens = Limits {
        token_budget: 10,
        ..Limits::default()
    };
    let one_call = Limits {
        max_model_calls: 1,
        ..Limits::default()
    };
    for (limits, out_of_time, completes) in [
        (Limits::default(), false, false),
        (Limits::default(), true, true),
        (spent_tokens, false, true),
        (one_call, false, true),
    ] {
        let shared: Shared = Arc::new(Mutex::new(TurnState::new(Vec::new())));
        {
            let mut state = lock(&shared);
            state.progress.model_calls = 1;
            state.progress.usage.completion_tokens = 10;
        }
        assert!(steer(&shared, "late".into()));
        assert_eq!(
            complete_unless_steered(&shared, &limits, || out_of_time),
            completes,
            "{limits:?}, out of time: {out_of_time}"
        );
        if completes {
            assert_eq!(lock(&shared).steering.len(), 1, "kept, unread");
            assert!(!steer(&shared, "later".into()), "taken after the end");
        }
    }
}

/// Two workers (review: limits at the edges, thirty-fourth session): a
/// call cut over the token budget had its streamed text taken in one step
/// and kept as the last thing written in a later one, the turn still in
/// its model call between: a stop there (another worker, a kill hook)
/// found the text gone — its result quoted nothing the host had seen.
/// The cut is one step.
#[test]
fn a_stop_just_after_a_budget_cut_keeps_what_the_call_wrote() {
    let (shared, _slot, turn_sink, out, _stream) = open_turn();
    {
        let mut state = lock(&shared);
        state.doing(Activity::InModelCall);
        state.streaming = "Half the report".into();
        let _cut = state.past_budget(Some(1_000), 10);
    }
    let quote = |state: &TurnState| {
        cut_result(
            state,
            |p| format!("{} call(s); last: {}", p.model_calls, p.last_text),
            |_| Outcome::Stopped,
            Instant::now(),
        )
    };
    let (_, result) =
        close(&shared, &turn_sink, &out, quote, &|_| "cut".to_owned()).expect("closed here");
    assert_eq!(result.text, "1 call(s); last: Half the report");
}

/// Same instant (review: the limits): a wall-clock cut read what the turn
/// did as its task saw the timer, then closed the turn; a call its tool
/// settled from another task in between (a host tool holding its
/// context's clone) was answered with that output by the close — a
/// `ToolResult` on the stream — while the `Result` said "0 tool call(s)".
/// Read in the close, as a stop's result is: the call counts.
#[test]
fn a_call_settled_between_a_wall_clock_cut_and_its_close_counts() {
    let (shared, slot, turn_sink, out, mut stream) = open_turn();
    let ran = crate::agent::turn::Ran::OutOfTime;
    let result = ran.result(Limits::default(), tokio::time::Instant::now());
    assert!(slot.settle(&Ok("done".into())));
    let (_, emitted) =
        close(&shared, &turn_sink, &out, result, &|_| "cut".to_owned()).expect("closed here");
    assert_eq!(emitted.outcome, Outcome::LimitReached(LimitKind::WallClock));
    assert_eq!(emitted.tool_calls, 1, "{emitted:?}");
    let Some(AgentEvent::ToolResult(answered)) = stream.try_recv() else {
        panic!("the call is answered first");
    };
    assert_eq!(answered.output, "done");
}

/// Same instant, two workers (review: wakes at the same instant): a
/// waiting delegation call's hand-on (the child detached or stopped by
/// the parent-stop policy) went to the hub only as the cut task was
/// dropped — on another worker, after the turn's end had reached the
/// thread, which released a wake queued after the handed-on child's. The
/// close that answers the cut call runs it (the close comes before the
/// turn's reply); only for a call the cut answers (a settled one is not
/// handed on).
#[test]
fn a_cut_runs_its_calls_hand_on_in_its_close() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    for settled in [false, true] {
        let (shared, slot, turn_sink, out, mut stream) = open_turn();
        let ran = Arc::new(AtomicUsize::new(0));
        let seen = ran.clone();
        slot.on_cut_hand_on(HandOn(Arc::new(move || {
            seen.fetch_add(1, Ordering::SeqCst);
        })));
        if settled {
            assert!(slot.settle(&Ok("done".into())));
        }
        let closed = close(&shared, &turn_sink, &out, stop_at_close, &|_| {
            "cut".to_owned()
        });
        assert!(closed.is_some());
        assert_eq!(
            ran.load(Ordering::SeqCst),
            usize::from(!settled),
            "settled: {settled}"
        );
        let Some(AgentEvent::ToolResult(answered)) = stream.try_recv() else {
            panic!("the call is answered");
        };
        assert_eq!(answered.output == "done", settled);
    }
}
