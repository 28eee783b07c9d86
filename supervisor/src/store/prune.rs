//! Envelopes leaving the store (past the retention), or out of every
//! thread's reach (a deleted thread's).

use std::fs;
use std::io;
use std::sync::PoisonError;

use subagents_messages::{AgentId, ThreadId};

use crate::store::EnvelopeStore;
use crate::store::files::{is_expired, sync_dir_best_effort};
use crate::store::listing::child_order;
use crate::store::report::{PruneReport, StoreError};

/// How long a forgotten thread's mark is kept at least, whatever the
/// retention: longer than any writer drains.
const FORGET_MARK_AT_LEAST: std::time::Duration = std::time::Duration::from_secs(3600);

impl EnvelopeStore {
    /// Removes, from memory and disk, every finished envelope (and its
    /// run) older than the retention by the injected clock; an unfinished
    /// one is never removed. Future-dated envelopes are kept;
    /// see the module docs on clock jumps.
    pub fn prune(&self) -> PruneReport {
        let _io = self.lock_io();
        let now = self.clock.now_ms();
        let mut expired: Vec<AgentId> = self
            .map
            .iter()
            // A child that has not finished is running (or queued): never
            // pruned; it ages from its end. (An earlier session's were
            // made `interrupted` by the open, ending then.)
            .filter(|e| {
                e.value().status.is_terminal() && is_expired(e.value(), now, self.retention)
            })
            .map(|e| e.key().clone())
            .collect();
        // In child-number order: a removal that fails is listed in it.
        expired.sort_by(|a, b| child_order(a).cmp(&child_order(b)));
        // A deleted conversation's mark, kept for a writer still draining
        // (none drains for the retention, or an hour: a retention of 0 let
        // it go at once): one per delete, for the store's life, was the
        // only thing a delete left behind.
        let kept = self.retention.max(FORGET_MARK_AT_LEAST).as_millis();
        (self.forgotten_threads.lock())
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|_, at| {
                now.checked_sub(*at)
                    .is_none_or(|age| u128::from(age) <= kept)
            });

