//! Wakes: FIFO, one in flight, held back while the user types, dropped off
//! screen and on a switch, none for a claimed result.

use super::*;

#[tokio::test(start_paused = true)]
async fn wakes_arrive_fifo_one_at_a_time_after_the_parent_is_idle() {
    let (thread, mut events) = thread(background_workers(&[30, 10, 20])).await;
    thread.send_user("start three").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 120).await;
    assert_eq!(
        wakes(&log),
        ["agent_2", "agent_3", "agent_1"],
        "finish order"
    );
    // One in flight: each wake's turn ends (a Result) before the next wake.
    let mut in_flight = false;
    for event in &log {
        match event {
            AgentEvent::Wake { .. } => {
                assert!(!in_flight, "two wakes in flight");
                in_flight = true;
            }
            AgentEvent::Result(_) => in_flight = false,
            _ => {}
        }
    }
    check_log(&log, true);
    let wake = log.iter().find_map(|e| match e {
        AgentEvent::Wake { line, .. } => Some(line.clone()),
        _ => None,
    });
    assert_eq!(
        wake.unwrap(),
        "[use_agent agent_2 finished] \"Worker 2\" (done, 10 s, task: \"work 10 s\")"
    );
}

#[tokio::test(start_paused = true)]
async fn typing_holds_wakes_back_until_the_user_stops() {
    let (thread, mut events) = thread(background_workers(&[10])).await;
    thread.send_user("start").unwrap();
    thread.typing(true).unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 60).await;
    assert!(wakes(&log).is_empty(), "a wake came while the user typed");
    thread.typing(false).unwrap();
    run_for(&mut events, &mut log, 10).await;
    assert_eq!(wakes(&log), ["agent_1"]);
}

/// A thread whose background child finished while the user typed: its
/// wake held.
async fn a_wake_the_typing_holds() -> (ThreadHandle, EventStream, Vec<AgentEvent>) {
    let (thread, mut events) = thread(background_workers(&[10])).await;
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    thread.typing(true).unwrap();
    run_for(&mut events, &mut log, 60).await;
    assert!(wakes(&log).is_empty(), "a wake came while the user typed");
    (thread, events, log)
}

/// Same instant: the user stops typing and sends in one tick (a chat box
/// submitted). The wake the typing held went out as it stopped, ahead of
/// the user's message: the model answered the wake before the question.
/// A message sent in the tick the typing stops goes first; the wake
/// follows its turn.
///
/// Also with another message read between the two (review: wakes at the
/// same instant — a host's stop sent in that tick, as a child's finish
/// from another worker would be): its handler released the wake, ahead of
/// the user's message. Nothing delivers a wake until the deferral is read.
#[tokio::test(start_paused = true)]
async fn a_message_sent_as_the_typing_stops_goes_before_the_held_wake() {
    for between in [false, true] {
        let (thread, mut events, mut log) = a_wake_the_typing_holds().await;
        let from = log.len();
        thread.typing(false).unwrap();
        let stop = between.then(|| thread.stop_child(&AgentId::new("agent_9")));
        thread.send_user("my question").unwrap();
        run_for(&mut events, &mut log, 60).await;
        if let Some(stop) = stop {
            assert!(stop.await.is_err(), "no such child");
        }
        let after = &log[from..];
        let at = |what: fn(&AgentEvent) -> bool| after.iter().position(what).unwrap();
        let asked = at(|e| matches!(e, AgentEvent::UserMessage(t) if t == "my question"));
        let woken = at(|e| matches!(e, AgentEvent::Wake { .. }));
        assert!(asked < woken, "between: {between}: {after:#?}");
        assert_eq!(wakes(&log), ["agent_1"]);
        check_log(&log, true);
    }
}

