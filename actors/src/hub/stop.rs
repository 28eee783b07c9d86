//! Ending children from outside: stop one, stop all (in child-number
//! order), detach, abandon — and the replies that wait for a stop to
//! complete (one `Stop`, or a stop-all answered when the last child it
//! stopped has ended).

use std::sync::{Arc, Mutex, PoisonError};

use ractor::{ActorRef, RpcReplyPort};
use subagents_messages::{AgentId, ApprovalDecision, ApprovalId, Envelope, SubAgentStatus};

use crate::agent::AgentMsg;
use crate::hub::BackgroundApprovals;
use crate::hub::child::AfterEnd;
use crate::hub::error::Refused;
use crate::hub::ids::child_number;
use crate::hub::lifecycle::HubState;
use crate::hub::msg::HubMsg;

/// Why a child stopped before it started.
pub(super) const STOPPED_QUEUED: &str = "stopped before it started";
/// Why a running child stopped.
pub(super) const STOPPED_RUNNING: &str = "stopped while running";
/// Why a child was interrupted.
pub(crate) const INTERRUPTED: &str = "interrupted before it finished; a message to it resumes it";

/// A stop-all waiting for every child it stopped: answered when the last
/// of them drops its share (each ended, or the hub went away).
pub(super) struct AllStopped {
    pub(super) reply: Mutex<Option<RpcReplyPort<usize>>>,
    /// The shares answered `stopped` (one that finished at that instant,
    /// `done`, was not stopped).
    pub(super) count: std::sync::atomic::AtomicUsize,
}

impl Drop for AllStopped {
    fn drop(&mut self) {
        let reply = self
            .reply
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(reply) = reply {
            let _ = reply.send(*self.count.get_mut());
        }
    }
}

/// Who waits for a child's stop to complete.
pub(super) enum StopReply {
    /// One `Stop`, answered with the child's status after it ended.
    One(Option<RpcReplyPort<Result<SubAgentStatus, Refused>>>),
    /// A share of a stop-all, answered when every share is gone.
    All(Arc<AllStopped>),
    /// A share of a stop-all for a child a stop was already ending: waited
    /// for, not counted (this stop did not stop it).
    Waits {
        /// Held only: the stop-all answers once every share dropped.
        _held: Arc<AllStopped>,
    },
}

