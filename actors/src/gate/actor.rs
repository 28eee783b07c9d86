//! The gate actor: the FIFO of waiters and the held tickets.

use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use subagents_messages::{AgentId, GateSnapshot};
use tokio::time::Instant;

use crate::gate::lane::Lane;
use crate::gate::msg::sealed::GateInternal;
use crate::gate::msg::{GateMsg, Permit};
use crate::gate::queue::GateQueue;
use crate::gate::{SharedLane, lock};

/// The gate actor.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ModelGate;

/// Arguments of [`ModelGate`].
#[derive(Debug)]
pub(crate) struct GateArguments {
    /// Permits held at once (at least 1).
    pub(crate) capacity: usize,
    /// The uncontended path its handles share.
    pub(crate) lane: SharedLane,
}

impl GateArguments {
    /// A gate of `capacity` (at least 1) with a lane holding all of it.
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            capacity,
            lane: std::sync::Arc::new(std::sync::Mutex::new(Lane::new(capacity))),
        }
    }
}

/// One queued waiter.
#[derive(Debug)]
pub(crate) struct Waiter {
    holder: AgentId,
    reply: RpcReplyPort<Permit>,
    /// When it started waiting; `None` when granted on arrival.
    since: Option<Instant>,
}

/// The gate's state.
#[derive(Debug)]
pub(crate) struct GateState {
    capacity: usize,
    lane: SharedLane,
    queue: GateQueue<Waiter>,
    granted_total: u64,
    longest_wait: Duration,
    total_wait: Duration,
    wait_histogram: [u64; 8],
}

impl GateState {
    /// Grants the queue's units to its waiters in order (a waiter that
    /// gave up is skipped: its Cancel may still be on the way); the units
    /// left once nobody waits go back to the lane.
    fn grant(&mut self, myself: &ActorRef<GateMsg>) {
        let lane = &self.lane;
        self.queue.grant_all(
            lane,
            |w| w.reply.is_closed(),
            |ticket, waiter| {
                let waited = waiter.since.map_or(Duration::ZERO, |s| s.elapsed());
                let permit = Permit::new(myself.clone(), lane.clone(), ticket);
                if waiter.reply.send(permit).is_ok() {
                    self.granted_total += 1;
                    self.longest_wait = self.longest_wait.max(waited);
                    self.total_wait = self.total_wait.saturating_add(waited);
                    self.wait_histogram[GateSnapshot::bucket_of(waited)] += 1;
                    tracing::debug!(
                        ticket,
                        holder = %waiter.holder,
                        wait_ms = waited.as_millis() as u64,
                        "model gate granted"
                    );
                }
                // If the send failed, the permit was dropped with the failed
                // message and gave its unit back.
            },
        );
    }

    fn snapshot(&self) -> GateSnapshot {
        let (free, granted_here) = {
            let lane = lock(&self.lane);
            (lane.free(), lane.granted())
        };
        let mut wait_histogram = self.wait_histogram;
        // Granted by the lane: none of them waited.
        wait_histogram[0] += granted_here;
        GateSnapshot {
            capacity: self.capacity,
            in_flight: self
                .capacity
                .saturating_sub(free)
                .saturating_sub(self.queue.units()),
            queued: self.queue.queued(),
            granted_total: self.granted_total + granted_here,
            longest_wait: self.longest_wait,
            total_wait: self.total_wait,
            wait_histogram,
        }
    }
}

impl Drop for GateState {
    /// However the actor ends (stopped, killed, panicked), its lane
    /// grants nothing after it.
    fn drop(&mut self) {
        lock(&self.lane).close();
    }
}

impl Actor for ModelGate {
    type Msg = GateMsg;
    type State = GateState;
    type Arguments = GateArguments;

    /// A stop closes the lane and lets the queue go here, not only in the
    /// state's drop: after a stop ractor hands the state to the supervisor
    /// inside the termination event, which a host's actor reads only
    /// between its handlers — until then a clone's uncontended `acquire`
    /// was granted, and one queued waited with its reply port held there.
    async fn post_stop(
        &self,
        _myself: ActorRef<GateMsg>,
        state: &mut GateState,
    ) -> Result<(), ActorProcessingErr> {
        lock(&state.lane).close();
        state.queue = GateQueue::new();
        Ok(())
    }

    async fn pre_start(
        &self,
        _myself: ActorRef<GateMsg>,
        args: GateArguments,
    ) -> Result<GateState, ActorProcessingErr> {
        Ok(GateState {
            capacity: args.capacity,
            lane: args.lane,
            queue: GateQueue::new(),
            granted_total: 0,
            longest_wait: Duration::ZERO,
            total_wait: Duration::ZERO,
            wait_histogram: [0; 8],
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<GateMsg>,
        message: GateMsg,
        state: &mut GateState,
    ) -> Result<(), ActorProcessingErr> {
        let mut snapshot = None;
        match message {
            GateMsg::Internal(GateInternal::Acquire {
                ticket,
                holder,
                reply,
            }) => {
                // Stamped only when it will wait.
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
            GateMsg::Internal(GateInternal::Cancel { ticket }) => {
                if state.queue.cancel(ticket).is_some() {
                    lock(&state.lane).unqueue();
                }
            }
            GateMsg::Internal(GateInternal::Release { ticket }) => {
                tracing::trace!(ticket, "model gate released to its queue");
                state.queue.add_units(1);
            }
            GateMsg::Snapshot(reply) => {
                let pruned = state.queue.prune(|w| w.reply.is_closed());
                let mut lane = lock(&state.lane);
                for _ in 0..pruned {
                    lane.unqueue();
                }
                drop(lane);
                // After the grants below: what pruning freed is counted
                // where it went.
                snapshot = Some(reply);
            }
        }
        state.grant(&myself);
        if let Some(reply) = snapshot {
            let _ = reply.send(state.snapshot());
        }
        Ok(())
    }
}
