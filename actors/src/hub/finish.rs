//! How a child ends, as the hub actor runs it: its terminal status (once),
//! the envelope, everyone waiting on it answered, its slot freed and the
//! next queued child started, the observers told.

use ractor::ActorRef;
use subagents_messages::{AgentEvent, AgentId, AgentResult, Envelope, Outcome, SubAgentStatus};

use crate::hub::ids::child_number;
use crate::hub::lifecycle::HubState;
use crate::hub::msg::HubMsg;
use crate::hub::msg::sealed::HubInternal;
use crate::hub::stop::STOPPED_RUNNING;

/// How a child's turn ended, as a status.
fn status_for(outcome: &Outcome) -> SubAgentStatus {
    match outcome {
        Outcome::Completed | Outcome::LimitReached(_) => SubAgentStatus::Done,
        Outcome::Failed(_) => SubAgentStatus::Failed,
        Outcome::Stopped => SubAgentStatus::Stopped,
    }
}

impl HubState {
    /// Every wait on the child `envelope` is of reads it (its end, at the
    /// hub's death: dropped unanswered, a call said the child "was lost"
    /// where the stream said `failed`).
    pub(super) fn answer_waiting(&mut self, envelope: &Envelope) {
        if let Some(child) = self.children.get_mut(&envelope.id) {
            for reply in child.subscribers.drain(..) {
                let _ = reply.send(envelope.clone());
            }
        }
    }

    /// Moves a child to a terminal status (once), frees its slot and
    /// answers everyone waiting on it. Returns the children to start.
    pub(super) fn finish_child(
        &mut self,
        id: &AgentId,
        status: SubAgentStatus,
        result: Option<String>,
        error: Option<String>,
    ) -> Vec<AgentId> {
        if self.book.is_terminal(id) {
            return Vec::new();
        }
        // A finished child leaves the map (its envelope stays): a long
        // session does not keep every child's sink, tools and model.
        let Some(mut child) = self.children.remove(id) else {
            return Vec::new();
        };
        let requester = child.request.requester.clone();
        if let Some(agent) = &child.agent {
            self.actors.remove(&agent.actor().get_id());
        }
        let requester_sink = child.requester_sink.clone();
        let terminal = AgentEvent::ChildStatus(id.clone(), status);
        let closed_here = child.sink.close_with(|| {
            requester_sink.emit(terminal);
        });
        // Closed first by a kill's hook (its hub's thread dead, on another
        // worker, while this handler ran on): the stream's one terminal
        // status says `failed`, and so does the book — what this finish
        // would have recorded was never shown.
        let (status, result, error) = match closed_here {
            true => (status, result, error),
            false => (
                SubAgentStatus::Failed,
                None,
                Some(crate::hub::handle::HUB_GONE.to_owned()),
            ),
        };
        // Never started: the messages it was sent while queued are in no
        // turn; its run keeps them (a message resumes it from there).
        if child.agent.is_none() && !child.followups.is_empty() {
            self.book.keep_unread(id, &child.followups);
        }
        let now = self.now_ms();
        if !self.book.finish(id, status, result, error, now) {
            return Vec::new();
        }
        // A stop that came as its turn ended, and it ended done or failed
        // all the same: what the stop meant holds (none for `stopped`).
        if child.after_end.cancel && status != SubAgentStatus::Stopped {
            drop(self.book.cancel(id));
        }
        if child.after_end.release {
            drop(self.book.release_finished(id));
        }
        // Copied only for whoever reads it.
        let envelope = if child.subscribers.is_empty() && self.config.observers.is_empty() {
            None
        } else {
            self.book.envelope(id)
        };
        // Sending the envelope delivers nothing: a receiver claims the
        // result once its tool call has taken it.
        if let Some(envelope) = &envelope {
            for reply in child.subscribers.drain(..) {
                let _ = reply.send(envelope.clone());
            }
        }
        for reply in child.stop_replies.drain(..) {
            reply.answer(Ok(status));
        }
        // Stopping the actor ends its turn (its `post_stop` stops it, and
        // the turn task is aborted with its state).
        if let Some(agent) = child.agent.take() {
            agent.shutdown();
        }
        self.sinks.remove(id);
        self.finished += 1;
        if let Some(envelope) = &envelope {
            self.tell_observers(envelope);
        }
        let mut next = self.slots.release(id);
        self.slots.forget_requester(id);
        // A requester whose turn ended while this one stopped ends with
        // the last of its children.
        if self
            .children
            .get(&requester)
            .is_some_and(|r| r.ending.is_some())
            && !self.asked_by(&requester)
            && let Some(ending) = self
                .children
                .get_mut(&requester)
                .and_then(|r| r.ending.take())
        {
            let (status, result, error) = *ending;
            next.extend(self.finish_child(&requester, status, result, error));
        }
        next
    }

