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
        state.open = Some(OpenCall {
            seq: 1,
            id: id.clone(),
            name: "use_agent".into(),
            on_cut: None,
            settled: None,
            span: tracing::Span::none(),
        });
    }
    let slot = CallSlot {
        turn: Some((shared.clone(), 1)),
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
/// taken and lost: two OS threads, 500 rounds.
#[test]
fn a_message_racing_completion_is_read_or_refused() {
    let (mut read, mut refused) = (0, 0);
    for _ in 0..500 {
        let shared: Shared = Arc::new(Mutex::new(TurnState::new(Vec::new())));
        let sender = {
            let shared = shared.clone();
            std::thread::spawn(move || steer(&shared, "more".into()))
        };
        // The turn loop: complete, or read what arrived and ask again.
        while !complete_unless_steered(&shared) {
            lock(&shared).read_steering();
        }
        let taken = sender.join().unwrap_or(false);
        let history = lock(&shared).history.clone();
        assert_eq!(taken, !history.is_empty(), "taken and not read");
        assert!(
            !steer(&shared, "late".into()),
            "completed: no more messages"
        );
        if taken { read += 1 } else { refused += 1 }
    }
    assert_eq!(read + refused, 500);
}

/// A call that settles before the cut is answered with its output; one
/// that tries after the cut is refused (its output never reaches the
/// model, so it must not count as delivered).
#[test]
fn settle_wins_only_before_the_turn_is_cut() {
    let (shared, slot, turn_sink, out, mut stream) = open_turn();
    slot.on_cut("note".into());
    assert!(slot.settle(&Ok("the answer".into())));
    close(&shared, &turn_sink, &out, &stopped(), &|| "cut".to_owned());
    let Some(AgentEvent::ToolResult(answered)) = stream.try_recv() else {
        panic!("the call is answered first");
    };
    assert_eq!(answered.output, "the answer");
    assert!(!answered.is_error);

    let (shared, slot, turn_sink, out, mut stream) = open_turn();
    slot.on_cut("note".into());
    close(&shared, &turn_sink, &out, &stopped(), &|| "cut".to_owned());
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
/// read before: the child's tokens were in no turn's count. They are read
/// under the lock that answers the call.
#[test]
fn a_childs_usage_added_after_a_stop_read_the_progress_is_the_turns() {
    let (shared, slot, turn_sink, out, mut stream) = open_turn();
    // The stop's read of the progress, then the delivery.
    let progress = lock(&shared).progress_at_cut();
    let stopped = result(
        "stopped".into(),
        Outcome::Stopped,
        &progress,
        Instant::now(),
    );
    assert!(slot.settle(&Ok("the child's answer".into())));
    let child = Usage {
        prompt_tokens: 7,
        completion_tokens: 3,
    };
    slot.add_child_usage(child);
    let (_, emitted) =
        close(&shared, &turn_sink, &out, &stopped, &|| "cut".to_owned()).expect("closed here");
    assert_eq!(emitted, child);
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
