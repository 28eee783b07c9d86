//! The store's own files beside the envelopes: the lock a store holds
//! for its life, and the count of sessions that opened the directory —
//! with the blocks of approval numbers each session hands its threads.

use std::fs;
use std::io::{self, Read};
use std::path::Path;

use crate::store::EnvelopeStore;
use crate::store::files::{LOCK_NAME, write_atomic};
use crate::store::report::StoreError;

/// Approval numbers a thread's parent has to itself.
pub(crate) const APPROVALS_PER_BLOCK: u64 = 1_000_000;
/// Blocks of approval numbers a session has.
pub(super) const BLOCKS_PER_SESSION: u64 = 1_000_000;

/// The file counting the stores that opened the directory (a decimal
/// number).
pub(super) const SESSION_NAME: &str = ".subagents-session";

/// The last session whose approval numbers fit in a `u64`: a session
/// has [`BLOCKS_PER_SESSION`] blocks of [`APPROVALS_PER_BLOCK`].
pub(super) const LAST_SESSION: u64 = u64::MAX / (BLOCKS_PER_SESSION * APPROVALS_PER_BLOCK);

/// Longest text a count is read as (a `u64` has 20 digits).
const COUNT_BYTES: u64 = 64;

/// The count the directory's session file holds (0 for none; a session
/// is one more, written back with [`count_session`] under the lock). A
/// count that cannot be read is an error, not a fresh start: the parents
/// of the next session would number their approvals as this one's, and a
/// host's row kept from before a restart would answer a new request.
/// Read before an open loads anything: a count it refused after the load
/// had moved corrupt files aside lost that report.
///
/// A directory a store opened before (`used`: [`held_a_store`]) but no count
/// was written by a version before the count (or by hand): its parents
/// numbered their approvals from 1, as the first session's do — counted
/// as one session, so none of its ids is handed out again.
pub(super) fn last_session(dir: &Path, used: bool) -> Result<u64, StoreError> {
    let path = dir.join(SESSION_NAME);
    let mut last = read_count(&path, "a count of sessions")?;
    if last == 0 && used && fs::symlink_metadata(&path).is_err() {
        last = 1;
    }
    if last >= LAST_SESSION {
        return Err(StoreError::OwnFile {
            path,
            problem: format!(
                "counts {last} sessions: no approval numbers are left past them (the last is {LAST_SESSION})"
            ),
            source: None,
        });
    }
    Ok(last)
}

/// The number one of the store's own files holds (0 for no file; `what`
/// names it in the error): one that cannot be read, is not a regular
/// file or holds no number is [`StoreError::OwnFile`], not a fresh start.
pub(super) fn read_count(path: &Path, what: &str) -> Result<u64, StoreError> {
    let fail = |problem: &str, source: Option<io::Error>| StoreError::OwnFile {
        path: path.to_path_buf(),
        problem: problem.to_owned(),
        source,
    };
    match fs::symlink_metadata(path) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(0),
        Err(error) => Err(fail("cannot be read", Some(error))),
        // A FIFO or a link to one held the open for ever; `/dev/zero`
        // grew without end.
        Ok(meta) if !meta.file_type().is_file() => Err(fail("is not a regular file", None)),
        Ok(_) => {
            let mut text = String::new();
            fs::File::open(path)
                .and_then(|file| file.take(COUNT_BYTES).read_to_string(&mut text))
                .map_err(|error| fail("cannot be read", Some(error)))?;
            // A byte-order mark an editor wrote first is not the count's
            // (`trim` keeps U+FEFF: the store would not open at all).
            let text = text.trim_start_matches('\u{feff}');
            text.trim()
                .parse::<u64>()
                .map_err(|_| fail(&format!("holds {:?}, not {what}", text.trim()), None))
        }
    }
}

/// `dir` holds one of the store's own names (its lock file, `runs/`, an
/// envelope's): a store opened it before. Read before the open makes its
/// lock file.
pub(super) fn held_a_store(dir: &Path) -> bool {
    let Ok(entries) = fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        name == LOCK_NAME || name == "runs" || crate::store::files::named_child(&name).is_some()
    })
}

/// Writes session `last + 1` as the directory's count, and returns it.
pub(super) fn count_session(dir: &Path, last: u64) -> Result<u64, StoreError> {
    let path = dir.join(SESSION_NAME);
    let session = last + 1;
    // Atomic: a kill cutting an in-place write short read as no count at
    // all, and numbering started over.
    write_atomic(&path, session.to_string().as_bytes()).map_err(|source| StoreError::OwnFile {
        path,
        problem: "cannot be written".to_owned(),
        source: Some(source),
    })?;
    Ok(session)
}

