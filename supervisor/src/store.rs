//! Persisted envelopes: one small JSON file per child, kept for a day.
//!
//! # File layout
//!
//! An [`EnvelopeStore`] owns one directory. Each envelope lives in its own
//! file, `<id>.json`, holding exactly the [`Envelope`]'s fields as compact
//! JSON (no wrapper, no history). Characters of the id outside
//! `[A-Za-z0-9_-]` are written as `%XX` (so `agent_3` is `agent_3.json` and
//! an id like `a/b` cannot escape the directory); the mapping is one-to-one.
//! Other files in the directory are left alone, except for the two kinds
//! described below (temporary files and corrupt files).
//!
//! The directory has one owner: one store in one process at a time. One
//! store may be shared by any number of threads of that process.
//!
//! # Atomicity
//!
//! [`EnvelopeStore::save`] never writes the target file in place. It writes
//! a temporary file in the same directory
//! (`.<id>.json.<16 hex digits>.subagents-tmp`, created exclusively), fsyncs
//! it, renames it over `<id>.json`, and fsyncs the directory. A reader (or the next [`EnvelopeStore::open`]) sees
//! either the old file or the new one, never a torn mix, even if the
//! process is killed in the middle.
//!
//! A write that fails (full disk, read-only or vanished directory, any I/O
//! error) returns [`StoreError::Write`] naming the target path; the
//! envelope is kept in memory anyway, so it stays answerable by id for the
//! rest of the session. A later `save` of the same id tries again.
//!
//! Stray temporary files, left behind when a process died between creating
//! one and renaming it, are **removed** on open (they never hold a write
//! that was reported complete) and listed in [`LoadReport::temp_removed`].
//! Only names of exactly that shape are removed: any other file in the
//! directory — `.notes.json.backup`, another tool's temporary file — is
//! left where it is and listed in [`LoadReport::foreign`].
//!
//! # Ids
//!
//! Envelopes are keyed by id alone, so every hub writing to one store must
//! draw its child ids from the store's own counter
//! ([`EnvelopeStore::child_ids`]), which starts past every id loaded: two
//! threads sharing a store never both make an `agent_1`, and a restart
//! never reuses an id. A stored child id past
//! [`MAX_CHILD_NUMBER`](subagents_actors::hub::MAX_CHILD_NUMBER) is a
//! corrupt file (reported and moved aside), never a crash.
//!
//! # Corrupt files
//!
//! On open, a `*.json` file that is not JSON, is not an [`Envelope`], or
//! holds an envelope whose id does not match its file name is *corrupt*.
//! It is skipped, reported in [`LoadReport::corrupt`] with its path (and
//! with a `tracing` warning), and moved aside to `<name>.corrupt`
//! (`<name>.<n>.corrupt` if that is taken). It is never deleted. All other
//! files still load. A file that cannot be read at all (an I/O error) is
//! reported in [`LoadReport::unreadable`] and left where it is.
//!
//! # Pruning and clock jumps
//!
//! An envelope's age is measured from its `finished_at_ms`, or from its
//! `requested_at_ms` while unfinished, against the injected [`Clock`].
//! [`EnvelopeStore::prune`] removes (from memory and disk) every envelope
//! older than the retention ([`DEFAULT_RETENTION`], 24 h, unless configured
//! with [`StoreConfig`]); exactly 24 h old is kept. `open` prunes once
//! after loading.
//!
//! Pruning is a pure function of the clock's current reading, with no
//! remembered high-water mark, so:
//!
//! - a backward jump only makes envelopes look younger: it never prunes
//!   anything that the same prune would not have pruned before the jump;
//! - an envelope stamped in the future (stamp > now, e.g. written before the
//!   clock was set back) is never pruned; it starts ageing once the clock
//!   passes its stamp;
//! - a forward jump prunes early, as a real day passing would. Nothing can
//!   tell the two apart.
//!
//! An envelope whose file cannot be removed stays (in memory and on disk),
//! is reported in [`PruneReport::failed`], and is retried on the next prune.

