//! How a thread is set up.

use std::sync::Arc;

use subagents_actors::DelegationBuilder;
use subagents_messages::ThreadId;

use crate::store::{EnvelopeStore, LiveThread};
use crate::thread::ThreadError;

/// How far behind its store's clock a builder's may read before the two
/// are taken for different clocks ([`ThreadError::ClockBehindStore`]).
const CLOCKS_APART_MS: u64 = 60_000;

/// How a thread is set up.
pub struct ThreadConfig {
    /// The parent and its children, not yet spawned.
    pub parent: DelegationBuilder,
    /// Where children's envelopes and runs (what each was asked and its
    /// conversation) are persisted, if anywhere (docs/persistence.md).
    pub store: Option<Arc<EnvelopeStore>>,
    /// The thread's id in its store: every envelope it writes names it
    /// ([`Envelope::thread`](subagents_messages::Envelope::thread)), and
    /// after a restart only a thread of this id is woken for those
    /// children. [`Threads::open`](crate::Threads::open) sets it. Without
    /// one, the thread's children belong to no thread: their wakes go to
    /// the first thread shown on the store.
    pub id: Option<ThreadId>,
}

impl ThreadConfig {
    /// A thread running `parent`, persisting nothing.
    pub fn new(parent: DelegationBuilder) -> Self {
        Self {
            parent,
            store: None,
            id: None,
        }
    }

    /// Persists every child's envelope (requested, then final) and run
    /// (what it was asked and its conversation, at each step: an answer
    /// asking for calls, a call answered, a message taken) in `store`,
    /// and answers its ids.
    pub fn store(mut self, store: Arc<EnvelopeStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Names the thread in its store (see [`ThreadConfig::id`]).
    pub fn id(mut self, id: ThreadId) -> Self {
        self.id = Some(id);
        self
    }
}

impl ThreadConfig {
    /// What refuses a spawn before anything starts: the builder's own
    /// check, a clock behind its store's, an id live on the store already
    /// (another registry's, a second window's: they took each other's
    /// wakes, and one's delete forgot the other's children) — one closing
    /// is waited for. The id held live is let go when the thread stops.
    pub(crate) async fn admit(
        &self,
        closing: &Arc<std::sync::Mutex<bool>>,
    ) -> Result<Option<LiveThread>, ThreadError> {
        self.parent.check().map_err(ThreadError::Refused)?;
        // Two clocks apart, not one read twice: a minute's slack (with a
        // retention of zero, a millisecond between the two reads of one
        // clock refused the spawn at random).
        let stamped_ms = self.parent.stamps_now_ms();
        let Some(store) = &self.store else {
            return Ok(None);
        };
        if !store.retains(stamped_ms.saturating_add(CLOCKS_APART_MS)) {
            return Err(ThreadError::ClockBehindStore { stamped_ms });
        }
        let Some(id) = &self.id else {
            return Ok(None);
        };
        EnvelopeStore::claim_thread(store, id, closing)
            .await
            .map(Some)
            .ok_or_else(|| ThreadError::AlreadyOpen(id.clone()))
    }
}

impl From<DelegationBuilder> for ThreadConfig {
    fn from(parent: DelegationBuilder) -> Self {
        Self::new(parent)
    }
}
