//! Resumes of an earlier session's children, decided at once — under the
//! store's lock, as a stop's cancel is.

use std::sync::PoisonError;

use subagents_messages::AgentId;

use crate::store::{EnvelopeStore, StoreError};

/// Resumes of an earlier session's children, decided at once.
impl EnvelopeStore {
    /// A thread is about to resume the earlier session's child `id`:
    /// `false` if it was resumed already (its envelope links a later run,
    /// or a thread of this session began a resume of it), so two threads
    /// in one instant — each reading the store before the other's link is
    /// written — cannot both go on from it; or cancelled (another thread
    /// stopped it since this one read it).
    pub(crate) fn begin_resume(&self, id: &AgentId) -> bool {
        let _io = self.lock_io();
        if self
            .get(id)
            .is_some_and(|e| e.continued_as.is_some() || e.cancelled)
        {
            return false;
        }
        self.resuming
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone())
    }

    /// A resume of `id` began ([`EnvelopeStore::begin_resume`] allowed
    /// it), its link perhaps not written yet.
    pub(crate) fn is_resuming(&self, id: &AgentId) -> bool {
        self.resuming
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(id)
    }

    /// A stop reached the earlier session's child `id` after it ended: it
    /// is cancelled for good — unless a thread began to resume it, decided
    /// under the store's lock as the resume is (a stop that read the chain
    /// before the mark, on another worker, cancelled the chain the other
    /// thread goes on with).
    pub(crate) fn cancel_unless_resuming(&self, id: &AgentId) -> Result<(), StoreError> {
        self.update(id, |e| {
            let first = e.cancellable() && !self.is_resuming(id);
            e.cancelled |= first;
            first
        })
    }

    /// The resume [`EnvelopeStore::begin_resume`] allowed did not start:
    /// true when a thread held `id`'s wake for it
    /// ([`EnvelopeStore::hold_for_resume`]) — to be offered again.
    pub(crate) fn resume_failed(&self, id: &AgentId) -> bool {
        let mut resuming = self.resuming.lock().unwrap_or_else(PoisonError::into_inner);
        resuming.remove(id);
        let mut held = (self.held_for_resume.lock()).unwrap_or_else(PoisonError::into_inner);
        held.remove(id)
    }

    /// A thread about to deliver `id`'s wake finds its resume begun, its
    /// link not landed: true when it is so — the wake is held, owed still
    /// (delivered, the chain reached two parents; settled, a resume that
    /// then failed left nobody woken, on disk too), and offered again if
    /// the resume fails. One step against [`EnvelopeStore::resume_failed`].
    pub(crate) fn hold_for_resume(&self, id: &AgentId) -> bool {
        let resuming = self.resuming.lock().unwrap_or_else(PoisonError::into_inner);
        let pending =
            resuming.contains(id) && self.get(id).is_some_and(|e| e.continued_as.is_none());
        if pending {
            let mut held = (self.held_for_resume.lock()).unwrap_or_else(PoisonError::into_inner);
            held.insert(id.clone());
        }
        pending
    }
}
