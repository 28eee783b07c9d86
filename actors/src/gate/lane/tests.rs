//! The lane alone, then the lane, the actor's queue and the mailbox
//! between them run as one model: every interleaving proptest draws keeps
//! FIFO, capacity, and every unit accounted for.

use std::collections::VecDeque;

use proptest::prelude::*;

use super::*;
use crate::gate::queue::GateQueue;
use crate::gate::{SharedLane, lock};

#[test]
fn grants_here_only_while_nobody_is_queued() {
    let mut lane = Lane::new(1);
    assert_eq!(lane.take(), Take::Granted);
    assert_eq!(lane.take(), Take::Queue, "nothing free");
    assert_eq!(lane.give_back(), GiveBack::ToQueue, "someone is queued");
    assert_eq!(lane.free(), 0);
    lane.unqueue(); // the actor granted it
    assert_eq!(lane.give_back(), GiveBack::Kept);
    assert_eq!(lane.free(), 1);
    assert_eq!(lane.granted(), 1);
}

#[test]
fn a_free_unit_is_not_taken_past_a_queued_waiter() {
    let mut lane = Lane::new(2);
    assert_eq!(lane.take(), Take::Granted);
    assert_eq!(lane.take(), Take::Granted);
    assert_eq!(lane.take(), Take::Queue);
    // The actor kept a unit for a waiter that then left; another acquire
    // is still on its way, so the actor keeps it.
    assert_eq!(lane.take(), Take::Queue);
    lane.unqueue();
    assert_eq!(lane.settle(1), 1);
    lane.unqueue();
    assert_eq!(lane.settle(1), 0, "nobody queued: the unit comes back");
    assert_eq!(lane.take(), Take::Granted);
}

#[test]
fn tickets_count_from_one_in_call_order() {
    let mut lane = Lane::new(1);
    assert_eq!([lane.ticket(), lane.ticket(), lane.ticket()], [1, 2, 3]);
}

#[test]
fn zero_capacity_is_raised_to_one() {
    assert_eq!(Lane::new(0).free(), 1);
}

#[test]
fn a_closed_lane_grants_nothing_and_keeps_what_comes_back() {
    let mut lane = Lane::new(1);
    assert_eq!(lane.take(), Take::Granted);
    assert_eq!(lane.take(), Take::Queue);
    lane.close();
    assert_eq!(lane.take(), Take::Closed);
    assert_eq!(lane.give_back(), GiveBack::Kept, "no actor to give it to");
}

/// A waiter of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waiter {
    Queued,
    Holding,
    /// Gave up while queued (its Cancel is in the mailbox or read).
    Gone,
    Released,
}

#[derive(Debug, Clone, Copy)]
enum Msg {
    Acquire(usize),
    Cancel(usize),
    Release,
}

#[derive(Debug, Clone)]
enum Op {
    Arrive,
    Release(usize),
    GiveUp(usize),
    /// The actor reads its next message.
    Step,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Arrive),
        2 => any::<usize>().prop_map(Op::Release),
        1 => any::<usize>().prop_map(Op::GiveUp),
        3 => Just(Op::Step),
    ]
}

struct Model {
    capacity: usize,
    lane: SharedLane,
    queue: GateQueue<usize>,
    mailbox: VecDeque<Msg>,
    waiters: Vec<Waiter>,
    /// Waiters in the order they were granted.
    grants: Vec<usize>,
}

impl Model {
    fn new(capacity: usize) -> Self {
        Self {
            capacity,
            lane: std::sync::Arc::new(std::sync::Mutex::new(Lane::new(capacity))),
            queue: GateQueue::new(),
            mailbox: VecDeque::new(),
            waiters: Vec::new(),
            grants: Vec::new(),
        }
    }

    fn pick(&self, state: Waiter, i: usize) -> Option<usize> {
        let found: Vec<usize> = (0..self.waiters.len())
            .filter(|w| self.waiters[*w] == state)
            .collect();
        (!found.is_empty()).then(|| found[i % found.len()])
    }

    fn granted(&mut self, w: usize) -> Result<(), TestCaseError> {
        let passed = (0..w).find(|e| self.waiters[*e] == Waiter::Queued);
        prop_assert_eq!(passed, None, "waiter {} granted past an earlier one", w);
        self.waiters[w] = Waiter::Holding;
        self.grants.push(w);
        Ok(())
    }

