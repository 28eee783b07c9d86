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
    /// Permits granted since the gate started.
    pub granted_total: u64,
    /// The longest any granted waiter waited (tokio time).
    pub longest_wait: Duration,
}
