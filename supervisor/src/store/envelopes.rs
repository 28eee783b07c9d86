//! The store itself: envelopes in memory and on disk.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use dashmap::DashMap;
use rustc_hash::FxBuildHasher;
use subagents_actors::clock::Clock;
use subagents_actors::hub::ChildIds;
use subagents_messages::{AgentId, Envelope, ThreadId};

use crate::store::files::{
    CORRUPT_EXT, JSON_EXT, LOCK_NAME, create_private_dir, file_name_for, from_another_version,
    is_expired, is_temp_name, move_aside, named_child, parse_envelope, remove_temp,
    sync_dir_best_effort, write_atomic,
};
use crate::store::kept_ids::{IDS_NAME, last_child_number};
use crate::store::lock::{SESSION_NAME, count_session, last_session, lock_dir};
use crate::store::report::{CorruptFile, LoadReport, StoreError};

/// Envelopes of one session, in memory and on disk. `Send + Sync`; its
/// methods are synchronous and short (one small file each).
pub struct EnvelopeStore {
    pub(super) dir: PathBuf,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) retention: Duration,
    pub(super) map: DashMap<AgentId, Envelope, FxBuildHasher>,
    /// Hands out child ids past every id loaded (and the number kept).
    pub(super) ids: ChildIds,
    /// The number `.subagents-ids` holds.
    pub(super) ids_kept: Mutex<u64>,
    /// The children of earlier sessions (loaded at open, or a closed
    /// named thread's finished ones), which the thread that wrote them
    /// (any, for one written for no thread) may read and resume. A child
    /// a live thread made is its own thread's alone.
    pub(super) earlier: std::sync::RwLock<rustc_hash::FxHashSet<AgentId>>,
    /// Serialises disk changes so the files follow the same order as the
    /// map. Reads (`get`, `all`) never take it.
    io: Mutex<()>,
    /// Children the open found unfinished (now `interrupted`), until a
    /// thread takes them to wake its parent.
    pub(super) interrupted: Mutex<Vec<AgentId>>,
    /// Finished children whose wake was owed to their parent when the
    /// last process ended, until a thread takes them to deliver them.
    pub(super) owed: Mutex<Vec<AgentId>>,
    /// Children of earlier sessions a thread of this session began to
    /// resume ([`EnvelopeStore::begin_resume`]): resumed once each.
    pub(super) resuming: Mutex<rustc_hash::FxHashSet<AgentId>>,
    /// Of those, the ones whose wake a thread held for the resume (left
    /// owed): offered again if the resume fails. Under `resuming`'s lock.
    pub(super) held_for_resume: Mutex<rustc_hash::FxHashSet<AgentId>>,
    /// Threads forgotten ([`EnvelopeStore::forget_thread`]), when, and not
    /// opened again since: a write for one (a killed thread's writer
    /// draining its queue) lands forgotten; let go past the retention.
    pub(super) forgotten_threads: Mutex<rustc_hash::FxHashMap<ThreadId, u64>>,
    /// The threads live on it ([`EnvelopeStore::claim_thread`]), and a
    /// wake for whoever waits for one closing.
    pub(super) live: crate::store::live::Live,
    pub(super) released: tokio::sync::Notify,
    /// Envelopes of another version the open left unread, until pruned
    /// ([`EnvelopeStore::prune`]).
    pub(super) other_versions: Mutex<Vec<AgentId>>,
    /// Writes whose last attempt failed, to try again
    /// ([`EnvelopeStore::retry_unsaved`]): envelopes by id (the map holds
    /// them), runs with what was to be written.
    pub(super) unsaved: Mutex<super::runs::Unsaved>,
    /// The directory's lock, held for the store's life (released when the
    /// file closes, a crash included); `None` where none can be taken.
    _lock: Vec<fs::File>,
    /// The session whose approval blocks threads' parents take (this
    /// open's number among the directory's, 1 for the first; a new one
    /// once its blocks are spent) and how many it handed out.
    pub(super) numbering: Mutex<(u64, u64)>,
    /// When a thread's writes last pruned ([`EnvelopeStore::prune_if_due`]).
    pub(crate) schedule: super::schedule::PruneSchedule,
    /// Taken around each thread's blocking write ([`EnvelopeStore::off_the_runtime`]).
    pub(super) writing: tokio::sync::Semaphore,
    /// Run files written (this crate's tests count them).
    #[cfg(test)]
    pub(crate) run_writes: std::sync::atomic::AtomicU64,
}