use std::fmt;
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use dashmap::DashMap;
use subagents_actors::clock::Clock;
use subagents_actors::hub::{ChildIds, MAX_CHILD_NUMBER, is_out_of_range};
use subagents_messages::{AgentId, Envelope};

/// How long an envelope is kept after it finished (or was requested, while
/// unfinished): 24 hours.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

/// The extension of an envelope file.
const JSON_EXT: &str = ".json";
/// The extension given to a corrupt file moved aside.
const CORRUPT_EXT: &str = ".corrupt";
/// The extension of the store's own temporary files.
const TEMP_EXT: &str = ".subagents-tmp";
/// Hex digits in a temporary file's unique part.
const TEMP_UNIQUE_LEN: usize = 16;

/// How a store is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// Envelopes older than this are pruned. Default: [`DEFAULT_RETENTION`].
    pub retention: Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            retention: DEFAULT_RETENTION,
        }
    }
}

/// What went wrong in the store. Every variant names the path involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store's directory could not be created or listed.
    #[error("envelope directory {path}: {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// An envelope file could not be written (full disk, read-only or
    /// missing directory, any I/O error). The envelope is still in memory.
    #[error("could not write envelope file {path}: {source}")]
    Write {
        /// The file that was being written.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// An envelope could not be encoded as JSON.
    #[error("could not encode envelope for {path}: {source}")]
    Encode {
        /// The file it was meant for.
        path: PathBuf,
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// An expired envelope's file could not be removed.
    #[error("could not remove envelope file {path}: {source}")]
    Remove {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
}

impl StoreError {
    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            StoreError::Dir { path, .. }
            | StoreError::Write { path, .. }
            | StoreError::Encode { path, .. }
            | StoreError::Remove { path, .. } => path,
        }
    }

    /// The error is a full disk (ENOSPC) or an exceeded quota.
    pub fn is_disk_full(&self) -> bool {
        let source = match self {
            StoreError::Dir { source, .. }
            | StoreError::Write { source, .. }
            | StoreError::Remove { source, .. } => source,
            StoreError::Encode { .. } => return false,
        };
        matches!(
            source.kind(),
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
        )
    }
}

/// A file skipped on open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorruptFile {
    /// Where the file was found.
    pub path: PathBuf,
    /// Why it was skipped, readable.
    pub error: String,
    /// Where it was moved aside to (`<name>.corrupt`); `None` if it was not
    /// moved (unreadable files, or the move failed).
    pub moved_to: Option<PathBuf>,
}

/// What [`EnvelopeStore::prune`] did.
#[derive(Debug, Default)]
pub struct PruneReport {
    /// The envelopes removed, sorted by id.
    pub removed: Vec<AgentId>,
    /// Expired envelopes whose file could not be removed; they are kept and
    /// retried on the next prune.
    pub failed: Vec<StoreError>,
}

/// What [`EnvelopeStore::open`] found.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// How many envelopes loaded (before pruning).
    pub loaded: usize,
    /// Corrupt files: skipped, reported, moved aside.
    pub corrupt: Vec<CorruptFile>,
    /// Files that could not be read (I/O errors): skipped, left in place.
    pub unreadable: Vec<CorruptFile>,
    /// Stray temporary files from interrupted writes, removed.
    pub temp_removed: Vec<PathBuf>,
    /// Files that are neither envelopes nor the store's own temporary
    /// files (another tool's, a user's backup): left alone, sorted.
    pub foreign: Vec<PathBuf>,
    /// The prune done right after loading.
    pub pruned: PruneReport,
}

