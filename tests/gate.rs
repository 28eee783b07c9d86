//! The ModelGate: FIFO grants, capacity, and permits that cannot leak.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use futures_util::poll;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use subagents::actors::GateHandle;
use subagents::actors::gate::Permit;

type Acquire = Pin<Box<dyn Future<Output = Result<Permit, subagents::actors::Closed>> + Send>>;

/// Queues `n` acquires in order (each polled once from this task, so the
/// gate receives them in this order). One granted at once (a unit free
/// and nobody queued: the lane's path) is kept as a ready future.
async fn queue_in_order(gate: &GateHandle, n: usize) -> Vec<Acquire> {
    let mut futures = Vec::new();
    for i in 0..n {
        let gate = gate.clone();
        let mut fut: Acquire = Box::pin(async move { gate.acquire(format!("w{i}")).await });
        if let Poll::Ready(granted) = poll!(fut.as_mut()) {
            fut = Box::pin(std::future::ready(granted));
        }
        futures.push(fut);
    }
    futures
}

async fn probe_is_free(gate: &GateHandle) -> bool {
    tokio::time::timeout(Duration::from_secs(1), gate.acquire("probe"))
        .await
        .is_ok()
}

async fn run_waiters(capacity: usize, waiters: usize) -> (Vec<usize>, usize) {
    let gate = GateHandle::spawn(capacity).await.unwrap();
    let blocker = gate.acquire("blocker").await.unwrap();
    let queued = queue_in_order(&gate, waiters).await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (i, fut) in queued.into_iter().enumerate() {
        let (order, in_flight, peak) = (order.clone(), in_flight.clone(), peak.clone());
        tasks.push(tokio::spawn(async move {
            let permit = fut.await.unwrap();
            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            order.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_millis(10)).await;
            in_flight.fetch_sub(1, Ordering::SeqCst);
            drop(permit);
        }));
    }
    drop(blocker);
    for task in tasks {
        task.await.unwrap();
    }
    let snapshot = gate.snapshot().await.unwrap();
    assert_eq!(snapshot.in_flight, 0);
    assert_eq!(snapshot.queued, 0);
    assert_eq!(snapshot.granted_total, waiters as u64 + 1);
    let order = order.lock().unwrap().clone();
    (order, peak.load(Ordering::SeqCst))
}

#[tokio::test(start_paused = true)]
async fn hundred_waiters_are_granted_in_exact_fifo_order() {
    let (order, peak) = run_waiters(1, 100).await;
    assert_eq!(order, (0..100).collect::<Vec<_>>());
    assert_eq!(peak, 1, "a capacity-1 gate had two calls in flight");
}

