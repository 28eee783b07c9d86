//! When and where a thread's writes run: one at a time a store on the
//! blocking pool, and pruning — each envelope write pruned, and a prune
//! reads every envelope and lists every run file under the store's lock —
//! O(N) a write, N² over a retention window, on every thread's writes (a
//! fan-out of 3,000 children on a store of 3,000 took tens of seconds of
//! the blocking pool).

use std::sync::Arc;
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
    /// Runs `write` on the blocking pool, one such write at a time for
    /// this store (every thread's writer, a close's, a delete's): they
    /// queue on the store's lock anyway, and each took a pool thread to
    /// wait there — behind a slow disk or a prune, threads' writes held
    /// the whole pool, and every other `spawn_blocking` (a host tool's,
    /// `tokio::fs`, a connection's DNS lookup) waited behind them. `None`
    /// if the write panicked.
    pub(crate) async fn off_the_runtime<R: Send + 'static>(
        self: &Arc<Self>,
        write: impl FnOnce(&EnvelopeStore) -> R + Send + 'static,
    ) -> Option<R> {
        let _turn = self.writing.acquire().await;
        let store = self.clone();
        tokio::task::spawn_blocking(move || write(&store))
            .await
            .ok()
    }

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
                // Never `u64::MAX`, the mark of none yet: a clock reading
                // it (a test's, a broken one) pruned at every write.
                .compare_exchange(
                    last,
                    now.min(u64::MAX - 1),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_err()
        {
            return None;
        }
        #[cfg(test)]
        self.schedule.count.fetch_add(1, Ordering::Relaxed);
        Some(self.prune())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use subagents_actors::clock::ManualClock;

    use crate::store::EnvelopeStore;

    /// A cost (review: surprise panics): a clock reading `u64::MAX` wrote
    /// the mark of "never pruned" as the last prune — every write pruned
    /// again, each a full prune under the store's lock.
    #[test]
    fn a_clock_at_its_end_prunes_once_a_minute_too() {
        let tmp = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(u64::MAX));
        let (store, _) = EnvelopeStore::open(tmp.path(), clock).unwrap();
        for _ in 0..3 {
            store.prune_if_due();
        }
        assert_eq!(store.schedule.count.load(Ordering::Relaxed), 1);
    }
}
