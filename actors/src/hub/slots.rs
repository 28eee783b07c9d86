//! The hub's pure core: live slots and the FIFO queue behind them.

use std::collections::VecDeque;

use rustc_hash::{FxHashMap, FxHashSet};

use subagents_messages::AgentId;

/// What `admit` decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Admission {
    /// A slot is reserved: start the child now.
    Start,
    /// Every slot is taken: the child waits at this 1-based position.
    Queued(usize),
}

/// Live slots (reserved or running) and the queues, in request order: the
/// cap holds per requester. The parent's children share `max_live`; each
/// child's own children share another `max_live` of their own, so a child
/// waiting on its child never holds the slot that child waits for (a
/// deadlock until a wait or a wall clock ran out). With `max_depth` 1 (the
/// default) only the parent's group is used, kept inline (no map).
#[derive(Debug)]
pub(crate) struct Slots {
    max_live: usize,
    /// The thread's parent: its children's group is `root`.
    parent: AgentId,
    root: Group,
    /// Each child that asked for children of its own: their group, for as
    /// long as the child lives (hashed with Fx: the ids are the hub's own).
    nested: FxHashMap<AgentId, Group>,
}

/// One requester's children: those holding a slot, and the queue.
#[derive(Debug, Default)]
struct Group {
    live: FxHashSet<AgentId>,
    queue: VecDeque<AgentId>,
}

impl Group {
    fn holds(&self, id: &AgentId) -> bool {
        self.live.contains(id) || self.queue.contains(id)
    }
}

impl Slots {
    /// At most `max_live` live at once per requester (at least 1); the
    /// thread's parent is `parent`.
    pub(crate) fn new(max_live: usize, parent: AgentId) -> Self {
        Self {
            max_live: max_live.max(1),
            parent,
            root: Group::default(),
            nested: FxHashMap::default(),
        }
    }

    /// Admits a new child of `requester`: a slot if one of its requester's
    /// is free and none of its children waits, else the back of that queue.
    pub(crate) fn admit(&mut self, id: AgentId, requester: &AgentId) -> Admission {
        let max_live = self.max_live;
        let group = if *requester == self.parent {
            &mut self.root
        } else {
            self.nested.entry(requester.clone()).or_default()
        };
        if group.live.len() < max_live && group.queue.is_empty() {
            group.live.insert(id);
            Admission::Start
        } else {
            group.queue.push_back(id);
            Admission::Queued(group.queue.len())
        }
    }

    /// Frees `id`'s slot (or drops it from its queue) and returns the
    /// children to start now, in request order (their slots reserved).
    pub(crate) fn release(&mut self, id: &AgentId) -> Vec<AgentId> {
        let max_live = self.max_live;
        let group = if self.root.holds(id) {
            &mut self.root
        } else {
            match self.nested.values_mut().find(|g| g.holds(id)) {
                Some(group) => group,
                None => return Vec::new(),
            }
        };
        if !group.live.remove(id) {
            group.queue.retain(|q| q != id);
        }
        let mut start = Vec::new();
        while group.live.len() < max_live {
            let Some(next) = group.queue.pop_front() else {
                break;
            };
            group.live.insert(next.clone());
            start.push(next);
        }
        start
    }

    /// `requester` ended: its group goes (empty by then: a child's own
    /// children end before it).
    pub(crate) fn forget_requester(&mut self, requester: &AgentId) {
        if self
            .nested
            .get(requester)
            .is_some_and(|g| g.live.is_empty() && g.queue.is_empty())
        {
            self.nested.remove(requester);
        }
    }

    /// Empties every queue, returning the children in request order (the
    /// hub's ids are numbered in request order).
    pub(crate) fn drain_queue(&mut self) -> Vec<AgentId> {
        let mut drained: Vec<AgentId> = self.root.queue.drain(..).collect();
        for group in self.nested.values_mut() {
            drained.extend(group.queue.drain(..));
        }
        drained.sort_by_key(|id| (crate::hub::ids::child_number(id), id.clone()));
        drained
    }