/// Takes the directory's lock file, or says which store holds it. A lock
/// another store holds is an error, and so is a lock file that is no
/// regular file; a lock file that cannot be made or a filesystem without
/// `flock` goes on unlocked, with a warning (a directory that cannot be
/// written then fails at its count of sessions). A held lock
/// is tried again for a moment first: a process forking (to run a
/// command) holds a copy of every open file until it execs, a closed
/// store's lock with it.
///
/// The directory itself is locked too: `flock` locks a file, not its
/// name, so a lock file deleted as stale let a second store lock a new
/// one beside the live store (two counters handing out the same ids).
pub(super) fn lock_dir(dir: &Path) -> Result<Vec<fs::File>, StoreError> {
    let path = dir.join(LOCK_NAME);
    let locked = |file: &fs::File| -> Result<bool, StoreError> {
        for attempt in 0.. {
            match file.try_lock() {
                Ok(()) => return Ok(true),
                Err(fs::TryLockError::WouldBlock) if attempt < LOCK_TRIES => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(fs::TryLockError::WouldBlock) => break,
                Err(fs::TryLockError::Error(error)) => {
                    tracing::warn!(path = %path.display(), %error, "cannot be locked: the store opens unlocked");
                    return Ok(false);
                }
            }
        }
        Err(StoreError::Locked {
            path: dir.to_path_buf(),
            lock: path.clone(),
        })
    };
    // Not a regular file (a FIFO, a link): opening it for writing blocked
    // for ever. A missing one is made below.
    if let Ok(meta) = fs::symlink_metadata(&path)
        && !meta.file_type().is_file()
    {
        return Err(StoreError::OwnFile {
            path,
            problem: "is not a regular file".into(),
            source: None,
        });
    }
    let mut held = Vec::new();
    if let Ok(directory) = fs::File::open(dir)
        && locked(&directory)?
    {
        held.push(directory);
    }
    let made = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path);
    // A lock file this process may not write (another user's, one made
    // under `sudo`) still locks: `flock` needs no write access. It opened
    // unlocked, and two processes shared the directory.
    let file = match made.or_else(|_| fs::File::open(&path)) {
        Ok(file) => file,
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "no lock file: the store opens unlocked");
            return Ok(held);
        }
    };
    if locked(&file)? {
        held.push(file);
    }
    Ok(held)
}

/// Tries of a held lock before `Locked` (10 ms apart).
const LOCK_TRIES: u32 = 20;

impl EnvelopeStore {
    /// The number a new thread's parent numbers its approvals after: a
    /// block of [`APPROVALS_PER_BLOCK`] of its own, past every block an
    /// earlier session (a million blocks each) or an earlier thread of
    /// this one took. Numbered from 1 in every parent, a host's row kept
    /// from before a kill, or from a thread closed and opened again,
    /// answered the new parent's first request.
    pub(crate) fn approvals_after(&self) -> u64 {
        self.approvals_after_at_least(0)
    }

    /// [`EnvelopeStore::approvals_after`], at `least` or past it: a
    /// registry's floor, past the numbers it gave its threads without this
    /// store (another store's, or none). A floor past this session's
    /// blocks takes a later session, counted on disk as an open's is, so a
    /// later process never numbers in the same block.
    pub(crate) fn approvals_after_at_least(&self, least: u64) -> u64 {
        let mut numbering = self
            .numbering
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (session, taken) = &mut *numbering;
        let first_block = |session: u64| (session - 1) * BLOCKS_PER_SESSION;
        let least_block = least.div_ceil(APPROVALS_PER_BLOCK);
        if first_block(*session) + *taken < least_block {
            let wanted = (least_block / BLOCKS_PER_SESSION + 1).min(LAST_SESSION);
            if wanted > *session {
                *session = self.count_sessions_to(wanted.saturating_sub(1), *session);
                *taken = 0;
            }
            let skip = least_block.saturating_sub(first_block(*session));
            *taken = (*taken).max(skip.min(BLOCKS_PER_SESSION));
        }
        if *taken == BLOCKS_PER_SESSION {
            // Spent (a million threads opened in one process's life): a
            // new session, counted on disk as an open's is.
            *session = self.count_sessions_to(*session, *session);
            *taken = 0;
        }
        let block = first_block(*session) + *taken;
        *taken += 1;
        block * APPROVALS_PER_BLOCK
    }