/// Envelopes of one session, in memory and on disk. `Send + Sync`; its
/// methods are synchronous and short (one small file each).
pub struct EnvelopeStore {
    dir: PathBuf,
    clock: Arc<dyn Clock>,
    retention: Duration,
    map: DashMap<AgentId, Envelope>,
    /// Hands out child ids past every id loaded.
    ids: ChildIds,
    /// Serialises disk changes so the files follow the same order as the
    /// map. Reads (`get`, `all`) never take it.
    io: Mutex<()>,
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
    /// Opens (creating it if missing) the store in `dir` with the default
    /// 24 h retention: loads every envelope, reports and moves aside
    /// corrupt files, removes stray temporary files, then prunes.
    pub fn open(
        dir: impl Into<PathBuf>,
        clock: Arc<dyn Clock>,
    ) -> Result<(EnvelopeStore, LoadReport), StoreError> {
        Self::open_with(dir, clock, StoreConfig::default())
    }

    /// [`EnvelopeStore::open`] with a configuration.
    pub fn open_with(
        dir: impl Into<PathBuf>,
        clock: Arc<dyn Clock>,
        config: StoreConfig,
    ) -> Result<(EnvelopeStore, LoadReport), StoreError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|source| StoreError::Dir {
            path: dir.clone(),
            source,
        })?;
        let store = EnvelopeStore {
            dir,
            clock,
            retention: config.retention,
            map: DashMap::new(),
            ids: ChildIds::default(),
            io: Mutex::new(()),
        };
        let mut report = store.load()?;
        let loaded: Vec<AgentId> = store.map.iter().map(|e| e.key().clone()).collect();
        let store = EnvelopeStore {
            ids: ChildIds::after(&loaded),
            ..store
        };
        report.pruned = store.prune();
        Ok((store, report))
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The counter every hub writing here must draw child ids from
    /// (clones share it): its first id comes after every id loaded.
    pub fn child_ids(&self) -> ChildIds {
        self.ids.clone()
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
    /// [`get`]: EnvelopeStore::get
    pub fn save(&self, envelope: &Envelope) -> Result<(), StoreError> {
        let _io = self.lock_io();
        self.map.insert(envelope.id.clone(), envelope.clone());
        let path = self.path_of(&envelope.id);
        let mut json = match serde_json::to_vec(envelope) {
            Ok(json) => json,
            Err(source) => return Err(StoreError::Encode { path, source }),
        };
        json.push(b'\n');
        match write_atomic(&path, &json) {
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

    /// Every envelope, sorted by id.
    pub fn all(&self) -> Vec<Envelope> {
        let mut all: Vec<Envelope> = self.map.iter().map(|e| e.value().clone()).collect();
        all.sort_by(|a, b| a.id.cmp(&b.id));
        all
    }

    /// How many envelopes are known.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// No envelope is known.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Removes, from memory and disk, every envelope older than the
    /// retention by the injected clock. Future-dated envelopes are kept;
    /// see the module docs on clock jumps.
    pub fn prune(&self) -> PruneReport {
        let _io = self.lock_io();
        let now = self.clock.now_ms();
        let mut expired: Vec<AgentId> = self
            .map
            .iter()
            .filter(|e| is_expired(e.value(), now, self.retention))
            .map(|e| e.key().clone())
            .collect();
        expired.sort();

        let mut report = PruneReport::default();
        for id in expired {
            let path = self.path_of(&id);
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
            report.removed.push(id);
        }
        if !report.removed.is_empty() {
            sync_dir_best_effort(&self.dir);
            tracing::debug!(
                count = report.removed.len(),
                now_ms = now,
                "pruned expired envelopes"
            );
        }
        report
    }

    /// Reads the directory into the map.
    fn load(&self) -> Result<LoadReport, StoreError> {
        let dir_err = |source| StoreError::Dir {
            path: self.dir.clone(),
            source,
        };
        let mut report = LoadReport::default();
        let mut touched = false;
        for entry in fs::read_dir(&self.dir).map_err(dir_err)? {
            let entry = entry.map_err(dir_err)?;
            let path = entry.path();
            // Names that are not UTF-8 are never ours.
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let is_file = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
            if !is_file {
                continue;
            }
            if is_temp_name(&name) {
                match fs::remove_file(&path) {
                    Ok(()) => {
                        tracing::debug!(path = %path.display(), "removed stray temporary file");
                        report.temp_removed.push(path);
                        touched = true;
                    }
                    Err(error) => tracing::warn!(
                        path = %path.display(),
                        %error,
                        "could not remove stray temporary file; ignored"
                    ),
                }
                continue;
            }
            if name.ends_with(CORRUPT_EXT) {
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
                Err(error) => {
                    let moved_to = move_aside(&path);
                    touched |= moved_to.is_some();
                    tracing::warn!(
                        path = %path.display(),
                        moved_to = ?moved_to,
                        %error,
                        "corrupt envelope file skipped"
                    );
                    report.corrupt.push(CorruptFile {
                        path,
                        error,
                        moved_to,
                    });
                }
            }
        }
        if touched {
            sync_dir_best_effort(&self.dir);
        }
        report.corrupt.sort_by(|a, b| a.path.cmp(&b.path));
        report.unreadable.sort_by(|a, b| a.path.cmp(&b.path));
        report.temp_removed.sort();
        report.foreign.sort();
        Ok(report)
    }

    fn lock_io(&self) -> MutexGuard<'_, ()> {
        // The guarded data is `()`: a panic elsewhere left nothing broken.
        self.io
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The file name of envelope `id`: `[A-Za-z0-9_-]` kept, every other byte
/// as `%XX`, then `.json`. The empty id is `%.json` (a lone `%` is never
/// produced otherwise), so the mapping is one-to-one and never starts with
/// a dot.
fn file_name_for(id: &AgentId) -> String {
    let id = id.as_str();
    let mut name = String::with_capacity(id.len() + JSON_EXT.len() + 1);
    if id.is_empty() {
        name.push('%');
    }
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            name.push(char::from(b));
        } else {
            // Writing to a String cannot fail.
            let _ = write!(name, "%{b:02X}");
        }
    }
    name.push_str(JSON_EXT);
    name
}

/// The store's own temporary names:
/// `.<envelope file>.<16 hex digits>.subagents-tmp`, where the envelope
/// file is a name [`file_name_for`] can produce.
fn is_temp_name(name: &str) -> bool {
    let Some(rest) = name
        .strip_prefix('.')
        .and_then(|r| r.strip_suffix(TEMP_EXT))
    else {
        return false;
    };
    let Some((target, unique)) = rest.rsplit_once('.') else {
        return false;
    };
    let Some(stem) = target.strip_suffix(JSON_EXT) else {
        return false;
    };
    unique.len() == TEMP_UNIQUE_LEN
        && unique
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        && !stem.is_empty()
        && stem
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'%')
}

