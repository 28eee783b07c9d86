//! The gate's pure core: a FIFO of waiters and a set of held tickets.
//! No I/O, no time source: the actor feeds it and acts on what it returns.

use std::collections::VecDeque;

use crate::gate::Ticket;

/// Waiters in arrival order and the tickets holding capacity.
#[derive(Debug)]
pub(crate) struct GateQueue<W> {
    capacity: usize,
    /// Held tickets: at most `capacity` (1 to a few), so a vector beats a
    /// hash set on every operation.
    held: Vec<Ticket>,
    waiting: VecDeque<(Ticket, W)>,
}

impl<W> GateQueue<W> {
    /// A queue admitting `capacity` holders at once (at least 1).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            held: Vec::new(),
            waiting: VecDeque::new(),
        }
    }

    /// Queues a waiter at the back.
    pub(crate) fn push(&mut self, ticket: Ticket, waiter: W) {
        self.waiting.push_back((ticket, waiter));
    }

    /// Removes a waiter that gave up; returns it if it was still queued.
    pub(crate) fn cancel(&mut self, ticket: Ticket) -> Option<W> {
        let at = self.waiting.iter().position(|(t, _)| *t == ticket)?;
        self.waiting.remove(at).map(|(_, w)| w)
    }

    /// Frees the capacity `ticket` held. Returns `false` for a ticket that
    /// holds nothing (a duplicate or unknown release changes nothing).
    pub(crate) fn release(&mut self, ticket: Ticket) -> bool {
        match self.held.iter().position(|t| *t == ticket) {
            Some(at) => {
                self.held.swap_remove(at);
                true
            }
            None => false,
        }
    }

    /// The next waiter to grant, if capacity is free: it leaves the queue
    /// and its ticket now holds capacity.
    pub(crate) fn grant_next(&mut self) -> Option<(Ticket, W)> {
        if self.held.len() >= self.capacity {
            return None;
        }
        let (ticket, waiter) = self.waiting.pop_front()?;
        self.held.push(ticket);
        Some((ticket, waiter))
    }

    /// Removes queued waiters for which `gone` is true (receivers dropped).
    pub(crate) fn prune(&mut self, mut gone: impl FnMut(&W) -> bool) {
        self.waiting.retain(|(_, w)| !gone(w));
    }

    /// Holders now.
    pub(crate) fn in_flight(&self) -> usize {
        self.held.len()
    }

    /// Waiters now.
    pub(crate) fn queued(&self) -> usize {
        self.waiting.len()
    }

    /// True when a waiter pushed now would be granted at once.
    pub(crate) fn has_room(&self) -> bool {
        self.held.len() < self.capacity && self.waiting.is_empty()
    }

    /// Holders allowed at once.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn grants_in_arrival_order_up_to_capacity() {
        let mut q = GateQueue::new(2);
        for t in 1..=4 {
            q.push(t, ());
        }
        assert_eq!(q.grant_next().map(|g| g.0), Some(1));
        assert_eq!(q.grant_next().map(|g| g.0), Some(2));
        assert_eq!(q.grant_next(), None);
        assert!(q.release(1));
        assert_eq!(q.grant_next().map(|g| g.0), Some(3));
    }

    #[test]
    fn a_cancelled_waiter_is_never_granted_and_blocks_nobody() {
        let mut q = GateQueue::new(1);
        q.push(1, ());
        q.push(2, ());
        q.push(3, ());
        assert_eq!(q.grant_next().map(|g| g.0), Some(1));
        assert_eq!(q.cancel(2), Some(()));
        assert!(q.release(1));
        assert_eq!(q.grant_next().map(|g| g.0), Some(3));
    }

    #[test]
    fn duplicate_or_unknown_release_changes_nothing() {
        let mut q = GateQueue::new(1);
        q.push(1, ());
        q.push(2, ());
        q.grant_next();
        assert!(!q.release(7));
        assert_eq!(q.grant_next(), None);
        assert!(q.release(1));
        assert!(!q.release(1));
        assert_eq!(q.grant_next().map(|g| g.0), Some(2));
        assert_eq!(q.in_flight(), 1);
    }

    #[test]
    fn zero_capacity_is_raised_to_one() {
        assert_eq!(GateQueue::<()>::new(0).capacity(), 1);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push,
        Cancel(usize),
        Release(usize),
        Grant,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            Just(Op::Push),
            any::<usize>().prop_map(Op::Cancel),
            any::<usize>().prop_map(Op::Release),
            Just(Op::Grant),
        ]
    }

    proptest! {
        /// Against a reference: grants follow arrival order among the
        /// waiters not cancelled, and holders never exceed capacity.
        #[test]
        fn matches_a_reference_fifo(capacity in 1usize..4, ops in prop::collection::vec(op(), 0..200)) {
            let mut q = GateQueue::new(capacity);
            let mut next = 0u64;
            let mut reference: VecDeque<u64> = VecDeque::new();
            let mut held: Vec<u64> = Vec::new();
            for op in ops {
                match op {
                    Op::Push => { next += 1; q.push(next, ()); reference.push_back(next); }
                    Op::Cancel(i) => if !reference.is_empty() {
                        let t = reference.remove(i % reference.len()).unwrap();
                        prop_assert!(q.cancel(t).is_some());
                    },
                    Op::Release(i) => if !held.is_empty() {
                        let t = held.remove(i % held.len());
                        prop_assert!(q.release(t));
                    },
                    Op::Grant => {
                        let got = q.grant_next().map(|g| g.0);
                        let expected = if held.len() < capacity { reference.pop_front() } else { None };
                        prop_assert_eq!(got, expected);
                        if let Some(t) = got { held.push(t); }
                    }
                }
                prop_assert!(q.in_flight() <= capacity);
                prop_assert_eq!(q.in_flight(), held.len());
                prop_assert_eq!(q.queued(), reference.len());
            }
        }
    }
}
