//! Runs on disk: what each child was asked and its conversation so far,
//! in `runs/<id>.json` beside its envelope — written when it starts, after
//! each tool call and when it ends, atomically like envelopes — so a child
//! that was running when the process died is `interrupted` at the next
//! open and a message resumes it from there (docs/lifecycle.md).

use std::fs;
use std::path::PathBuf;
use std::sync::PoisonError;

use subagents_actors::hub::ChildIds;
use subagents_messages::{AgentId, ChatMessage, ChildRequest, Envelope};

use crate::store::envelopes::EnvelopeStore;
use crate::store::files::{file_name_for, is_temp_name, json_text, named_child, write_atomic};
use crate::store::listing::child_order;
use crate::store::report::StoreError;

/// Writes whose last attempt failed.
#[derive(Default)]
pub(super) struct Unsaved {
    pub(super) envelopes: std::collections::BTreeSet<AgentId>,
    pub(super) runs: std::collections::BTreeMap<AgentId, (ChildRequest, Vec<ChatMessage>)>,
}

impl EnvelopeStore {
    pub(super) fn run_path(&self, id: &AgentId) -> PathBuf {
        self.dir.join("runs").join(file_name_for(id))
    }

    /// Writes what `id` was asked and its conversation so far to
    /// `runs/<id>.json`, atomically.
    pub fn save_run(
        &self,
        id: &AgentId,
        request: &ChildRequest,
        conversation: &[ChatMessage],
    ) -> Result<(), StoreError> {
        let _io = self.lock_io();
        self.write_run(id, request, conversation)
    }

    /// Writes `id`'s run file and notes how it went (a failed write is
    /// kept to try again: the run is all a later `send` resumes from);
    /// the caller holds the `io` lock, so the note and the file agree.
    fn write_run(
        &self,
        id: &AgentId,
        request: &ChildRequest,
        conversation: &[ChatMessage],
    ) -> Result<(), StoreError> {
        #[cfg(test)]
        self.run_writes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let written = self.write_run_file(id, request, conversation);
        let mut unsaved = self.unsaved();
        if written.is_ok() {
            unsaved.runs.remove(id);
        } else {
            unsaved
                .runs
                .insert(id.clone(), (request.clone(), conversation.to_vec()));
        }
        written
    }

    fn write_run_file(
        &self,
        id: &AgentId,
        request: &ChildRequest,
        conversation: &[ChatMessage],
    ) -> Result<(), StoreError> {
        let path = self.run_path(id);
        // `runs/` only, never the store's directory: one removed while the
        // store was open is not made again (a second store could then open
        // it, unlocked beside this one); the write fails, naming it.
        if let Some(dir) = path.parent() {
            match super::files::create_private_dir(dir, false) {
                Err(source) if source.kind() != std::io::ErrorKind::AlreadyExists => {
                    return Err(StoreError::Dir {
                        path: dir.to_owned(),
                        source,
                    });
                }
                _ => {}
            }
        }
        let file = serde_json::json!({ "request": request, "conversation": conversation });
        let json = serde_json::to_vec(&file).map_err(|source| StoreError::Encode {
            path: path.clone(),
            source,
        })?;
        write_atomic(&path, &json).map_err(|source| StoreError::Write { path, source })
    }

    /// What `id` was asked and its last saved conversation, if saved and
    /// readable (a file that is not a run — any other JSON, or not JSON —
    /// is `None`, never a panic). Only a regular file is read: a FIFO (or a
    /// link to one, or to `/dev/zero`) put in its place held the hub's
    /// handler, which reads it, for ever.
    pub fn run(&self, id: &AgentId) -> Option<(ChildRequest, Vec<ChatMessage>)> {
        let path = self.run_path(id);
        if !fs::symlink_metadata(&path).ok()?.is_file() {
            return None;
        }
        let bytes = fs::read(path).ok()?;
        let mut file: serde_json::Value = serde_json::from_slice(json_text(&bytes)).ok()?;
        // `get_mut`, not indexing: `value["key"]` panics on an array,
        // number, string or bool.
        let mut field = |key| file.get_mut(key).map(serde_json::Value::take);
        let request = serde_json::from_value(field("request")?).ok()?;
        let conversation = serde_json::from_value(field("conversation")?).ok()?;
        Some((request, conversation))
    }

    /// Writes again every envelope and run whose last write failed (a
    /// full disk that has room again, a directory put back), and returns
    /// what still fails. A thread calls it as it closes; a host may call it
    /// any time. What succeeds is forgotten; what fails is kept for the
    /// next try.
    pub fn retry_unsaved(&self) -> Vec<StoreError> {
        self.retry_unsaved_each()
            .into_iter()
            .map(|(_, error)| error)
            .collect()
    }

    /// [`EnvelopeStore::retry_unsaved`], each failure with the child it
    /// was for (a thread closing says only its own children's).
    pub(crate) fn retry_unsaved_each(&self) -> Vec<(AgentId, StoreError)> {
        // Under the `io` lock throughout: what is written is what the
        // store holds now (a newer save, or a prune, cannot slip between
        // the read and the write).
        let _io = self.lock_io();
        // In child-number order, as every list the store gives (the
        // sets hold them in the ids' text order: `agent_10` first).
        let (mut envelopes, mut runs): (Vec<_>, Vec<_>) = {
            let unsaved = self.unsaved();
            (
                unsaved.envelopes.iter().cloned().collect(),
                unsaved.runs.clone().into_iter().collect(),
            )
        };
        envelopes.sort_by(|a, b| child_order(a).cmp(&child_order(b)));
        runs.sort_by(|(a, _), (b, _)| child_order(a).cmp(&child_order(b)));
        let mut failed = Vec::new();
        for id in envelopes {
            match self.get(&id) {
                Some(envelope) => {
                    if let Err(error) = self.write_envelope(&envelope) {
                        failed.push((id, error));
                    }
                }
                None => self.forget_unsaved(&id),
            }
        }
        for (id, (request, conversation)) in runs {
            if let Err(error) = self.write_run(&id, &request, &conversation) {
                failed.push((id, error));
            }
        }
        failed
    }

