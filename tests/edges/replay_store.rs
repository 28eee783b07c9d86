//! Replay and data safety: the same seed gives the same log, and every
//! child is left with a final envelope in the store, whatever ends it.

use super::*;

/// Defect 5: `stop_all` iterated a `HashMap`, so a switch that stopped
/// several children gave a different log for the same seed.
#[test]
fn a_switch_that_stops_several_children_replays_byte_for_byte() {
    let scenario = Scenario::new(vec![
        {
            let mut fan_out = Reply::new();
            for i in 1..=6 {
                fan_out = fan_out.use_agent(&work_call(&format!("Worker {i}"), 100, false));
            }
            fan_out
        },
        Reply::answer("Started."),
    ])
    .configure(|b| b.max_live(4))
    .tools(ToolRegistry::new().with(Sleep))
    .jitter(Duration::from_secs(2))
    .at(Duration::ZERO, HostAction::User("Start six.".into()))
    .at(Duration::from_secs(10), HostAction::SwitchAway)
    .run_for(Duration::from_secs(200));
    let scenario = (1..=6).fold(scenario, |s, i| {
        s.child_script(format!("Worker {i}\n"), worker(100))
    });
    for seed in 0..8 {
        let first = scenario.run(seed);
        let second = scenario.run(seed);
        assert_eq!(
            first.render(),
            second.render(),
            "seed {seed} replays differently"
        );
        // Asked to stop in child-number order: the queued ones end at
        // once, the running ones as their turns report; each group in
        // child-number order.
        let events = first.events();
        let was_queued = |id: &str| {
            events.iter().any(
                |e| matches!(e, AgentEvent::ChildStatus(c, SubAgentStatus::Queued) if c.as_str() == id),
            ) && !events
                .iter()
                .any(|e| matches!(e, AgentEvent::ChildRunning(c) if c.as_str() == id))
        };
        let stopped: Vec<String> = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ChildStatus(id, SubAgentStatus::Stopped) => Some(id.to_string()),
                _ => None,
            })
            .collect();
        let number = |id: &String| id["agent_".len()..].parse::<u64>().unwrap();
        let (queued, running): (Vec<String>, Vec<String>) =
            stopped.iter().cloned().partition(|id| was_queued(id));
        assert!(queued.is_sorted_by_key(number), "seed {seed}: {stopped:?}");
        assert!(running.is_sorted_by_key(number), "seed {seed}: {stopped:?}");
        assert_eq!(stopped, [queued, running].concat(), "seed {seed}");
        assert_eq!(stopped.len(), 6, "{}", first.render());
    }
}

/// Defect 6: closing a thread with a background child running left no
/// envelope in the store, and the next session reused `agent_1`.
#[tokio::test(start_paused = true)]
async fn closing_a_thread_leaves_a_final_envelope_for_every_child() {
    let dir = tempfile::tempdir().unwrap();
    {
        let config =
            ThreadConfig::new(parent(background_workers(&[600, 5]))).store(store(dir.path()));
        let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
        thread.send_user("start").unwrap();
        let mut log = Vec::new();
        run_for(&mut events, &mut log, 30).await;
        assert_eq!(started(&log).len(), 2);
        thread.close_and_wait().await;
    }
    let reopened = store(dir.path());
    let all = reopened.all();
    let statuses: Vec<(String, SubAgentStatus)> =
        all.iter().map(|e| (e.id.to_string(), e.status)).collect();
    assert_eq!(
        statuses,
        [
            ("agent_1".to_owned(), SubAgentStatus::Stopped),
            ("agent_2".to_owned(), SubAgentStatus::Done)
        ]
    );
    let config = ThreadConfig::new(parent(background_workers(&[5]))).store(reopened);
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    thread.send_user("again").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 30).await;
    assert_eq!(started(&log), [AgentId::new("agent_3")]);
}

