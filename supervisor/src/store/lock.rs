//! The store's own files beside the envelopes: the lock a store holds
//! for its life, and the count of sessions that opened the directory.

use std::fs;
use std::path::Path;

use crate::store::files::{LOCK_NAME, write_atomic};
use crate::store::report::StoreError;

/// The file counting the stores that opened the directory (a decimal
/// number).
pub(super) const SESSION_NAME: &str = ".subagents-session";

/// This open's session: one more than the number the directory's session
/// file holds (1 for a directory that has none), written back atomically
/// once the open holds the lock. One that cannot be read or written
/// counts as none (a warning says so).
pub(super) fn next_session(dir: &Path) -> u64 {
    let path = dir.join(SESSION_NAME);
    let last = match fs::read_to_string(&path) {
        Ok(text) => text.trim().parse::<u64>().unwrap_or_else(|_| {
            tracing::warn!(path = %path.display(), "an unreadable session count, taken as none");
            0
        }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => 0,
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "the session count cannot be read, taken as none");
            0
        }
    };
    let session = last.saturating_add(1);
    // Atomic: a kill cutting an in-place write short read as no count at
    // all, and numbering started over.
    if let Err(error) = write_atomic(&path, session.to_string().as_bytes()) {
        tracing::warn!(path = %path.display(), %error, "the session count cannot be written");
    }
    session
}

/// Takes the directory's lock file, or says which store holds it. Only a
/// lock another store holds is an error: a directory where the lock file
/// cannot be made (read-only: nothing will be written anyway) or a
/// filesystem without `flock` opens unlocked, with a warning. A held lock
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
