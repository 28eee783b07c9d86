//! The cheap handle that spawns and talks to a gate (tower's `Buffer`
//! shape: a private worker, a handle to clone).

use std::sync::Arc;

use crate::gate::lane::Take;
use crate::gate::{SharedLane, Ticket, lock};
use ractor::{Actor, ActorCell, ActorRef, SpawnErr};
use subagents_messages::{AgentId, GateSnapshot};

use crate::Closed;
use crate::gate::actor::{GateArguments, ModelGate};
use crate::gate::msg::{GateMsg, Permit};

/// A handle to a ModelGate. Cheap to clone.
///
/// A gate lives as long as a handle refers to it: when the last clone is
/// dropped, the gate stops (a permit still held then releases into
/// nothing). A gate a thread made for itself (no
/// [`DelegationBuilder::gate`](crate::DelegationBuilder::gate) given, and
/// none of its models' registry: a parent's model registered for children
/// runs on that name's gate, which the thread neither made nor stops) is
/// the exception: it stops with its thread, whoever still holds a clone
/// (from `ThreadHandle::gate`); to share a gate across threads, spawn it
/// and give it to each.
#[derive(Debug, Clone)]
pub struct GateHandle {
    actor: ActorRef<GateMsg>,
    /// The uncontended path and the ticket counter, shared with the actor
    /// and the permits.
    lane: SharedLane,
    /// Shared by every clone of an owning handle; stops the gate when the
    /// last one goes.
    _owner: Arc<StopOnDrop>,
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
    /// Spawns a gate admitting `capacity` calls at once (0 is read as 1: a
    /// gate admitting none would hang every call); it stops when the last
    /// handle is dropped.
    pub async fn spawn(capacity: usize) -> Result<GateHandle, SpawnErr> {
        let args = GateArguments::new(capacity);
        let lane = args.lane.clone();
        let (actor, _) = Actor::spawn(None, ModelGate, args).await?;
        Ok(Self::owning(actor, lane))
    }

    fn owning(actor: ActorRef<GateMsg>, lane: SharedLane) -> Self {
        Self {
            _owner: Arc::new(StopOnDrop(actor.clone())),
            actor,
            lane,
        }
    }

    /// Spawns a gate linked under `supervisor`; it stops when the last
    /// handle is dropped, or with its supervisor. `supervisor` must
    /// override `handle_supervisor_evt`: ractor's default stops it when
    /// the gate stops.
    pub async fn spawn_linked(
        capacity: usize,
        supervisor: ActorCell,
    ) -> Result<GateHandle, SpawnErr> {
        let args = GateArguments::new(capacity);
        let lane = args.lane.clone();
        let (actor, _) = Actor::spawn_linked(None, ModelGate, args, supervisor).await?;
        Ok(Self::owning(actor, lane))
    }

    /// The gate actor's cell: to wait for it, or stop it. Its messages
    /// are this handle's methods and [`Permit`]'s drop.
    pub fn actor(&self) -> &ActorCell {
        &self.actor
    }

    /// Waits for a permit, in FIFO order. Dropping this future before it
    /// completes removes the waiter from the queue. With a unit free and
    /// nobody queued, the permit is granted at once, with no message to
    /// the gate actor.
    pub async fn acquire(&self, holder: impl Into<AgentId>) -> Result<Permit, Closed> {
        let (ticket, rx) = {
            let mut lane = lock(&self.lane);
            let ticket = lane.ticket();
            match lane.take() {
                Take::Granted => {
                    return Ok(Permit::new(self.actor.clone(), self.lane.clone(), ticket));
                }
                Take::Closed => return Err(Closed::Gate),
                Take::Queue => {
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    // Sent under the lock: the actor reads acquires and
                    // releases in the order the lane decided them.
                    let sent = self
                        .actor
                        .cast(GateMsg::acquire(ticket, holder.into(), tx.into()));
                    if sent.is_err() {
                        lane.unqueue();
                        return Err(Closed::Gate);
                    }
                    (ticket, rx)
                }
            }
        };
        let mut guard = CancelOnDrop {
            actor: &self.actor,
            ticket,
            armed: true,
        };
        let permit = rx.await.map_err(|_| Closed::Gate)?;
        guard.armed = false;
        Ok(permit)
    }

    /// The gate's state now. Never waits on a holder.
    pub async fn snapshot(&self) -> Result<GateSnapshot, Closed> {
        ractor::call!(self.actor, GateMsg::Snapshot).map_err(|_| Closed::Gate)
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
            let _ = self.actor.cast(GateMsg::cancel(self.ticket));
        }
    }
}