    /// True if `id` holds a slot.
    #[cfg(test)]
    pub(crate) fn is_live(&self, id: &AgentId) -> bool {
        self.root.live.contains(id) || self.nested.values().any(|g| g.live.contains(id))
    }

    /// Children holding a slot, at every depth.
    pub(crate) fn live(&self) -> usize {
        self.root.live.len() + self.nested.values().map(|g| g.live.len()).sum::<usize>()
    }

    /// Children queued, at every depth.
    pub(crate) fn queued(&self) -> usize {
        self.root.queue.len() + self.nested.values().map(|g| g.queue.len()).sum::<usize>()
    }

    /// The cap (per requester).
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

    fn parent() -> AgentId {
        AgentId::new("parent")
    }

    /// A child's children have slots of their own: the child holding the
    /// parent's only slot never makes its own child wait for it.
    #[test]
    fn the_cap_holds_per_requester() {
        let mut s = Slots::new(1, parent());
        assert_eq!(s.admit(id(1), &parent()), Admission::Start);
        assert_eq!(s.admit(id(2), &id(1)), Admission::Start);
        assert_eq!(s.admit(id(3), &id(1)), Admission::Queued(1));
        assert_eq!(s.admit(id(4), &parent()), Admission::Queued(1));
        assert_eq!((s.live(), s.queued()), (2, 2));
        // Each release admits from its own requester's queue.
        assert_eq!(s.release(&id(2)), vec![id(3)]);
        assert_eq!(s.release(&id(1)), vec![id(4)]);
        assert_eq!(s.drain_queue(), vec![]);
        assert_eq!(s.release(&id(3)), vec![]);
        assert_eq!(s.release(&id(4)), vec![]);
        assert_eq!((s.live(), s.queued()), (0, 0));
        s.forget_requester(&id(1));
        assert!(s.nested.is_empty(), "nothing held at rest");
    }

    #[test]
    fn draining_gives_every_queue_in_request_order() {
        let mut s = Slots::new(1, parent());
        s.admit(id(1), &parent());
        s.admit(id(2), &id(1));
        s.admit(id(5), &id(1));
        s.admit(id(3), &parent());
        s.admit(id(4), &id(2));
        s.admit(id(6), &id(2));
        assert_eq!(s.drain_queue(), vec![id(3), id(5), id(6)]);
        assert_eq!(s.queued(), 0);
    }

    #[test]
    fn the_fourth_is_queued_and_starts_when_a_slot_frees() {
        let mut s = Slots::new(3, parent());
        for n in 1..=3 {
            assert_eq!(s.admit(id(n), &parent()), Admission::Start);
        }
        assert_eq!(s.admit(id(4), &parent()), Admission::Queued(1));
        assert_eq!(s.admit(id(5), &parent()), Admission::Queued(2));
        assert_eq!(s.release(&id(2)), vec![id(4)]);
        assert!(s.is_live(&id(4)));
        assert_eq!((s.live(), s.queued()), (3, 1));
    }

    #[test]
    fn releasing_a_queued_child_drops_it_and_unknown_ids_change_nothing() {
        let mut s = Slots::new(1, parent());
        s.admit(id(1), &parent());
        s.admit(id(2), &parent());
        s.admit(id(3), &parent());
        assert_eq!(s.release(&id(2)), vec![]);
        assert_eq!(s.release(&id(9)), vec![]);
        assert_eq!(s.release(&id(1)), vec![id(3)]);
        assert_eq!(s.drain_queue(), vec![]);
    }

    #[test]
    fn nobody_jumps_the_queue() {
        let mut s = Slots::new(1, parent());
        s.admit(id(1), &parent());
        s.admit(id(2), &parent());
        // A slot frees but the queue is served first.
        assert_eq!(s.release(&id(1)), vec![id(2)]);
        assert_eq!(s.admit(id(3), &parent()), Admission::Queued(1));
    }