impl StopReply {
    pub(super) fn answer(self, status: Result<SubAgentStatus, Refused>) {
        match self {
            StopReply::One(Some(reply)) => {
                let _ = reply.send(status);
            }
            StopReply::One(None) | StopReply::Waits { .. } => {}
            StopReply::All(share) => {
                if matches!(status, Ok(SubAgentStatus::Stopped)) {
                    share
                        .count
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
    }
}

impl HubState {
    /// The status a stopped child ends with: `interrupted` when the stop
    /// was an interrupt.
    pub(super) fn stop_status(&self, id: &AgentId) -> SubAgentStatus {
        match self.children.get(id) {
            Some(child) if child.interrupted => SubAgentStatus::Interrupted,
            _ => SubAgentStatus::Stopped,
        }
    }

    /// Its requester gave up before learning its id: it goes on in the
    /// background (its result wakes the parent), or stops — unless its
    /// turn is over already: then its result goes to the background, as a
    /// cascade's does (the cut call told the model "if it had already
    /// finished, its result will arrive as a message"; the stop cancelled
    /// it instead, its result reaching nobody).
    pub(super) async fn abandon(&mut self, myself: &ActorRef<HubMsg>, id: &AgentId, stop: bool) {
        // Ended on its own (not stopped before: a stopped one wakes nobody).
        let answered = self.book.status(id).is_some_and(|s| {
            s.is_terminal() && !matches!(s, SubAgentStatus::Stopped | SubAgentStatus::Interrupted)
        });
        if stop && !answered && !self.turn_over(id) {
            self.stop(myself, id, StopReply::One(None)).await;
        } else {
            self.detach(id);
        }
    }

    pub(super) fn detach(&mut self, id: &AgentId) -> DetachOutcome {
        if !self.book.contains(id) {
            return DetachOutcome::Unknown;
        }
        if self.book.is_terminal(id) {
            // Nobody took its result inline: it becomes a background
            // result and wakes the parent (unless a tool claims it).
            if let Some(released) = self.book.release_finished(id) {
                self.tell_observers(&released);
            }
            return match self.book.get(id) {
                Some(envelope) => DetachOutcome::AlreadyFinished(Box::new(envelope)),
                None => DetachOutcome::Unknown,
            };
        }
        let Some(child) = self.children.get(id) else {
            return DetachOutcome::Unknown;
        };
        self.set_status(id, child, SubAgentStatus::Background);
        // One being stopped (by name, in the tick its parent was cut) or
        // whose turn is over goes with the children it waits on: none of
        // their requests is the policy's to answer — it approved a call
        // nobody had, just before the stop reached its caller. Nor one
        // whose requester, up the chain, is going (the book's rule): a
        // grandchild its requester's inline wait let go in the tick the
        // requester's stop was read was approved on its way to a stop.
        if self.going_up(id) {
            return DetachOutcome::Detached;
        }
        self.answer_pending_approval(id);
        // Its children waited on inline go unwatched with it: a request
        // one of them waits on is answered too (in child-number order) —
        // not one whose requester, below `id`, is going.
        if self.config.background_approvals != BackgroundApprovals::Ask {
            let mut below: Vec<AgentId> = self
                .children
                .keys()
                .filter(|c| self.book.requested_under(c, id) && !self.going_under(c, id))
                .cloned()
                .collect();
            below.sort_by_key(|c| (child_number(c), c.clone()));
            for child in &below {
                self.answer_pending_approval(child);
            }
        }
        DetachOutcome::Detached
    }

    /// Told to stop, or its turn over: it ends with the children it waits on.
    fn going(&self, id: &AgentId) -> bool {
        self.book.is_going(id) || self.turn_over(id)
    }

    /// `id`, or a requester of it up the chain, is going.
    fn going_up(&self, id: &AgentId) -> bool {
        let mut at = id.clone();
        loop {
            if self.going(&at) {
                return true;
            }
            match self.book.requester_of(&at) {
                Some(requester) if self.book.contains(&requester) => at = requester,
                _ => return false,
            }
        }
    }

    /// `id`, or a requester of it below `top`, is going.
    fn going_under(&self, id: &AgentId, top: &AgentId) -> bool {
        let mut at = id.clone();
        while &at != top {
            if self.going(&at) {
                return true;
            }
            match self.book.requester_of(&at) {
                Some(requester) => at = requester,
                None => return false,
            }
        }
        false
    }

    /// A child handed to the background while it waits on an approval:
    /// the background policy, when it answers (`Deny`, `Approve`: the host
    /// chose not to be asked for a background child's calls), answers
    /// that request too, as it answers every later one. Sent as the host's
    /// answer is: one the agent no longer waits on is refused, and that
    /// refusal is nobody's to read.
    fn answer_pending_approval(&self, id: &AgentId) {
        let decision = match self.config.background_approvals {
            BackgroundApprovals::Ask => return,
            BackgroundApprovals::Deny => ApprovalDecision::Deny,
            BackgroundApprovals::Approve => ApprovalDecision::Approve,
        };
        let asked = self.book.approvals_asked(id);
        let agent = self.children.get(id).and_then(|c| c.agent.as_ref());
        if let (Some(agent), true) = (agent, asked > 0) {
            let (reply, _) = tokio::sync::oneshot::channel();
            let _ = agent.actor_ref().cast(AgentMsg::ResolveApproval {
                id: ApprovalId::for_agent(id, asked),
                decision,
                reply: reply.into(),
            });
        }
    }

    /// Interrupts a child: [`HubState::stop`], ending `interrupted` (a
    /// message resumes it). A child being stopped already stays stopped;
    /// one that ended already answers how, and stays resumable (through
    /// the stop it was cancelled for good, though the interrupt's answer
    /// said a message resumes it).
    pub(super) async fn interrupt(
        &mut self,
        myself: &ActorRef<HubMsg>,
        id: &AgentId,
        reply: StopReply,
    ) {
        if let Some(status) = self.status_of(id)
            && status.is_terminal()
        {
            return reply.answer(Ok(status));
        }
        if let Some(child) = self.children.get_mut(id)
            && child.stopping.is_none()
        {
            child.interrupted = true;
        }
        self.stop(myself, id, reply).await;
    }

    /// A child ending while the hub closes (drained: what came before the
    /// close is read first): the close is a stop, and a stop wins over an
    /// interrupt under way.
    pub(super) fn prefer_stop_if_closing(&mut self, myself: &ActorRef<HubMsg>, id: &AgentId) {
        if myself.get_status() == ractor::ActorStatus::Draining {
            self.prefer_stop(id);
            // And each child whose turn ended interrupted while its own
            // children stop: it ends with the last of them, and the close
            // is its stop too.
            let waiting: Vec<AgentId> = self
                .children
                .iter()
                .filter(|(_, c)| {
                    c.ending
                        .as_ref()
                        .is_some_and(|e| e.0 == SubAgentStatus::Interrupted)
                })
                .map(|(waiting, _)| waiting.clone())
                .collect();
            for waiting in waiting {
                self.prefer_stop(&waiting);
            }
        }
    }

    /// A stop wins over an interrupt still in progress: it ends `stopped`
    /// — also one whose turn ended interrupted and that waits for its own
    /// children to stop (its ending kept).
    pub(super) fn prefer_stop(&mut self, id: &AgentId) {
        if let Some(child) = self.children.get_mut(id) {
            prefer_stop_of(child);
        }
    }

    /// A stop by name (`HubMsg::Stop`): [`HubState::prefer_stop`], and
    /// what it means if the child ends all the same (`cancel`), in one
    /// look-up.
    pub(super) fn stop_by_name(&mut self, id: &AgentId) {
        if let Some(child) = self.children.get_mut(id) {
            prefer_stop_of(child);
            child.after_end.cancel = true;
        }
    }

    /// What a stop of `id` means if its turn is already over and it ends
    /// done or failed all the same ([`AfterEnd`]), added to what earlier
    /// stops meant.
    pub(super) fn after_end(&mut self, id: &AgentId, meaning: impl FnOnce(&mut AfterEnd)) {
        if let Some(child) = self.children.get_mut(id) {
            meaning(&mut child.after_end);
        }
    }

    /// Cancels a child that ended (in the book, or an earlier session's in
    /// the archive): no message resumes it. The thread records the change.
    fn cancel_ended(&self, id: &AgentId) {
        let archive = self.archive.as_ref().and_then(|slot| slot.get());
        cancel_ended_in(&self.book, archive.as_ref(), &self.config.observers, id);
    }

    /// Asks a child to stop: a queued one ends now; a running one is told
    /// to stop its turn and ends when it reports. `reply` is answered once
    /// it has ended (at once for an unknown or already ended child — an
    /// earlier session's too: it answers with the status it ended with, as
    /// `status` reads it, not as unknown).
    pub(super) async fn stop(&mut self, myself: &ActorRef<HubMsg>, id: &AgentId, reply: StopReply) {
        let Some(status) = self.status_of(id) else {
            return reply.answer(Err(Refused::UnknownChild(id.clone())));
        };
        if status.is_terminal() {
            // Ended already (interrupted and waiting for a message, or
            // done): the stop cancels it for good — a later message
            // resumed it. Its status stays the one it ended with.
            self.cancel_ended(id);
            return reply.answer(Ok(status));
        }
        // One look-up for a running child (the stop of every one).
        let child = self.children.get_mut(id);
        let status = match &child {
            Some(child) if child.interrupted => SubAgentStatus::Interrupted,
            _ => SubAgentStatus::Stopped,
        };
        let why = |queued: bool| match (status, queued) {
            (SubAgentStatus::Interrupted, _) => INTERRUPTED,
            (_, true) => STOPPED_QUEUED,
            (_, false) => STOPPED_RUNNING,
        };
        let Some(child) = child.filter(|c| c.agent.is_some()) else {
            // Queued: it ends now.
            let next = self.finish_and_orphan(myself, id, status, None, Some(why(true).into()));
            self.refill(myself, next).await;
            return reply.answer(Ok(status));
        };
        child.stop_replies.push(reply);
        let first = child.stopping.replace(why(false)).is_none();
        self.book.mark_going(id);
        if first && child.agent.as_ref().is_some_and(|a| a.stop_turn().is_err()) {
            // Its agent is already gone: it ends now.
            let next = self.finish_and_orphan(myself, id, status, None, Some(why(false).into()));
            self.refill(myself, next).await;
        } else if status == SubAgentStatus::Stopped {
            // Written as accepted: a kill before its end leaves it stopped.
            crate::hub::finish::mark_stopping_in(&self.book, &self.config.observers, id);
        }
    }

    /// Every live and queued child, in child-number order: the stream (and
    /// a replay) never depends on a map's iteration order.
    pub(super) fn unfinished(&mut self) -> Vec<AgentId> {
        // The queue is emptied first, so stopping the live ones starts
        // nobody.
        let queued = self.slots.drain_queue();
        let mut all: Vec<AgentId> = queued
            .into_iter()
            .chain(self.children.keys().cloned())
            .filter(|id| !self.book.is_terminal(id))
            .collect();
        all.sort_by_key(|id| (child_number(id), id.clone()));
        all.dedup();
        all
    }

    pub(super) async fn stop_all(
        &mut self,
        myself: &ActorRef<HubMsg>,
        reply: Option<RpcReplyPort<usize>>,
    ) {
        let all = self.unfinished();
        let done = Arc::new(AllStopped {
            reply: Mutex::new(reply),
            count: Default::default(),
        });
        for id in all {
            // A stop ending it already (not an interrupt, nor an ending
            // kept interrupted: this stop makes those stopped) is not one
            // this stop makes — a host adding the counts had it twice.
            let already = self.children.get(&id).is_some_and(|c| {
                c.stopping.is_some()
                    && !c.interrupted
                    && c.ending
                        .as_ref()
                        .is_none_or(|e| e.0 != SubAgentStatus::Interrupted)
            });
            // A stop of them all is a stop: it wins over an interrupt
            // under way, as a stop of one does.
            self.prefer_stop(&id);
            let share = match already {
                true => StopReply::Waits {
                    _held: done.clone(),
                },
                false => StopReply::All(done.clone()),
            };
            self.stop(myself, &id, share).await;
        }
    }
}

/// What `Detach` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DetachOutcome {
    /// The child now runs in the background.
    Detached,
    /// The child had already finished: here is its envelope (now claimed).
    AlreadyFinished(Box<Envelope>),
    /// No child has that id.
    Unknown,
    /// Asked only if still queued: it had started (nothing done).
    Started,
}

/// A stop wins over an interrupt of the same child.
fn prefer_stop_of(child: &mut crate::hub::lifecycle::Child) {
    child.interrupted = false;
    if child.stopping.is_some() {
        child.stopping = Some(STOPPED_RUNNING);
    }
    if let Some(ending) = child.ending.as_mut()
        && ending.0 == SubAgentStatus::Interrupted
    {
        ending.0 = SubAgentStatus::Stopped;
        ending.2 = Some(STOPPED_RUNNING.to_owned());
    }
}

/// Cancels `id`, a child that ended, in `book` (its observers told of the
/// change) and in `archive` (an earlier session's child, read from it or
/// brought into the book by a message: the store keeps its record) — a
/// live hub's stop, and one after the hub's death alike.
pub(super) fn cancel_ended_in(
    book: &crate::hub::book::Book,
    archive: Option<&Arc<dyn crate::hub::config::EnvelopeArchive>>,
    observers: &[Arc<dyn crate::hub::HubObserver>],
    id: &AgentId,
) {
    if let Some(envelope) = book.cancel(id) {
        crate::hub::config::tell_each(observers, "finished", id, |o| o.finished(&envelope));
    }
    if let Some(archive) = archive {
        archive.cancel(id);
    }
}