    /// Some write's last attempt failed.
    pub(crate) fn has_unsaved(&self) -> bool {
        let unsaved = self.unsaved();
        !unsaved.envelopes.is_empty() || !unsaved.runs.is_empty()
    }

    /// Records how a save of `id`'s envelope went.
    pub(super) fn note_saved(&self, id: &AgentId, saved: bool) {
        let mut unsaved = self.unsaved();
        if saved {
            unsaved.envelopes.remove(id);
        } else {
            unsaved.envelopes.insert(id.clone());
        }
    }

    /// `id` was pruned: nothing of it is to be written.
    pub(super) fn forget_unsaved(&self, id: &AgentId) {
        let mut unsaved = self.unsaved();
        unsaved.envelopes.remove(id);
        unsaved.runs.remove(id);
    }

    fn unsaved(&self) -> std::sync::MutexGuard<'_, Unsaved> {
        self.unsaved.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Removes `runs/<id>.json` (pruned with its envelope); best effort.
    pub(super) fn remove_run(&self, id: &AgentId) {
        let _ = fs::remove_file(self.run_path(id));
    }

    /// Runs whose envelope is gone — a kill between a prune's two
    /// removals, a run's removal that failed, an envelope moved aside as
    /// corrupt — once the retention has passed since the file was last
    /// written (its time against the store's clock): removed, so no
    /// conversation outlives the retention. Their ids, sorted.
    pub(super) fn prune_orphan_runs(&self, now_ms: u64) -> Vec<AgentId> {
        let Ok(entries) = fs::read_dir(self.dir.join("runs")) else {
            return Vec::new();
        };
        let mut removed = Vec::new();
        for entry in entries.flatten() {
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let Some(id) = named_child(&name) else {
                continue;
            };
            // Only a run the store wrote: one of an id it hands out
            // (`runs/notes.json` is a user's).
            // Nor one whose envelope is there, unread (another version's).
            if is_temp_name(&name)
                || name != file_name_for(&id)
                || ChildIds::number(&id).is_none()
                || self.map.contains_key(&id)
                || self.dir.join(&name).exists()
            {
                continue;
            }
            let written = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
            let expired = written.is_some_and(|at| {
                u128::from(now_ms)
                    .checked_sub(at.as_millis())
                    .is_some_and(|age| age > self.retention.as_millis())
            });
            // Its number kept first: the next open no longer sees it.
            if expired
                && self.keep_child_numbers([&id]).is_ok()
                && fs::remove_file(entry.path()).is_ok()
            {
                removed.push(id);
            }
        }
        removed.sort();
        removed
    }

    /// A resume writes the new run's envelope first and the old run's
    /// link (`continued_as`) after it: a process killed between the two
    /// left a run naming the child it went on from (`resumed_from`), unnamed
    /// by it, and the next session's message reached the old run again —
    /// the chain forked. Each missing link is restored from the run that
    /// names it (the latest, if a fork named it twice) — one whose run
    /// file landed: a kill between the new run's envelope and its run
    /// (or a run write that failed) left a run nothing resumes from, and
    /// linked to it, the whole chain could go on no more.
    pub(super) fn restore_links(&self) {
        let mut later: Vec<(AgentId, usize, AgentId)> = self
            .map
            .iter()
            .filter_map(|e| {
                let from = e.value().resumed_from.clone()?;
                Some((from, e.key().as_str().len(), e.key().clone()))
            })
            .collect();
        later.sort_unstable();
        for (from, _, to) in later.into_iter().rev() {
            let has_run = fs::symlink_metadata(self.run_path(&to)).is_ok_and(|m| m.is_file());
            if has_run
                && let Some(mut earlier) = self.get(&from)
                && earlier.continued_as.is_none()
                && earlier.id != to
            {
                earlier.continued_as = Some(to);
                // On failure it is linked in memory.
                let _ = self.save(&earlier);
            }
        }
    }

    /// The wake for `id` is no longer owed, in memory at once: a copy read
    /// after it (a hub resuming the child, another thread) says so, whenever
    /// the disk write ([`EnvelopeStore::update`]) lands.
    pub(crate) fn settle_in_memory(&self, id: &AgentId) {
        if let Some(mut envelope) = self.map.get_mut(id) {
            envelope.wake_owed = false;
        }
    }

    /// Changes the envelope `id` as it is in the store now (under the io
    /// lock, so no earlier copy overwrites it) and writes it when `change`
    /// says it changed.
    pub(crate) fn update(
        &self,
        id: &AgentId,
        change: impl FnOnce(&mut Envelope) -> bool,
    ) -> Result<(), StoreError> {
        let _io = self.lock_io();
        let Some(mut envelope) = self.get(id) else {
            return Ok(());
        };
        if !change(&mut envelope) {
            return Ok(());
        }
        self.map.insert(id.clone(), envelope.clone());
        self.write_envelope(&envelope)
    }
}