/// Defect 6, the crash path: a hub that dies leaves every child it had
/// with a final envelope in the store.
#[tokio::test(start_paused = true)]
async fn a_crashed_hub_leaves_a_final_envelope_for_every_child() {
    let dir = tempfile::tempdir().unwrap();
    let kept = store(dir.path());
    let config = ThreadConfig::new(parent(background_workers(&[600]))).store(kept.clone());
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 10).await;
    kill_the_hub(&thread).await;
    thread.flush_persistence().await.unwrap();
    let envelope = kept.get(&AgentId::new("agent_1")).expect("persisted");
    assert_eq!(envelope.status, SubAgentStatus::Failed);
    assert!(
        envelope.error.as_deref().unwrap_or("").contains("hub"),
        "{envelope:?}"
    );
    assert!(envelope.finished_at_ms.is_some());
    // The thread stays open and answerable: a stop of the failed child,
    // or of them all, says what is so — `Closed` said the thread itself
    // was closed, and a host acting on it dropped an open thread.
    assert_eq!(
        thread.stop_child(&AgentId::new("agent_1")).await,
        Ok(SubAgentStatus::Failed)
    );
    assert_eq!(
        thread.stop_child(&AgentId::new("agent_9")).await,
        Err(subagents::supervisor::ThreadError::UnknownChild(
            AgentId::new("agent_9")
        ))
    );
    assert_eq!(thread.switch_away().await, Ok(0));
    // So does its usage (it was `Closed` too): the parent's turns and the
    // failed child's tokens, read from the hub's book.
    let mut expected = thread.parent_snapshot().await.unwrap().usage;
    expected.add(envelope.usage);
    assert_eq!(thread.usage().await, Ok(expected));
    thread.close_and_wait().await;
}

/// Defect 7: two threads sharing one store both numbered their first
/// child `agent_1`, and the store kept one envelope.
#[tokio::test(start_paused = true)]
async fn two_threads_on_one_store_never_share_an_id() {
    let dir = tempfile::tempdir().unwrap();
    let shared = store(dir.path());
    let mut threads = Vec::new();
    for _ in 0..2 {
        let config = ThreadConfig::new(parent(background_workers(&[5]))).store(shared.clone());
        threads.push(ThreadHandle::spawn(config, None).await.unwrap());
    }
    let mut ids = Vec::new();
    for (thread, events) in &mut threads {
        thread.send_user("start").unwrap();
        let mut log = Vec::new();
        run_for(events, &mut log, 30).await;
        ids.extend(started(&log));
        thread.flush_persistence().await.unwrap();
    }
    assert_eq!(ids, [AgentId::new("agent_1"), AgentId::new("agent_2")]);
    assert_eq!(shared.len(), 2);
    for (thread, _) in &threads {
        thread.close_and_wait().await;
    }
}

/// Shared: two threads on one store. A child one thread made in this
/// session is that thread's alone — the other could read it through the
/// host (`envelope`) and its model could `result`, `status` or `send` to
/// it by guessing `agent_1` (the store served as every hub's archive).
/// Children of an earlier session stay readable by every thread.
#[tokio::test(start_paused = true)]
async fn a_thread_cannot_reach_a_child_another_thread_made() {
    let dir = tempfile::tempdir().unwrap();
    let shared = store(dir.path());
    let config = ThreadConfig::new(parent(background_workers(&[5]))).store(shared.clone());
    let (first, mut first_events) = ThreadHandle::spawn(config, None).await.unwrap();
    first.send_user("start").unwrap();
    run_for(&mut first_events, &mut Vec::new(), 30).await;
    first.flush_persistence().await.unwrap();
    let agent_1 = AgentId::new("agent_1");
    assert!(shared.get(&agent_1).unwrap().status.is_terminal());

    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&UseAgentCall::result("agent_1"))
            .use_agent(&UseAgentCall::send("agent_1", "go on")),
        Reply::answer("Done."),
    ]);
    let config = ThreadConfig::new(parent(model)).store(shared.clone());
    let (second, mut second_events) = ThreadHandle::spawn(config, None).await.unwrap();
    assert_eq!(second.envelope(&agent_1).await, Ok(None));
    second.send_user("peek").unwrap();
    let mut log = Vec::new();
    until_result(&mut second_events, &mut log).await;
    for (output, is_error) in results_of(&log, "use_agent") {
        assert!(
            is_error && output.contains("no sub-agent with id `agent_1`"),
            "{output}"
        );
    }
    assert!(started(&log).is_empty(), "nothing resumed: {log:?}");
    assert!(first.envelope(&agent_1).await.unwrap().is_some());
    second.close_and_wait().await;
    first.close_and_wait().await;
    drop((first, second, shared));

    // After a restart it is a child of an earlier session: any thread
    // may read it.
    let reopened = store(dir.path());
    let config = ThreadConfig::new(parent(background_workers(&[5]))).store(reopened);
    let (third, _events) = ThreadHandle::spawn(config, None).await.unwrap();
    assert!(third.envelope(&agent_1).await.unwrap().is_some());
    third.close_and_wait().await;
}

