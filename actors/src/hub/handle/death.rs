//! A dead hub's children, failed by whoever asks first once it is dead
//! (not while it stops: a stopping hub ends them itself).

use std::sync::Arc;

use subagents_messages::{AgentId, Envelope};

use crate::hub::HubHandle;
use crate::hub::config::EnvelopeArchive;
use crate::hub::handle::HUB_GONE;

impl HubHandle {
    /// After the hub actor is gone (it crashed or was killed; its status
    /// is `Stopped`): every child that had not ended becomes `failed`
    /// ("the sub-agent hub stopped before the sub-agent ended"), stamped
    /// now. Returns the final envelopes of every child the hub's death
    /// failed, in request order — the same list to every caller, whoever
    /// called first. Does nothing (and returns nothing) while the hub
    /// runs, or while it stops (`Stopping`, its `post_stop`): a live or
    /// stopping hub ends its children itself.
    ///
    /// A ractor host's supervision handler reads the hub's termination a
    /// moment before ractor says `Stopped` (on another worker it may get
    /// nothing here): await [`actor().wait(None)`](ractor::ActorCell::wait)
    /// first, or take the list from its observers (a hub's death tells
    /// them of each child it failed).
    pub fn fail_unfinished(&self) -> Vec<Envelope> {
        self.fail_if_dead(false)
    }

    /// [`HubHandle::fail_unfinished`] for a caller that read ractor's
    /// termination event for the hub, sent while its status still says
    /// `Stopping`.
    #[doc(hidden)] // used by subagents-supervisor's supervision handler
    pub fn fail_unfinished_exited(&self) -> Vec<Envelope> {
        self.fail_if_dead(true)
    }

    fn fail_if_dead(&self, exited: bool) -> Vec<Envelope> {
        if !self.book.is_dead(self.actor.get_status(), exited) {
            return Vec::new();
        }
        self.book.fail_unfinished(HUB_GONE, self.clock.now_ms())
    }

    /// After the hub's death (its archive link gone with it), a stop of
    /// `id` as the live hub's: its newest run — resume links followed
    /// through the book and `archive` — cancelled if it ended, in the
    /// book (which the thread's close writes) and in `archive`. Its
    /// envelope; `None` for an id neither holds, or one another thread
    /// is resuming — and while the hub's actor has not stopped (a host
    /// calling it on a live hub cancelled a child in the book alone).
    /// `observers` (the host's, which died with the hub's state) are told
    /// of a change to its book, as a live hub's stop tells them (a host
    /// persisting through its observer kept the child resumable). Not
    /// kept in the handle: an observer holding its thread's handle would
    /// hold itself, the thread's book with it, for good.
    #[doc(hidden)] // used by subagents-supervisor's `stop_child`
    pub fn cancel_after_death(
        &self,
        id: &AgentId,
        archive: Option<Arc<dyn EnvelopeArchive>>,
        observers: &[Arc<dyn crate::hub::HubObserver>],
    ) -> Option<Envelope> {
        if self.actor.get_status() != ractor::ActorStatus::Stopped {
            return None;
        }
        let newest = self.book.newest_run(id, || archive.clone());
        // One another thread is resuming, its link not written yet: not
        // this thread's to stop, as the live hub answers (a stop here read
        // `Done` while the other thread's run went on).
        if archive
            .as_ref()
            .is_some_and(|a| self.book.is_terminal(&newest) && a.resuming(&newest))
        {
            return None;
        }
        if self.book.contains(&newest) {
            crate::hub::stop::cancel_ended_in(&self.book, archive.as_ref(), observers, &newest);
            return self.book.get(&newest);
        }
        let archive = archive?;
        let envelope = archive.get(&newest)?;
        archive.cancel(&newest);
        Some(archive.get(&newest).unwrap_or(envelope))
    }
}