        let mut report = PruneReport::default();
        // A file whose number cannot be kept first is kept itself.
        let mut unkept = (!expired.is_empty())
            .then(|| self.keep_child_numbers(&expired).err())
            .flatten();
        let keep_files = unkept.is_some();
        for id in expired {
            let path = self.path_of(&id);
            if keep_files && fs::symlink_metadata(&path).is_ok() {
                report.failed.extend(unkept.take());
                continue;
            }
            match fs::remove_file(&path) {
                Ok(()) => {}
                // Never persisted (its save failed): nothing on disk.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => {
                    tracing::warn!(
                        path = %path.display(),
                        error = %source,
                        "could not remove expired envelope file"
                    );
                    report.failed.push(StoreError::Remove { path, source });
                    continue;
                }
            }
            self.map.remove(&id);
            self.remove_run(&id);
            self.forget_unsaved(&id);
            // Nobody reaches or resumes it now (kept, one id per child of
            // every closed thread stayed for the store's life).
            (self.earlier.write().unwrap_or_else(PoisonError::into_inner)).remove(&id);
            (self.resuming.lock().unwrap_or_else(PoisonError::into_inner)).remove(&id);
            (self.held_for_resume.lock())
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
            report.removed.push(id);
        }
        self.prune_other_versions(now, &mut report);
        report.runs_removed = self.prune_orphan_runs(now);
        // In child-number order, another version's removals among them
        // (listed in the directory's order): the hub's and the listing's.
        let by_child = |a: &AgentId, b: &AgentId| child_order(a).cmp(&child_order(b));
        report.removed.sort_by(by_child);
        report.runs_removed.sort_by(by_child);
        if !report.removed.is_empty() {
            // Gone from the restart list too: listed, it named a child the
            // store no longer has, and the first thread shown (any
            // conversation: a missing envelope belongs to every thread)
            // woke its parent for "0 sub-agent(s) interrupted".
            // And from the owed wakes: listed, a pruned child was taken by
            // the first thread shown and settled with no wake sent.
            self.unlist(&report.removed);
            sync_dir_best_effort(&self.dir);
            tracing::debug!(
                count = report.removed.len(),
                now_ms = now,
                "pruned expired envelopes"
            );
        }
        report
    }

    /// Removes the envelopes of another version the open left unread (and
    /// their runs) once their files are twice the retention old by this
    /// store's clock: this version cannot read their stamps, and left for
    /// good — a rollback from a later version — they outlived the
    /// retention for as long as this version ran. Twice: the version that
    /// wrote one would have pruned it by then if it finished, and an
    /// unfinished one ages from its last write (its run's, if later).
    fn prune_other_versions(&self, now: u64, report: &mut PruneReport) {
        let mut others = (self.other_versions.lock()).unwrap_or_else(PoisonError::into_inner);
        // Read in the directory's order (the file system's): a removal
        // that fails is listed in child-number order.
        others.sort_by(|a, b| child_order(a).cmp(&child_order(b)));
        let age = |path: &std::path::Path| {
            let written = fs::symlink_metadata(path).and_then(|m| m.modified()).ok()?;
            let at = written.duration_since(std::time::UNIX_EPOCH).ok()?;
            // Written after the clock's now (future-dated): no age yet.
            Some(u128::from(now).saturating_sub(at.as_millis()))
        };
        others.retain(|id| {
            let path = self.path_of(id);
            // From its last write, the envelope's or its run's (a running
            // child's run is written at each step, its envelope not).
            let run = self.run_path(id);
            let expired = match fs::symlink_metadata(&path) {
                // Gone (removed by hand, or its version took it back).
                Err(e) if e.kind() == io::ErrorKind::NotFound => return false,
                _ => (age(&path).into_iter().chain(age(&run)).min())
                    .is_some_and(|age| age > 2 * self.retention.as_millis()),
            };
            // Its number kept first: no name gives it once removed.
            if !expired || self.keep_child_numbers([id]).is_err() {
                return true;
            }
            if let Err(source) = fs::remove_file(&path) {
                report.failed.push(StoreError::Remove { path, source });
                return true;
            }
            let _ = fs::remove_file(run);
            report.removed.push(id.clone());
            false
        });
    }

    /// Takes `ids` off the restart list and the owed wakes.
    fn unlist(&self, ids: &[AgentId]) {
        self.interrupted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|id| !ids.contains(id));
        self.owed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|id| !ids.contains(id));
    }

    /// Marks every child `thread` wrote as forgotten, in memory and on
    /// disk: the host deleted that conversation. Kept reachable, a thread
    /// opened again under its id — or, after a restart, whichever thread
    /// had it — read, claimed and resumed them (their ids are `agent_1`,
    /// …: a model guesses them). Their files stay, final, until the
    /// retention prunes them; no thread reaches them or is woken for them.
    /// Each is changed through `EnvelopeStore::update`, the io lock
    /// taken per envelope: held across them all, another thread's hub
    /// waited on it in its handler (a resume's check) for every write.
    ///
    /// [`Threads::delete`](crate::Threads::delete) calls it for an open
    /// thread; a host deleting a conversation that is not open (after a
    /// restart, most are) calls it itself — opening one to delete it ran a
    /// turn for its wakes and stopped the children of the thread on
    /// screen. A conversation open on the store (another registry's, a
    /// window's) is refused, [`StoreError::ThreadOpen`]: its later writes
    /// name it still, and its running children were forgotten under it; a
    /// thread of the id opened meanwhile waits until this returns. Returns
    /// the writes that failed.
    pub fn forget_thread(&self, thread: &ThreadId) -> Result<Vec<StoreError>, StoreError> {
        let _held = self
            .hold_for_forget(thread)
            .ok_or_else(|| StoreError::ThreadOpen {
                path: self.dir.clone(),
                thread: thread.clone(),
            })?;
        Ok(self.forget_now(thread))
    }

    /// [`EnvelopeStore::forget_thread`], for the thread itself as it
    /// stops (it holds the id): its children's envelopes marked, and
    /// taken off the restart list and the owed wakes — listed, no thread
    /// would ever take them.
    pub(crate) fn forget_now(&self, thread: &ThreadId) -> Vec<StoreError> {
        // Marked first: a write landing meanwhile lands forgotten.
        self.forgotten_threads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(thread.clone(), self.clock.now_ms());
        let mut own: Vec<AgentId> = self
            .map
            .iter()
            .filter(|e| e.value().thread.as_ref() == Some(thread) && !e.value().forgotten)
            .map(|e| e.key().clone())
            .collect();
        // In child-number order: a write that fails is listed in it.
        own.sort_by(|a, b| child_order(a).cmp(&child_order(b)));
        let failed = own
            .iter()
            .filter_map(|id| {
                self.update(id, |e| !std::mem::replace(&mut e.forgotten, true))
                    .err()
            })
            .collect();
        self.unlist(&own);
        failed
    }
}

#[cfg(test)]
mod tests;
