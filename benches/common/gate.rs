//! Case 1: one grant/release cycle of a capacity-1 FIFO lock with 100
//! waiters, for our `GateHandle`, a `tokio::sync::Mutex` handoff and a bare
//! ractor gate (an actor granting through `RpcReplyPort`, released by a
//! cast from the permit's `Drop`).
//!
//! A round: a blocker holds the lock; 100 acquire futures are polled once
//! from one task, in order (so each lock has them queued in that order);
//! each then moves to its own task, which loops `cycles` times: acquire,
//! write its index into the grant log, release. The blocker releases and
//! the clock runs until every task is done.
//!
//! FIFO means grants follow the order in which `Acquire`s reached the
//! lock. The first 100 reach it in index order, so the log must start
//! `0, 1, …, 99` on any runtime. After that a waiter re-queues right after
//! its release, behind the 99 others, so the log continues `0, 1, …, 99`
//! over and over — exactly, on a current-thread runtime. On a multi-thread
//! runtime the OS may preempt a waiter between its release and its next
//! acquire, letting the next holder queue first: that reorders arrivals
//! (not grants), so there the rounds only count such slips.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use subagents::actors::GateHandle;

/// Waiters queued at once.
pub(crate) const WAITERS: usize = 100;

/// A capacity-1 FIFO lock under test.
pub(crate) trait Lock: Clone + Send + Sync + 'static {
    /// What releases the lock when dropped.
    type Guard: Send + 'static;
    /// Waits for the lock.
    fn lock(&self) -> impl Future<Output = Self::Guard> + Send + 'static;
}

/// `tokio::sync::Mutex` (FIFO-fair): the raw tokio floor.
#[derive(Clone, Default)]
pub(crate) struct TokioMutex(Arc<tokio::sync::Mutex<()>>);

impl Lock for TokioMutex {
    type Guard = tokio::sync::OwnedMutexGuard<()>;
    fn lock(&self) -> impl Future<Output = Self::Guard> + Send + 'static {
        self.0.clone().lock_owned()
    }
}

/// Our gate, acquired under one agent id (cloned per acquire, as an agent
/// does: no allocation).
#[derive(Clone)]
pub(crate) struct Ours(pub(crate) GateHandle, subagents::messages::AgentId);

impl Lock for Ours {
    type Guard = subagents::actors::gate::Permit;
    fn lock(&self) -> impl Future<Output = Self::Guard> + Send + 'static {
        let gate = self.0.clone();
        let holder = self.1.clone();
        async move { gate.acquire(holder).await.expect("the gate is open") }
    }
}

impl Ours {
    pub(crate) async fn spawn() -> Self {
        Self(
            GateHandle::spawn(1).await.expect("spawn the gate"),
            subagents::messages::AgentId::new("waiter"),
        )
    }
}

/// The bare ractor floor: a FIFO of reply ports and a held flag.
pub(crate) struct BareGate;

/// Its messages.
pub(crate) enum BareMsg {
    Acquire(RpcReplyPort<BarePermit>),
    Release,
}

/// Releases the bare gate when dropped.
pub(crate) struct BarePermit(ActorRef<BareMsg>);

impl Drop for BarePermit {
    fn drop(&mut self) {
        let _ = self.0.cast(BareMsg::Release);
    }
}

/// The bare gate's state.
pub(crate) struct BareState {
    queue: VecDeque<RpcReplyPort<BarePermit>>,
    held: bool,
}

impl Actor for BareGate {
    type Msg = BareMsg;
    type State = BareState;
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ActorRef<BareMsg>,
        _args: (),
    ) -> Result<BareState, ActorProcessingErr> {
        Ok(BareState {
            queue: VecDeque::new(),
            held: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<BareMsg>,
        message: BareMsg,
        state: &mut BareState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            BareMsg::Acquire(reply) if !state.held => {
                state.held = true;
                // A failed send drops the permit, whose Release follows.
                let _ = reply.send(BarePermit(myself));
            }
            BareMsg::Acquire(reply) => state.queue.push_back(reply),
            BareMsg::Release => match state.queue.pop_front() {
                Some(reply) => {
                    let _ = reply.send(BarePermit(myself));
                }
                None => state.held = false,
            },
        }
        Ok(())
    }
}

