//! What a thread shares with its handles and its writer, read without
//! the thread: its failed writes, and the host's delete.

use std::sync::{Arc, Mutex, PoisonError};

/// The thread's failed writes, each named once (a prune that fails on
/// every write is listed once), shared by the thread, its writer and every
/// handle: read without the thread, so a close's own failed writes — the
/// final envelopes — are still told once it has gone. Each is marked with
/// the last time it failed, so a failure that comes again (a write that
/// failed earlier and fails at the close too) is one a caller asking
/// "since when" hears of. It also carries the host's delete, set by the
/// handle where the thread's close reads it: a message sent with a close
/// in flight was dropped by the stopping actor.
#[derive(Debug, Clone, Default)]
pub(crate) struct PersistErrors(Arc<Mutex<Failures>>);

#[derive(Debug, Default)]
struct Failures {
    /// Each failure, in the order first seen, with the number of the last
    /// push that named it.
    named: Vec<(String, u64)>,
    /// Pushes so far.
    pushes: u64,
    /// Deleted by the host (`Threads::delete`): its children are forgotten
    /// as it closes.
    deleted: bool,
    /// The close has read `deleted` (its last look): a mark after it is
    /// the delete's to carry out.
    read: bool,
    /// The close carried out what it read (forgot the children if it was
    /// marked): not after a kill, before or during it — ractor skips, or
    /// drops at an await, a killed actor's `post_stop`.
    settled: bool,
}

impl PersistErrors {
    /// Notes a failed write (logged).
    pub(crate) fn push(&self, error: String) {
        tracing::error!(%error, "an envelope or run could not be persisted; it stays in memory");
        let mut failures = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        failures.pushes += 1;
        let at = failures.pushes;
        match failures.named.iter_mut().find(|(named, _)| *named == error) {
            Some((_, last)) => *last = at,
            None => failures.named.push((error, at)),
        }
    }

    /// Marks the thread deleted (`Threads::delete`): `true` if its close
    /// will read the mark (and forget its children, unless it is killed
    /// first: [`Self::is_settled`]); `false` if the close has read it
    /// already (the thread closed by itself, or its close got there first
    /// on another worker) — the delete forgets them itself. One step
    /// against the close's read: no mark lands between.
    pub(crate) fn mark_deleted(&self) -> bool {
        let mut failures = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        failures.deleted = true;
        !failures.read
    }

    /// The close's last look at the mark: marked deleted by the host. A
    /// mark after it is [`Self::mark_deleted`]'s `false`.
    pub(crate) fn read_deleted(&self) -> bool {
        let mut failures = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        failures.read = true;
        failures.deleted
    }

    /// The close carried out what it read ([`Self::read_deleted`]).
    pub(crate) fn settle(&self) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .settled = true;
    }

    /// The close read the mark and carried it out (`false` after a kill).
    pub(crate) fn is_settled(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .settled
    }

    /// Every failed write so far, in the order first seen.
    pub(crate) fn list(&self) -> Vec<String> {
        let failures = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        failures.named.iter().map(|(e, _)| e.clone()).collect()
    }

    /// Where the failures are now: [`Self::since`] names what fails after.
    pub(crate) fn mark(&self) -> u64 {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).pushes
    }

    /// The failures named (again) after `mark`, in the order first seen.
    pub(crate) fn since(&self, mark: u64) -> Vec<String> {
        let failures = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        failures
            .named
            .iter()
            .filter(|(_, last)| *last > mark)
            .map(|(e, _)| e.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::PersistErrors;

    /// A delete's mark before the close's look is the close's to carry
    /// out; one after it is the delete's (review: a host's calls made
    /// late, thirty-seventh session — a mark landing after the close's
    /// one read was read by nobody: `Ok`, nothing forgotten).
    #[test]
    fn a_mark_after_the_closes_look_is_the_deletes() {
        let before = PersistErrors::default();
        assert!(before.mark_deleted(), "the close will read it");
        assert!(before.read_deleted());
        let after = PersistErrors::default();
        assert!(!after.read_deleted());
        assert!(!after.mark_deleted(), "nobody reads it now");
    }
}
