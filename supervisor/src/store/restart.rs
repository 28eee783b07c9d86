//! A restart's part of the store: the children an open found unfinished
//! (`interrupted`, or `stopped` when a stop had been accepted) and the
//! wakes owed when the process died, each handed to its thread once.

use std::sync::PoisonError;

use subagents_messages::{AgentId, Envelope, SubAgentStatus, ThreadId};

use crate::store::envelopes::EnvelopeStore;
use crate::store::listing::child_order;

/// Why a child the open found unfinished is `interrupted`.
pub(crate) const RESTARTED: &str = "interrupted: the process running it stopped; a message (use_agent send) resumes it from its saved conversation";

/// Why a child the open found unfinished, its stop accepted
/// ([`subagents_messages::Envelope::stopping`]), is `stopped`.
pub(crate) const STOPPED_AT_RESTART: &str =
    "stopped while running (its process ended before the stop finished)";

impl EnvelopeStore {
    /// The children the open found running or queued, each saved now as
    /// `interrupted` with its restart wake owed (on disk: an open whose
    /// process ends before a thread delivers that wake leaves it to the
    /// next open), and those an earlier open interrupted whose wake never
    /// went out; in child-number order. Kept until a thread takes them
    /// ([`EnvelopeStore::take_interrupted`]).
    pub(super) fn interrupt_unfinished(&self) -> Vec<AgentId> {
        let now = self.clock.now_ms();
        let open: Vec<AgentId> = self
            .map
            .iter()
            .filter(|e| !e.value().status.is_terminal())
            .map(|e| e.key().clone())
            .collect();
        for id in &open {
            if let Some(mut envelope) = self.get(id) {
                // Never before it was asked for (a clock set back since
                // keeps a future-dated envelope future-dated).
                let asked = envelope.started_at_ms.unwrap_or(envelope.requested_at_ms);
                envelope.finished_at_ms = Some(now.max(asked));
                if envelope.stopping {
                    // A stop was accepted before the process stopped: the
                    // host's stop holds, no wake offers it, no message
                    // resumes it.
                    envelope.status = SubAgentStatus::Stopped;
                    envelope.error = Some(STOPPED_AT_RESTART.to_owned());
                    let _ = self.save(&envelope);
                    continue;
                }
                envelope.status = SubAgentStatus::Interrupted;
                envelope.error = Some(RESTARTED.to_owned());
                envelope.wake_owed = true;
                // On failure it is still interrupted in memory.
                let _ = self.save(&envelope);
            }
        }
        // Only a restart owes an interrupted child's wake (one the parent
        // interrupted wakes nobody); not one a stop cancelled since: the
        // wake would say a message resumes it.
        let mut owed: Vec<AgentId> = self
            .map
            .iter()
            .filter(|e| e.status == SubAgentStatus::Interrupted && wake_still_owed(e))
            .filter(|e| !e.cancelled)
            .map(|e| e.key().clone())
            .collect();
        owed.sort_unstable_by(|a, b| child_order(a).cmp(&child_order(b)));
        *self
            .interrupted
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = owed.clone();
        owed
    }