/// Same instant (review: the registry): a wake the typing held is
/// released "after what the host sent in this tick" — and the close the
/// host sent in that tick released it, inside its own handler: a `Wake`
/// and a parent turn (a model call) on a thread being closed, which owes
/// no wake. A close delivers nothing; the wake is settled with the
/// thread.
/// Also with a host's stop read between the two (review: wakes at the
/// same instant): its handler released the wake before the close.
#[tokio::test(start_paused = true)]
async fn a_wake_the_typing_held_does_not_go_out_behind_a_close() {
    for between in [false, true] {
        let (thread, mut events, mut log) = a_wake_the_typing_holds().await;
        thread.typing(false).unwrap();
        let _stop = between.then(|| thread.stop_child(&AgentId::new("agent_9")));
        thread.close_and_wait().await;
        drain(&mut events, &mut log);
        assert!(
            wakes(&log).is_empty(),
            "between: {between}: a wake went out behind the close: {log:#?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn off_screen_drops_wakes() {
    let (thread, mut events) = thread(background_workers(&[10])).await;
    thread.send_user("start").unwrap();
    thread.on_screen(false).unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 60).await;
    thread.on_screen(true).unwrap();
    run_for(&mut events, &mut log, 60).await;
    assert!(wakes(&log).is_empty());
    check_log(&log, true);
}

#[tokio::test(start_paused = true)]
async fn a_switch_stops_every_child_and_drops_wakes() {
    let (thread, mut events) = thread(background_workers(&[100, 100, 100, 100, 100])).await;
    thread.send_user("start five").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    assert_eq!(thread.switch_away().await.unwrap(), 5);
    run_for(&mut events, &mut log, 300).await;
    let (order, by_id) = check_log(&log, true);
    assert_eq!(order.len(), 5);
    for id in &order {
        assert_eq!(by_id[id].terminal().unwrap().1, SubAgentStatus::Stopped);
    }
    assert!(wakes(&log).is_empty());
}

/// The wake-dropping half of a switch, with a wake pending (the test
/// above switches while every child still runs: stopped children never
/// wake, so a switch that kept pending wakes passed it). A finished
/// child's wake held while the user types, then a switch: no wake comes
/// once the typing stops.
#[tokio::test(start_paused = true)]
async fn a_switch_drops_a_wake_that_was_pending() {
    let (thread, mut events) = thread(background_workers(&[10])).await;
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    thread.typing(true).unwrap();
    run_for(&mut events, &mut log, 60).await;
    let (_, by_id) = check_log(&log, true);
    assert_eq!(
        by_id[&AgentId::new("agent_1")].terminal().unwrap().1,
        SubAgentStatus::Done,
        "finished, its wake held"
    );
    assert!(wakes(&log).is_empty());
    assert_eq!(thread.switch_away().await.unwrap(), 0);
    thread.typing(false).unwrap();
    run_for(&mut events, &mut log, 60).await;
    assert!(wakes(&log).is_empty(), "{log:#?}");
    thread.close_and_wait().await;
}

#[tokio::test(start_paused = true)]
async fn a_switch_racing_a_completion_leaves_one_terminal_status_and_no_wake() {
    let mut ways = Vec::new();
    for at in [9_999u64, 10_000, 10_001] {
        let (thread, mut events) = thread(background_workers(&[10])).await;
        thread.send_user("start").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        tokio::time::sleep_until(
            tokio::time::Instant::now() + Duration::from_millis(at) - Duration::from_millis(1),
        )
        .await;
        let said = thread.switch_away().await.unwrap();
        run_for(&mut events, &mut log, 60).await;
        check_log(&log, true);
        assert!(
            wakes(&log).is_empty(),
            "a wake after the switch (at {at} ms)"
        );
        // "How many were stopped": one that finished first is not.
        let stopped = log
            .iter()
            .filter(|e| matches!(e, AgentEvent::ChildStatus(_, SubAgentStatus::Stopped)))
            .count();
        assert_eq!(said, stopped, "at {at} ms");
        // One that finished first stays `done` (review: never read).
        let done =
            (log.iter()).any(|e| matches!(e, AgentEvent::ChildStatus(_, SubAgentStatus::Done)));
        assert_eq!(done, said == 0, "at {at} ms: {log:#?}");
        ways.push(said);
    }
    assert!(
        ways.contains(&0) && ways.contains(&1),
        "both ends reached: {ways:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_claimed_result_produces_no_wake() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 10, false)),
        Reply::new().use_agent(&UseAgentCall::result("agent_1")),
        Reply::answer("Got it."),
        Reply::answer("(a wake would land here)"),
    ])
    .with_script("Worker", worker(10));
    let (thread, mut events) = thread(model).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 120).await;
    assert!(wakes(&log).is_empty());
}

/// A child finished while the parent was busy (its wake queued), then the
/// parent's model sent it a message, resuming it as a new run: the queued
/// wake still went out with the old answer, though "the run it goes on as
/// wakes the parent, not this one" — and after a restart the same owed
/// wake was dropped (the store skips a resumed child). One wake, the new
/// run's.
#[tokio::test(start_paused = true)]
async fn a_wake_queued_for_a_child_a_message_then_resumed_is_the_new_runs() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 5, false)),
        // Busy past the child's finish: its wake waits.
        Reply::new().tool_call("sleep", r#"{"secs":10}"#),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "one more thing")),
        Reply::answer("Sent."),
        Reply::answer("Noted."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Worker",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":5}"#),
            Reply::answer("worked 5 s"),
            Reply::answer("one more thing done"),
        ],
    );
    let (thread, mut events) = thread(model).await;
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 120).await;
    check_log(&log, true);
    assert_eq!(wakes(&log), ["agent_2"], "the new run's wake only");
}

/// Two wakes pending at once, the parent slow to answer each: they go out
/// one at a time, each after the last wake's turn has its `Result`, in the
/// order the children finished (the test above never had two pending: its
/// wake turns answer at once and its children finish 10 s apart).
#[tokio::test(start_paused = true)]
async fn pending_wakes_wait_for_the_last_wakes_turn_and_keep_the_finish_order() {
    // Busy in a tool, not a model call: a model call would hold the gate
    // and keep the children from finishing meanwhile.
    let sleep = || Reply::new().tool_call("sleep", r#"{"secs":15}"#);
    let mut first = Reply::new();
    for (i, secs) in [10, 12, 11].iter().enumerate() {
        first = first.use_agent(&work_call(&format!("Worker {}", i + 1), *secs, false));
    }
    let noted = || Reply::answer("Noted.");
    let mut model = ScriptedModel::new(vec![
        first,
        Reply::answer("Started."),
        sleep(),
        noted(),
        sleep(),
        noted(),
        sleep(),
        noted(),
    ]);
    for (i, secs) in [10, 12, 11].iter().enumerate() {
        model = model.with_script(format!("Worker {}\n", i + 1), worker(*secs));
    }
    let (thread, mut events) = thread(model).await;
    thread.send_user("start three").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 120).await;
    check_log(&log, true);
    assert_eq!(
        wakes(&log),
        ["agent_1", "agent_3", "agent_2"],
        "finish order"
    );
    let mut in_flight = false;
    let mut waited = 0;
    for event in &log {
        match event {
            AgentEvent::Wake { .. } => {
                assert!(!in_flight, "two wakes in flight");
                in_flight = true;
            }
            AgentEvent::Result(_) if in_flight => {
                in_flight = false;
                waited += 1;
            }
            _ => {}
        }
    }
    assert_eq!(waited, 3, "each wake's turn answered");
}
