//! Host code that panics, read where the library cannot let it unwind.

use std::sync::atomic::{AtomicBool, Ordering};

use subagents::actors::clock::Clock;

use super::*;

/// A clock that panics once, when armed (a time service that is down).
struct Flaky(AtomicBool);

impl Clock for Flaky {
    fn now_ms(&self) -> u64 {
        if self.0.swap(false, Ordering::SeqCst) {
            panic!("the time service is down");
        }
        1_700_000_000_000
    }
}

/// A thread whose parent starts one background worker of 5 s, on `clock`.
async fn on(clock: &Arc<Flaky>) -> (ThreadHandle, EventStream) {
    let builder = DelegationBuilder::new(background_workers(&[5]).shared())
        .tools(ToolRegistry::new().with(Sleep))
        .clock(clock.clone());
    ThreadHandle::spawn(builder, None).await.unwrap()
}

/// A host's clock that panics (the NodeLink's did, tenth row of the
/// eighteenth session): read in the hub's handler with no guard, it took
/// the hub down as a child was asked for — the call refused, every later
/// delegation too; read between a child's `done` on the stream and its
/// book entry, it recorded that child `failed` ("the hub stopped"), its
/// answer lost, its parent never woken. A reading that panics is not the
/// reader's: the last good one stands in.
#[tokio::test(start_paused = true)]
async fn a_clock_that_panics_takes_no_child_down() {
    for armed_at in ["the request", "the finish"] {
        let clock = Arc::new(Flaky(AtomicBool::new(armed_at == "the request")));
        let (thread, mut events) = on(&clock).await;
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        if armed_at == "the finish" {
            // Requested and started: the hub's next reading is the finish's.
            until_child(
                &mut events,
                &mut log,
                |e| matches!(e, AgentEvent::ToolStarted(t) if t.name == "sleep"),
            )
            .await;
            clock.0.store(true, Ordering::SeqCst);
        }
        until_wake(&mut events, &mut log, "agent_1").await;
        assert!(
            !clock.0.load(Ordering::SeqCst),
            "{armed_at}: the clock was read"
        );
        let envelope = thread.envelope(&AgentId::new("agent_1")).await.unwrap();
        let envelope = envelope.expect("agent_1's envelope");
        assert_eq!(envelope.status, SubAgentStatus::Done, "{armed_at}");
        assert_eq!(envelope.result.as_deref(), Some("worked 5 s"), "{armed_at}");
        thread.sync().await.expect("the hub runs on");
        thread.close_and_wait().await;
    }
}
