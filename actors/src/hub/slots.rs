//! The hub's pure core: live slots and the FIFO queue behind them.

use std::collections::VecDeque;

use rustc_hash::FxHashSet;

use subagents_messages::AgentId;

/// What `admit` decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Admission {
    /// A slot is reserved: start the child now.
    Start,
    /// Every slot is taken: the child waits at this 1-based position.
    Queued(usize),
}

/// Live slots (reserved or running) and the queue, in request order.
#[derive(Debug)]
pub(crate) struct Slots {
    max_live: usize,
    /// Hashed with Fx: the ids are the hub's own, and SipHash cost
    /// more than the rest of an admission.
    live: FxHashSet<AgentId>,
    queue: VecDeque<AgentId>,
}

impl Slots {
    /// At most `max_live` live at once (at least 1).
    pub(crate) fn new(max_live: usize) -> Self {
        Self {
            max_live: max_live.max(1),
            live: FxHashSet::default(),
            queue: VecDeque::new(),
        }
    }

    /// Admits a new child: a slot if one is free and nobody waits, else
    /// the back of the queue.
    pub(crate) fn admit(&mut self, id: AgentId) -> Admission {
        if self.live.len() < self.max_live && self.queue.is_empty() {
            self.live.insert(id);
            Admission::Start
        } else {
            self.queue.push_back(id);
            Admission::Queued(self.queue.len())
        }
    }

    /// Frees `id`'s slot (or drops it from the queue) and returns the
    /// children to start now, in request order (their slots reserved).
    pub(crate) fn release(&mut self, id: &AgentId) -> Vec<AgentId> {
        if !self.live.remove(id) {
            self.remove_queued(id);
        }
        let mut start = Vec::new();
        while self.live.len() < self.max_live {
            let Some(next) = self.queue.pop_front() else {
                break;
            };
            self.live.insert(next.clone());
            start.push(next);
        }
        start
    }

    /// Drops a queued child; `false` if it was not queued.
    pub(crate) fn remove_queued(&mut self, id: &AgentId) -> bool {
        let before = self.queue.len();
        self.queue.retain(|q| q != id);
        self.queue.len() != before
    }

    /// Empties the queue, returning it in order.
    pub(crate) fn drain_queue(&mut self) -> Vec<AgentId> {
        self.queue.drain(..).collect()
    }

    /// True if `id` holds a slot.
    #[cfg(test)]
    pub(crate) fn is_live(&self, id: &AgentId) -> bool {
        self.live.contains(id)
    }

    /// Children holding a slot.
    pub(crate) fn live(&self) -> usize {
        self.live.len()
    }

    /// Children queued.
    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }

    /// The cap.
    pub(crate) fn max_live(&self) -> usize {
        self.max_live
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn id(n: usize) -> AgentId {
        AgentId::new(format!("agent_{n}"))
    }

    #[test]
    fn the_fourth_is_queued_and_starts_when_a_slot_frees() {
        let mut s = Slots::new(3);
        for n in 1..=3 {
            assert_eq!(s.admit(id(n)), Admission::Start);
        }
        assert_eq!(s.admit(id(4)), Admission::Queued(1));
        assert_eq!(s.admit(id(5)), Admission::Queued(2));
        assert_eq!(s.release(&id(2)), vec![id(4)]);
        assert!(s.is_live(&id(4)));
        assert_eq!((s.live(), s.queued()), (3, 1));
    }

    #[test]
    fn releasing_a_queued_child_drops_it_and_unknown_ids_change_nothing() {
        let mut s = Slots::new(1);
        s.admit(id(1));
        s.admit(id(2));
        s.admit(id(3));
        assert_eq!(s.release(&id(2)), vec![]);
        assert_eq!(s.release(&id(9)), vec![]);
        assert_eq!(s.release(&id(1)), vec![id(3)]);
        assert_eq!(s.drain_queue(), vec![]);
    }

    #[test]
    fn nobody_jumps_the_queue() {
        let mut s = Slots::new(1);
        s.admit(id(1));
        s.admit(id(2));
        // A slot frees but the queue is served first.
        assert_eq!(s.release(&id(1)), vec![id(2)]);
        assert_eq!(s.admit(id(3)), Admission::Queued(1));
    }

    proptest! {
        /// Live never exceeds the cap; children start in request order; a
        /// queued child never waits while a slot is free.
        #[test]
        fn cap_and_fifo_hold(cap in 1usize..5, ops in prop::collection::vec(any::<(bool, usize)>(), 0..200)) {
            let mut s = Slots::new(cap);
            let mut next = 0usize;
            let mut started: Vec<usize> = Vec::new();
            let mut live: Vec<usize> = Vec::new();
            for (add, pick) in ops {
                if add || live.is_empty() {
                    next += 1;
                    if s.admit(id(next)) == Admission::Start {
                        started.push(next);
                        live.push(next);
                    }
                } else {
                    let gone = live.remove(pick % live.len());
                    for n in s.release(&id(gone)) {
                        let n: usize = n.as_str()["agent_".len()..].parse().unwrap();
                        started.push(n);
                        live.push(n);
                    }
                }
                prop_assert!(s.live() <= cap);
                prop_assert_eq!(s.live(), live.len());
                prop_assert!(s.queued() == 0 || s.live() == cap);
                prop_assert!(started.windows(2).all(|w| w[0] < w[1]));
            }
        }
    }
}
