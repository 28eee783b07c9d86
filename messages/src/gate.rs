//! Messages of the **ModelGate** actor: a FIFO lock around every model call.
//!
//! A holder keeps a [`Permit`] for one model call. Dropping the permit —
//! explicitly, by unwinding from a panic, or by the task holding it being
//! aborted — sends [`GateMsg::Release`], so a permit cannot leak while the
//! gate lives.

use std::time::Duration;

use ractor::{ActorRef, RpcReplyPort};

/// A waiter's place in the gate's queue, unique per gate.
pub type Ticket = u64;

/// What the ModelGate actor is told.
#[derive(Debug)]
#[non_exhaustive]
pub enum GateMsg {
    /// Sent by a gate handle's `acquire`: queue for a permit. The gate
    /// replies with a [`Permit`] when this waiter reaches the head of the
    /// queue and capacity is free. Permits are granted in arrival order.
    Acquire {
        /// The waiter's ticket (the handle allocates it).
        ticket: Ticket,
        /// Who waits (for tracing); an id, so queuing allocates nothing.
        holder: crate::ids::AgentId,
        /// Where the permit goes.
        reply: RpcReplyPort<Permit>,
    },
    /// Sent by a waiter that gave up before being granted (its acquire
    /// future was dropped). The gate removes it from the queue; no reply.
    Cancel {
        /// The waiter's ticket.
        ticket: Ticket,
    },
    /// Sent by a [`Permit`]'s `Drop`. Frees one unit of capacity and grants
    /// the next waiter, if any. No reply.
    Release {
        /// The ticket the permit was granted to.
        ticket: Ticket,
    },
    /// Sent by a host or test: replies with a [`GateSnapshot`]. Never waits.
    Snapshot(RpcReplyPort<GateSnapshot>),
}

/// The right to make one model call. Dropping it releases the gate.
#[derive(Debug)]
pub struct Permit {
    gate: ActorRef<GateMsg>,
    ticket: Ticket,
}

impl Permit {
    /// Made by the gate actor when it grants `ticket`.
    pub fn new(gate: ActorRef<GateMsg>, ticket: Ticket) -> Self {
        Self { gate, ticket }
    }

    /// The ticket this permit was granted to.
    pub fn ticket(&self) -> Ticket {
        self.ticket
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        // A gate that is gone has nothing left to release.
        let _ = self.gate.cast(GateMsg::Release {
            ticket: self.ticket,
        });
    }
}

/// The gate's state, as a query sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GateSnapshot {
    /// Calls allowed at once.
    pub capacity: usize,
    /// Permits held now.
    pub in_flight: usize,
    /// Waiters queued now.
    pub queued: usize,
    /// Permits granted since the gate started.
    pub granted_total: u64,
    /// The longest any granted waiter waited (tokio time).
    pub longest_wait: Duration,
}
