//! A thread's wakes: taken from the store, delivered one at a time,
//! settled on disk once read, dropped — or, an earlier session's, given
//! back to the store — when they cannot go out.

use ractor::ActorRef;
use subagents_messages::{AgentEvent, AgentId, Envelope};

use crate::thread::msg::ThreadMsg;
use crate::thread::msg::sealed::ThreadInternal;
use crate::thread::persist::Write;
use crate::thread::state::{ThreadState, TurnOrigin};
use crate::wake::{restart_line, restart_text, wake_line, wake_text};

impl ThreadState {
    /// The wake for `id` was delivered or dropped: no longer owed, on disk
    /// either (written again for a child whose wake was not owed).
    pub(super) fn settle_wake(&self, id: &AgentId) {
        // In memory now, on disk in order: a copy read in between (a
        // message resuming the child as the wake's turn ended) said it was
        // owed still, or not, as a blocking thread happened to run — and
        // the resume wrote that copy back.
        if let Some(store) = &self.store {
            store.settle_in_memory(id);
        }
        if let Some(writer) = &self.writer {
            writer.send(Write::Settle(id.clone()));
        }
    }

    /// The wake turn in flight has ended (or the thread closes): what it
    /// was about is no longer owed, on disk either.
    pub(super) fn settle_delivered(&mut self) {
        for id in std::mem::take(&mut self.settle_at_end) {
            self.settle_wake(&id);
        }
    }

    /// The restart wake (its first child `id`) went out or was dropped:
    /// every child it lists is settled, on disk too.
    fn settle_restart(&self, id: &AgentId) {
        if self.restarted.first() == Some(id) {
            for listed in &self.restarted[1..] {
                self.settle_wake(listed);
            }
        }
    }

    /// Takes the store's owed wakes that are this thread's, once, onto the
    /// queue: the children a restart interrupted (one wake lists them),
    /// then the finished children whose wake the last process owed and
    /// never delivered, in the order they finished. Its own are those its
    /// id wrote, and those written for no thread (the first thread shown
    /// takes them); another thread's wait for it.
    pub(super) fn take_store_wakes(&mut self) {
        if std::mem::replace(&mut self.store_wakes_taken, true) {
            return;
        }
        let Some(store) = &self.store else {
            return;
        };
        self.gave_back_ids.clear();
        self.restarted = store.take_interrupted(self.id.as_ref());
        let owed = store.take_owed_wakes(self.id.as_ref());
        if let Some(first) = self.restarted.first() {
            self.wakes.push(first.clone());
        }
        for id in owed {
            self.wakes.push(id.clone());
            self.woken.insert(id);
        }
    }

    /// The store's wakes a killed thread gave back after this one took
    /// the store's (found none: the killed state held them): taken as at
    /// a showing — now if shown, else when it is next. A restart list of
    /// its own not yet settled is kept; the given-back list waits then.
    pub(super) fn take_given_back(&mut self, ids: Vec<AgentId>) {
        // Its own restart list first: taken once that has gone (declined,
        // they were never asked again, and stayed interrupted).
        if self.store_wakes_taken && !self.restarted.is_empty() {
            self.given_back_waiting.extend(ids);
            return;
        }
        if self.store_wakes_taken {
            self.store_wakes_taken = false;
            // Off screen, taken they were dropped (a wake off screen goes
            // nowhere) and lost for the process: left for the showing —
            // and, those given back to it, settled by a clear or a close
            // before it, as a switch's (not another thread's given back
            // for its own showing, listed beside them).
            if self.wakes.is_on_screen() && !self.wakes.is_held() {
                self.take_store_wakes();
            } else {
                if let Some(store) = &self.store {
                    let listed = store.wakes_of(self.id.as_ref());
                    let mine = ids.into_iter().filter(|id| listed.contains(id));
                    self.gave_back_ids.extend(mine);
                }
                self.gave_back = true;
            }
        }
    }

    /// Wakes that will not go out now (off screen, a switch): one of an
    /// earlier session — its restart wake, an owed one — goes back to the
    /// store, owed still, for the thread's next showing; any other is
    /// dropped ([`Self::drop_wake`]). A host restoring its tabs after a
    /// restart opens each (showing it) and leaves it for the next: every
    /// owed wake of a tab but the first went out of the store, was dropped
    /// by the switch and settled on disk — lost for good.
    pub(super) fn put_back_or_drop(&mut self, dropped: Vec<AgentId>) {
        let mut put_back = false;
        for id in dropped {
            let Some(store) = self.store.clone() else {
                self.drop_wake(&id);
                continue;
            };
            if self.restarted.first() == Some(&id) {
                let restarted = std::mem::take(&mut self.restarted);
                self.gave_back_ids.extend(restarted.iter().cloned());
                store.give_back_interrupted(restarted);
                put_back = true;
            } else if store.is_from_earlier_session(&id) {
                store.give_back_owed(&id);
                self.woken.remove(&id);
                self.gave_back_ids.push(id);
                put_back = true;
            } else {
                self.drop_wake(&id);
            }
        }
        // Taken again when it is shown next.
        if put_back {
            self.store_wakes_taken = false;
            self.gave_back = true;
        }
    }

