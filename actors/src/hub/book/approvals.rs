//! What the book knows of a child's approvals once it ended: how an
//! answer to one of them is refused.

use subagents_messages::{AgentId, ApprovalId, ApprovalRefusal};

use crate::hub::book::Book;

impl Book {
    /// Its children number their approvals after `n` (the thread's block).
    pub(crate) fn set_approvals_after(&self, n: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.counters.approvals_after.store(n, Relaxed);
    }

    /// How many approvals `id` asked for (its last one's number; 0: none).
    pub(crate) fn approvals_asked(&self, id: &AgentId) -> u64 {
        self.entries.get(id).map_or(0, |e| e.approvals_asked)
    }

    /// Why an answer to `id`'s approval `n` is refused once it ended: how
    /// it was answered, or `Ended` for one it asked and nobody answered,
    /// or `Unknown` for a number it never reached.
    pub(crate) fn approval_refusal(
        &self,
        id: ApprovalId,
        owner: &AgentId,
        n: u64,
    ) -> ApprovalRefusal {
        let Some(entry) = self.entries.get(owner) else {
            return ApprovalRefusal::Unknown(id);
        };
        // From its block's first number: in a block past 0, a number
        // under it was never asked (it read `Ended`, a request the child
        // never made).
        let first = self
            .counters
            .approvals_after
            .load(std::sync::atomic::Ordering::Relaxed)
            .saturating_add(1);
        if !(first..=entry.approvals_asked).contains(&n) {
            return ApprovalRefusal::Unknown(id);
        }
        match entry
            .approvals_answered
            .iter()
            .find(|(asked, _)| *asked == n)
        {
            Some((_, decision)) => ApprovalRefusal::AlreadyAnswered {
                id,
                decision: *decision,
            },
            None => ApprovalRefusal::Ended(id),
        }
    }
}
