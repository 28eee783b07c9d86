//! What the store reports: its errors, what `open` and `prune` found.

use std::io;
use std::path::{Path, PathBuf};

use subagents_messages::AgentId;

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
    /// [`EnvelopeStore::forget_thread`](crate::store::EnvelopeStore::forget_thread)
    /// of a conversation open on the store, or closing: close it and wait
    /// (or delete it through its registry,
    /// [`Threads::delete`](crate::Threads::delete)) first.
    #[error(
        "conversation `{thread}` is open on the store in {path} (or still closing): close it \
         and wait for it to have closed (`close_and_wait`) before forgetting it"
    )]
    ThreadOpen {
        /// The store's directory.
        path: PathBuf,
        /// The conversation.
        thread: subagents_messages::ThreadId,
    },
    /// Another store holds the directory (in this process or another):
    /// two would hand out the same child ids, write over each other's
    /// files and mark each other's running children interrupted. One
    /// store per directory; share it (`Arc`) between threads.
    #[error("envelope directory {path} is in use by another store (its lock file {lock} is held)")]
    Locked {
        /// The directory.
        path: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// One of the store's own files beside the envelopes — its lock
    /// (`.subagents-lock`) or its count of sessions
    /// (`.subagents-session`) — is not a regular file (a FIFO held the
    /// open for ever), or the count cannot be read or written, or is
    /// spent. The store does not open: with its count unknown its
    /// threads' parents would number their approvals as another session's,
    /// and a host's row kept across a restart would answer a request the
    /// user never saw. Repair the file with a number at least the one it
    /// held (the number of opens so far, or the last child number for
    /// `.subagents-ids`), or make the directory writable. Removing it
    /// starts the count again from 1: only for a directory whose earlier
    /// sessions no host keeps anything of (their approval rows, their
    /// child ids — a pruned child's id is handed out again).
    #[error("the store's own file {path} {problem}")]
    OwnFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
        /// The I/O error, when one was.
        #[source]
        source: Option<io::Error>,
    },
    /// [`EnvelopeStore::save`](crate::store::EnvelopeStore::save) of a
    /// child id past `ChildIds::MAX` (`agent_9007199254740991`): the next
    /// open sets such a file aside as corrupt, so it is not written, nor
    /// kept in memory, where it would answer only until that open.
    #[error(
        "the id {id:?} is out of range: child ids go up to agent_{max}, and a store's next \
         open would set {path} aside as corrupt"
    )]
    OutOfRange {
        /// The file it was meant for.
        path: PathBuf,
        /// The id.
        id: AgentId,
        /// The largest child number a store keeps.
        max: u64,
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
            | StoreError::OutOfRange { path, .. }
            | StoreError::Remove { path, .. }
            | StoreError::OwnFile { path, .. }
            | StoreError::Locked { path, .. }
            | StoreError::ThreadOpen { path, .. } => path,
        }
    }

    /// The error is a full disk (ENOSPC) or an exceeded quota.
    pub fn is_disk_full(&self) -> bool {
        let source = match self {
            StoreError::Dir { source, .. }
            | StoreError::Write { source, .. }
            | StoreError::Remove { source, .. } => source,
            StoreError::OwnFile {
                source: Some(source),
                ..
            } => source,
            StoreError::OwnFile { source: None, .. }
            | StoreError::Encode { .. }
            | StoreError::OutOfRange { .. }
            | StoreError::Locked { .. }
            | StoreError::ThreadOpen { .. } => return false,
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

/// What [`EnvelopeStore::prune`](crate::store::EnvelopeStore::prune) did.
#[derive(Debug, Default)]
pub struct PruneReport {
    /// The envelopes removed, in child-number order (`agent_2` before
    /// `agent_10`; ids no hub numbered after them, as text).
    pub removed: Vec<AgentId>,
    /// Expired envelopes whose file could not be removed; they are kept and
    /// retried on the next prune. This version's first, then another
    /// version's ([`LoadReport::unreadable`]), each in child-number order.
    pub failed: Vec<StoreError>,
    /// Runs (`runs/<id>.json`) whose envelope is gone, removed once the
    /// retention passed since their file was written; in the same order.
    pub runs_removed: Vec<AgentId>,
}

/// What [`EnvelopeStore::open`](crate::store::EnvelopeStore::open) found.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// How many envelopes loaded (before pruning).
    pub loaded: usize,
    /// Corrupt files: skipped, reported, moved aside.
    pub corrupt: Vec<CorruptFile>,
    /// Files that could not be read (I/O errors; a link or a folder under
    /// an envelope's name, not followed), or envelopes this
    /// version cannot decode filed under their own id (another version's:
    /// a status or field it does not know): skipped, left in place, their
    /// ids never handed out and their runs kept.
    pub unreadable: Vec<CorruptFile>,
    /// Stray temporary files from interrupted writes, removed.
    pub temp_removed: Vec<PathBuf>,
    /// Files that are neither envelopes nor the store's own temporary
    /// files (another tool's, a user's backup): left alone, sorted.
    pub foreign: Vec<PathBuf>,
    /// The prune done right after loading.
    pub pruned: PruneReport,
    /// Children that were running or queued when the process that wrote
    /// them stopped: each is now `interrupted` (saved so, its restart wake
    /// owed), resumable from its saved conversation — and those an earlier
    /// open interrupted whose restart wake no thread delivered; in
    /// child-number order.
    pub interrupted: Vec<AgentId>,
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::path::PathBuf;

    use super::StoreError;

    /// A full disk and an exceeded quota read as full, another error not:
    /// asserted only behind a root-only tmpfs mount before, and the quota
    /// nowhere.
    #[test]
    fn a_full_disk_and_an_exceeded_quota_are_disk_full() {
        let write = |errno| StoreError::Write {
            path: PathBuf::from("/d/agent_1.json"),
            source: io::Error::from_raw_os_error(errno),
        };
        // ENOSPC, EDQUOT (Linux), ENOENT.
        assert!(write(28).is_disk_full());
        #[cfg(target_os = "linux")]
        assert!(write(122).is_disk_full());
        assert!(!write(2).is_disk_full());
    }
}