/// Decodes an envelope file, checking it is filed under its own id.
fn parse_envelope(name: &str, bytes: &[u8]) -> Result<Envelope, String> {
    let envelope: Envelope = serde_json::from_slice(bytes).map_err(|e| {
        if e.is_data() {
            format!("not an envelope: {e}")
        } else {
            format!("not valid JSON: {e}")
        }
    })?;
    if is_out_of_range(&envelope.id) {
        return Err(format!(
            "the id {:?} is out of range: child ids go up to agent_{MAX_CHILD_NUMBER}",
            envelope.id.as_str()
        ));
    }
    let expected = file_name_for(&envelope.id);
    if expected != name {
        return Err(format!(
            "holds envelope {:?}, which belongs in {expected}",
            envelope.id.as_str()
        ));
    }
    Ok(envelope)
}

/// The stamp an envelope ages from.
fn age_stamp(envelope: &Envelope) -> u64 {
    envelope.finished_at_ms.unwrap_or(envelope.requested_at_ms)
}

/// Older than `retention` at `now`. Future-dated (stamp > now): never.
fn is_expired(envelope: &Envelope, now_ms: u64, retention: Duration) -> bool {
    match now_ms.checked_sub(age_stamp(envelope)) {
        Some(age) => u128::from(age) > retention.as_millis(),
        None => false,
    }
}

