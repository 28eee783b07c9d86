//! One live thread per id on a store. Which thread a child is, and so
//! who takes its wake, reads and resumes it and whose delete forgets it,
//! is its thread id alone: two live threads of one id on one store (two
//! registries, a user's two windows, `ThreadHandle::spawn` with an id) took
//! each other's wakes after a restart, and one's delete forgot the other's
//! running children. A registry refused a second open of an id it held;
//! the store refuses it across registries — and waits for a thread of the
//! id that is closing (its handle's `close` called), as a registry does.

use std::sync::{Arc, Mutex, PoisonError};

use subagents_messages::{AgentId, ThreadId};

use crate::store::EnvelopeStore;

/// The threads live on a store: each id's closing flag (its handles').
pub(crate) type Live = Mutex<rustc_hash::FxHashMap<ThreadId, Arc<Mutex<bool>>>>;

/// A thread id held live on a store, let go when dropped (the thread
/// stopped, or its spawn failed).
pub(crate) struct LiveThread {
    store: Arc<EnvelopeStore>,
    id: ThreadId,
    closing: Arc<Mutex<bool>>,
}

impl std::fmt::Debug for LiveThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LiveThread").field(&self.id).finish()
    }
}

impl Drop for LiveThread {
    fn drop(&mut self) {
        let mut live = self
            .store
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if live
            .get(&self.id)
            .is_some_and(|c| Arc::ptr_eq(c, &self.closing))
        {
            live.remove(&self.id);
        }
        drop(live);
        self.store.released.notify_waiters();
    }
}

impl EnvelopeStore {
    /// Holds `id` live on `store`, `closing` its handles' flag; `None`
    /// while another thread of the id is open. One closing is waited for.
    pub(crate) async fn claim_thread(
        store: &Arc<Self>,
        id: &ThreadId,
        closing: &Arc<Mutex<bool>>,
    ) -> Option<LiveThread> {
        loop {
            let released = store.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            {
                let mut live = store.live.lock().unwrap_or_else(PoisonError::into_inner);
                match live.get(id) {
                    None => {
                        live.insert(id.clone(), closing.clone());
                        return Some(LiveThread {
                            store: store.clone(),
                            id: id.clone(),
                            closing: closing.clone(),
                        });
                    }
                    Some(other) if !*other.lock().unwrap_or_else(PoisonError::into_inner) => {
                        return None;
                    }
                    Some(_) => {}
                }
            }
            released.await;
        }
    }
}

/// Whose a child is.
impl EnvelopeStore {
    /// The child `id`'s wakes are `thread`'s to take: its envelope names
    /// that thread, or none (a thread opened without an id wrote it, or a
    /// file from before threads were kept: the first thread shown takes
    /// those, as every thread did before). A deleted thread's child is no
    /// thread's ([`Envelope::forgotten`](subagents_messages::Envelope::forgotten)).
    pub(super) fn belongs(&self, id: &AgentId, thread: Option<&ThreadId>) -> bool {
        // In place: a copy each (its result whole) cost what the store held.
        self.map
            .get(id)
            .is_none_or(|e| !e.forgotten && (e.thread.is_none() || e.thread.as_ref() == thread))
    }

    /// The child `id` is one of an earlier session that `thread` may read,
    /// claim or resume: its own, or one written for no thread.
    pub(crate) fn reaches(&self, id: &AgentId, thread: Option<&ThreadId>) -> bool {
        self.is_from_earlier_session(id) && self.belongs(id, thread)
    }
}