#[tokio::test(start_paused = true)]
async fn capacity_n_admits_exactly_n_at_once() {
    let (order, peak) = run_waiters(3, 30).await;
    assert_eq!(peak, 3);
    assert_eq!(order.len(), 30);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_permit_releases_it() {
    let gate = GateHandle::spawn(1).await.unwrap();
    let permit = gate.acquire("a").await.unwrap();
    assert!(!probe_is_free(&gate).await);
    drop(permit);
    assert!(probe_is_free(&gate).await);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_holder_releases_its_permit() {
    let gate = GateHandle::spawn(1).await.unwrap();
    let g = gate.clone();
    let holder = tokio::spawn(async move {
        let _permit = g.acquire("panicker").await.unwrap();
        panic!("holder crashed");
    });
    assert!(holder.await.unwrap_err().is_panic());
    assert!(probe_is_free(&gate).await);
}

#[tokio::test(start_paused = true)]
async fn an_aborted_holder_task_releases_its_permit() {
    let gate = GateHandle::spawn(1).await.unwrap();
    let g = gate.clone();
    let (held_tx, held_rx) = tokio::sync::oneshot::channel();
    let holder = tokio::spawn(async move {
        let _permit = g.acquire("hanger").await.unwrap();
        held_tx.send(()).unwrap();
        std::future::pending::<()>().await;
    });
    held_rx.await.unwrap();
    assert!(!probe_is_free(&gate).await);
    holder.abort();
    assert!(holder.await.unwrap_err().is_cancelled());
    assert!(probe_is_free(&gate).await);
}

struct Holder;

impl Actor for Holder {
    type Msg = ();
    type State = Permit;
    type Arguments = GateHandle;

    async fn pre_start(
        &self,
        _myself: ActorRef<()>,
        gate: GateHandle,
    ) -> Result<Permit, ActorProcessingErr> {
        Ok(gate.acquire("actor").await?)
    }
}

#[tokio::test(start_paused = true)]
async fn a_killed_holder_actor_releases_its_permit() {
    let gate = GateHandle::spawn(1).await.unwrap();
    let (actor, handle) = Actor::spawn(None, Holder, gate.clone()).await.unwrap();
    assert!(!probe_is_free(&gate).await);
    actor.kill();
    handle.await.unwrap();
    assert!(probe_is_free(&gate).await);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_waiter_never_gets_a_permit_and_blocks_nobody() {
    let gate = GateHandle::spawn(1).await.unwrap();
    let holder = gate.acquire("holder").await.unwrap();
    let mut queued = queue_in_order(&gate, 3).await;
    let third = queued.pop().unwrap();
    let second = queued.pop().unwrap();
    drop(queued); // the first waiter gives up while queued
    let snapshot = gate.snapshot().await.unwrap();
    assert_eq!(snapshot.queued, 2, "the cancelled waiter left the queue");
    drop(holder);
    let second = second.await.unwrap();
    drop(second);
    let third = third.await.unwrap();
    assert_eq!(third.ticket(), 4);
    let snapshot = gate.snapshot().await.unwrap();
    assert_eq!(snapshot.granted_total, 3, "holder, second and third only");
}

#[tokio::test(start_paused = true)]
async fn wait_times_are_observable() {
    let gate = GateHandle::spawn(1).await.unwrap();
    let holder = gate.acquire("holder").await.unwrap();
    let g = gate.clone();
    let waiter = tokio::spawn(async move { g.acquire("waiter").await.map(drop) });
    tokio::time::sleep(Duration::from_secs(5)).await;
    let snapshot = gate.snapshot().await.unwrap();
    assert_eq!((snapshot.in_flight, snapshot.queued), (1, 1));
    drop(holder);
    waiter.await.unwrap().unwrap();
    let snapshot = gate.snapshot().await.unwrap();
    assert_eq!(snapshot.longest_wait, Duration::from_secs(5));
    // The holder was granted on arrival, the waiter after 5 s.
    assert_eq!(snapshot.total_wait, Duration::from_secs(5));
    assert_eq!(snapshot.wait_histogram, [1, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(
        snapshot.wait_histogram.iter().sum::<u64>(),
        snapshot.granted_total
    );
}

/// With several grants that waited, the snapshot's wait statistics are
/// what `GateSnapshot` defines: `longest_wait` the longest of them (not
/// the last: the last waiter here waited 1 s, the first 10 s),
/// `total_wait` their sum, and the histogram counts every grant in its
/// bucket. Guards against each statistic keeping only the last grant's
/// wait (`longest_wait = waited`, `total_wait = waited`, a bucket set to
/// 1), which one waiter alone cannot tell apart.
#[tokio::test(start_paused = true)]
async fn wait_statistics_count_every_grant_not_the_last() {
    /// Holds the permit `fut` is granted for `ms`, then lets it go.
    fn hold(fut: Acquire, ms: u64) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let permit = fut.await.unwrap();
            tokio::time::sleep(Duration::from_millis(ms)).await;
            drop(permit);
        })
    }
    let gate = GateHandle::spawn(1).await.unwrap();
    // Granted by the lane at 0; A queues at 0.
    let holder = gate.acquire("holder").await.unwrap();
    let mut first = queue_in_order(&gate, 1).await;
    let a = hold(first.remove(0), 500);
    tokio::time::sleep(Duration::from_secs(10)).await;
    // B and C queue at 10 s, behind A.
    let mut then = queue_in_order(&gate, 2).await;
    let b = hold(then.remove(0), 500);
    let c = hold(then.remove(0), 0);
    assert_eq!(gate.snapshot().await.unwrap().queued, 3);
    // A is granted at 10 s (waited 10 s), B at 10.5 s (0.5 s), C at 11 s
    // (1 s).
    drop(holder);
    for task in [a, b, c] {
        task.await.unwrap();
    }
    let snapshot = gate.snapshot().await.unwrap();
    assert_eq!(snapshot.granted_total, 4);
    assert_eq!(snapshot.longest_wait, Duration::from_secs(10), "A's wait");
    assert_eq!(
        snapshot.total_wait,
        Duration::from_millis(11_500),
        "10 s + 0.5 s + 1 s"
    );
    assert_eq!(snapshot.wait_histogram, [1, 0, 0, 2, 1, 0, 0, 0]);
    assert_eq!(
        snapshot.wait_histogram.iter().sum::<u64>(),
        snapshot.granted_total
    );
}

#[tokio::test(start_paused = true)]
async fn acquire_on_a_stopped_gate_is_an_error() {
    let gate = GateHandle::spawn(1).await.unwrap();
    gate.actor().stop(None);
    tokio::time::sleep(Duration::from_millis(1)).await;
    let err = gate.acquire("late").await.unwrap_err();
    assert_eq!(err.to_string(), "the model gate is closed");
}

/// A capacity of 0 is read as 1 (documented on `GateHandle::spawn`): a
/// gate admitting no call would hang every one.
#[tokio::test(start_paused = true)]
async fn a_gate_of_capacity_zero_admits_one_call() {
    let gate = GateHandle::spawn(0).await.unwrap();
    assert_eq!(gate.snapshot().await.unwrap().capacity, 1);
    let (_, peak) = run_waiters(0, 3).await;
    assert_eq!(peak, 1);
}

/// Held (a gate linked under a host actor): the gate's lane closed only
/// when its state dropped, and after a stop ractor hands the state to the
/// supervisor inside the termination event, which a host actor reads
/// only between its handlers — so in the handler that stopped the gate,
/// an uncontended `acquire` on a clone was still granted, a model call
/// let through a stopped gate, and one queued before the stop waited for
/// ever. The gate closes its lane and lets its queue go as it stops.
#[tokio::test(start_paused = true)]
async fn a_stopped_gate_linked_under_a_host_grants_nothing() {
    let host = common::host::Host::spawn().await;
    let gate = GateHandle::spawn_linked(1, host.cell()).await.unwrap();
    let (late, queued) = host
        .run(async move {
            let held = gate.acquire("first").await.unwrap();
            let queued = tokio::spawn({
                let gate = gate.clone();
                async move { gate.acquire("second").await.is_ok() }
            });
            while gate.snapshot().await.unwrap().queued == 0 {
                tokio::task::yield_now().await;
            }
            gate.actor().stop_and_wait(None, None).await.ok();
            let late = gate.acquire("late").await.is_ok();
            let queued = tokio::time::timeout(Duration::from_secs(3600), queued)
                .await
                .ok()
                .map(Result::unwrap);
            drop(held);
            (late, queued)
        })
        .await;
    assert!(!late, "a stopped gate granted a permit");
    assert_eq!(
        queued,
        Some(false),
        "the queued acquire (None: still waiting)"
    );
}
