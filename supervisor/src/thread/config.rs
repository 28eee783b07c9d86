//! How a thread is set up.

use std::sync::Arc;

use subagents_actors::DelegationBuilder;

use crate::store::EnvelopeStore;

/// How a thread is set up.
pub struct ThreadConfig {
    /// The parent and its children, not yet spawned.
    pub parent: DelegationBuilder,
    /// Where children's envelopes and runs (what each was asked and its
    /// conversation) are persisted, if anywhere (docs/persistence.md).
    pub store: Option<Arc<EnvelopeStore>>,
}

impl ThreadConfig {
    /// A thread running `parent`, persisting nothing.
    pub fn new(parent: DelegationBuilder) -> Self {
        Self {
            parent,
            store: None,
        }
    }

    /// Persists every child's envelope (requested, then final) and run
    /// (what it was asked and its conversation, after each answered tool
    /// call) in `store`, and answers its ids.
    pub fn store(mut self, store: Arc<EnvelopeStore>) -> Self {
        self.store = Some(store);
        self
    }
}

impl From<DelegationBuilder> for ThreadConfig {
    fn from(parent: DelegationBuilder) -> Self {
        Self::new(parent)
    }
}