    /// A clear, a delete or a close: the wakes `dropped` from the queue and
    /// those the thread gave back to the store before are settled.
    pub(super) fn forget_wakes(&mut self, dropped: Vec<AgentId>) {
        for id in dropped {
            self.drop_wake(&id);
        }
        // Settled: not given back by a kill later in a close (the drop
        // below), nor delivered.
        self.restarted.clear();
        // Given back to it while its restart list waited: its own too.
        let waiting = std::mem::take(&mut self.given_back_waiting);
        if let (false, Some(store)) = (waiting.is_empty(), &self.store) {
            let listed = store.wakes_of(self.id.as_ref());
            let mine = waiting.into_iter().filter(|id| listed.contains(id));
            self.gave_back_ids.extend(mine);
            self.gave_back = true;
        }
        self.settle_given_back();
    }

    /// The wakes this thread gave back to the store (a switch away before
    /// they went out), and its own children's a killed thread gave back,
    /// are settled there (not another thread's given back, written for
    /// no thread: `EnvelopeStore::take_given_back_by`): a clear or a delete forgets the
    /// conversation, a close is meant. Left owed, they outlived the delete
    /// — the next thread opened under the id was woken with the deleted
    /// conversation's children — and came back after a clear. (An open
    /// given up took none: nothing to settle.)
    fn settle_given_back(&mut self) {
        if !std::mem::take(&mut self.gave_back) {
            return;
        }
        let Some(store) = self.store.clone() else {
            return;
        };
        let gave = std::mem::take(&mut self.gave_back_ids);
        let (interrupted, owed) = store.take_given_back_by(self.id.as_ref(), &gave);
        for id in interrupted {
            self.settle_wake(&id);
        }
        for id in owed {
            self.woken.remove(&id);
            self.settle_wake(&id);
        }
        self.store_wakes_taken = true;
    }

    /// A wake that will not go out (off screen, a switch, the thread
    /// closed): settled, and the child's run span, kept for it, let go.
    pub(super) fn drop_wake(&self, id: &AgentId) {
        self.settle_restart(id);
        self.settle_wake(id);
        drop(self.parent.hub.take_run_span(id));
    }

    /// The parent agent takes no more turns: its actor is draining,
    /// stopping or stopped (ractor refuses every message from `Draining`
    /// on) — killed under the thread, or shut down by a host.
    pub(super) fn parent_gone(&self) -> bool {
        self.parent.agent.actor().get_status() >= ractor::ActorStatus::Draining
    }

    /// What waits goes out after what was sent in this tick: when the
    /// `DeliverWakes` sent now is read. Until then no message delivers a
    /// wake — one read between (a child's finish, a host's stop, a close)
    /// released it ahead of the user's turn sent as the typing stopped.
    pub(super) fn defer_wakes(&mut self, myself: &ActorRef<ThreadMsg>) {
        if myself
            .cast(ThreadMsg::Internal(ThreadInternal::DeliverWakes))
            .is_ok()
        {
            self.deferred += 1;
        }
    }

    /// [`ThreadState::defer_wakes`], once the hub has read what was sent
    /// to it before: what that set going (a finished child handed on by a
    /// cut, its notice to this thread) is read first.
    pub(super) fn defer_wakes_through_hub(&mut self, myself: &ActorRef<ThreadMsg>) {
        let (hub, thread) = (self.parent.hub.clone(), myself.clone());
        self.deferred += 1;
        tokio::spawn(async move {
            // A hub gone answers at once: nothing of it is to come.
            let _ = hub.sync().await;
            let _ = thread.cast(ThreadMsg::Internal(ThreadInternal::DeliverWakes));
        });
    }

