//! What a book's clones share besides its entries: the queue's counter,
//! the hub's own stop, the kill's lock, and the finish stamps' order.

/// How far past the clock a finish stamp may be put to keep the order
/// children finished in: a minute (a clock stepped back further is
/// believed).
const STAMP_SLACK_MS: u64 = 60_000;

/// What a book's clones share besides its entries (one allocation).
#[derive(Debug, Default)]
pub(super) struct Counters {
    /// The next child's place in the queue.
    pub(super) next_queued: std::sync::atomic::AtomicU64,
    /// The hub is in its `post_stop`, ending its children itself
    /// ([`Book::stopping_itself`](super::Book::stopping_itself)).
    pub(super) stopping_itself: std::sync::atomic::AtomicBool,
    /// No wake will come any more ([`Book::drop_run_spans`](super::Book::drop_run_spans)
    /// ran): a child finishing after keeps no run span.
    pub(super) no_wakes: std::sync::atomic::AtomicBool,
    /// Held while the children's turns are ended as killed: one caller at
    /// a time (see `Book::end_turns_as_killed`).
    pub(super) ending_killed: std::sync::Mutex<()>,
    /// The least the next finish stamp may read: one past the last given
    /// (see [`Counters::finish_stamp`]).
    next_finish_ms: std::sync::atomic::AtomicU64,
    /// The number every child's approvals follow (the thread's block):
    /// set once, at the hub's spawn.
    pub(super) approvals_after: std::sync::atomic::AtomicU64,
}

impl Counters {
    /// A finish stamp for a child ending now (`now_ms` by the clock):
    /// strictly past the last one given, so the stamps read in the order
    /// the children finished — the order a restart delivers the wakes its
    /// last process owed. A clock that stood still (two finishes in one
    /// millisecond, which then went by number) or stepped back between
    /// two finishes put the later one first. Past the last by
    /// [`STAMP_SLACK_MS`] at most: a clock that read far ahead once (set
    /// back since) stamped every later finish of the thread in its future,
    /// and none was pruned until then.
    pub(super) fn finish_stamp(&self, now_ms: u64) -> u64 {
        use std::sync::atomic::Ordering::SeqCst;
        let stamp = |least: u64| match least.checked_sub(now_ms) {
            Some(behind) if behind <= STAMP_SLACK_MS => least,
            _ => now_ms,
        };
        let least = self
            .next_finish_ms
            .fetch_update(SeqCst, SeqCst, |least| Some(stamp(least).saturating_add(1)))
            .unwrap_or_else(|least| least);
        stamp(least)
    }
}
