//! The store's envelopes listed and counted.

use subagents_messages::Envelope;

use crate::store::EnvelopeStore;

impl EnvelopeStore {
    /// Every envelope, in child-number order (`agent_2` before
    /// `agent_10`, as a hub's envelopes and the restart list are), then
    /// ids of another shape as text.
    pub fn all(&self) -> Vec<Envelope> {
        let mut all: Vec<Envelope> = self.map.iter().map(|e| e.value().clone()).collect();
        let number = |e: &Envelope| {
            let n = e.id.as_str().strip_prefix("agent_")?;
            n.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| n.parse::<u64>().ok())?
        };
        all.sort_by(|a, b| {
            let key = |e| (number(e).is_none(), number(e));
            key(a).cmp(&key(b)).then_with(|| a.id.cmp(&b.id))
        });
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
