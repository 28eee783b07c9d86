//! How a thread is set up.

use std::sync::Arc;

use subagents_actors::DelegationBuilder;
use subagents_messages::ThreadId;

use crate::store::EnvelopeStore;

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
    /// (what it was asked and its conversation, after each answered tool
    /// call) in `store`, and answers its ids.
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

impl From<DelegationBuilder> for ThreadConfig {
    fn from(parent: DelegationBuilder) -> Self {
        Self::new(parent)
    }
}
