//! Wall-clock stamps, injectable. Only stamps (envelope timestamps, the
//! 24 h pruning) use it; all waiting goes through tokio time. It is read
//! in the hub's handler and under the store's lock: it must answer at
//! once (never block, never call back into the runtime).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of wall-clock time, in milliseconds since the Unix epoch.
/// Read in the hub's handler and under the store's lock: `now_ms` must
/// answer at once, never block or call back into the runtime. One given
/// to `DelegationBuilder::clock` or a store's open that panics is read
/// as its last good reading (0 before any), with a warning.
pub trait Clock: Send + Sync + 'static {
    /// Now.
    fn now_ms(&self) -> u64;
}

/// The system's clock (the default).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

/// A clock that moves only when told: for tests (jumps forward and back).
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    /// A clock reading `now_ms`.
    pub fn new(now_ms: u64) -> Self {
        Self {
            now: AtomicU64::new(now_ms),
        }
    }

    /// Sets the reading.
    pub fn set(&self, now_ms: u64) {
        self.now.store(now_ms, Ordering::SeqCst);
    }

    /// Moves the reading forward by `ms`, to `u64::MAX` at most (it
    /// wrapped: past the top, a test meaning a jump forward tested one
    /// back).
    pub fn advance(&self, ms: u64) {
        let _ = self
            .now
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| {
                Some(now.saturating_add(ms))
            });
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}

/// `clock`, read so that a panic in it is not the reader's: the last good
/// reading (0 before any) stands in, with a warning. A host's clock is
/// read in the hub's handler, in its drop and in the thread's supervision
/// handler: one that panicked took the hub down (every later delegation
/// refused), or, between a child's `done` on the stream and its book
/// entry, recorded that child `failed` with its answer lost and no wake.
#[doc(hidden)] // applied by `DelegationBuilder::clock` and the store's open
pub fn guarded(clock: Arc<dyn Clock>) -> Arc<dyn Clock> {
    Arc::new(Guarded {
        clock,
        last: AtomicU64::new(0),
    })
}

/// See [`guarded`].
struct Guarded {
    clock: Arc<dyn Clock>,
    last: AtomicU64,
}

impl Clock for Guarded {
    fn now_ms(&self) -> u64 {
        match catch_unwind(AssertUnwindSafe(|| self.clock.now_ms())) {
            Ok(now) => {
                self.last.store(now, Ordering::Relaxed);
                now
            }
            Err(panic) => {
                crate::panics::dispose(panic);
                let last = self.last.load(Ordering::Relaxed);
                tracing::warn!(
                    last_ms = last,
                    "the host's clock panicked: its last reading stands in"
                );
                last
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Clock, ManualClock};

    /// Boundary value (review: time): `advance` wrapped past `u64::MAX`.
    #[test]
    fn a_manual_clock_advanced_past_the_top_stays_there() {
        let clock = ManualClock::new(u64::MAX - 1);
        clock.advance(2);
        assert_eq!(clock.now_ms(), u64::MAX);
    }
}