    /// Some child it asked for is still in the map (running or queued).
    fn asked_by(&self, requester: &AgentId) -> bool {
        self.children
            .values()
            .any(|c| c.request.requester == *requester)
    }

    /// Tells every observer; one that panics is logged and the others are
    /// still told (a host's bug must not take the hub down).
    pub(super) fn tell_observers(&self, envelope: &Envelope) {
        crate::hub::config::tell_each(&self.config.observers, "finished", &envelope.id, |o| {
            o.finished(envelope)
        });
    }

    /// [`HubState::finish_child`], and the child's own children stopped.
    /// Returns the queued children its slot admits, for `refill`.
    #[must_use = "the children a finish admits must be started (`refill`)"]
    pub(super) fn finish_and_orphan(
        &mut self,
        myself: &ActorRef<HubMsg>,
        id: &AgentId,
        status: SubAgentStatus,
        result: Option<String>,
        error: Option<String>,
    ) -> Vec<AgentId> {
        // A child's own children do not outlive it: nobody would read
        // their results (wakes go to the thread's parent only). Their ends
        // come inside its row, before its own: while they stop, it waits
        // (`ending`), and the last of them to end ends it.
        let mut orphans: Vec<AgentId> = self
            .children
            .iter()
            .filter(|(_, c)| c.request.requester == *id)
            .map(|(orphan, _)| orphan.clone())
            .collect();
        if orphans.is_empty() {
            return self.finish_child(id, status, result, error);
        }
        orphans.sort_by_key(|o| (child_number(o), o.clone()));
        for orphan in orphans {
            let _ = myself.cast(HubMsg::Internal(HubInternal::StopOrphan { id: orphan }));
        }
        match self.children.get_mut(id) {
            Some(child) => {
                // The first ending stands (a stop after its turn ended
                // changes nothing).
                child
                    .ending
                    .get_or_insert_with(|| Box::new((status, result, error)));
                Vec::new()
            }
            None => self.finish_child(id, status, result, error),
        }
    }

    /// Starts the children a finish admitted: boxed, and only when there
    /// are some (most finishes admit nobody), so a path that may refill
    /// costs its caller's future a pointer, not a start.
    pub(super) async fn refill(&mut self, myself: &ActorRef<HubMsg>, next: Vec<AgentId>) {
        if !next.is_empty() {
            Box::pin(self.start_all(myself, next)).await;
        }
    }

    /// A child's turn reported its result: it ends. Returns the queued
    /// children its slot admits, for `refill`.
    #[must_use = "the children a finish admits must be started (`refill`)"]
    pub(super) fn child_finished(
        &mut self,
        myself: &ActorRef<HubMsg>,
        id: &AgentId,
    ) -> Vec<AgentId> {
        self.prefer_stop_if_closing(myself, id);
        // Sent before the hub was told (see `start_child`). A child that
        // already ended has left the map: its finish below changes
        // nothing.
        // Taken, not borrowed: a receiver read once is spent, and a child
        // that now waits for its own children (`ending`) stays in the map.
        let result = self
            .children
            .get_mut(id)
            .and_then(|child| child.last_result.take())
            .and_then(|mut last| last.try_recv().ok());
        let (status, result, error) = self.ending(id, result);
        self.finish_and_orphan(myself, id, status, result, error)
    }

    /// How a child ends given its turn's result (`None`: it never
    /// reported, having been told to stop): its status, result and error.
    pub(super) fn ending(
        &self,
        id: &AgentId,
        result: Option<AgentResult>,
    ) -> (SubAgentStatus, Option<String>, Option<String>) {
        match result {
            Some(r) => match &r.outcome {
                Outcome::Failed(e) => (SubAgentStatus::Failed, Some(r.text), Some(e.clone())),
                Outcome::Stopped => self.ending(id, None),
                _ => (status_for(&r.outcome), Some(r.text), None),
            },
            None => {
                let why = self
                    .children
                    .get(id)
                    .and_then(|c| c.stopping)
                    .unwrap_or(STOPPED_RUNNING);
                (self.stop_status(id), None, Some(why.to_owned()))
            }
        }
    }
}

/// A stop of `id`, running, accepted: marked in the book and told to
/// the observers (the first time), so the thread writes it. On the hub's
/// parts: the shutdown holds a child of the map as it marks it.
pub(super) fn mark_stopping_in(
    book: &crate::hub::book::Book,
    observers: &[std::sync::Arc<dyn crate::hub::HubObserver>],
    id: &AgentId,
) {
    if book.mark_stopping(id)
        && !observers.is_empty()
        && let Some(envelope) = book.envelope(id)
    {
        crate::hub::config::tell_each(observers, "stopping", id, |o| o.stopping(&envelope));
    }
}