/// A handle to a bare gate.
#[derive(Clone)]
pub(crate) struct Bare(ActorRef<BareMsg>);

impl Bare {
    pub(crate) async fn spawn() -> Self {
        let (actor, _) = Actor::spawn(None, BareGate, ())
            .await
            .expect("spawn the bare gate");
        Self(actor)
    }
}

impl Lock for Bare {
    type Guard = BarePermit;
    fn lock(&self) -> impl Future<Output = Self::Guard> + Send + 'static {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = self.0.cast(BareMsg::Acquire(tx.into()));
        async move {
            sent.map_err(|_| ()).expect("the bare gate is open");
            rx.await.expect("the bare gate granted")
        }
    }
}

type Queued<G> = Pin<Box<dyn Future<Output = G> + Send>>;

impl Round {
    /// Exact FIFO: every grant in arrival order (what a current-thread
    /// runtime must show).
    pub(crate) fn exact_fifo(&self) -> bool {
        self.first_in_order && self.slips == 0
    }
}

/// What one round measured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Round {
    /// Wall time from the blocker's release to the last task's end.
    pub(crate) elapsed: Duration,
    /// Grant/release cycles in that time.
    pub(crate) cycles: usize,
    /// The first `WAITERS` grants were `0..WAITERS`, in order.
    pub(crate) first_in_order: bool,
    /// Grants that differ from `0..WAITERS` repeated (0 on a
    /// current-thread runtime; see the module docs).
    pub(crate) slips: usize,
}

/// One round: `WAITERS` tasks, `cycles` acquisitions each.
pub(crate) async fn round<L: Lock>(lock: &L, cycles: usize) -> Round {
    let total = WAITERS * cycles;
    let log: Arc<Vec<AtomicU16>> = Arc::new((0..total).map(|_| AtomicU16::new(u16::MAX)).collect());
    let next = Arc::new(AtomicUsize::new(0));
    let blocker = lock.lock().await;
    // Poll each first acquire once, here, in order: they queue in order.
    // `unconstrained`: tokio's co-operative budget must not turn a first
    // poll into a not-yet-queued `Pending`.
    let mut firsts: Vec<Queued<L::Guard>> = Vec::with_capacity(WAITERS);
    tokio::task::unconstrained(async {
        for _ in 0..WAITERS {
            let mut fut: Queued<L::Guard> = Box::pin(lock.lock());
            assert!(
                futures_util::poll!(fut.as_mut()).is_pending(),
                "the blocker holds the lock"
            );
            firsts.push(fut);
        }
    })
    .await;
    let mut tasks = Vec::with_capacity(WAITERS);
    for (i, first) in firsts.into_iter().enumerate() {
        let (lock, log, next) = (lock.clone(), log.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut guard = first.await;
            for c in 0..cycles {
                let at = next.fetch_add(1, Ordering::Relaxed);
                log[at].store(i as u16, Ordering::Relaxed);
                drop(guard);
                if c + 1 == cycles {
                    break;
                }
                guard = lock.lock().await;
            }
        }));
    }
    let start = Instant::now();
    drop(blocker);
    for task in tasks {
        task.await.expect("a waiter task");
    }
    let elapsed = start.elapsed();
    let log: Vec<usize> = log
        .iter()
        .map(|slot| usize::from(slot.load(Ordering::Relaxed)))
        .collect();
    Round {
        elapsed,
        cycles: total,
        first_in_order: log.iter().take(WAITERS).copied().eq(0..WAITERS),
        slips: log
            .iter()
            .enumerate()
            .filter(|(k, i)| **i != k % WAITERS)
            .count(),
    }
}
