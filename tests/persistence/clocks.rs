//! The builder's clock stamps envelopes, the store's clock ages them: a
//! thread whose stamps the store would prune as they are written is
//! refused; what a prune could not remove is not a thread's write.

use super::*;
use subagents::actors::clock::{Clock, ManualClock};
use subagents::supervisor::ThreadError;

/// Configuration at odds with itself: a builder pinned to a date (stable
/// stamps) on a store reading the system's. Every finished child's
/// envelope and run were deleted right after they were written — no
/// resume, no owed wake after a restart. The spawn is refused, as the
/// simulation's `Scenario::store` refuses it; one clock for both runs.
#[tokio::test]
async fn a_builder_clock_the_store_would_prune_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    let pinned = 1_700_000_000_000;
    let builder = |clock: u64| {
        DelegationBuilder::new(background_workers(&[0]).shared())
            .clock(Arc::new(ManualClock::new(clock)))
    };
    let Err(refused) = ThreadHandle::spawn(
        ThreadConfig::new(builder(pinned)).store(store.clone()),
        None,
    )
    .await
    else {
        panic!("spawned on a store that prunes what it stamps");
    };
    assert!(
        matches!(refused, ThreadError::ClockBehindStore { stamped_ms } if stamped_ms == pinned),
        "{refused}"
    );
    assert!(refused.to_string().contains("one clock"), "{refused}");
    // Stamped now by the store's reckoning: it runs.
    let now = SystemClock.now_ms();
    let (thread, _events) = ThreadHandle::spawn(ThreadConfig::new(builder(now)).store(store), None)
        .await
        .unwrap();
    thread.close_and_wait().await;
}

/// Review of this session's change: with a retention of zero (a host
/// keeping only running children across restarts) and one clock for
/// both, a millisecond between the check's two reads refused the spawn
/// at random, telling the host to use one clock. A clock that moves a
/// millisecond at every read opens that window each time.
#[tokio::test]
async fn one_clock_read_twice_is_not_two_clocks() {
    use std::sync::atomic::{AtomicU64, Ordering};
    struct Ticking(AtomicU64);
    impl Clock for Ticking {
        fn now_ms(&self) -> u64 {
            self.0.fetch_add(1, Ordering::SeqCst)
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(Ticking(AtomicU64::new(SystemClock.now_ms())));
    let store =
        EnvelopeStore::open_with_retention(tmp.path(), clock.clone(), std::time::Duration::ZERO)
            .unwrap()
            .0;
    let builder = DelegationBuilder::new(background_workers(&[0]).shared()).clock(clock);
    let spawned =
        ThreadHandle::spawn(ThreadConfig::new(builder).store(Arc::new(store)), None).await;
    let Ok((thread, _events)) = spawned else {
        panic!("one clock, refused");
    };
    thread.close_and_wait().await;
}

/// The typed host boundary (review): every envelope write pruned, and the
/// files a prune could not remove — any thread's expired children — went
/// into the writing thread's failed writes: `persist_errors` and a
/// `delete`'s `NotSaved` named another child's file, though every write
/// of this thread had landed. A prune's failures are logged; the file is
/// kept and tried again at the next prune.
#[tokio::test(start_paused = true)]
async fn a_file_a_prune_cannot_remove_is_not_a_failed_write_of_the_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("First", 1, false)),
        Reply::answer("Started."),
        Reply::answer("Noted."),
        Reply::new().use_agent(&work_call("Second", 1, false)),
        Reply::answer("Started another."),
        Reply::answer("Noted again."),
    ])
    .with_script("First\n", worker(1))
    .with_script("Second\n", worker(1));
    let (clock, store, thread, mut events) = an_hours_retention(tmp.path(), model).await;
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until_wake(&mut events, &mut log, "agent_1").await;
    thread.flush_persistence().await.unwrap();
    // Its file cannot be removed (a directory in its place: another
    // program holding it, on Windows).
    let first = store.path_of(&AgentId::new("agent_1"));
    std::fs::remove_file(&first).unwrap();
    std::fs::create_dir(&first).unwrap();
    clock.advance(2 * HOUR);
    thread.send_user("start another").unwrap();
    until_wake(&mut events, &mut log, "agent_2").await;
    thread.flush_persistence().await.unwrap();
    assert!(first.exists(), "kept, to try again");
    assert_eq!(thread.persist_errors().await.unwrap(), Vec::<String>::new());
    thread.close_and_wait().await;
}

/// Time (a clock stepped back) and the same instant: a restart delivers
/// the wakes its last process owed in the order their children finished,
/// read from their finish stamps — `Beta` finished first, then the
/// clock was stepped back (or stood still: two finishes in one
/// millisecond went by number) and `Alpha` finished: the restart woke
/// the parent for `Alpha` first. A thread's finish stamps are strictly
/// increasing.
#[tokio::test(start_paused = true)]
async fn owed_wakes_keep_their_finish_order_when_the_clock_steps_back() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(
                &UseAgentCall::run("Alpha\nYou work.", "alpha's part")
                    .tools(["sleep"])
                    .background(),
            )
            .use_agent(&UseAgentCall::run("Beta\nYou work.", "beta's part").background()),
        Reply::answer("Started."),
    ])
    .with_script(
        "Alpha",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs": 60}"#),
            Reply::answer("alpha done"),
        ],
    )
    .with_script("Beta", vec![Reply::answer("beta done")]);
    let (clock, store, thread, mut events) = an_hours_retention(&live, model).await;
    thread.typing(true).unwrap();
    thread.send_user("go").unwrap();
    let owed = |id: &str| store.get(&AgentId::new(id)).is_some_and(|e| e.wake_owed);
    let mut log = Vec::new();
    for (id, then) in [("agent_2", Some(-1_000)), ("agent_1", None)] {
        until(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::ChildStatus(child, SubAgentStatus::Done) if child.as_str() == id)
        })
        .await;
        while !owed(id) {
            thread.sync().await.unwrap();
            thread.flush_persistence().await.unwrap();
            tokio::task::yield_now().await;
        }
        if let Some(step) = then {
            clock.set(clock.now_ms().saturating_add_signed(step));
        }
    }
    let killed = tmp.path().join("killed");
    copy_dir(&live, &killed);
    thread.close_and_wait().await;
    let retention = std::time::Duration::from_millis(HOUR);
    let restarted = EnvelopeStore::open_with_retention(&killed, clock, retention).unwrap();
    assert_eq!(
        restarted.0.owed_wakes(),
        [AgentId::new("agent_2"), AgentId::new("agent_1")]
    );
}
