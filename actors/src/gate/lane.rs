//! The gate's uncontended path, a pure core: the capacity nobody holds
//! and nobody queues for. An acquire takes a unit here, under one short
//! lock and without a message, when nobody is queued; otherwise it queues
//! at the actor, and from then on every newcomer does too, until the
//! actor's queue has drained. A released unit comes back here while
//! nobody is queued and goes to the actor's queue otherwise. So a grant
//! here never passes a waiter: FIFO holds over both paths.
//!
//! The handles, the permits and the actor share one `Lane` behind a
//! mutex; each step below is one critical section, and a message to the
//! actor decided in it is sent before the lock is let go, so the actor
//! reads the messages in the order the lane decided them.

use crate::gate::Ticket;

/// What an acquire does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// A unit was free and nobody queued: it is held now.
    Granted,
    /// Others are queued or nothing is free: it queues at the actor
    /// (counted as queued from now).
    Queue,
    /// The gate has stopped.
    Closed,
}

/// Where a released unit goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GiveBack {
    /// Back to the lane: nobody is queued.
    Kept,
    /// To the actor, for the head of its queue.
    ToQueue,
}

/// The capacity of the uncontended path, how many wait at the actor, and
/// the next ticket.
#[derive(Debug)]
pub(crate) struct Lane {
    /// The ticket the next acquire gets (from 1).
    next_ticket: Ticket,
    /// Units nobody holds and the actor does not keep.
    free: usize,
    /// Acquires sent to the actor and not yet granted, cancelled or
    /// pruned there.
    queued: usize,
    /// Grants made here (each waited no time).
    granted: u64,
    /// The actor has stopped: nothing is granted any more.
    closed: bool,
}

impl Lane {
    /// A lane holding all of `capacity` (at least 1).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            next_ticket: 1,
            free: capacity.max(1),
            queued: 0,
            granted: 0,
            closed: false,
        }
    }

    /// A new acquire's ticket: unique per gate, in call order.
    pub(crate) fn ticket(&mut self) -> Ticket {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        ticket
    }

    /// An acquire arrives.
    pub(crate) fn take(&mut self) -> Take {
        if self.closed {
            Take::Closed
        } else if self.queued == 0 && self.free > 0 {
            self.free -= 1;
            self.granted += 1;
            Take::Granted
        } else {
            self.queued += 1;
            Take::Queue
        }
    }

    /// A queued acquire left the actor's queue (granted there, cancelled,
    /// pruned) or was never delivered to it.
    pub(crate) fn unqueue(&mut self) {
        self.queued = self.queued.saturating_sub(1);
    }

    /// A held unit is released.
    pub(crate) fn give_back(&mut self) -> GiveBack {
        if self.queued > 0 && !self.closed {
            GiveBack::ToQueue
        } else {
            self.free += 1;
            GiveBack::Kept
        }
    }

    /// The actor has `spare` units and nobody left in its queue: they come
    /// back here unless an acquire is on its way to the actor. Returns the
    /// units the actor keeps.
    pub(crate) fn settle(&mut self, spare: usize) -> usize {
        if self.queued == 0 {
            self.free += spare;
            0
        } else {
            spare
        }
    }

    /// The actor has stopped.
    pub(crate) fn close(&mut self) {
        self.closed = true;
    }

    /// Units free here.
    pub(crate) fn free(&self) -> usize {
        self.free
    }

    /// Grants made here.
    pub(crate) fn granted(&self) -> u64 {
        self.granted
    }
}

#[cfg(test)]
mod tests;