/// Defect 8: a valid envelope named `agent_18446744073709551615` made
/// `ThreadHandle::spawn` panic, and `…614` killed the hub on the next
/// child. Out of range is a corrupt file; the thread runs.
#[tokio::test(start_paused = true)]
async fn a_huge_stored_id_does_not_crash_the_thread() {
    for huge in ["agent_18446744073709551615", "agent_18446744073709551614"] {
        let (_dir, thread, log) = delegating_beside(huge, &format!("{huge}.json")).await;
        assert_eq!(started(&log), [AgentId::new("agent_1")], "{huge}");
        check_log(&log, true);
        assert!(thread.hub().snapshot().await.is_ok(), "the hub lives");
        thread.close_and_wait().await;
    }
}

/// Foreign input (review: forged or repeated): a backup another tool (or
/// a user) left beside the envelopes, named for the last id a store may
/// hand out, took that number at the open — no id was left, and every
/// child was refused "no child id is left". Another tool's names take no
/// number; the store's own (an envelope, one moved aside, a temporary
/// one) still do.
#[tokio::test(start_paused = true)]
async fn a_foreign_files_name_takes_no_childs_number() {
    let last = "agent_9007199254740991";
    let (_dir, thread, log) = delegating_beside(last, &format!("{last}.json.bak")).await;
    assert_eq!(started(&log), [AgentId::new("agent_1")], "{log:#?}");
    check_log(&log, true);
    thread.close_and_wait().await;
}

/// A thread on a store whose directory holds `file`, a finished envelope
/// of `id` (long before the manual clock's now: kept, not pruned), after
/// its parent started a background worker and 30 s went by: the log.
async fn delegating_beside(
    id: &str,
    file: &str,
) -> (tempfile::TempDir, ThreadHandle, Vec<AgentEvent>) {
    let dir = tempfile::tempdir().unwrap();
    let envelope = common::store::finished_envelope(id, 1_700_000_000_000);
    std::fs::write(
        dir.path().join(file),
        serde_json::to_vec(&envelope).unwrap(),
    )
    .unwrap();
    let config = ThreadConfig::new(parent(background_workers(&[5]))).store(store(dir.path()));
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 30).await;
    (dir, thread, log)
}

/// One run of a hub killed mid-work (its handler crashed, or a host
/// killed it), on a fresh paused runtime: what the thread's stream said.
fn kill_the_hub_with_two_children_running() -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let config = ThreadConfig::new(parent(background_workers(&[600, 600, 600])));
        let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
        thread.send_user("start").unwrap();
        let mut log = Vec::new();
        run_for(&mut events, &mut log, 10).await;
        let seen = log.len();
        kill_the_hub(&thread).await;
        run_for(&mut events, &mut log, 1).await;
        thread.close_and_wait().await;
        log[seen..].iter().map(|e| format!("{e:?}")).collect()
    })
}

/// Replay, the kill path: a hub that dies without its own stop (killed,
/// or its handler crashed) had its children killed by ractor in its
/// child map's order — a `HashMap` with a random seed — and each child
/// closed its turn on the stream as its task ran: the children's last
/// events came in a different order on each run. They close in
/// child-number order.
#[test]
fn a_killed_hub_closes_its_children_in_number_order_on_every_run() {
    let first = kill_the_hub_with_two_children_running();
    let closes: Vec<&String> = first.iter().filter(|e| e.contains("ToolResult")).collect();
    assert_eq!(closes.len(), 3, "{first:#?}");
    for (n, close) in closes.iter().enumerate() {
        assert!(close.contains(&format!("agent_{}", n + 1)), "{first:#?}");
    }
    for round in 0..12 {
        assert_eq!(
            kill_the_hub_with_two_children_running(),
            first,
            "round {round} closed differently"
        );
    }
}

