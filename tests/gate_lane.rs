//! The gate's uncontended path (its lane) against the real actor: an
//! acquire with a unit free and nobody queued is granted at once, and at
//! every edge — a release, a give-up and an arrival in the same tick —
//! nobody passes a waiter and no unit is lost. A proptest drives random
//! arrivals, releases, give-ups and scheduler turns in paused time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use futures_util::poll;
use proptest::prelude::*;
use subagents::actors::gate::Permit;
use subagents::actors::{Closed, GateHandle};

type Acquire = Pin<Box<dyn Future<Output = Result<Permit, Closed>> + Send>>;

fn acquire(gate: &GateHandle, name: &str) -> Acquire {
    let gate = gate.clone();
    let name = name.to_owned();
    Box::pin(async move { gate.acquire(name).await })
}

/// `fut`'s output, or a failure (not a hang) if it never comes.
async fn within<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(60), fut)
        .await
        .expect("it never came")
}

/// Lets the gate actor read what was sent to it.
async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

/// A capacity-1 gate, its holder, and a waiter queued behind it.
async fn held_with_a_waiter() -> (GateHandle, Permit, Acquire) {
    let gate = GateHandle::spawn(1).await.unwrap();
    let holder = gate.acquire("holder").await.unwrap();
    let mut waiter = acquire(&gate, "waiter");
    assert!(poll!(waiter.as_mut()).is_pending());
    (gate, holder, waiter)
}

#[tokio::test(start_paused = true)]
async fn an_uncontended_acquire_is_granted_at_its_first_poll() {
    let gate = GateHandle::spawn(2).await.unwrap();
    let mut first = acquire(&gate, "a");
    let Poll::Ready(first) = poll!(first.as_mut()) else {
        panic!("a free gate made its first acquire wait for the actor");
    };
    let first = first.unwrap();
    let mut second = acquire(&gate, "b");
    let Poll::Ready(second) = poll!(second.as_mut()) else {
        panic!("a second unit was free");
    };
    let _second = second.unwrap();
    let snapshot = gate.snapshot().await.unwrap();
    assert_eq!((snapshot.in_flight, snapshot.queued), (2, 0));
    assert_eq!(snapshot.granted_total, 2);
    assert_eq!(snapshot.wait_histogram[0], 2, "neither waited");
    drop(first);
    let snapshot = gate.snapshot().await.unwrap();
    assert_eq!(snapshot.in_flight, 1);
}

