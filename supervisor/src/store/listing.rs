//! The store's envelopes listed and counted.

use subagents_actors::hub::ChildIds;
use subagents_messages::{AgentId, Envelope};

use crate::store::EnvelopeStore;

impl EnvelopeStore {
    /// Every envelope, in child-number order (`agent_2` before
    /// `agent_10`, as a hub's envelopes and the restart list are), then
    /// ids of another shape as text.
    pub fn all(&self) -> Vec<Envelope> {
        let mut all: Vec<Envelope> = self.map.iter().map(|e| e.value().clone()).collect();
        all.sort_by(|a, b| child_order(&a.id).cmp(&child_order(&b.id)));
        all
    }

    /// How many envelopes are known.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// No envelope is known.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Child-number order (`agent_2` before `agent_10`), then ids no hub
/// numbered (`agent_012`, a host's `notes`) as text: the order of a hub's
/// envelopes. A leading zero was read as a number here and not by the
/// hub, and the restart list sorted by length: three orders for one id.
pub(crate) fn child_order(id: &AgentId) -> (bool, Option<u64>, &str) {
    let number = ChildIds::number(id);
    (number.is_none(), number, id.as_str())
}