    /// One step of [`cap_and_fifo_hold`]: a request by the parent or by a
    /// live child (picked), a release of a live or queued child (picked),
    /// or the whole queue drained (a stop-all).
    #[derive(Debug, Clone)]
    enum Op {
        Admit(usize),
        Release(usize),
        Drain,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => any::<usize>().prop_map(Op::Admit),
            4 => any::<usize>().prop_map(Op::Release),
            1 => Just(Op::Drain),
        ]
    }

    /// The reference: each requester's live children and queue, as plain
    /// vectors.
    #[derive(Default)]
    struct Reference {
        groups: std::collections::BTreeMap<AgentId, (Vec<AgentId>, VecDeque<AgentId>)>,
    }

    impl Reference {
        fn live(&self) -> Vec<AgentId> {
            self.groups
                .values()
                .flat_map(|(l, _)| l.iter().cloned())
                .collect()
        }
        fn known(&self) -> Vec<AgentId> {
            self.groups
                .values()
                .flat_map(|(l, q)| l.iter().chain(q.iter()).cloned())
                .collect()
        }
    }

    proptest! {
        /// Against a reference, with requesters at two depths: live never
        /// exceeds the cap per requester; a child is queued at the position
        /// the reference gives; a release starts exactly the children the
        /// reference starts, in request order; a queued child never waits
        /// while its requester has a slot free; a drain gives every queue
        /// in request order.
        #[test]
        fn cap_and_fifo_hold(cap in 1usize..4, ops in prop::collection::vec(op(), 0..200)) {
            let mut s = Slots::new(cap, parent());
            let mut r = Reference::default();
            let mut next = 0usize;
            for op in ops {
                match op {
                    Op::Admit(pick) => {
                        let mut requesters = vec![parent()];
                        requesters.extend(r.live());
                        let requester = requesters[pick % requesters.len()].clone();
                        next += 1;
                        let (live, queue) = r.groups.entry(requester.clone()).or_default();
                        let want = if live.len() < cap && queue.is_empty() {
                            live.push(id(next));
                            Admission::Start
                        } else {
                            queue.push_back(id(next));
                            Admission::Queued(queue.len())
                        };
                        prop_assert_eq!(s.admit(id(next), &requester), want);
                    }
                    Op::Release(pick) => {
                        let known = r.known();
                        if known.is_empty() {
                            prop_assert_eq!(s.release(&id(next + 1)), Vec::<AgentId>::new());
                            continue;
                        }
                        let gone = known[pick % known.len()].clone();
                        let mut want = Vec::new();
                        for (live, queue) in r.groups.values_mut() {
                            let before = live.len() + queue.len();
                            live.retain(|c| c != &gone);
                            queue.retain(|c| c != &gone);
                            if live.len() + queue.len() == before {
                                continue;
                            }
                            while live.len() < cap {
                                let Some(n) = queue.pop_front() else { break };
                                live.push(n.clone());
                                want.push(n);
                            }
                        }
                        prop_assert_eq!(s.release(&gone), want);
                    }
                    Op::Drain => {
                        let mut want: Vec<AgentId> = r
                            .groups
                            .values_mut()
                            .flat_map(|(_, q)| q.drain(..))
                            .collect();
                        want.sort_by_key(crate::hub::ids::child_number);
                        prop_assert_eq!(s.drain_queue(), want);
                    }
                }
                for (live, queue) in r.groups.values() {
                    prop_assert!(live.len() <= cap);
                    prop_assert!(queue.is_empty() || live.len() == cap);
                }
                prop_assert_eq!(s.live(), r.live().len());
                prop_assert_eq!(s.queued(), r.known().len() - r.live().len());
                for c in r.live() {
                    prop_assert!(s.is_live(&c));
                }
            }
        }
    }
}
