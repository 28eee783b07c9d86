//! Envelopes leaving the store (past the retention), or out of every
//! thread's reach (a deleted thread's).

use std::fs;
use std::io;
use std::sync::PoisonError;

use subagents_messages::{AgentId, ThreadId};

use crate::store::EnvelopeStore;
use crate::store::files::{is_expired, sync_dir_best_effort};
use crate::store::report::{PruneReport, StoreError};

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
        expired.sort();

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
            report.removed.push(id);
        }
        report.runs_removed = self.prune_orphan_runs(now);
        if !report.removed.is_empty() {
            // Gone from the restart list too: listed, it named a child the
            // store no longer has, and the first thread shown (any
            // conversation: a missing envelope belongs to every thread)
            // woke its parent for "0 sub-agent(s) interrupted".
            self.interrupted
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .retain(|id| !report.removed.contains(id));
            // And from the owed wakes: listed, a pruned child was taken by
            // the first thread shown and settled with no wake sent.
            self.owed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .retain(|id| !report.removed.contains(id));
            sync_dir_best_effort(&self.dir);
            tracing::debug!(
                count = report.removed.len(),
                now_ms = now,
                "pruned expired envelopes"
            );
        }
        report
    }

    /// Marks every child `thread` wrote as forgotten, in memory and on
    /// disk: the host deleted that conversation. Kept reachable, a thread
    /// opened again under its id — or, after a restart, whichever thread
    /// had it — read, claimed and resumed them (their ids are `agent_1`,
    /// …: a model guesses them). Their files stay, final, until the
    /// retention prunes them; no thread reaches them or is woken for them.
    /// Each is changed through [`EnvelopeStore::update`], the io lock
    /// taken per envelope: held across them all, another thread's hub
    /// waited on it in its handler (a resume's check) for every write.
    pub(crate) fn forget_thread(&self, thread: &ThreadId) -> Vec<StoreError> {
        let mut own: Vec<AgentId> = self
            .map
            .iter()
            .filter(|e| e.value().thread.as_ref() == Some(thread) && !e.value().forgotten)
            .map(|e| e.key().clone())
            .collect();
        own.sort();
        own.iter()
            .filter_map(|id| {
                self.update(id, |e| !std::mem::replace(&mut e.forgotten, true))
                    .err()
            })
            .collect()
    }
}
