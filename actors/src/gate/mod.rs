//! The **ModelGate** actor: a FIFO lock around every model call.
//!
//! ```text
//!  Agent task ──Acquire{ticket}──► ModelGate ──Permit──► Agent task
//!                                  │ GateQueue (pure)  ◄──Release── Permit::drop
//!  acquire future dropped ──Cancel{ticket}──►
//! ```
//!
//! **Owns:** the queue of waiters and the set of held tickets.
//! **Guarantees:** at most `capacity` permits held at once; permits granted
//! in the order `Acquire` messages arrived (one task's `acquire` calls are
//! FIFO per sender, as ractor delivers); a permit is released when dropped —
//! including by a panic unwinding or a task being aborted; a waiter whose
//! `acquire` future is dropped is removed and never granted.
//!
//! The shape follows tower's `Buffer`: a private worker (the actor) and a
//! cheap handle ([`GateHandle`]) that spawns it for you.
//!
//! # A note on choosing a capacity
//! One set of weights serves one call at a time: keep the default of 1 for
//! a local model (llama.cpp without parallel slots, a phone). A server that
//! batches (vLLM, llama.cpp with `--parallel N`) can take N: set the
//! capacity to the server's parallel slots, not more, or calls queue inside
//! the server where the gate can no longer order them.

mod queue;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use queue::GateQueue;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort, SpawnErr};
use subagents_messages::{AgentId, GateMsg, GateSnapshot, Permit, Ticket};
use tokio::time::Instant;

/// The gate actor.
#[derive(Debug, Default, Clone, Copy)]
pub struct ModelGate;

/// Arguments of [`ModelGate`].
#[derive(Debug, Clone, Copy)]
pub struct GateArguments {
    /// Permits held at once (at least 1).
    pub capacity: usize,
}

/// One queued waiter.
#[derive(Debug)]
pub struct Waiter {
    holder: AgentId,
    reply: RpcReplyPort<Permit>,
    /// When it started waiting; `None` when granted on arrival.
    since: Option<Instant>,
}

/// The gate's state.
#[derive(Debug)]
pub struct GateState {
    queue: GateQueue<Waiter>,
    granted_total: u64,
    longest_wait: Duration,
}

impl GateState {
    fn grant(&mut self, myself: &ActorRef<GateMsg>) {
        while let Some((ticket, waiter)) = self.queue.grant_next() {
            if waiter.reply.is_closed() {
                // The waiter gave up; its Cancel may still be on the way.
                self.queue.release(ticket);
                continue;
            }
            let waited = waiter.since.map_or(Duration::ZERO, |s| s.elapsed());
            if waiter
                .reply
                .send(Permit::new(myself.clone(), ticket))
                .is_ok()
            {
                self.granted_total += 1;
                self.longest_wait = self.longest_wait.max(waited);
                tracing::debug!(
                    ticket,
                    holder = %waiter.holder,
                    wait_ms = waited.as_millis() as u64,
                    in_flight = self.queue.in_flight(),
                    queued = self.queue.queued(),
                    "model gate granted"
                );
            }
            // If the send failed, the permit was dropped with the failed
            // message and its Release is on the way.
        }
    }

    fn snapshot(&self) -> GateSnapshot {
        GateSnapshot {
            capacity: self.queue.capacity(),
            in_flight: self.queue.in_flight(),
            queued: self.queue.queued(),
            granted_total: self.granted_total,
            longest_wait: self.longest_wait,
        }
    }
}

impl Actor for ModelGate {
    type Msg = GateMsg;
    type State = GateState;
    type Arguments = GateArguments;

