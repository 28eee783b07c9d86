//! One live thread per id on a store. Which thread a child is, and so
//! who takes its wake, reads and resumes it and whose delete forgets it,
//! is its thread id alone: two live threads of one id on one store (two
//! registries, a user's two windows, `ThreadHandle::spawn` with an id) took
//! each other's wakes after a restart, and one's delete forgot the other's
//! running children. A registry refused a second open of an id it held;
//! the store refuses it across registries — and waits for a thread of the
//! id that is closing (its handle's `close` called), as a registry does.

use std::sync::{Arc, Mutex, PoisonError};

use subagents_messages::ThreadId;

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
