//! The gate's protocol, private to this crate: queueing for a permit,
//! cancelling, releasing and snapshots are written only by
//! [`GateHandle`](crate::gate::GateHandle) and [`Permit`], so a host cannot
//! release a permit it does not hold.
//!
//! What a host may do, and hold:
//!
//! ```
//! use subagents_actors::gate::{GateHandle, Permit};
//! async fn ask(gate: &GateHandle) {
//!     let _ = gate.snapshot().await;
//! }
//! fn ticket(held: &Permit) -> u64 {
//!     held.ticket()
//! }
//! ```
//!
//! ```compile_fail
//! // A host cannot forge a permit: its constructor is the gate's alone
//! // (named, whatever its arguments, it is private)…
//! use subagents_actors::gate::Permit;
//! let _ = Permit::new;
//! ```
//!
//! ```compile_fail
//! // …nor name the gate's messages to cast a release for a ticket it does
//! // not hold.
//! use subagents_actors::gate::GateMsg;
//! ```

use crate::gate::lane::GiveBack;
use crate::gate::{SharedLane, Ticket, lock};
use ractor::{ActorRef, RpcReplyPort};
use subagents_messages::{AgentId, GateSnapshot};

/// What the ModelGate actor is told.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum GateMsg {
    /// Sent by anyone: replies with a [`GateSnapshot`]. Never waits.
    Snapshot(RpcReplyPort<GateSnapshot>),
    /// Sent only by this crate's handles and permits.
    Internal(sealed::GateInternal),
}

// Built with ractor's `cluster` feature (only by the subagents-cluster
// workspace, which sets `--cfg subagents_cluster`), a message type says
// it is one: the blanket impl is gone then. It never crosses a node.
#[cfg(subagents_cluster)]
impl ractor::Message for GateMsg {}

pub(crate) mod sealed {
    //! Pub in a private module, not re-exported: nameable in this crate
    //! only.
    #![allow(unreachable_pub)]

    use crate::gate::Ticket;
    use ractor::RpcReplyPort;
    use subagents_messages::AgentId;

    use super::Permit;

    /// The gate's own messages.
    #[derive(Debug)]
    pub enum GateInternal {
        /// Sent by a gate handle's `acquire`: queue for a permit. The gate
        /// replies with a [`Permit`] when this waiter reaches the head of
        /// the queue and capacity is free; in arrival order.
        Acquire {
            /// The waiter's ticket (the handle allocates it).
            ticket: Ticket,
            /// Who waits (for tracing); an id, so queuing allocates nothing.
            holder: AgentId,
            /// Where the permit goes.
            reply: RpcReplyPort<Permit>,
        },
        /// Sent by a waiter that gave up before being granted (its acquire
        /// future was dropped): the gate removes it from the queue.
        Cancel {
            /// The waiter's ticket.
            ticket: Ticket,
        },
        /// Sent by a [`Permit`]'s `Drop` while anyone is queued: gives its
        /// unit of capacity to the next waiter.
        Release {
            /// The ticket the permit was granted to.
            ticket: Ticket,
        },
    }
}

use sealed::GateInternal;

impl GateMsg {
    pub(crate) fn acquire(ticket: Ticket, holder: AgentId, reply: RpcReplyPort<Permit>) -> Self {
        GateMsg::Internal(GateInternal::Acquire {
            ticket,
            holder,
            reply,
        })
    }

    pub(crate) fn cancel(ticket: Ticket) -> Self {
        GateMsg::Internal(GateInternal::Cancel { ticket })
    }
}

/// The right to make one model call. Dropping it — explicitly, by a panic
/// unwinding, or by the task holding it being aborted — releases the
/// gate, so a permit cannot leak while the gate lives. Only the gate makes
/// permits.
#[derive(Debug)]
pub struct Permit {
    gate: ActorRef<GateMsg>,
    lane: SharedLane,
    ticket: Ticket,
}

impl Permit {
    /// Made by the gate when it grants `ticket`: its lane on an
    /// uncontended acquire, its actor otherwise.
    pub(crate) fn new(gate: ActorRef<GateMsg>, lane: SharedLane, ticket: Ticket) -> Self {
        Self { gate, lane, ticket }
    }

    /// The ticket this permit was granted to.
    pub fn ticket(&self) -> Ticket {
        self.ticket
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut lane = lock(&self.lane);
        if lane.give_back() == GiveBack::ToQueue {
            // Sent under the lock: after every acquire the lane queued
            // before it. A gate that is gone has nothing left to release.
            let _ = self.gate.cast(GateMsg::Internal(GateInternal::Release {
                ticket: self.ticket,
            }));
        }
    }
}