/// Stopped midway: a hub that died without its stop (killed, or its
/// handler crashed) left its unfinished children with no terminal status
/// on the stream — each running child's turn closed (its `Result` came),
/// the queued one said nothing, and the envelopes read `failed`, but no
/// `ChildStatus` ever came: a host's rows stayed "background" for good.
/// Each gets one `failed`, after its turn's last event, deepest first.
#[tokio::test(start_paused = true)]
async fn a_dead_hub_gives_every_unfinished_child_its_terminal_status() {
    let config = ThreadConfig::new(parent(background_workers(&[600, 600, 600, 600])));
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 10).await;
    assert!(
        log.contains(&AgentEvent::ChildStatus(
            AgentId::new("agent_4"),
            SubAgentStatus::Queued
        )),
        "{log:#?}"
    );
    let seen = log.len();
    kill_the_hub(&thread).await;
    run_for(&mut events, &mut log, 1).await;
    let ends: Vec<&AgentEvent> = log[seen..]
        .iter()
        .filter(|e| matches!(e, AgentEvent::ChildStatus(..)))
        .collect();
    let failed = |n: u32| {
        AgentEvent::ChildStatus(AgentId::new(format!("agent_{n}")), SubAgentStatus::Failed)
    };
    assert_eq!(
        ends,
        [&failed(1), &failed(2), &failed(3), &failed(4)],
        "{:#?}",
        &log[seen..]
    );
    check_log(&log, true);
    thread.close_and_wait().await;
}

/// One run of a whole thread killed (`ThreadHandle::actor().kill()`) with
/// its parent waiting inline on one child and another in the background,
/// on a fresh paused runtime: what the stream said after the kill.
fn kill_the_thread_with_children_running() -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let model = ScriptedModel::new(vec![
            Reply::new()
                .use_agent(&work_call("Worker 1", 600, false))
                .use_agent(&work_call("Worker 2", 600, true)),
            Reply::answer("Done."),
        ])
        .with_script("Worker 1\n", worker(600))
        .with_script("Worker 2\n", worker(600));
        let (thread, mut events) = ThreadHandle::spawn(parent(model), None).await.unwrap();
        thread.send_user("start").unwrap();
        let mut log = Vec::new();
        run_for(&mut events, &mut log, 10).await;
        let seen = log.len();
        thread.actor().kill();
        thread.actor().wait(None).await.ok();
        run_for(&mut events, &mut log, 1).await;
        log[seen..].iter().map(|e| format!("{e:?}")).collect()
    })
}

/// Replay, the kill path of a whole thread: ractor kills the supervisor's
/// actors (parent, hub, gate) in its child map's order, a `HashMap` with a
/// random seed, and each ended what it held as its task ran — the parent's
/// waiting call and `Result` before or after its children's ends, from
/// run to run. The children end first (deepest, then by number), then the
/// parent, on every run.
#[test]
fn a_killed_thread_closes_its_children_then_its_parent_on_every_run() {
    let first = kill_the_thread_with_children_running();
    let at = |needle: &str| {
        first
            .iter()
            .position(|e| e.contains(needle))
            .unwrap_or_else(|| panic!("no {needle}: {first:#?}"))
    };
    let parent_call = first
        .iter()
        .position(|e| e.starts_with("ToolResult") && e.contains("use_agent"))
        .unwrap_or_else(|| panic!("the parent's call unanswered: {first:#?}"));
    assert!(at("Child(AgentId(\"agent_1\"), Result") < at("Child(AgentId(\"agent_2\"), Result"));
    assert!(
        at("Child(AgentId(\"agent_2\"), Result") < parent_call,
        "{first:#?}"
    );
    for round in 0..12 {
        assert_eq!(
            kill_the_thread_with_children_running(),
            first,
            "round {round} closed differently"
        );
    }
}