/// Temporary file (created exclusively, named by [`is_temp_name`]'s
/// shape), write, fsync, rename over `path`, fsync the directory. The
/// temporary is removed on error.
fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a file path",
        ));
    };
    let unique = format!(
        "{:08x}{:08x}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let temp = dir.join(format!(".{name}.{unique}{TEMP_EXT}"));
    let written = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
        return written;
    }
    fs::File::open(dir)?.sync_all()
}

/// Renames a corrupt file to `<name>.corrupt` (or `<name>.<n>.corrupt`),
/// never over an existing file. `None` if it could not be moved.
fn move_aside(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    let dir = path.parent()?;
    for n in 0u32..1000 {
        let target = if n == 0 {
            dir.join(format!("{name}{CORRUPT_EXT}"))
        } else {
            dir.join(format!("{name}.{n}{CORRUPT_EXT}"))
        };
        // A hard link fails if the target exists: no clobbering.
        match fs::hard_link(path, &target) {
            Ok(()) => {
                return match fs::remove_file(path) {
                    Ok(()) => Some(target),
                    Err(error) => {
                        tracing::warn!(path = %path.display(), %error, "could not move corrupt file aside");
                        None
                    }
                };
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(_) => {
                // No hard links here: fall back to a checked rename.
                if target.exists() {
                    continue;
                }
                return match fs::rename(path, &target) {
                    Ok(()) => Some(target),
                    Err(error) => {
                        tracing::warn!(path = %path.display(), %error, "could not move corrupt file aside");
                        None
                    }
                };
            }
        }
    }
    None
}

/// Makes renames and removals in `dir` durable; failures are logged only
/// (the data files themselves are already complete).
fn sync_dir_best_effort(dir: &Path) {
    if let Err(error) = fs::File::open(dir).and_then(|d| d.sync_all()) {
        tracing::warn!(dir = %dir.display(), %error, "could not fsync envelope directory");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_safe_and_one_to_one() {
        assert_eq!(file_name_for(&AgentId::new("agent_3")), "agent_3.json");
        assert_eq!(file_name_for(&AgentId::new("a/b")), "a%2Fb.json");
        assert_eq!(file_name_for(&AgentId::new("../x")), "%2E%2E%2Fx.json");
        assert_eq!(file_name_for(&AgentId::new("%")), "%25.json");
        assert_eq!(file_name_for(&AgentId::new("")), "%.json");
        assert_ne!(
            file_name_for(&AgentId::new("a.b")),
            file_name_for(&AgentId::new("a%2Eb"))
        );
    }

    #[test]
    fn temp_names_are_recognised() {
        assert!(is_temp_name(".agent_1.json.0000abcd00000001.subagents-tmp"));
        assert!(is_temp_name(".a%2Fb.json.0123456789abcdef.subagents-tmp"));
        assert!(!is_temp_name(".agent_1.json.aB3xY9"));
        assert!(!is_temp_name(".notes.json.backup"));
        assert!(!is_temp_name(
            ".agent_1.json.0000ABCD00000001.subagents-tmp"
        ));
        assert!(!is_temp_name(".agent_1.json.0000abcd0000001.subagents-tmp"));
        assert!(!is_temp_name("agent_1.json.0000abcd00000001.subagents-tmp"));
        assert!(!is_temp_name(".a.b.json.0000abcd00000001.subagents-tmp"));
        assert!(!is_temp_name("agent_1.json"));
        assert!(!is_temp_name(".agent_1.json"));
        assert!(!is_temp_name(".agent_1.json.corrupt"));
    }
}