    fn apply(&mut self, op: Op) -> Result<(), TestCaseError> {
        match op {
            Op::Arrive => {
                let w = self.waiters.len();
                self.waiters.push(Waiter::Queued);
                let take = lock(&self.lane).take();
                match take {
                    Take::Granted => self.granted(w)?,
                    Take::Queue => self.mailbox.push_back(Msg::Acquire(w)),
                    Take::Closed => prop_assert!(false, "never closed here"),
                }
            }
            Op::Release(i) => {
                if let Some(w) = self.pick(Waiter::Holding, i) {
                    self.waiters[w] = Waiter::Released;
                    self.give_back();
                }
            }
            Op::GiveUp(i) => {
                if let Some(w) = self.pick(Waiter::Queued, i) {
                    self.waiters[w] = Waiter::Gone;
                    self.mailbox.push_back(Msg::Cancel(w));
                }
            }
            Op::Step => self.step()?,
        }
        self.check()
    }

    /// A holder's permit drops, as `Permit::drop` runs it.
    fn give_back(&mut self) {
        if lock(&self.lane).give_back() == GiveBack::ToQueue {
            self.mailbox.push_back(Msg::Release);
        }
    }

    /// The actor's handler, as `actor.rs` runs it (the grants are
    /// `GateQueue::grant_all`, the actor's own).
    fn step(&mut self) -> Result<(), TestCaseError> {
        let Some(msg) = self.mailbox.pop_front() else {
            return Ok(());
        };
        match msg {
            Msg::Acquire(w) => self.queue.push(w as u64, w),
            Msg::Cancel(w) => {
                if self.queue.cancel(w as u64).is_some() {
                    lock(&self.lane).unqueue();
                }
            }
            Msg::Release => self.queue.add_units(1),
        }
        let waiters = &self.waiters;
        let mut given = Vec::new();
        self.queue.grant_all(
            &self.lane,
            |w| waiters[*w] == Waiter::Gone,
            |_, w| given.push(w),
        );
        for w in given {
            self.granted(w)?;
        }
        Ok(())
    }

    fn check(&self) -> Result<(), TestCaseError> {
        let holding = self
            .waiters
            .iter()
            .filter(|w| **w == Waiter::Holding)
            .count();
        let releasing = self
            .mailbox
            .iter()
            .filter(|m| matches!(m, Msg::Release))
            .count();
        let lane = lock(&self.lane);
        prop_assert!(holding <= self.capacity);
        prop_assert_eq!(
            holding + lane.free() + self.queue.units() + releasing,
            self.capacity,
            "a unit was lost or made"
        );
        if lane.queued > 0 {
            prop_assert_eq!(lane.free(), 0, "a unit idles while someone waits");
        }
        Ok(())
    }
}

proptest! {
    /// Any interleaving of arrivals, releases, give-ups and the actor's
    /// steps: grants in arrival order over both paths, never more than the
    /// capacity held, no unit lost; and once the mailbox is read, a waiter
    /// still queued means every unit is held, and spare units are back in
    /// the lane.
    #[test]
    fn both_paths_together_stay_fifo_and_lose_nothing(
        capacity in 1usize..4,
        ops in prop::collection::vec(op(), 0..300),
    ) {
        let mut model = Model::new(capacity);
        for op in ops {
            model.apply(op)?;
        }
        while !model.mailbox.is_empty() {
            model.apply(Op::Step)?;
        }
        let queued = model.waiters.contains(&Waiter::Queued);
        let (free, queued_in_lane) = {
            let lane = lock(&model.lane);
            (lane.free(), lane.queued)
        };
        if queued {
            prop_assert_eq!(free + model.queue.units(), 0);
        } else {
            prop_assert_eq!(model.queue.units(), 0);
            prop_assert_eq!(queued_in_lane, 0);
        }
        // Releasing everything held brings the whole capacity back.
        while let Some(w) = model.pick(Waiter::Holding, 0) {
            model.waiters[w] = Waiter::Released;
            model.give_back();
            while !model.mailbox.is_empty() {
                model.apply(Op::Step)?;
            }
        }
        if !model.waiters.contains(&Waiter::Queued) {
            prop_assert_eq!(lock(&model.lane).free(), capacity);
        }
    }
}
