//! The gate's queue, a pure core: a FIFO of waiters and the units of
//! capacity released to it. No I/O, no time source: the actor feeds it
//! and acts on what it returns. The capacity nobody queues for lives in
//! the lane (`lane.rs`); a unit comes here only while someone is queued.

use std::collections::VecDeque;

use crate::gate::{SharedLane, Ticket, lock};

/// Waiters in arrival order and the units they may be granted.
#[derive(Debug)]
pub(crate) struct GateQueue<W> {
    /// Units released to the queue and not granted yet.
    units: usize,
    waiting: VecDeque<(Ticket, W)>,
}

impl<W> GateQueue<W> {
    /// An empty queue holding no unit.
    pub(crate) fn new() -> Self {
        Self {
            units: 0,
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

    /// A unit of capacity comes to the queue.
    pub(crate) fn add_units(&mut self, units: usize) {
        self.units += units;
    }

    /// The next waiter to grant, if a unit is here: it leaves the queue
    /// with the unit.
    pub(crate) fn grant_next(&mut self) -> Option<(Ticket, W)> {
        if self.units == 0 {
            return None;
        }
        let next = self.waiting.pop_front()?;
        self.units -= 1;
        Some(next)
    }

    /// The units left over once nobody waits: taken out of the queue (for
    /// the lane). None while anyone waits.
    pub(crate) fn take_spare(&mut self) -> usize {
        if self.waiting.is_empty() {
            std::mem::take(&mut self.units)
        } else {
            0
        }
    }

    /// Grants the queue's units to its waiters in order — each leaves the
    /// lane's count of queued acquires; one that is `gone` leaves its unit
    /// for the next — and, once nobody waits, gives the spare units back
    /// to the lane (unless an acquire is on its way here). `give` runs
    /// with the lane unlocked: a permit it fails to deliver is dropped
    /// there, and its drop locks the lane.
    pub(crate) fn grant_all(
        &mut self,
        lane: &SharedLane,
        gone: impl Fn(&W) -> bool,
        mut give: impl FnMut(Ticket, W),
    ) {
        while let Some((ticket, waiter)) = self.grant_next() {
            lock(lane).unqueue();
            if gone(&waiter) {
                self.units += 1;
                continue;
            }
            give(ticket, waiter);
        }
        let spare = self.take_spare();
        if spare > 0 {
            self.units += lock(lane).settle(spare);
        }
    }

    /// Removes queued waiters for which `gone` is true (receivers
    /// dropped); how many.
    pub(crate) fn prune(&mut self, mut gone: impl FnMut(&W) -> bool) -> usize {
        let before = self.waiting.len();
        self.waiting.retain(|(_, w)| !gone(w));
        before - self.waiting.len()
    }

    /// Waiters now.
    pub(crate) fn queued(&self) -> usize {
        self.waiting.len()
    }

    /// Units here now.
    pub(crate) fn units(&self) -> usize {
        self.units
    }

    /// True when a waiter pushed now would be granted at once.
    pub(crate) fn has_room(&self) -> bool {
        self.units > 0 && self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn grants_in_arrival_order_one_per_unit() {
        let mut q = GateQueue::new();
        for t in 1..=4 {
            q.push(t, ());
        }
        assert_eq!(q.grant_next(), None, "no unit, no grant");
        q.add_units(2);
        assert_eq!(q.grant_next().map(|g| g.0), Some(1));
        assert_eq!(q.grant_next().map(|g| g.0), Some(2));
        assert_eq!(q.grant_next(), None);
        q.add_units(1);
        assert_eq!(q.grant_next().map(|g| g.0), Some(3));
    }

    #[test]
    fn a_cancelled_waiter_is_never_granted_and_blocks_nobody() {
        let mut q = GateQueue::new();
        q.push(1, ());
        q.push(2, ());
        q.push(3, ());
        q.add_units(1);
        assert_eq!(q.grant_next().map(|g| g.0), Some(1));
        assert_eq!(q.cancel(2), Some(()));
        assert_eq!(q.cancel(2), None, "cancelled once");
        q.add_units(1);
        assert_eq!(q.grant_next().map(|g| g.0), Some(3));
    }

    #[test]
    fn spare_units_leave_only_when_nobody_waits() {
        let mut q = GateQueue::new();
        q.push(1, ());
        q.add_units(2);
        assert_eq!(q.take_spare(), 0, "a waiter is owed one");
        assert_eq!(q.grant_next().map(|g| g.0), Some(1));
        assert_eq!(q.take_spare(), 1);
        assert_eq!(q.units(), 0);
    }

    #[test]
    fn prune_counts_what_it_removed() {
        let mut q = GateQueue::new();
        for t in 1..=4 {
            q.push(t, t % 2 == 0);
        }
        assert_eq!(q.prune(|gone| *gone), 2);
        assert_eq!(q.queued(), 2);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push,
        Cancel(usize),
        Unit,
        Grant,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            Just(Op::Push),
            any::<usize>().prop_map(Op::Cancel),
            Just(Op::Unit),
            Just(Op::Grant),
        ]
    }

    proptest! {
        /// Against a reference: grants follow arrival order among the
        /// waiters not cancelled, one per unit.
        #[test]
        fn matches_a_reference_fifo(ops in prop::collection::vec(op(), 0..200)) {
            let mut q = GateQueue::new();
            let mut next = 0u64;
            let mut reference: VecDeque<u64> = VecDeque::new();
            let mut units = 0usize;
            for op in ops {
                match op {
                    Op::Push => { next += 1; q.push(next, ()); reference.push_back(next); }
                    Op::Cancel(i) => if !reference.is_empty() {
                        let t = reference.remove(i % reference.len()).unwrap();
                        prop_assert!(q.cancel(t).is_some());
                    },
                    Op::Unit => { units += 1; q.add_units(1); }
                    Op::Grant => {
                        let got = q.grant_next().map(|g| g.0);
                        let expected = if units > 0 { reference.pop_front() } else { None };
                        if expected.is_some() { units -= 1; }
                        prop_assert_eq!(got, expected);
                    }
                }
                prop_assert_eq!(q.units(), units);
                prop_assert_eq!(q.queued(), reference.len());
            }
        }
    }
}