#[tokio::test(start_paused = true)]
async fn a_release_and_an_arrival_in_one_tick_do_not_pass_the_queued_waiter() {
    let (gate, holder, waiter) = held_with_a_waiter().await;
    // Same tick: the holder releases, a newcomer arrives.
    drop(holder);
    let mut newcomer = acquire(&gate, "newcomer");
    assert!(
        poll!(newcomer.as_mut()).is_pending(),
        "the newcomer took the released unit past the waiter"
    );
    let granted = within(waiter).await.unwrap();
    settle().await;
    assert!(poll!(newcomer.as_mut()).is_pending(), "capacity 1, held");
    drop(granted);
    within(newcomer).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_waiter_that_gives_up_as_its_unit_arrives_loses_no_unit() {
    let (gate, holder, waiter) = held_with_a_waiter().await;
    // Same tick: the unit goes to the waiter's queue, the waiter leaves.
    drop(holder);
    drop(waiter);
    settle().await;
    let snapshot = gate.snapshot().await.unwrap();
    assert_eq!((snapshot.in_flight, snapshot.queued), (0, 0));
    let mut next = acquire(&gate, "next");
    assert!(
        poll!(next.as_mut()).is_ready(),
        "the unit came back to the lane"
    );
}

/// A waiter that gives up after a snapshot was already sent to the gate
/// (its `Cancel` queued behind the snapshot, which prunes it first) leaves
/// the uncontended path open: once the holder lets go, a new acquire is
/// granted at its first poll. Guards against the snapshot's prune not
/// unqueueing what it removed from the lane: the `Cancel` then found
/// nothing, the lane counted a waiter for good, and every later acquire
/// went through the actor.
#[tokio::test(start_paused = true)]
async fn a_waiter_pruned_by_a_snapshot_leaves_the_lane_uncontended() {
    let (gate, holder, waiter) = held_with_a_waiter().await;
    let mut snap = Box::pin(gate.snapshot());
    assert!(poll!(snap.as_mut()).is_pending(), "the snapshot is sent");
    drop(waiter);
    assert_eq!(within(snap).await.unwrap().queued, 0, "pruned");
    drop(holder);
    settle().await;
    let snapshot = gate.snapshot().await.unwrap();
    assert_eq!((snapshot.in_flight, snapshot.queued), (0, 0));
    let mut next = acquire(&gate, "next");
    assert!(
        poll!(next.as_mut()).is_ready(),
        "the lane still counts the pruned waiter: the free unit went through the actor"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stopped_gate_grants_nothing_on_either_path() {
    let gate = GateHandle::spawn(2).await.unwrap();
    let held = gate.acquire("held").await.unwrap();
    gate.actor().stop(None);
    settle().await;
    assert!(matches!(gate.acquire("late").await, Err(Closed::Gate)));
    // Releasing into a stopped gate is harmless.
    drop(held);
    assert!(matches!(gate.acquire("later").await, Err(Closed::Gate)));
}

#[tokio::test(start_paused = true)]
async fn queued_waiters_are_told_when_the_gate_stops() {
    let (gate, _held, waiter) = held_with_a_waiter().await;
    gate.actor().stop(None);
    assert!(matches!(within(waiter).await, Err(Closed::Gate)));
}

/// Shared: tasks on two worker threads acquire and release one gate at
/// once, so the lane's lock is taken from both threads and the fast and
/// queued paths interleave for real. Never more held than the capacity,
/// every acquire granted, and every unit back on the uncontended path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_threads_on_one_gate_never_exceed_its_capacity() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    const CAPACITY: usize = 2;
    const TASKS: usize = 8;
    const ROUNDS: usize = 300;
    let gate = GateHandle::spawn(CAPACITY).await.unwrap();
    let held = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let (gate, held, peak) = (gate.clone(), held.clone(), peak.clone());
        tasks.push(tokio::spawn(async move {
            for round in 0..ROUNDS {
                let permit = gate.acquire(format!("t{t}")).await.unwrap();
                let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                if round % 3 == 0 {
                    tokio::task::yield_now().await;
                }
                held.fetch_sub(1, Ordering::SeqCst);
                drop(permit);
            }
        }));
    }
    for task in tasks {
        within(task).await.unwrap();
    }
    assert!(
        peak.load(Ordering::SeqCst) <= CAPACITY,
        "more held than the capacity"
    );
    let snapshot = within(gate.snapshot()).await.unwrap();
    assert_eq!((snapshot.in_flight, snapshot.queued), (0, 0));
    assert_eq!(snapshot.granted_total, (TASKS * ROUNDS) as u64);
    let mut again = Vec::new();
    for _ in 0..CAPACITY {
        let mut fut = acquire(&gate, "after");
        assert!(poll!(fut.as_mut()).is_ready(), "a unit was lost");
        again.push(fut);
    }
}

#[derive(Debug, Clone)]
enum Step {
    Arrive,
    Release(usize),
    GiveUp(usize),
    Yield(u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => Just(Step::Arrive),
        3 => any::<usize>().prop_map(Step::Release),
        1 => any::<usize>().prop_map(Step::GiveUp),
        3 => (0u8..6).prop_map(Step::Yield),
    ]
}

/// The scenario's waiters: pending ones in arrival order, holders, and
/// the order of grants.
#[derive(Default)]
struct Waiters {
    pending: Vec<(usize, Acquire)>,
    holding: Vec<(usize, Permit)>,
    grants: Vec<usize>,
}

impl Waiters {
    /// Polls every pending waiter once, oldest first: a grant to one with
    /// an older waiter still pending breaks FIFO.
    async fn poll_all(&mut self) -> Result<(), TestCaseError> {
        let mut still = Vec::new();
        for (i, mut fut) in std::mem::take(&mut self.pending) {
            match poll!(fut.as_mut()) {
                Poll::Ready(granted) => {
                    let passed = still.first().map(|(w, _): &(usize, Acquire)| *w);
                    prop_assert_eq!(passed, None, "waiter {} granted past an older one", i);
                    self.holding.push((i, granted.unwrap()));
                    self.grants.push(i);
                }
                Poll::Pending => still.push((i, fut)),
            }
        }
        self.pending = still;
        Ok(())
    }
}

async fn scenario(capacity: usize, steps: Vec<Step>) -> Result<(), TestCaseError> {
    let gate = GateHandle::spawn(capacity).await.unwrap();
    let mut w = Waiters::default();
    let mut next = 0;
    for step in steps {
        match step {
            Step::Arrive => {
                w.pending.push((next, acquire(&gate, "w")));
                next += 1;
            }
            Step::Release(k) if !w.holding.is_empty() => {
                let at = k % w.holding.len();
                drop(w.holding.remove(at));
            }
            Step::GiveUp(k) if !w.pending.is_empty() => {
                let at = k % w.pending.len();
                drop(w.pending.remove(at));
            }
            Step::Release(_) | Step::GiveUp(_) => {}
            Step::Yield(n) => {
                for _ in 0..n {
                    tokio::task::yield_now().await;
                }
            }
        }
        w.poll_all().await?;
        prop_assert!(w.holding.len() <= capacity, "more held than the capacity");
    }
    // Release everything; every waiter left is granted in turn.
    let mut rounds = 0;
    while !w.pending.is_empty() || !w.holding.is_empty() {
        rounds += 1;
        prop_assert!(rounds <= next + 2, "a waiter was never granted");
        w.holding.clear();
        settle().await;
        w.poll_all().await?;
        prop_assert!(w.holding.len() <= capacity);
    }
    settle().await;
    let snapshot = gate.snapshot().await.unwrap();
    prop_assert_eq!((snapshot.in_flight, snapshot.queued), (0, 0));
    prop_assert_eq!(snapshot.granted_total, w.grants.len() as u64);
    // The whole capacity is back on the uncontended path.
    let mut again = Vec::new();
    for _ in 0..capacity {
        let mut fut = acquire(&gate, "after");
        prop_assert!(poll!(fut.as_mut()).is_ready(), "a unit was lost");
        again.push(fut);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Random arrivals, releases, give-ups and scheduler turns against the
    /// real gate: FIFO over both paths, never more held than the capacity,
    /// and every unit back at the end.
    #[test]
    fn random_interleavings_stay_fifo_and_lose_no_unit(
        capacity in 1usize..4,
        steps in prop::collection::vec(step(), 1..60),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(scenario(capacity, steps))?;
    }
}