    pub(super) fn deliver_wakes(&mut self, myself: &ActorRef<ThreadMsg>) {
        if self.deferred > 0 {
            return;
        }
        // A parent that is gone (its actor killed) reads no wake: each
        // waits, owed (on disk too) — a restart delivers it, a close
        // settles it. Sent, each was "answered" by a failed `Result` no
        // model read, and one that finished after the parent died was
        // settled on disk.
        while !self.parent_gone()
            && let Some(child) = self.wakes.release_next()
        {
            if self.restarted.first() == Some(&child) {
                let restarted = std::mem::take(&mut self.restarted);
                // Wakes a killed thread gave back meanwhile: queued behind.
                let waiting = std::mem::take(&mut self.given_back_waiting);
                if !waiting.is_empty() {
                    self.take_given_back(waiting);
                }
                // Only what can still go on: read as the wake goes out,
                // after the host's first turn, which may have resumed one
                // (it offered the run again) or stopped one (refused).
                // One whose resume another thread began is held for it,
                // neither listed nor settled (offered again if it fails).
                let held: Vec<AgentId> = (restarted.iter())
                    .filter(|id| self.held_for_resume(id))
                    .cloned()
                    .collect();
                let listed: Vec<Envelope> = restarted
                    .iter()
                    .filter(|id| !held.contains(id))
                    .filter_map(|id| self.envelope(id))
                    .filter(|e| e.continued_as.is_none() && !e.cancelled)
                    .collect();
                self.settle_at_end = restarted
                    .into_iter()
                    .filter(|id| !held.contains(id))
                    .collect();
                if listed.is_empty() {
                    // Gone meanwhile (pruned): no wake about nothing — and
                    // none in flight (taken as one, it held the queue: no
                    // later wake of the thread went out).
                    self.settle_delivered();
                    self.wakes.finished();
                    continue;
                }
                self.events.emit(AgentEvent::Wake {
                    child: listed[0].id.clone(),
                    line: restart_line(&listed),
                });
                let text = restart_text(&listed, self.parent.offers_use_agent());
                // In flight (kept so if the parent went as it was sent).
                self.send_turn(myself, text, TurnOrigin::Wake, None, None);
                return;
            }
            // Through the store once the hub is gone (its archive with
            // it): found nowhere, an owed wake read as claimed and was
            // settled, the parent never told.
            let envelope = self.envelope(&child);
            match envelope {
                // A child a message resumed meanwhile: the run it goes on
                // as wakes the parent, not this one (as after a restart,
                // where the store skips it).
                // Held for a resume another thread began: owed still,
                // offered again if the resume fails.
                Some(envelope)
                    if !envelope.claimed
                        && envelope.continued_as.is_none()
                        && self.held_for_resume(&child) =>
                {
                    self.wakes.finished();
                }
                Some(envelope) if !envelope.claimed && envelope.continued_as.is_none() => {
                    self.events.emit(AgentEvent::Wake {
                        child: child.clone(),
                        line: wake_line(&envelope),
                    });
                    let text = wake_text(
                        &envelope,
                        self.parent.hub.result_budget(),
                        self.parent.offers_use_agent(),
                    );
                    let follows = self.parent.hub.take_run_span(&child);
                    self.settle_at_end = vec![child];
                    self.send_turn(myself, text, TurnOrigin::Wake, None, follows);
                    return;
                }
                // Claimed through `result`, or resumed, meanwhile: no wake.
                _ => {
                    self.settle_wake(&child);
                    self.wakes.finished();
                }
            }
        }
    }
}

impl Drop for ThreadState {
    /// A thread killed — its ractor host panicked or was killed, or an
    /// ancestor of the host stopped (ractor kills the subtree): no
    /// `post_stop` ran. The store's wakes it took go back, for the next
    /// thread on the store: the restart wake not yet out (or cut in its
    /// turn), the owed wakes of earlier sessions waiting or in flight.
    /// They were lost for the rest of the process — the store still open
    /// under its lock, so no open could find them again. (A close settles
    /// them and lets go of the store first: nothing to give back then.)
    /// This runs after ractor reports the thread stopped, and before its
    /// event stream ends (the state holds the stream's last sender): a
    /// host that spawns again on the store once the old stream ended
    /// finds them there; a thread that opened before (in the handler that
    /// read this one's termination) is told to take them.
    fn drop(&mut self) {
        // No wake comes in this process: the run spans kept for them go
        // (a span held open holds the turn that started its child).
        self.parent.hub.drop_run_spans();
        let Some(store) = self.store.take() else {
            return;
        };
        let mut interrupted = std::mem::take(&mut self.restarted);
        let mut owed = Vec::new();
        let cut = std::mem::take(&mut self.settle_at_end);
        for id in cut.into_iter().chain(self.wakes.clear()) {
            if !store.is_from_earlier_session(&id) || interrupted.contains(&id) {
                continue;
            }
            let status = store.get(&id).map(|e| e.status);
            if status == Some(subagents_messages::SubAgentStatus::Interrupted) {
                interrupted.push(id);
            } else {
                store.give_back_owed(&id);
                owed.push(id);
            }
        }
        owed.extend_from_slice(&interrupted);
        if !interrupted.is_empty() {
            store.give_back_interrupted(interrupted);
        }
        // A thread that opened since (a host reopening the conversation
        // in the handler that read this one's termination) took the
        // store's wakes and found none: told to take them now.
        for taker in store.takers_of(&owed) {
            let taker: ActorRef<ThreadMsg> = taker.into();
            let back = ThreadInternal::StoreWakesBack(owed.clone());
            let _ = taker.cast(ThreadMsg::Internal(back));
        }
    }
}