    /// A session past `last` (and past the count on disk), counted there;
    /// one past `session` with a warning if it cannot be.
    fn count_sessions_to(&self, last: u64, session: u64) -> u64 {
        let _io = self.lock_io();
        last_session(&self.dir, false)
            .and_then(|on_disk| count_session(&self.dir, on_disk.max(last)))
            .unwrap_or_else(|error| {
                tracing::warn!(%error, "the next session is not counted on disk");
                (last.max(session) + 1).min(LAST_SESSION)
            })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use subagents_actors::clock::ManualClock;

    use super::{APPROVALS_PER_BLOCK, BLOCKS_PER_SESSION};
    use crate::store::EnvelopeStore;

    /// Repeated (a long-lived server): the millionth thread opened in one
    /// session and every one after it got the session's last block — two
    /// threads' parents numbered their approvals alike. A spent session
    /// takes the next count, written as an open's is.
    #[test]
    fn a_session_whose_blocks_are_spent_takes_the_next() {
        let tmp = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(0));
        let (store, _) = EnvelopeStore::open(tmp.path(), clock).unwrap();
        let count = || std::fs::read_to_string(tmp.path().join(".subagents-session")).unwrap();
        assert_eq!(store.approvals_after(), 0);
        let mut last = 0;
        for _ in 1..BLOCKS_PER_SESSION {
            last = store.approvals_after();
        }
        assert_eq!(last, (BLOCKS_PER_SESSION - 1) * APPROVALS_PER_BLOCK);
        assert_eq!(count(), "1");
        let next = store.approvals_after();
        assert_eq!(next, BLOCKS_PER_SESSION * APPROVALS_PER_BLOCK);
        assert_eq!(count(), "2");
        assert_eq!(store.approvals_after(), next + APPROVALS_PER_BLOCK);
    }

    /// Written by another version (before the count of sessions): a
    /// store with envelopes and no `.subagents-session` was read as a
    /// first session, whose parents numbered their approvals from 1 again
    /// — a host's row kept from before the upgrade answered the new
    /// parent's first request. A directory without the store's names is
    /// a first session.
    #[test]
    fn a_used_directory_without_a_count_is_past_its_first_session() {
        let tmp = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(0));
        std::fs::write(tmp.path().join(".subagents-lock"), "").unwrap();
        std::fs::write(tmp.path().join("agent_1.json"), "{}").unwrap();
        let (store, _) = EnvelopeStore::open(tmp.path(), clock.clone()).unwrap();
        assert_eq!(
            store.approvals_after(),
            BLOCKS_PER_SESSION * APPROVALS_PER_BLOCK
        );
        let fresh = tmp.path().join("fresh");
        std::fs::create_dir(&fresh).unwrap();
        std::fs::write(fresh.join("README.txt"), "notes").unwrap();
        let (store, _) = EnvelopeStore::open(&fresh, clock).unwrap();
        assert_eq!(store.approvals_after(), 0);
    }

    /// A registry's floor (numbers its threads took elsewhere): within
    /// this session's blocks it skips to the floor; past them it takes the
    /// session that holds the floor, counted on disk — a later process
    /// numbers past it, never in the same block.
    #[test]
    fn a_floor_past_the_session_takes_a_later_one_counted_on_disk() {
        let tmp = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(0));
        let (store, _) = EnvelopeStore::open(tmp.path(), clock.clone()).unwrap();
        let count = || std::fs::read_to_string(tmp.path().join(".subagents-session")).unwrap();
        assert_eq!(
            store.approvals_after_at_least(5 * APPROVALS_PER_BLOCK),
            5 * APPROVALS_PER_BLOCK
        );
        assert_eq!(
            store.approvals_after(),
            6 * APPROVALS_PER_BLOCK,
            "past the floor"
        );
        let far = (3 * BLOCKS_PER_SESSION + 7) * APPROVALS_PER_BLOCK;
        assert_eq!(store.approvals_after_at_least(far), far);
        assert_eq!(count(), "4", "the session holding the floor");
        assert_eq!(store.approvals_after(), far + APPROVALS_PER_BLOCK);
        // A floor behind what was taken changes nothing.
        assert_eq!(
            store.approvals_after_at_least(0),
            far + 2 * APPROVALS_PER_BLOCK
        );
        drop(store);
        let (store, _) = EnvelopeStore::open(tmp.path(), clock).unwrap();
        assert_eq!(
            store.approvals_after(),
            4 * BLOCKS_PER_SESSION * APPROVALS_PER_BLOCK
        );
    }
}