    /// The children the open found unfinished (now `interrupted`) that no
    /// thread has taken yet: the thread each belongs to wakes its parent
    /// with them ([`Envelope::thread`]; the first thread shown, for those
    /// recorded for none). Reading them takes nothing — taking is the
    /// thread's alone (a host that took them, through a method that was
    /// public, left the thread nothing to wake its parent with):
    ///
    /// ```compile_fail
    /// # fn f(store: &subagents_supervisor::store::EnvelopeStore) {
    /// store.take_interrupted(None);
    /// # }
    /// ```
    pub fn interrupted(&self) -> Vec<AgentId> {
        self.interrupted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The interrupted children of `thread`, once: the thread that takes
    /// them wakes its parent with the list. A thread takes its own and
    /// those recorded for no thread (see [`EnvelopeStore::belongs`]); the
    /// rest wait for theirs.
    pub(crate) fn take_interrupted(&self, thread: Option<&ThreadId>) -> Vec<AgentId> {
        let mut list = self
            .interrupted
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.take_own(&mut list, thread)
    }

    /// The ids of `list` that belong to `thread`, taken out of it (in
    /// order); the others are left.
    fn take_own(&self, list: &mut Vec<AgentId>, thread: Option<&ThreadId>) -> Vec<AgentId> {
        let (own, others) = std::mem::take(list)
            .into_iter()
            .partition(|id| self.belongs(id, thread));
        *list = others;
        own
    }

    /// Notes the finished children whose wake the last process owed its
    /// parent and never delivered, in the order they finished (then by
    /// number); kept until a thread takes them
    /// ([`EnvelopeStore::take_owed_wakes`]).
    pub(super) fn find_owed_wakes(&self) {
        let mut owed: Vec<(u64, AgentId)> = self
            .map
            .iter()
            .map(|e| e.value().clone())
            .filter(|e| {
                matches!(e.status, SubAgentStatus::Done | SubAgentStatus::Failed)
                    && wake_still_owed(e)
            })
            .map(|e| (e.finished_at_ms.unwrap_or(0), e.id))
            .collect();
        owed.sort_unstable_by(|(a_at, a), (b_at, b)| {
            a_at.cmp(b_at)
                .then_with(|| child_order(a).cmp(&child_order(b)))
        });
        *self.owed.lock().unwrap_or_else(PoisonError::into_inner) =
            owed.into_iter().map(|(_, id)| id).collect();
    }

    /// The wakes the last process owed and never delivered that no thread
    /// has taken yet; reading them takes nothing (the thread each belongs
    /// to delivers them, as for [`EnvelopeStore::interrupted`]):
    ///
    /// ```compile_fail
    /// # fn f(store: &subagents_supervisor::store::EnvelopeStore) {
    /// store.take_owed_wakes(None);
    /// # }
    /// ```
    pub fn owed_wakes(&self) -> Vec<AgentId> {
        self.owed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The owed wakes of `thread`, once: the thread that takes them
    /// delivers them, after the restart list (whose they are: as for
    /// [`EnvelopeStore::take_interrupted`]).
    pub(crate) fn take_owed_wakes(&self, thread: Option<&ThreadId>) -> Vec<AgentId> {
        let mut list = self.owed.lock().unwrap_or_else(PoisonError::into_inner);
        self.take_own(&mut list, thread)
    }

    /// An owed wake a thread took and never delivered (it was switched
    /// away from first): owed again, in the order the children finished —
    /// unless pruned meanwhile (listed, it was settled with no wake sent),
    /// forgotten (a killed thread's state, dropped after a
    /// `forget_thread`, listed its children again for no thread to take),
    /// or its result claimed or the child resumed meanwhile (listed, a
    /// host's badge counted a wake the next showing settled unsent).
    pub(crate) fn give_back_owed(&self, id: &AgentId) {
        let mut list = self.owed.lock().unwrap_or_else(PoisonError::into_inner);
        let owed =
            self.map.get(id).is_some_and(|e| wake_still_owed(&e)) && !self.hold_for_resume(id);
        if !list.contains(id) && owed {
            list.push(id.clone());
            let finished = |id: &AgentId| self.get(id).and_then(|e| e.finished_at_ms).unwrap_or(0);
            list.sort_by_cached_key(|id| {
                let (unnumbered, number, _) = child_order(id);
                (finished(id), unnumbered, number, id.clone())
            });
        }
    }

    /// A restart list a thread took and never delivered: listed again
    /// (ahead of any other, in its order), but what was pruned, forgotten,
    /// resumed or stopped meanwhile (none of which goes on from there).
    pub(crate) fn give_back_interrupted(&self, ids: Vec<AgentId>) {
        let mut list = self
            .interrupted
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // A resume begun is a link on its way (written by the thread's
        // writer, later): read only from the map, the child was listed
        // again or not by how far the writer had got.
        let goes_on = |id: &AgentId| {
            self.map
                .get(id)
                .is_some_and(|e| !e.forgotten && e.continued_as.is_none() && !e.cancelled)
                && !self.hold_for_resume(id)
        };
        let kept = |id: &AgentId| !list.contains(id) && goes_on(id);
        let mut back: Vec<AgentId> = ids.into_iter().filter(kept).collect();
        back.append(&mut list);
        *list = back;
    }
}

/// Its wake was owed and nothing took its place since: no tool claimed
/// its result, no message resumed it as a later run.
fn wake_still_owed(envelope: &Envelope) -> bool {
    envelope.wake_owed
        && !envelope.claimed
        && envelope.continued_as.is_none()
        && !envelope.forgotten
}
