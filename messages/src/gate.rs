//! What the **ModelGate** shows: its snapshot. The gate's messages and
//! its `Permit` live with the gate (`subagents_actors::gate`), sealed.

use std::time::Duration;

/// The gate's state, as a query sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GateSnapshot {
    /// Calls allowed at once.
    pub capacity: usize,
    /// Permits held now.
    pub in_flight: usize,
    /// Waiters queued now.
    pub queued: usize,
    /// Permits granted since the gate started (sent: one whose waiter
    /// left in the tick it was sent comes straight back, counted).
    pub granted_total: u64,
    /// The longest any granted waiter waited (tokio time).
    pub longest_wait: Duration,
    /// The waits of every grant, summed (their mean is this over
    /// `granted_total`).
    pub total_wait: Duration,
    /// How many grants waited how long: bucket `i` counts waits up to
    /// [`GateSnapshot::WAIT_BUCKETS`]`[i]` (and over the one before); the
    /// last counts the longer ones. Bucket 0 is "granted on arrival".
    pub wait_histogram: [u64; 8],
}

impl GateSnapshot {
    /// The upper bounds of the first seven buckets of
    /// [`GateSnapshot::wait_histogram`]: 0, 10 ms, 100 ms, 1 s, 10 s,
    /// 60 s, 600 s; the eighth is everything longer.
    pub const WAIT_BUCKETS: [Duration; 7] = [
        Duration::ZERO,
        Duration::from_millis(10),
        Duration::from_millis(100),
        Duration::from_secs(1),
        Duration::from_secs(10),
        Duration::from_secs(60),
        Duration::from_secs(600),
    ];

    /// The bucket a wait of `waited` counts in.
    pub fn bucket_of(waited: Duration) -> usize {
        Self::WAIT_BUCKETS
            .iter()
            .position(|bound| waited <= *bound)
            .unwrap_or(Self::WAIT_BUCKETS.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_fall_in_their_buckets() {
        assert_eq!(GateSnapshot::bucket_of(Duration::ZERO), 0);
        assert_eq!(GateSnapshot::bucket_of(Duration::from_millis(1)), 1);
        assert_eq!(GateSnapshot::bucket_of(Duration::from_millis(10)), 1);
        assert_eq!(GateSnapshot::bucket_of(Duration::from_millis(11)), 2);
        assert_eq!(GateSnapshot::bucket_of(Duration::from_secs(59)), 5);
        assert_eq!(GateSnapshot::bucket_of(Duration::from_secs(601)), 7);
    }
}