    async fn pre_start(
        &self,
        _myself: ActorRef<GateMsg>,
        args: GateArguments,
    ) -> Result<GateState, ActorProcessingErr> {
        Ok(GateState {
            queue: GateQueue::new(args.capacity),
            granted_total: 0,
            longest_wait: Duration::ZERO,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<GateMsg>,
        message: GateMsg,
        state: &mut GateState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            GateMsg::Acquire {
                ticket,
                holder,
                reply,
            } => {
                // Stamped only when it will wait: most grants are at once.
                let since = (!state.queue.has_room()).then(Instant::now);
                state.queue.push(
                    ticket,
                    Waiter {
                        holder,
                        reply,
                        since,
                    },
                );
            }
            GateMsg::Cancel { ticket } => {
                state.queue.cancel(ticket);
            }
            GateMsg::Release { ticket } => {
                state.queue.release(ticket);
            }
            GateMsg::Snapshot(reply) => {
                state.queue.prune(|w| w.reply.is_closed());
                let _ = reply.send(state.snapshot());
            }
            _ => {}
        }
        state.grant(&myself);
        Ok(())
    }
}

/// The gate is gone (stopped or crashed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the model gate is closed")]
pub struct GateClosed(());

/// A handle to a ModelGate. Cheap to clone.
///
/// A gate spawned through [`GateHandle::spawn`] or
/// [`GateHandle::spawn_linked`] lives as long as a handle refers to it:
/// when the last clone is dropped, the gate stops (a permit still held
/// then releases into nothing). A handle made with
/// [`GateHandle::from_actor`] never stops the gate: its spawner owns it.
#[derive(Debug, Clone)]
pub struct GateHandle {
    actor: ActorRef<GateMsg>,
    next_ticket: Arc<AtomicU64>,
    /// Shared by every clone of an owning handle; stops the gate when the
    /// last one goes.
    _owner: Option<Arc<StopOnDrop>>,
}

/// Stops the gate actor when dropped.
#[derive(Debug)]
struct StopOnDrop(ActorRef<GateMsg>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop(None);
    }
}

impl GateHandle {
    /// Spawns a gate admitting `capacity` calls at once; it stops when the
    /// last handle is dropped.
    pub async fn spawn(capacity: usize) -> Result<GateHandle, SpawnErr> {
        let (actor, _) = Actor::spawn(None, ModelGate, GateArguments { capacity }).await?;
        Ok(Self::owning(actor))
    }

    fn owning(actor: ActorRef<GateMsg>) -> Self {
        Self {
            _owner: Some(Arc::new(StopOnDrop(actor.clone()))),
            ..Self::from_actor(actor)
        }
    }

    /// Spawns a gate linked under `supervisor`; it stops when the last
    /// handle is dropped, or with its supervisor.
    pub async fn spawn_linked(
        capacity: usize,
        supervisor: ActorCell,
    ) -> Result<GateHandle, SpawnErr> {
        let (actor, _) =
            Actor::spawn_linked(None, ModelGate, GateArguments { capacity }, supervisor).await?;
        Ok(Self::owning(actor))
    }

    /// A handle to a gate spawned by the host, who stops it: dropping
    /// this handle leaves the gate running.
    pub fn from_actor(actor: ActorRef<GateMsg>) -> Self {
        Self {
            actor,
            next_ticket: Arc::new(AtomicU64::new(1)),
            _owner: None,
        }
    }

    /// The gate actor.
    pub fn actor(&self) -> &ActorRef<GateMsg> {
        &self.actor
    }

    /// Waits for a permit, in FIFO order. Dropping this future before it
    /// completes removes the waiter from the queue.
    pub async fn acquire(&self, holder: impl Into<AgentId>) -> Result<Permit, GateClosed> {
        let ticket = self.next_ticket.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.actor
            .cast(GateMsg::Acquire {
                ticket,
                holder: holder.into(),
                reply: tx.into(),
            })
            .map_err(|_| GateClosed(()))?;
        let mut guard = CancelOnDrop {
            actor: &self.actor,
            ticket,
            armed: true,
        };
        let permit = rx.await.map_err(|_| GateClosed(()))?;
        guard.armed = false;
        Ok(permit)
    }

    /// The gate's state now. Never waits on a holder.
    pub async fn snapshot(&self) -> Result<GateSnapshot, GateClosed> {
        ractor::call!(self.actor, GateMsg::Snapshot).map_err(|_| GateClosed(()))
    }
}

struct CancelOnDrop<'a> {
    actor: &'a ActorRef<GateMsg>,
    ticket: Ticket,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.actor.cast(GateMsg::Cancel {
                ticket: self.ticket,
            });
        }
    }
}
