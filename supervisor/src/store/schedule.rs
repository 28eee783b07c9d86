//! When a thread's writes prune: each envelope write pruned, and a prune
//! reads every envelope and lists every run file under the store's lock —
//! O(N) a write, N² over a retention window, on every thread's writes (a
//! fan-out of 3,000 children on a store of 3,000 took tens of seconds of
//! the blocking pool).

use std::sync::atomic::{AtomicU64, Ordering};

use super::{EnvelopeStore, PruneReport};

/// A thread's writes prune at most this often by the store's clock (or a
/// hundredth of the retention, when that is shorter).
const PRUNE_EVERY_MS: u64 = 60_000;

/// When the store last pruned, by its clock.
#[derive(Debug)]
pub(crate) struct PruneSchedule {
    last_ms: AtomicU64,
    /// Prunes run through [`EnvelopeStore::prune_if_due`] (this crate's
    /// tests count them).
    #[cfg(test)]
    pub(crate) count: AtomicU64,
}

impl Default for PruneSchedule {
    fn default() -> Self {
        Self {
            last_ms: AtomicU64::new(u64::MAX),
            #[cfg(test)]
            count: AtomicU64::new(0),
        }
    }
}

impl EnvelopeStore {
    /// Prunes ([`EnvelopeStore::prune`]) unless a prune ran less than a
    /// minute ago by the store's clock (a hundredth of the retention, when
    /// shorter); a clock set back prunes at once. Of writers racing, one
    /// prunes. What expires between two prunes stays until the next write
    /// past that minute (or the next open: a store left idle keeps it).
    pub(crate) fn prune_if_due(&self) -> Option<PruneReport> {
        let now = self.clock.now_ms();
        let every = u64::try_from(self.retention.as_millis() / 100)
            .unwrap_or(u64::MAX)
            .min(PRUNE_EVERY_MS);
        let last = self.schedule.last_ms.load(Ordering::Acquire);
        let due = last == u64::MAX || now < last || now - last >= every;
        if !due
            || self
                .schedule
                .last_ms
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return None;
        }
        #[cfg(test)]
        self.schedule.count.fetch_add(1, Ordering::Relaxed);
        Some(self.prune())
    }
}
