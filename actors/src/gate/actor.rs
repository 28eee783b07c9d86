//! The gate actor: the FIFO of waiters and the held tickets.

use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use subagents_messages::{AgentId, GateSnapshot};
use tokio::time::Instant;

use crate::gate::msg::sealed::GateInternal;
use crate::gate::msg::{GateMsg, Permit};
use crate::gate::queue::GateQueue;

/// The gate actor.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ModelGate;

/// Arguments of [`ModelGate`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct GateArguments {
    /// Permits held at once (at least 1).
    pub(crate) capacity: usize,
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
    queue: GateQueue<Waiter>,
    granted_total: u64,
    longest_wait: Duration,
    total_wait: Duration,
    wait_histogram: [u64; 8],
}

impl GateState {
    fn grant(&mut self, myself: &ActorRef<GateMsg>) {
        while let Some((ticket, waiter)) = self.queue.grant_next() {
            if waiter.reply.is_closed() {
                // The waiter gave up; its Cancel may still be on the way.
                self.queue.release(ticket);
                continue;
            }
            let waited = waiter.since.map_or(Duration::ZERO, |s| s.elapsed());
            if waiter
                .reply
                .send(Permit::new(myself.clone(), ticket))
                .is_ok()
            {
                self.granted_total += 1;
                self.longest_wait = self.longest_wait.max(waited);
                self.total_wait = self.total_wait.saturating_add(waited);
                self.wait_histogram[GateSnapshot::bucket_of(waited)] += 1;
                tracing::debug!(
                    ticket,
                    holder = %waiter.holder,
                    wait_ms = waited.as_millis() as u64,
                    in_flight = self.queue.in_flight(),
                    queued = self.queue.queued(),
                    "model gate granted"
                );
            }
            // If the send failed, the permit was dropped with the failed
            // message and its Release is on the way.
        }
    }

    fn snapshot(&self) -> GateSnapshot {
        GateSnapshot {
            capacity: self.queue.capacity(),
            in_flight: self.queue.in_flight(),
            queued: self.queue.queued(),
            granted_total: self.granted_total,
            longest_wait: self.longest_wait,
            total_wait: self.total_wait,
            wait_histogram: self.wait_histogram,
        }
    }
}

impl Actor for ModelGate {
    type Msg = GateMsg;
    type State = GateState;
    type Arguments = GateArguments;

    async fn pre_start(
        &self,
        _myself: ActorRef<GateMsg>,
        args: GateArguments,
    ) -> Result<GateState, ActorProcessingErr> {
        Ok(GateState {
            queue: GateQueue::new(args.capacity),
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
        match message {
            GateMsg::Internal(GateInternal::Acquire {
                ticket,
                holder,
                reply,
            }) => {
                // Stamped only when it will wait: most grants are at once.
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
                state.queue.cancel(ticket);
            }
            GateMsg::Internal(GateInternal::Release { ticket }) => {
                state.queue.release(ticket);
            }
            GateMsg::Snapshot(reply) => {
                state.queue.prune(|w| w.reply.is_closed());
                let _ = reply.send(state.snapshot());
            }
        }
        state.grant(&myself);
        Ok(())
    }
}