impl fmt::Debug for EnvelopeStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnvelopeStore")
            .field("dir", &self.dir)
            .field("retention", &self.retention)
            .field("len", &self.map.len())
            .finish_non_exhaustive()
    }
}

impl EnvelopeStore {
    /// How long an envelope is kept after it finished (or was requested,
    /// while unfinished), unless opened with another retention: 24 hours.
    pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

    /// Opens (creating it if missing) the store in `dir` with the default
    /// retention ([`EnvelopeStore::DEFAULT_RETENTION`]): loads every envelope, reports and moves aside
    /// corrupt files, removes stray temporary files, then prunes. A
    /// relative `dir` is resolved against the working directory now, once.
    pub fn open(
        dir: impl Into<PathBuf>,
        clock: Arc<dyn Clock>,
    ) -> Result<(EnvelopeStore, LoadReport), StoreError> {
        Self::open_with_retention(dir, clock, Self::DEFAULT_RETENTION)
    }

    /// [`EnvelopeStore::open`], keeping envelopes for `retention`.
    pub fn open_with_retention(
        dir: impl Into<PathBuf>,
        clock: Arc<dyn Clock>,
        retention: Duration,
    ) -> Result<(EnvelopeStore, LoadReport), StoreError> {
        let (dir, clock) = (dir.into(), subagents_actors::clock::guarded(clock));
        // Absolute: a relative one named another directory once the
        // process changed its working directory (a host, a tool), and the
        // store wrote, pruned and resumed there, outside its lock.
        let dir = std::path::absolute(&dir).map_err(|source| StoreError::Dir {
            path: dir.clone(),
            source,
        })?;
        create_private_dir(&dir, true).map_err(|source| StoreError::Dir {
            path: dir.clone(),
            source,
        })?;
        let used = super::lock::held_a_store(&dir);
        let lock = lock_dir(&dir)?;
        let last = last_session(&dir, used)?;
        let kept = last_child_number(&dir)?;
        let store = EnvelopeStore {
            numbering: Mutex::new((0, 0)),
            dir,
            clock,
            retention,
            map: DashMap::default(),
            ids: ChildIds::default(),
            ids_kept: Mutex::new(kept),
            earlier: Default::default(),
            io: Mutex::new(()),
            interrupted: Mutex::new(Vec::new()),
            owed: Mutex::new(Vec::new()),
            resuming: Mutex::default(),
            held_for_resume: Mutex::default(),
            forgotten_threads: Mutex::default(),
            live: Mutex::default(),
            released: tokio::sync::Notify::new(),
            unsaved: Mutex::default(),
            other_versions: Mutex::default(),
            _lock: lock,
            schedule: Default::default(),
            writing: tokio::sync::Semaphore::new(1),
            #[cfg(test)]
            run_writes: Default::default(),
        };
        let (mut report, named) = store.load()?;
        // After the load, which removed the stale temporary files: one a
        // killed process left under this process's id blocked the write.
        let session = count_session(&store.dir, last)?;
        store.move_corrupt_aside(&mut report);
        let loaded: Vec<AgentId> = store.map.iter().map(|e| e.key().clone()).collect();
        let store = EnvelopeStore {
            numbering: Mutex::new((session, 0)),
            // Past every id a file names too (a corrupt one moved aside,
            // an unreadable one, a run, a link), and past the ones pruned:
            // never handed out again.
            ids: ChildIds::starting_at(
                (loaded.iter().chain(&named))
                    .filter_map(ChildIds::number)
                    .fold(kept, u64::max)
                    + 1,
            ),
            earlier: std::sync::RwLock::new(loaded.into_iter().collect()),
            ..store
        };
        // Interrupted first: an unfinished child ages from the restart,
        // so one that ran longer than the retention is not pruned unseen.
        store.restore_links();
        report.interrupted = store.interrupt_unfinished();
        report.pruned = store.prune();
        // One an earlier open interrupted, pruned now: none to resume.
        report
            .interrupted
            .retain(|id| !report.pruned.removed.contains(id));
        store.find_owed_wakes();
        Ok((store, report))
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The counter every hub writing here must draw child ids from
    /// (clones share it): its first id comes after every id loaded.
    #[doc(hidden)] // read by `ThreadConfig::store`, not API
    pub fn child_ids(&self) -> ChildIds {
        self.ids.clone()
    }

    /// True for a child of an earlier session (loaded at open, or of a
    /// named thread closed since), which the thread it names may read and
    /// resume; a child a live thread made belongs to it.
    pub(crate) fn is_from_earlier_session(&self, id: &AgentId) -> bool {
        let earlier = self.earlier.read();
        earlier.unwrap_or_else(PoisonError::into_inner).contains(id)
    }

    /// How long envelopes are kept.
    pub fn retention(&self) -> Duration {
        self.retention
    }

    /// The file that holds (or would hold) the envelope `id`.
    pub fn path_of(&self, id: &AgentId) -> PathBuf {
        self.dir.join(file_name_for(id))
    }

    /// Records `envelope` in memory, then writes it to `<id>.json`
    /// atomically (temporary file, fsync, rename, directory fsync).
    ///
    /// On error the envelope is still in memory (answerable by [`get`]),
    /// and the file on disk is the previous version, if any.
    ///
    /// A link to a later run (`continued_as`), a claim, a cancel, a
    /// forgetting and the thread it belongs to (an earlier session's
    /// child's, none too), once held, are kept: a copy taken before another
    /// thread resumed the child or took its result (an earlier session's
    /// child written for no thread, which any thread may read) never
    /// erases them. A child id past the store's counter (a host's own) is
    /// never handed out to a child (whose envelopes took the host's).
    ///
    /// [`get`]: EnvelopeStore::get
    ///
    /// A child id past `ChildIds::MAX` is refused ([`StoreError::OutOfRange`]).
    pub fn save(&self, envelope: &Envelope) -> Result<(), StoreError> {
        if ChildIds::is_out_of_range(&envelope.id) {
            return Err(StoreError::OutOfRange {
                path: self.path_of(&envelope.id),
                id: envelope.id.clone(),
                max: ChildIds::MAX,
            });
        }
        let _io = self.lock_io();
        if let Some(number) = ChildIds::number(&envelope.id) {
            self.ids.skip_past(number);
        }
        let mut envelope = envelope.clone();
        if let Some(held) = self.map.get(&envelope.id) {
            if envelope.continued_as.is_none() {
                envelope.continued_as = held.continued_as.clone();
            }
            envelope.claimed |= held.claimed;
            envelope.cancelled |= held.cancelled;
            envelope.forgotten |= held.forgotten;
            // An earlier session's child keeps the owner it was written
            // with — none too: a named thread writing its link, cancel or
            // claim stamped its own id on a child of the store's, and
            // every other thread lost it.
            if held.thread.is_some() || self.is_from_earlier_session(&envelope.id) {
                envelope.thread = held.thread.clone();
            }
        }
        if let Some(thread) = &envelope.thread {
            let forgotten = self.forgotten_threads.lock();
            envelope.forgotten |= forgotten
                .unwrap_or_else(PoisonError::into_inner)
                .contains_key(thread);
        }
        let written = self.write_envelope(&envelope);
        self.map.insert(envelope.id.clone(), envelope);
        written
    }

    /// `envelope` is past the retention: the next prune removes it (and a
    /// pruned one is not written back).
    pub(crate) fn expired(&self, envelope: &Envelope) -> bool {
        envelope.status.is_terminal() && is_expired(envelope, self.clock.now_ms(), self.retention)
    }

    /// Writes `envelope`'s file and notes how it went; the caller holds
    /// the `io` lock.
    pub(super) fn write_envelope(&self, envelope: &Envelope) -> Result<(), StoreError> {
        let path = self.path_of(&envelope.id);
        let mut json = match serde_json::to_vec(envelope) {
            Ok(json) => json,
            Err(source) => return Err(StoreError::Encode { path, source }),
        };
        json.push(b'\n');
        let written = write_atomic(&path, &json);
        self.note_saved(&envelope.id, written.is_ok());
        match written {
            Ok(()) => Ok(()),
            Err(source) => {
                tracing::warn!(
                    path = %path.display(),
                    error = %source,
                    "envelope not persisted; kept in memory"
                );
                Err(StoreError::Write { path, source })
            }
        }
    }

    /// The envelope `id`, if known (loaded, or saved this session).
    pub fn get(&self, id: &AgentId) -> Option<Envelope> {
        self.map.get(id).map(|entry| entry.value().clone())
    }

    /// Reads the directory into the map.
    fn load(&self) -> Result<(LoadReport, Vec<AgentId>), StoreError> {
        let dir_err = |source| StoreError::Dir {
            path: self.dir.clone(),
            source,
        };
        let mut report = LoadReport::default();
        let mut named = Vec::new();
        let mut touched = false;
        for entry in fs::read_dir(&self.dir).map_err(dir_err)? {
            let entry = entry.map_err(dir_err)?;
            let path = entry.path();
            // Names that are not UTF-8 are never ours.
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            named.extend(named_child(&name));
            let is_file = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
            if !is_file {
                // A link or a folder under an envelope's name is not read
                // (as a run's is not), but said: the model read "no such
                // sub-agent", and the host had no word of why.
                if name.ends_with(JSON_EXT) && !name.starts_with('.') {
                    report.unreadable.push(CorruptFile {
                        path,
                        error: "not a regular file (a link or a folder); left in place".into(),
                        moved_to: None,
                    });
                }
                continue;
            }
            if is_temp_name(&name) {
                // Its number kept first: removed, no name in the store
                // gave it, and the open after the next handed it out.
                match self.keep_child_numbers(named_child(&name).as_ref()) {
                    Ok(()) => touched |= remove_temp(path, &mut report),
                    Err(e) => {
                        tracing::warn!(%e, "a stray temporary file left: its number not kept")
                    }
                }
                continue;
            }
            if name.ends_with(CORRUPT_EXT) || [LOCK_NAME, SESSION_NAME, IDS_NAME].contains(&&*name)
            {
                // Moved aside by an earlier open, already reported then.
                continue;
            }
            if !name.ends_with(JSON_EXT) || name.starts_with('.') {
                tracing::debug!(path = %path.display(), "a file the store did not write; left alone");
                report.foreign.push(path);
                continue;
            }
            let bytes = match fs::read(&path) {
                Ok(bytes) => bytes,
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "unreadable envelope file skipped");
                    report.unreadable.push(CorruptFile {
                        path,
                        error: error.to_string(),
                        moved_to: None,
                    });
                    continue;
                }
            };
            match parse_envelope(&name, &bytes) {
                Ok(envelope) => {
                    self.map.insert(envelope.id.clone(), envelope);
                    report.loaded += 1;
                }
                Err(error) if from_another_version(&name, &bytes) => {
                    tracing::warn!(path = %path.display(), %error, "an envelope of another version left in place");
                    (self.other_versions.lock())
                        .unwrap_or_else(PoisonError::into_inner)
                        .extend(named_child(&name));
                    report.unreadable.push(CorruptFile {
                        path,
                        error: format!("{error} (another version's? {})", super::files::KEPT_UNTIL),
                        moved_to: None,
                    });
                }
                // Moved aside once the open is sure ([`Self::move_corrupt_aside`]).
                Err(error) => report.corrupt.push(CorruptFile {
                    path,
                    error,
                    moved_to: None,
                }),
            }
        }
        if touched {
            sync_dir_best_effort(&self.dir);
        }
        self.load_runs(&mut report, &mut named);
        for envelope in self.map.iter() {
            named.extend(envelope.continued_as.iter().cloned());
            named.extend(envelope.resumed_from.iter().cloned());
        }
        report.corrupt.sort_by(|a, b| a.path.cmp(&b.path));
        report.unreadable.sort_by(|a, b| a.path.cmp(&b.path));
        report.temp_removed.sort();
        report.foreign.sort();
        Ok((report, named))
    }

    /// Moves the corrupt files the load found aside, once the open counted
    /// its session: moved by an open that then failed (its count not
    /// written — a full disk, a read-only one), they were reported to
    /// nobody, and every later open skips what was moved aside.
    fn move_corrupt_aside(&self, report: &mut LoadReport) {
        for corrupt in &mut report.corrupt {
            corrupt.moved_to = move_aside(&corrupt.path);
            let (path, moved_to) = (corrupt.path.display(), &corrupt.moved_to);
            let error = &corrupt.error;
            tracing::warn!(%path, ?moved_to, %error, "corrupt envelope file skipped");
        }
        if report.corrupt.iter().any(|c| c.moved_to.is_some()) {
            sync_dir_best_effort(&self.dir);
        }
    }

    /// Reads `runs/`'s names (each names a child, whose id is taken) and
    /// removes the temporary files a killed write left there.
    fn load_runs(&self, report: &mut LoadReport, named: &mut Vec<AgentId>) {
        let runs = self.dir.join("runs");
        let Ok(entries) = fs::read_dir(&runs) else {
            return;
        };
        let mut touched = false;
        for entry in entries.flatten() {
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            named.extend(named_child(&name));
            if is_temp_name(&name) && entry.file_type().is_ok_and(|t| t.is_file()) {
                touched |= remove_temp(entry.path(), report);
            }
        }
        if touched {
            sync_dir_best_effort(&runs);
        }
    }

    pub(crate) fn lock_io(&self) -> MutexGuard<'_, ()> {
        // The guarded data is `()`: a panic elsewhere left nothing broken.
        self.io
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
